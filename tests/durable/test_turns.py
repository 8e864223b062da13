"""Durable turns in one process: the workflow id, joining a turn, the tool rules, bad input.

Layout of this module:
    turns        a turn's response and session; the workflow id; the same turn twice is one
    tools        ``@tool(idempotent=True)``; the idempotency key inside and outside a turn
    bad input    agent paths, factories, agents a durable turn cannot run, a corrupt record
    records      the step records round-trip (property)
    recorder     ``restore(before=...)`` and appends idempotent by message id

The kill-and-restart tests are in ``test_recovery.py``.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import pickle
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AgentResponse,
    AssistantMessage,
    DurableRecordError,
    RunContext,
    SessionConflictError,
    ToolCall,
    ToolMessage,
    UnknownApprovalError,
    Usage,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.durable import DBOSEngine, DurableChats, DurableEngine, workflow_id
from hookloop.durable._records import (
    decode_model_call,
    decode_response,
    decode_tool_call,
    encode_model_call,
    encode_response,
    encode_tool_call,
)
from hookloop.limits import Spend
from hookloop.models import ProviderResponse
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import ScriptedModel
from tests.durable import _agents

Launch = Callable[..., "asyncio.Future[DurableChats]"]


@pytest.fixture
def store(tmp_path: Path) -> SQLiteSessionStore:
    return SQLiteSessionStore(tmp_path / "sessions.db")


# --- turns ------------------------------------------------------------------------------


async def test_a_turn_answers_and_keeps_its_messages_in_the_session(
    engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    assert chats.agent_path == "tests.durable._agents:echo_agent"
    await engine.launch()
    response = await chats.chat("s", UserMessage(content="say hi", id="m-1"))
    assert response.text == "said hi"
    assert response.iterations == 2
    records = await store.records("s")
    assert [r.message for r in records] == list(response.messages)
    assert [(m.role, m.content) for m in response.messages] == [
        ("user", "say hi"),
        ("assistant", ""),
        ("tool", "hi"),
        ("assistant", "said hi"),
    ]
    assert _agents.calls == ["model", "echo hookloop-turn:s:m-1:call-1", "model"]


async def test_each_model_call_and_each_tool_call_is_one_step(
    tmp_path: Path, engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.batch_agent, sessions=store)
    await engine.launch()
    response = await chats.chat("s", "go", turn_id="t")
    with sqlite3.connect(tmp_path / "dbos.db") as db:
        steps = db.execute(
            "SELECT function_name FROM operation_outputs WHERE workflow_uuid = ? "
            "ORDER BY function_id",
            (workflow_id("s", "t"),),
        ).fetchall()
    assert [name for (name,) in steps] == [
        "DBOS.listWorkflows",  # the earlier turns of the session to wait for (none)
        "hookloop.begin",
        "hookloop.model",
        "hookloop.tool_started",  # a tool that is not idempotent first records its start
        "hookloop.tool",
        "hookloop.tool",
        "hookloop.tool_started",
        "hookloop.tool",
        "hookloop.model",
    ]
    # The batch's calls ran one after another, in the model's order.
    assert _agents.calls == ["note a", "echo hookloop-turn:s:t:call-b", "note c"]
    assert [m.content for m in response.messages if m.role == "tool"] == ["noted", "b", "noted"]


async def test_the_workflow_id_is_the_session_and_the_turn(
    engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, "tests.durable._agents:echo_agent", sessions=store)
    await engine.launch()
    by_message = await chats.submit("s", UserMessage(content="say hi", id="m-7"))
    assert by_message.workflow_id == workflow_id("s", "m-7") == "hookloop-turn:s:m-7"
    named = await chats.submit("s2", "say hi", turn_id="t-1")
    assert (named.workflow_id, named.session_id, named.turn_id) == (
        "hookloop-turn:s2:t-1",
        "s2",
        "t-1",
    )
    await by_message.result()
    await named.result()


async def test_turns_whose_ids_share_colons_are_distinct(
    engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    # Session "acme:alice" turn "req-1" and session "acme" turn "alice:req-1".
    chats = DurableChats(engine, _agents.gated_agent, sessions=store)
    await engine.launch()
    alice = await chats.chat("acme:alice", "alice's secret", turn_id="req-1")
    bob = await chats.chat("acme", "bob's question", turn_id="alice:req-1")
    assert (alice.text, bob.text) == ("answer to alice's secret", "answer to bob's question")
    assert [r.message.content for r in await store.records("acme")] == [
        "bob's question",
        "answer to bob's question",
    ]
    assert workflow_id("acme:alice", "req-1") == "hookloop-turn:acme%3Aalice:req-1"
    assert workflow_id("acme", "alice:req-1") == "hookloop-turn:acme:alice%3Areq-1"


_ID_PART = st.text(alphabet="a:%3A", max_size=6)  # the separator and what escapes it
_SESSION_TURN = st.tuples(_ID_PART.filter(bool), _ID_PART)


@given(_SESSION_TURN, _SESSION_TURN)
def test_a_workflow_id_names_one_session_and_turn(
    one: tuple[str, str], other: tuple[str, str]
) -> None:
    assert (workflow_id(*one) == workflow_id(*other)) == (one == other)
    # The session's turns, and only they, start with its prefix.
    session_prefix = workflow_id(other[0], "")
    assert workflow_id(*one).startswith(session_prefix) == (one[0] == other[0])


async def test_the_same_turn_started_twice_is_one_turn(
    engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    first, second = await asyncio.gather(
        chats.submit("s", "say hi", turn_id="t-1"), chats.submit("s", "say it again", turn_id="t-1")
    )
    one, other = await first.result(), await second.result()
    later = await chats.chat("s", "once more", turn_id="t-1")  # after it ended: its response
    assert one == other == later
    records = await store.records("s")
    assert [r.message for r in records] == list(one.messages)
    assert records[0].message.content in ("say hi", "say it again")  # the one that won
    assert _agents.calls == ["model", "echo hookloop-turn:s:t-1:call-1", "model"]


async def test_a_turn_nobody_waits_for_leaves_nothing_behind_in_the_engine(
    engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    handle = await chats.submit("s", "say hi", turn_id="t-1")
    await until(lambda: not engine._handles)  # its handle goes when the turn ends
    assert (await handle.result()).text == "said hi"  # read from the record


async def test_a_new_turn_continues_the_session(
    engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    first = await chats.chat("s", "say hi", turn_id="t-1")
    second = await chats.chat("s", "and again", turn_id="t-2")
    records = await store.records("s")
    assert [r.message for r in records] == [*first.messages, *second.messages]
    assert [r.seq for r in records] == list(range(1, 7))  # the second needs no tool


async def test_turns_of_one_session_run_one_at_a_time_in_their_order(
    tmp_path: Path, engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    # The second turn starts while the first waits for its model: it waits for the first,
    # rather than putting its messages between the first's. Its id sorts first, so within
    # one tick of DBOS's clock (a second on SQLite) only the worker's own lock orders them.
    chats = DurableChats(engine, _agents.gated_agent, sessions=store)
    await engine.launch()
    _agents.gate = asyncio.Event()
    try:
        first = await chats.submit("s", "first", turn_id="t-b")
        await until(lambda: _agents.calls == ["model first"])
        second = await chats.submit("s", "second", turn_id="t-a")
        wid = workflow_id("s", "t-a")

        def waiting_or_stored() -> bool:
            """Whether the second turn waits, or wrote into the session (as it once did)."""
            with sqlite3.connect(tmp_path / "dbos.db") as db:
                listed = db.execute(
                    "SELECT 1 FROM operation_outputs WHERE workflow_uuid = ? "
                    "AND function_name = 'DBOS.listWorkflows'",
                    (wid,),
                ).fetchall()
            with sqlite3.connect(tmp_path / "sessions.db") as db:
                stored = db.execute("SELECT COUNT(*) FROM hookloop_messages").fetchone()[0]
            return bool(listed) or stored > 1

        await until(waiting_or_stored)
        _agents.gate.set()
        answers = [(await h.result()).text for h in (first, second)]
    finally:
        _agents.gate = None
    assert answers == ["answer to first", "answer to second"]
    log = [r.message.content for r in await store.records("s")]
    assert log == ["first", "answer to first", "second", "answer to second"]
    assert _agents.calls == ["model first", "model second"]


async def until(condition: Callable[[], bool]) -> None:
    """Wait until ``condition()`` holds; only a failure guard limits the time."""
    async with asyncio.timeout(60):
        for _ in itertools.count():
            if condition():
                return
            await asyncio.sleep(0.01)


def test_the_sync_wrappers_run_a_turn_without_an_event_loop(tmp_path: Path) -> None:
    engine = DBOSEngine(f"sqlite:///{tmp_path / 'dbos.db'}", executor_id="sync")
    chats = DurableChats(engine, _agents.echo_agent, sessions=SQLiteSessionStore(tmp_path / "s.db"))
    engine.launch_sync()
    try:
        assert chats.chat_sync("s", "say hi").text == "said hi"
    finally:
        engine.shutdown_sync()


def test_importing_the_package_does_not_import_dbos_or_temporalio() -> None:
    code = "import sys, hookloop.durable; print('dbos' in sys.modules, 'temporalio' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "False False\n"


def test_the_engine_is_a_durable_engine(engine: DBOSEngine) -> None:
    assert isinstance(engine, DurableEngine)


# --- tools ------------------------------------------------------------------------------


def test_a_tool_is_not_idempotent_unless_it_says_so() -> None:
    def f() -> str:
        """F."""
        return ""

    assert tool(f).idempotent is False
    assert tool(idempotent=True)(f).idempotent is True
    assert _agents.echo.idempotent is True


async def test_outside_a_durable_turn_a_call_has_no_idempotency_key() -> None:
    seen: list[str | None] = []

    @tool
    def probe(ctx: RunContext) -> str:
        """Probe."""
        seen.append(ctx.idempotency_key)
        return "ok"

    model = ScriptedModel(
        [ProviderResponse(tool_calls=(ToolCall(name="probe", arguments="{}", id="c"),)), "done"]
    )
    await Agent(model, tools=[probe]).chat("go")
    assert seen == [None]


# --- bad input --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("agent", "message"),
    [
        (
            "tests.durable._agents:nobody",
            "cannot load agent factory 'tests.durable._agents:nobody'",
        ),
        ("tests.durable.nowhere:build", "cannot load agent factory 'tests.durable.nowhere:build'"),
        ("no_colon", "write it as module:attribute"),
        ("tests.durable._agents:NOT_CALLABLE", "is int, not a function that builds an Agent"),
        (lambda: None, "module-level function"),
        (42, "module-level function"),
    ],
)
def test_an_agent_that_cannot_be_found_is_refused_at_once(
    engine: DBOSEngine, store: SQLiteSessionStore, agent: object, message: str
) -> None:
    with pytest.raises(UsageError, match=message.replace("(", r"\(")):
        DurableChats(engine, agent, sessions=store)  # type: ignore[arg-type]
    DurableChats(engine, _agents.echo_agent, sessions=store)  # nothing was registered


@pytest.mark.parametrize(
    ("factory", "message"),
    [
        (_agents.not_an_agent, "must return an Agent, got str"),
        (_agents.typed_agent, "with an output type"),
    ],
)
async def test_a_turn_whose_agent_cannot_run_durably_fails_with_a_usage_error(
    engine: DBOSEngine, store: SQLiteSessionStore, factory: Callable[[], object], message: str
) -> None:
    chats = DurableChats(engine, factory, sessions=store)  # type: ignore[arg-type]
    await engine.launch()
    with pytest.raises(UsageError, match=message):
        await chats.chat("s", UserMessage(content="go", id="m-1"))
    messages = [r.message for r in await store.records("s")]
    assert [m.id for m in messages][:1] in ([], ["m-1"])  # at most the user's message, kept


async def test_a_call_that_needs_approval_ends_the_turn_and_a_resumed_turn_runs_it(
    engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.approval_agent, sessions=store)
    await engine.launch()
    waiting = await chats.chat("s", UserMessage(content="go", id="m-1"))
    [pending] = waiting.pending_approvals
    assert (pending.call_id, pending.tool_name) == ("call-1", "delete_all")
    assert waiting.output is None
    resumed = await (await chats.resume("s", [pending.approve()], turn_id="t-2")).result()
    assert resumed.text == "deleted everything"
    messages = [r.message for r in await store.records("s")]
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[2].content == "deleted"
    # A decision when no call waits fails its turn as resume() refuses it.
    with pytest.raises(UsageError, match="nothing to resume"):
        await (await chats.resume("s", [pending.approve()], turn_id="t-3")).result()


async def test_two_resumes_sent_together_run_the_decided_call_once(
    engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    # Both carry the decisions from before either ran: the second finds them taken.
    chats = DurableChats(engine, _agents.remove_agent, sessions=store)
    await engine.launch()
    waiting = await chats.chat("s", UserMessage(content="go", id="m-1"))
    [pending] = waiting.pending_approvals
    first = await chats.resume("s", [pending.approve()], turn_id="t-2")
    second = await chats.resume("s", [pending.approve()], turn_id="t-3")
    assert (await first.result()).text == "done: removed /a"
    with pytest.raises(UnknownApprovalError, match="decided already"):
        await second.result()
    assert _agents.calls.count("remove /a") == 1


async def test_bad_arguments_start_nothing(engine: DBOSEngine, store: SQLiteSessionStore) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    with pytest.raises(UsageError, match="launch the engine first"):
        await chats.chat("s", "hi")
    await engine.launch()
    with pytest.raises(UsageError, match="session_id"):
        await chats.chat("", "hi")
    with pytest.raises(UsageError, match="turn_id"):
        await chats.chat("s", "hi", turn_id="")
    with pytest.raises(UsageError):
        await chats.chat("s", "")
    with pytest.raises(UsageError, match="register durable workflows before"):
        DurableChats(engine, _agents.echo_agent, sessions=store)
    assert await store.records("s") == []


def test_an_engine_needs_a_database_url() -> None:
    with pytest.raises(UsageError, match="database_url"):
        DBOSEngine("")


_MODEL_STEP = (
    "function_id = (SELECT MIN(function_id) FROM operation_outputs WHERE workflow_uuid = ? "
    "AND function_name = 'hookloop.model')"
)
_CORRUPTIONS = {  # what is done to the model step's row: (column, value)
    "not JSON text": ("output", base64.b64encode(pickle.dumps('{"message": 1}')).decode()),
    "not base64": ("output", "not base64!"),
    "not a pickle": ("output", base64.b64encode(b"not a pickle").decode()),
    "another step": ("function_name", "renamed"),
}


@pytest.mark.parametrize("corruption", list(_CORRUPTIONS))
async def test_a_corrupt_step_record_stops_the_replay_with_a_typed_error(
    corruption: str, tmp_path: Path, store: SQLiteSessionStore
) -> None:
    """A turn replayed over a model step record that cannot be read: the session keeps all."""
    url = f"sqlite:///{tmp_path / 'dbos.db'}"
    engine = DBOSEngine(url, executor_id="test")
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    async with engine:
        done = await chats.chat("s", "say hi", turn_id="t-1")
    before = await store.records("s")
    with sqlite3.connect(tmp_path / "dbos.db") as db:  # as if the worker died mid-turn
        wid = workflow_id("s", "t-1")
        column, value = _CORRUPTIONS[corruption]
        db.execute(
            f"UPDATE operation_outputs SET {column} = ? WHERE workflow_uuid = ? AND {_MODEL_STEP}",
            (value, wid, wid),
        )
        db.execute(
            "UPDATE workflow_status SET status = 'PENDING', output = NULL WHERE workflow_uuid = ?",
            (wid,),
        )
        db.execute("DELETE FROM workflow_output WHERE workflow_uuid = ?", (wid,))
    engine = DBOSEngine(url, executor_id="test")
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    async with engine:  # recovery replays the turn
        with pytest.raises(DurableRecordError) as caught:
            await chats.chat("s", "say hi", turn_id="t-1")
    assert (caught.value.workflow_id, caught.value.step) == (wid, "hookloop.model")
    assert await store.records("s") == before  # nothing lost, nothing added
    assert [r.message for r in before] == list(done.messages)


async def test_a_corrupt_turn_input_is_a_typed_error_when_the_turn_resumes(
    tmp_path: Path, store: SQLiteSessionStore
) -> None:
    url = f"sqlite:///{tmp_path / 'dbos.db'}"
    engine = DBOSEngine(url, executor_id="test")
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    async with engine:
        await chats.chat("s", "say hi", turn_id="t-1")
    wid = workflow_id("s", "t-1")
    with sqlite3.connect(tmp_path / "dbos.db") as db:  # as if the worker died mid-turn
        db.execute(
            "UPDATE workflow_status SET status = 'PENDING', output = NULL WHERE workflow_uuid = ?",
            (wid,),
        )
        empty = base64.b64encode(b"").decode()
        db.execute("UPDATE workflow_input SET inputs = ? WHERE workflow_uuid = ?", (empty, wid))
        db.execute("DELETE FROM workflow_output WHERE workflow_uuid = ?", (wid,))
    engine = DBOSEngine(url, executor_id="test")
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    async with engine:  # recovery cannot read the turn's input
        with pytest.raises(DurableRecordError) as caught:
            await engine.result(wid)
    assert (caught.value.workflow_id, caught.value.step) == (wid, "output")
    assert caught.value.reason.startswith("EOFError")


async def test_a_corrupt_turn_output_is_a_typed_error_and_the_session_stays(
    tmp_path: Path, engine: DBOSEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    done = await chats.chat("s", "say hi", turn_id="t-1")
    wid = workflow_id("s", "t-1")
    with sqlite3.connect(tmp_path / "dbos.db") as db:
        corrupt = base64.b64encode(pickle.dumps(b"not text")).decode()
        db.execute("UPDATE workflow_status SET output = ? WHERE workflow_uuid = ?", (corrupt, wid))
        db.execute("UPDATE workflow_output SET output = ? WHERE workflow_uuid = ?", (corrupt, wid))
    with pytest.raises(DurableRecordError) as caught:
        await chats.chat("s", "say hi", turn_id="t-1")
    assert (caught.value.workflow_id, caught.value.step) == (wid, "output")
    assert [r.message for r in await store.records("s")] == list(done.messages)
    assert _agents.calls == ["model", f"echo {wid}:call-1", "model"]  # nothing ran again


# --- records ----------------------------------------------------------------------------

texts = st.text(max_size=30)
calls = st.lists(
    st.builds(
        ToolCall,
        name=st.from_regex(r"[a-z_]{1,10}", fullmatch=True),
        arguments=texts,
        id=texts.filter(bool),
    ),
    max_size=3,
    unique_by=lambda c: c.id,
)
usages = st.none() | st.builds(
    Usage,
    input_tokens=st.integers(0, 10**6),
    output_tokens=st.integers(0, 10**6),
    cached_input_tokens=st.integers(0, 10**6),
    reasoning_tokens=st.integers(0, 10**6),
    cost=st.none() | st.decimals(min_value=0, max_value=10**4, allow_nan=False, places=12),
)


@settings(max_examples=60)
@given(
    content=texts,
    tool_calls=calls,
    usage=usages,
    finish=st.sampled_from(["stop", "tool_calls", "length"]),
    model=st.none() | texts,
    rid=st.none() | texts,
)
def test_a_model_call_record_gives_back_the_response_and_message(
    content: str,
    tool_calls: list[ToolCall],
    usage: Usage | None,
    finish: str,
    model: str | None,
    rid: str | None,
) -> None:
    response = ProviderResponse(
        content=content,
        tool_calls=tuple(tool_calls),
        finish_reason=finish,  # type: ignore[arg-type]
        usage=usage,
        model=model,
        id=rid,
    )
    message = response.to_message()
    assert decode_model_call(encode_model_call(response, message), "w", "s") == (response, message)


@settings(max_examples=60)
@given(content=texts, error=st.booleans())
def test_a_tool_call_record_gives_back_the_tool_message(content: str, error: bool) -> None:
    message = ToolMessage(tool_call_id="c", tool_name="t", content=content, is_error=error)
    assert decode_tool_call(encode_tool_call(message), "w", "s") == (message, None)
    usage = Usage(input_tokens=3, output_tokens=2, cost=Decimal("0.000123456789012345"))
    spent = Spend(requests=2, tool_calls=1, usage=usage)
    assert decode_tool_call(encode_tool_call(message, spent), "w", "s") == (message, spent)


def test_a_record_written_before_costs_reads_as_unpriced() -> None:
    message = ToolMessage(tool_call_id="c", tool_name="t", content="x")
    record = json.loads(encode_tool_call(message, Spend(requests=1, usage=Usage(input_tokens=3))))
    del record["usage"]["cost"]
    del record["requests"], record["tool_calls"]  # nor requests and tool calls
    spent = Spend(usage=Usage(input_tokens=3))
    assert decode_tool_call(json.dumps(record), "w", "s") == (message, spent)


@settings(max_examples=40)
@given(
    question=texts.filter(str.strip),
    answer=texts,
    usage=usages.filter(lambda u: u is not None),
    iterations=st.integers(1, 50),
)
def test_a_turn_output_gives_back_the_response(
    question: str, answer: str, usage: Usage, iterations: int
) -> None:
    final = AssistantMessage(content=answer)
    response = AgentResponse(
        message=final,
        messages=(UserMessage(content=question), final),
        usage=usage,
        iterations=iterations,
        finish_reason="stop",
        output=answer,
    )
    assert decode_response(encode_response(response), "w") == response


@pytest.mark.parametrize("text", ["", "[]", '{"role": "user", "content": "x"}', "null", '"x"'])
def test_an_unreadable_record_is_a_durable_record_error(text: str) -> None:
    with pytest.raises(DurableRecordError, match="'w': the recorded output of step 's'"):
        decode_tool_call(text, "w", "s")
    with pytest.raises(DurableRecordError):
        decode_model_call(text, "w", "s")


# --- recorder ---------------------------------------------------------------------------


async def test_a_recorder_restores_before_a_message_and_stores_it_again_once(
    store: SQLiteSessionStore,
) -> None:
    first, answer = UserMessage(content="a", id="u-1"), AssistantMessage(content="b", id="a-1")
    turn = UserMessage(content="c", id="u-2")
    for message in (first, answer, turn):
        await store.append("s", message)
    agent = Agent(ScriptedModel(["d"]))
    recorder = store.session("s")
    agent.use(recorder)
    assert await recorder.restore(before="u-2") == [first, answer]
    assert agent.history.messages == (first, answer)
    response = await agent.chat(turn)  # the turn again: its message is stored once
    assert [r.message for r in await store.records("s")] == [first, answer, turn, response.message]


async def test_a_recorder_restored_before_the_first_message_sees_later_writers(
    store: SQLiteSessionStore,
) -> None:
    # A turn that started the session, run again: the messages after its own (another
    # writer's) are not the turn's to append after.
    turn = UserMessage(content="a", id="u-1")
    other = UserMessage(content="x", id="o-1")
    for message in (turn, other):
        await store.append("s", message)
    agent = Agent(ScriptedModel(["b"]))
    recorder = store.session("s")
    agent.use(recorder)
    assert await recorder.restore(before="u-1") == []
    assert (recorder.last_seq, agent.history.messages) == (0, ())
    with pytest.raises(SessionConflictError) as caught:
        await agent.chat(turn)
    assert (caught.value.expected_seq, caught.value.actual_seq) == (1, 2)
    assert [r.message for r in await store.records("s")] == [turn, other]


async def test_a_message_stored_after_another_writers_is_a_conflict(
    store: SQLiteSessionStore,
) -> None:
    # What a resumed turn commits again must be found right after what it restored.
    turn, other = UserMessage(content="a", id="u-1"), UserMessage(content="x", id="o-1")
    answer = AssistantMessage(content="b", id="a-1")
    for message in (turn, other, answer):
        await store.append("s", message)
    recorder = store.session("s")
    Agent(ScriptedModel([])).use(recorder)
    await recorder.restore(before="u-1")
    await recorder._append(turn)  # the loop's commit of a recorded message
    with pytest.raises(SessionConflictError, match=r"stored at seq 3 .* not right after seq 1"):
        await recorder._append(answer)
    assert recorder.last_seq == 1
    assert [r.message for r in await store.records("s")] == [turn, other, answer]


@pytest.mark.parametrize("size", [0, -1, True, 2.0, "2"])
def test_a_pool_size_is_a_positive_int(size: object) -> None:
    with pytest.raises(UsageError, match="pool_size must be a positive int"):
        DBOSEngine("sqlite:///dbos.db", pool_size=size)  # type: ignore[arg-type]


def test_the_engines_repr_leaves_the_password_out() -> None:
    engine = DBOSEngine("postgresql://app:s3cret@db.example:5432/turns")
    assert repr(engine) == "DBOSEngine('postgresql://app:***@db.example:5432/turns')"
    assert repr(DBOSEngine("sqlite:///x.db")) == "DBOSEngine('sqlite:///x.db')"


async def test_the_pool_size_bounds_dboss_connections_to_postgresql(
    database_url: str, postgres_dsn: str, tmp_path: Path
) -> None:
    """Eight turns at once on a pool of two: DBOS holds two connections and its listener's."""
    import asyncpg

    database = database_url.rsplit("/", 1)[1]
    engine = DBOSEngine(database_url, executor_id="pool", pool_size=2)
    store = SQLiteSessionStore(tmp_path / "s.db")
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    most = 0
    async with engine:
        monitor = await asyncpg.connect(postgres_dsn)
        try:
            turns = [asyncio.ensure_future(chats.chat(f"s{i}", "say hi")) for i in range(8)]
            while not all(turn.done() for turn in turns):
                found = await monitor.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE datname = $1 AND application_name = 'dbos_transact'",
                    database,
                )
                most = max(most, found)
                await asyncio.sleep(0.005)
            answers = [(await turn).text for turn in turns]
        finally:
            await monitor.close()
    await store.close()
    assert answers == ["said hi"] * 8
    assert 2 <= most <= 3
