"""Durable turns on Temporal in one process: activities, joining a turn, errors, odd input.

Layout of this module:
    turns        a turn's response and session; its activities; the same turn twice is one
    events       each event reaches ``on_event`` once although each activity replays
    errors       what the turn raises; a wrong address; a cancelled turn; bad arguments
    odd input    line and paragraph separators, emoji and NUL in messages and tool arguments

The kill-and-restart tests are in ``test_recovery.py`` (parametrised over the engines), the
replay of recorded histories in ``test_temporal_replay.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hookloop import (
    AgentEvent,
    ChatCancelledError,
    StoreError,
    UsageError,
    UserMessage,
)
from hookloop.durable import DurableChats, DurableEngine, TemporalEngine, workflow_id
from hookloop.durable._temporal_payloads import PAYLOAD_SESSION_PREFIX as PREFIX
from hookloop.sessions import SQLiteSessionStore
from tests.durable import _agents
from tests.durable._temporal_support import activities, history_json, quick_engine
from tests.durable.test_turns import until


@pytest.fixture
def store(tmp_path: Path) -> SQLiteSessionStore:
    return SQLiteSessionStore(tmp_path / "sessions.db")


@pytest.fixture
async def engine(temporal_address: str) -> AsyncIterator[TemporalEngine]:
    """An engine on its own task queue (not launched: the test makes its DurableChats first)."""
    engine = quick_engine(temporal_address)
    _agents.calls.clear()
    yield engine
    await engine.shutdown()


# --- turns ------------------------------------------------------------------------------


async def test_a_turn_answers_and_keeps_its_messages_in_the_session(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    session = engine.task_queue  # fresh on the shared server
    response = await chats.chat(session, UserMessage(content="say hi", id="m-1"))
    assert response.text == "said hi"
    assert response.iterations == 2
    records = await store.records(session)
    assert [r.message for r in records] == list(response.messages)
    assert [(m.role, m.content) for m in response.messages] == [
        ("user", "say hi"),
        ("assistant", ""),
        ("tool", "hi"),
        ("assistant", "said hi"),
    ]
    assert _agents.calls == ["model", f"echo hookloop-turn:{session}:m-1:call-1", "model"]
    assert response.usage == (await chats.chat(session, "again", turn_id="m-1")).usage


async def test_each_model_call_and_each_tool_call_is_one_activity(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.batch_agent, sessions=store)
    await engine.launch()
    session = engine.task_queue
    response = await chats.chat(session, "go", turn_id="t")
    assert await activities(engine, workflow_id(session, "t")) == [
        "hookloop.model",
        "hookloop.tool",  # note a (its start is recorded in the same activity)
        "hookloop.tool",  # echo b
        "hookloop.tool",  # note c
        "hookloop.model",
        "hookloop.finish",  # the code after the last call: the answer's commit, on_chat_done
    ]
    assert _agents.calls == ["note a", f"echo hookloop-turn:{session}:t:call-b", "note c"]
    assert [m.content for m in response.messages if m.role == "tool"] == ["noted", "b", "noted"]


async def test_the_same_turn_started_twice_is_one_turn(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    session = engine.task_queue
    first, second = await asyncio.gather(
        chats.submit(session, "say hi", turn_id="t-1"),
        chats.submit(session, "say it again", turn_id="t-1"),
    )
    one, other = await first.result(), await second.result()
    later = await chats.chat(session, "once more", turn_id="t-1")  # after it ended
    assert one == other == later
    records = await store.records(session)
    assert [r.message for r in records] == list(one.messages)
    assert _agents.calls == ["model", f"echo hookloop-turn:{session}:t-1:call-1", "model"]


async def test_a_new_turn_continues_the_session(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    session = engine.task_queue
    first = await chats.chat(session, "say hi", turn_id="t-1")
    second = await chats.chat(session, "and again", turn_id="t-2")
    records = await store.records(session)
    assert [r.message for r in records] == [*first.messages, *second.messages]
    assert [r.seq for r in records] == list(range(1, 7))


async def test_turns_of_one_session_run_one_at_a_time_in_their_order(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    # The second turn starts while the first waits for its model: its first activity waits
    # for the first turn to end, rather than putting its messages between the first's.
    chats = DurableChats(engine, _agents.gated_agent, sessions=store)
    await engine.launch()
    session = f'odd "session\\ {engine.task_queue}'  # a quote and a backslash: the query
    _agents.gate = asyncio.Event()
    try:
        first = await chats.submit(session, "first", turn_id="t-b")
        await until(lambda: _agents.calls == ["model first"])
        second = await chats.submit(session, "second", turn_id="t-a")
        await started(engine, workflow_id(session, "t-a"))
        _agents.gate.set()
        answers = [(await h.result()).text for h in (first, second)]
    finally:
        _agents.gate = None
    assert answers == ["answer to first", "answer to second"]
    log = [r.message.content for r in await store.records(session)]
    assert log == ["first", "answer to first", "second", "answer to second"]


async def test_two_turns_of_a_session_started_back_to_back_run_one_after_the_other(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    # The second's first activity lists the session's running turns at once: visibility
    # must show the first already (it did in every run on the dev server).
    chats = DurableChats(engine, _agents.gated_agent, sessions=store)
    await engine.launch()
    session = engine.task_queue
    _agents.gate = asyncio.Event()
    try:
        first = await chats.submit(session, "first", turn_id="t-1")
        second = await chats.submit(session, "second", turn_id="t-2")
        await started(engine, workflow_id(session, "t-2"))
        await until(lambda: "model first" in _agents.calls)
        _agents.gate.set()
        answers = [(await h.result()).text for h in (first, second)]
    finally:
        _agents.gate = None
    assert answers == ["answer to first", "answer to second"]
    log = [r.message.content for r in await store.records(session)]
    assert log == ["first", "answer to first", "second", "answer to second"]


async def started(engine: TemporalEngine, wid: str) -> None:
    """Wait until the turn's first activity runs (in the worker)."""
    from temporalio.api.enums.v1 import PendingActivityState
    from temporalio.client import Client

    client = await Client.connect(engine.address)
    handle = client.get_workflow_handle(wid)
    running = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
    async with asyncio.timeout(60):  # only a failure guard
        while True:
            pending = (await handle.describe()).raw_description.pending_activities
            if any(a.state == running for a in pending):
                return
            await asyncio.sleep(0.01)


def test_the_engine_is_a_durable_engine(temporal_address: str) -> None:
    assert isinstance(quick_engine(temporal_address), DurableEngine)


# --- events -----------------------------------------------------------------------------


async def test_each_event_reaches_on_event_once(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    # Each activity replays the turn's earlier part; what it sends again is dropped.
    seen: list[str] = []

    async def on_event(event: AgentEvent) -> None:
        if event.type != "tool_call_delta":  # the deltas of a call are one or several
            seen.append(event.type)

    chats = DurableChats(engine, _agents.echo_agent, sessions=store, on_event=on_event)
    await engine.launch()
    await chats.chat(engine.task_queue, "say hi", turn_id="t-1")
    assert seen == [
        "message",  # user
        "message",  # assistant (the call)
        "tool_call_started",
        "tool_call_finished",
        "message",  # tool
        "text_delta",
        "message",  # answer
        "chat_done",
    ]


# --- errors -----------------------------------------------------------------------------


async def test_what_the_turn_raises_reaches_its_caller_typed(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.refusing_agent, sessions=store)
    await engine.launch()
    with pytest.raises(UsageError, match="delete_all is refused"):
        await chats.chat(engine.task_queue, "delete", turn_id="t-1")
    # Not retried: the turn failed once, for good.
    wid = workflow_id(engine.task_queue, "t-1")
    # The tool's error is recorded; the next activity raises it again in its place, where
    # the turn answers the open calls and fails (as a replay after a crash would).
    assert await activities(engine, wid) == ["hookloop.model", "hookloop.tool", "hookloop.finish"]


async def test_a_wrong_address_is_a_store_error_at_launch_fast(store: SQLiteSessionStore) -> None:
    engine = TemporalEngine("127.0.0.1:1", connect_timeout=2.0)
    DurableChats(engine, _agents.echo_agent, sessions=store)
    began = time.monotonic()
    with pytest.raises(StoreError, match=r"the Temporal server at 127\.0\.0\.1:1 cannot be used"):
        await engine.launch()
    assert time.monotonic() - began < 30  # only a failure guard: connect_timeout holds it
    with pytest.raises(UsageError, match="launch the engine first"):
        await engine.start("x", "y", "{}")


async def test_a_turn_cancelled_from_outside_ends_with_chat_cancelled(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.gated_agent, sessions=store)
    await engine.launch()
    _agents.gate = asyncio.Event()  # the model waits
    try:
        handle = await chats.submit(engine.task_queue, "first", turn_id="t-1")
        await until(lambda: _agents.calls == ["model first"])
        await handle.cancel()
        with pytest.raises(ChatCancelledError, match="t-1"):
            await handle.result()
    finally:
        _agents.gate = None
    assert [r.message.content for r in await store.records(engine.task_queue)] == ["first"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"address": ""}, "address must be a non-empty str"),
        ({"address": "localhost"}, "address must be 'host:port' \\(localhost:7233\\), got 'lo"),
        ({"address": "http://localhost:7233"}, "address must be 'host:port'"),
        ({"address": "a host:7233"}, "address must be 'host:port'"),
        ({"task_queue": " "}, "task_queue must be a non-empty str"),
        ({"heartbeat": 0}, "heartbeat must be a positive number"),
        ({"retry": True}, "retry must be a positive number"),
    ],
)
def test_bad_arguments_are_refused(options: dict[str, object], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        TemporalEngine(**options)  # type: ignore[arg-type]


# --- odd input --------------------------------------------------------------------------


async def test_separators_emoji_and_nul_cross_the_activities_unchanged(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    text = "line\u2028para\u2029nul\x00emoji 🙂 rtl \u202e end"
    chats = DurableChats(engine, _agents.odd_agent, sessions=store)
    await engine.launch()
    response = await chats.chat(engine.task_queue, text, turn_id="t-1")
    assert [m.content for m in response.messages] == [text, "", text, text]
    stored = [r.message for r in await store.records(engine.task_queue)]
    assert stored == list(response.messages)


async def test_a_turn_the_server_does_not_know_is_a_store_error(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    # What a caller sees after a dev server in memory restarted under its turn.
    DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    with pytest.raises(StoreError, match="it has no durable turn 'hookloop-turn:nobody:t-1'"):
        await engine.result(workflow_id("nobody", "t-1"))
    with pytest.raises(StoreError, match="it has no durable turn"):
        await engine.cancel(workflow_id("nobody", "t-1"))


async def test_payloads_over_the_limit_are_kept_in_the_session_store(
    temporal_address: str, store: SQLiteSessionStore
) -> None:
    # A message over 2 MB, echoed by a tool and by the answer: each record is over
    # Temporal's 2 MB limit on one payload. They go to the session store; the history
    # holds references.
    engine = quick_engine(temporal_address, payloads=store)
    chats = DurableChats(engine, _agents.big_agent, sessions=store)
    text = "x" * 2_100_000  # over 2 MB
    async with engine:
        response = await chats.chat(engine.task_queue, text, turn_id="t-1")
        history = await history_json(engine, workflow_id(engine.task_queue, "t-1"))
    assert [m.content for m in response.messages] == [text, "", text, text]
    assert [r.message for r in await store.records(engine.task_queue)] == list(response.messages)
    assert len(history) < 300_000
    # The payloads, one side session each: not conversations, so not listed.
    assert [s.session_id for s in await store.list_sessions()] == [engine.task_queue]
    with sqlite3.connect(store.path) as db:
        ids = [row[0] for row in db.execute("SELECT session_id FROM hookloop_sessions")]
    assert [i for i in ids if re.fullmatch(rf"{PREFIX}[0-9a-f]{{64}}", i)]


async def test_without_a_payload_store_a_message_over_the_limit_is_refused_at_its_start(
    engine: TemporalEngine, store: SQLiteSessionStore
) -> None:
    chats = DurableChats(engine, _agents.big_agent, sessions=store)
    await engine.launch()
    with pytest.raises(StoreError, match=r"give TemporalEngine\(payloads=\) the session store"):
        await chats.submit(engine.task_queue, "x" * 2_100_000, turn_id="t-1")
    assert await store.records(engine.task_queue) == []


@pytest.mark.parametrize(
    ("agent", "last"),
    [(_agents.remove_agent_logged, "chat_done"), (_agents.refusing_agent_logged, "message")],
)
async def test_a_turn_that_ends_with_no_new_message_ends_as_a_first_run(
    engine: TemporalEngine, store: SQLiteSessionStore, agent: Any, last: str
) -> None:
    # Its last activity commits nothing new (it ends waiting for approval, or raises a
    # recorded error): what runs after the last record ran nowhere before, so the end's
    # hooks see replaying() False, as on DBOS, and fire once.
    seen: list[str] = []

    async def on_event(event: AgentEvent) -> None:
        seen.append(event.type)

    chats = DurableChats(engine, agent, sessions=store, on_event=on_event)
    await engine.launch()
    _agents.ends.clear()
    with contextlib.suppress(UsageError):
        await chats.chat(engine.task_queue, "go", turn_id="t-1")
    assert _agents.ends == [False]
    assert seen[-1] == last  # the turn's last event is sent (the answers of a failed turn)
