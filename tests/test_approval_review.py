"""Approval defects a review found (issue 15), each pinned by a test.

Layout of this module:
    one source      a new process (a new store and agent) refuses chat() and chat_stream()
                    while the session's calls wait, as the process that asked does
    what waits      the history's call, not the side record's copy; a record whose digest
                    does not match its fields is corrupt; a changed call is listed, only a
                    denial goes
    claims          two workers resuming one session: the decision is claimed before the
                    call runs, so it runs once (every backend)
    before running  resume() without the deps a call needs keeps the calls waiting;
                    switch_session() without reset is refused while calls wait
    as soon as      the request is in the store while another call of the batch still runs
    sub-agents      an approval inside a sub-agent is an error result for the parent model
    terminal        Ctrl-C at the y/n/e prompt of ``hookloop chat`` leaves
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import pexpect
import pytest

import hookloop
from hookloop import (
    Agent,
    ApprovalMismatchError,
    AssistantMessage,
    CorruptSessionError,
    MissingDepsError,
    RunContext,
    SessionConflictError,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
    tool,
)
from hookloop._approval import arguments_digest
from hookloop._approval_log import approval_session_id, encode_decision
from hookloop._errors import RESULT_LOST_TEXT
from hookloop.hooks import Phase
from hookloop.sessions._codec import encode_message
from hookloop.testing import ScriptedModel, tool_call, tool_calls
from tests._approval_terminal import approval_chat
from tests.models._provider_server import ProviderServer, answer
from tests.sessions._backends import Backend

ran: list[str] = []


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount; always needs approval.

    Args:
        amount: How much.
    """
    ran.append(f"pay {amount}")
    return f"paid {amount}"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


def asking_model() -> ScriptedModel:
    return ScriptedModel([tool_call("pay", {"amount": 500}, id="c1")])


async def asked(backend: Backend, session_id: str) -> None:
    """A first process: its chat ends with ``pay(500)`` waiting."""
    async with backend.store() as store:
        agent = Agent(asking_model(), tools=[pay], plugins=[store.session(session_id)])
        assert [p.call_id for p in (await agent.chat("pay 500")).pending_approvals] == ["c1"]


def tool_results(messages: object) -> list[tuple[str, str]]:
    return [(m.tool_call_id, m.content) for m in messages if isinstance(m, ToolMessage)]  # type: ignore[attr-defined]


# --- one source ------------------------------------------------------------------------------


async def test_a_new_process_refuses_a_chat_while_the_sessions_calls_wait(
    backend: Backend,
) -> None:
    await asked(backend, "s")
    async with backend.store() as store:
        model = ScriptedModel(["something else"])
        agent = Agent(model, tools=[pay], plugins=[store.session("s")])
        with pytest.raises(UsageError, match="wait for approval"):
            await agent.chat("never mind, do something else")
        with pytest.raises(UsageError, match="wait for approval"):
            async with agent.chat_stream("never mind") as events:
                [event async for event in events]
        assert model.requests == []
        assert [m.role for m in await store.load("s")] == ["user", "assistant"]
        (pending,) = await agent.pending_approvals()
        await agent.resume([pending.approve()])
    assert ran == ["pay 500"]


# --- what waits --------------------------------------------------------------------------------


async def side_record(
    backend: Backend, session_id: str
) -> tuple[UserMessage, int, dict[str, object]]:
    async with backend.store() as store:
        (record,) = await store.records(approval_session_id(session_id))
    assert isinstance(record.message, UserMessage)
    assert isinstance(record.message.content, str)
    return record.message, record.seq, json.loads(record.message.content)


async def forge(
    backend: Backend,
    session_id: str,
    record: tuple[UserMessage, int, dict[str, object]],
    **changes: object,
) -> None:
    """Rewrite a side record's fields behind the store's back."""
    message, seq, data = record
    forged = dataclasses.replace(message, content=json.dumps({**data, **changes}))
    await backend.set_row(approval_session_id(session_id), seq, data=encode_message(forged))


async def test_a_request_record_whose_digest_does_not_match_its_call_is_corrupt(
    backend: Backend,
) -> None:
    await asked(backend, "s")
    record = await side_record(backend, "s")
    seq = record[1]
    await forge(backend, "s", record, arguments='{"amount": 5}')  # the digest stays
    async with backend.store() as store:
        agent = Agent(ScriptedModel(["ok"]), tools=[pay], plugins=[store.session("s")])
        with pytest.raises(CorruptSessionError) as raised:
            await agent.pending_approvals()
        assert (raised.value.session_id, raised.value.seq) == (approval_session_id("s"), seq)
        assert "digest" in raised.value.reason
    assert ran == []


async def test_the_call_that_waits_is_the_historys_not_the_records_copy(
    backend: Backend,
) -> None:
    await asked(backend, "s")
    shown = '{"amount": 5}'  # a record consistent in itself, about another call
    forged = {
        "arguments": shown,
        "model_arguments": shown,
        "digest": arguments_digest("c1", "pay", shown),
    }
    await forge(backend, "s", await side_record(backend, "s"), **forged)
    async with backend.store() as store:
        agent = Agent(ScriptedModel(["ok"]), tools=[pay], plugins=[store.session("s")])
        (pending,) = await agent.pending_approvals()
        real = '{"amount": 500}'
        assert (pending.tool_name, pending.arguments, pending.digest) == (
            "pay",
            real,
            arguments_digest("c1", "pay", real),
        )
        assert (pending.changed, pending.requested_digest) == (True, forged["digest"])
        with pytest.raises(ApprovalMismatchError):
            await agent.resume([pending.approve()])
        with pytest.raises(ApprovalMismatchError):
            await agent.resume([pending.edit({"amount": 1})])
        assert ran == []
        await agent.resume([pending.deny("not what I was asked about")])
        assert tool_results(await store.load("s")) == [("c1", "denied: not what I was asked about")]
    assert ran == []


async def test_a_call_changed_in_the_history_is_listed_and_only_a_denial_goes() -> None:
    agent = Agent(ScriptedModel([tool_call("pay", {"amount": 500}, id="c1"), "ok"]), tools=[pay])
    (asked_for,) = (await agent.chat("pay 500")).pending_approvals
    assistant = agent.messages[1]
    assert isinstance(assistant, AssistantMessage)
    changed = tuple(
        dataclasses.replace(c, arguments='{"amount": 5000}') for c in assistant.tool_calls
    )
    agent.history.import_history(
        [
            m if m is not assistant else dataclasses.replace(assistant, tool_calls=changed)
            for m in agent.messages
        ]
    )
    (now,) = await agent.pending_approvals()
    assert now == dataclasses.replace(
        asked_for,
        arguments='{"amount": 5000}',
        model_arguments='{"amount": 5000}',
        digest=arguments_digest("c1", "pay", '{"amount": 5000}'),
        requested_digest=asked_for.digest,
    )
    for decision in (asked_for.approve(), now.approve(), now.edit({"amount": 5})):
        with pytest.raises(ApprovalMismatchError):
            await agent.resume([decision])
    with pytest.raises(UsageError, match="wait for approval"):
        await agent.chat("forget it")
    response = await agent.resume([asked_for.deny("changed behind my back")])
    assert tool_results(response.messages) == [("c1", "denied: changed behind my back")]
    assert ran == []
    assert await agent.pending_approvals() == ()


# --- claims ----------------------------------------------------------------------------------


async def test_two_workers_resuming_one_session_run_the_call_once(backend: Backend) -> None:
    await asked(backend, "s")
    async with backend.store() as one, backend.store() as two:
        w1 = Agent(ScriptedModel(["done"]), tools=[pay], plugins=[one.session("s")])
        w2 = Agent(ScriptedModel(["done"]), tools=[pay], plugins=[two.session("s")])
        (p1,) = await w1.pending_approvals()
        (p2,) = await w2.pending_approvals()

        async def first_the_other_worker(ctx: object) -> None:
            # w2 found the call pending; w1 resumes it now, before w2 claims it.
            await w1.resume([p1.approve()])

        w2.add_hook("on_approval_decision", first_the_other_worker, order=Phase.RECORD - 1)
        with pytest.raises(SessionConflictError, match="decided already"):
            await w2.resume([p2.approve()])
        assert ran == ["pay 500"]
        # Once decided, the call is pending nowhere.
        assert await w2.pending_approvals() == ()
        with pytest.raises(UsageError, match="'c1' was decided already"):
            await w2.resume([p2.approve()])
        assert ran == ["pay 500"]
        assert tool_results(await one.load("s")) == [("c1", "paid 500")]
        side = await one.load(approval_session_id("s"))
        kinds = [json.loads(m.content)["kind"] for m in side if isinstance(m.content, str)]
        assert kinds == ["request", "decision"]


async def test_two_workers_resuming_at_once_run_the_call_once(backend: Backend) -> None:
    await asked(backend, "s")
    async with backend.store() as one, backend.store() as two:
        workers = [
            Agent(ScriptedModel(["done"]), tools=[pay], plugins=[store.session("s")])
            for store in (one, two)
        ]
        decisions = [(await w.pending_approvals())[0].approve() for w in workers]
        outcomes = await asyncio.gather(
            *(w.resume([d]) for w, d in zip(workers, decisions, strict=True)),
            return_exceptions=True,
        )
        # The loser either claims second (SessionConflictError) or, reading later, finds
        # nothing pending (UsageError); which one depends on how the two interleave.
        winners = [o for o in outcomes if not isinstance(o, BaseException)]
        losers = [o for o in outcomes if isinstance(o, (SessionConflictError, UsageError))]
        assert (len(winners), len(losers)) == (1, 1)
        assert ran == ["pay 500"]
        assert tool_results(await one.load("s")) == [("c1", "paid 500")]


# --- before running ----------------------------------------------------------------------------


@dataclass
class Bank:
    name: str


@tool(requires_approval=True)
def transfer(ctx: RunContext[Bank], amount: int) -> str:
    """Transfer through the chat's bank.

    Args:
        amount: How much.
    """
    ran.append(f"transfer {amount} via {ctx.deps.name}")
    return f"sent {amount}"


async def test_resume_without_the_deps_a_call_needs_keeps_it_waiting(tmp_path: Path) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("transfer", {"amount": 5}, id="c1"), "done"])
        agent = Agent(model, tools=[transfer], plugins=[store.session("s")])
        (pending,) = (await agent.chat("pay", deps=Bank("acme"))).pending_approvals
        before = agent.messages
        with pytest.raises(MissingDepsError) as raised:
            await agent.resume([pending.approve()])
        assert raised.value.tool_name == "transfer"
        assert agent.messages == before
        assert await agent.pending_approvals() == (pending,)
        assert len(await store.load(approval_session_id("s"))) == 1  # no decision recorded
        response = await agent.resume([pending.approve()], deps=Bank("acme"))
        assert tool_results(response.messages) == [("c1", "sent 5")]
    assert ran == ["transfer 5 via acme"]


async def test_a_denial_needs_no_deps() -> None:
    agent = Agent(
        ScriptedModel([tool_call("transfer", {"amount": 5}, id="c1"), "ok"]), tools=[transfer]
    )
    (pending,) = (await agent.chat("pay", deps=Bank("acme"))).pending_approvals
    response = await agent.resume([pending.deny("no")])
    assert tool_results(response.messages) == [("c1", "denied: no")]


async def test_switching_sessions_while_calls_wait_is_refused(tmp_path: Path) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("pay", {"amount": 500}, id="c1"), "paid", "hi"])
        agent = Agent(model, tools=[pay], plugins=[store.session("s1")])
        (pending,) = (await agent.chat("pay 500")).pending_approvals
        before = agent.session_id
        with pytest.raises(UsageError, match="before switching"):
            await agent.switch_session("s2")
        assert agent.session_id == before
        assert await agent.pending_approvals() == (pending,)
        await agent.resume([pending.approve()])
        await agent.switch_session("s2")  # nothing waits now: the conversation goes on
        assert tool_results(await store.load("s2")) == [("c1", "paid 500")]
        assert (await agent.chat("hello")).text == "hi"


async def test_a_switch_with_reset_leaves_the_waiting_calls_in_their_session(
    tmp_path: Path,
) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("pay", {"amount": 500}, id="c1"), "hi", "paid"])
        agent = Agent(model, tools=[pay], plugins=[store.session("s1")])
        (pending,) = (await agent.chat("pay 500")).pending_approvals
        await agent.switch_session("s2", reset=True)
        assert await agent.pending_approvals() == ()
        assert (await agent.chat("hello")).text == "hi"
        await agent.switch_session("s1")  # back: its calls still wait
        assert await agent.pending_approvals() == (pending,)
        await agent.resume([pending.approve()])
    assert ran == ["pay 500"]


# --- as soon as ----------------------------------------------------------------------------------


async def test_the_request_is_stored_while_another_call_of_the_batch_runs(
    tmp_path: Path,
) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    asked_for = asyncio.Event()
    seen: list[list[str]] = []

    @tool
    async def report() -> str:
        """A slow report."""
        # Set once the request went through the recorder. The bound only matters when it
        # never comes (the request waited for the batch): the test then fails, not hangs.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asked_for.wait(), 60)
        async with backend.store() as other:  # what a process started now would find
            side = await other.load(approval_session_id("s"))
        seen.append([json.loads(m.content)["call_id"] for m in side if isinstance(m.content, str)])
        return "report"

    async with backend.store() as store:
        model = ScriptedModel(
            [
                tool_calls(
                    ToolCall.create("report", {}, id="c0"),
                    ToolCall.create("pay", {"amount": 9}, id="c1"),
                )
            ]
        )
        agent = Agent(model, tools=[pay, report], plugins=[store.session("s")])
        agent.add_hook("on_approval_request", lambda ctx: asked_for.set())
        response = await agent.chat("report and pay")
    assert seen == [["c1"]]
    assert [p.call_id for p in response.pending_approvals] == ["c1"]
    assert tool_results(response.messages) == [("c0", "report")]


# --- sub-agents ----------------------------------------------------------------------------------


async def test_a_sub_agents_waiting_call_is_an_error_result_for_the_parent_model() -> None:
    sub = Agent(
        ScriptedModel([tool_call("pay", {"amount": 7}, id="s1"), "paid"]), tools=[pay], name="payer"
    )
    parent_model = ScriptedModel([tool_call("payer", {"task": "pay 7"}, id="p1"), "It waits."])
    parent = Agent(parent_model, tools=[sub.as_tool()])
    causes: list[BaseException | None] = []
    parent.add_hook("on_tool_call_error", lambda ctx: causes.append(ctx.error.__cause__))
    response = await parent.chat("pay 7")
    # The cause is public: a program can tell this failure from the others and find the calls.
    (cause,) = causes
    assert isinstance(cause, hookloop.WaitingForApprovalError)
    assert isinstance(cause, hookloop.RunError)
    assert cause.agent_name == "payer"
    assert [p.call_id for p in cause.pending] == ["s1"]
    assert tool_results(response.messages) == [
        (
            "p1",
            "tool 'payer' failed: WaitingForApprovalError: payer is waiting for a person's "
            'approval: pay({"amount": 7})',
        )
    ]
    assert ran == []
    (pending,) = await sub.pending_approvals()
    assert (pending.call_id, pending.arguments) == ("s1", '{"amount": 7}')
    await sub.resume([pending.approve()])
    assert ran == ["pay 7"]


# --- terminal ----------------------------------------------------------------------------------


def test_ctrl_c_at_the_decision_prompt_of_hookloop_chat_leaves(tmp_path: Path) -> None:
    with ProviderServer() as server:
        server.add(
            answer(
                "chat.completions", calls=(("call_a", "delete_file", '{"path": "a"}'),), stream=True
            ),
            answer("chat.completions", "not asked"),
        )
        with approval_chat(server, tmp_path) as child:
            child.sendline("Tidy up.")
            child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
            child.sendintr()
            child.expect(pexpect.EOF)
        assert child.exitstatus == 0
        assert len(server.received) == 1  # nothing decided, nothing sent


async def test_a_call_claimed_by_a_process_that_died_is_not_run_again(backend: Backend) -> None:
    await asked(backend, "s")
    async with backend.store() as store:  # the process that decided died before the result
        (pending,) = await Agent(
            ScriptedModel([]), tools=[pay], plugins=[store.session("s")]
        ).pending_approvals()
        await store.append(
            approval_session_id("s"), encode_decision(pending.approve(), pending.message_id)
        )
    async with backend.store() as store:
        model = ScriptedModel(["What was lost?"])
        agent = Agent(model, tools=[pay], plugins=[store.session("s")])
        assert await agent.pending_approvals() == ()
        await agent.chat("did it go through?")  # not refused: the call is decided
        (sent,) = [m for m in model.requests[0].messages if isinstance(m, ToolMessage)]
        # Every decision of the batch was recorded, so it may have run: not run again (pay
        # is not idempotent), and the model is told so, in the log too.
        assert (sent.tool_call_id, sent.is_error) == ("c1", True)
        assert sent.content == RESULT_LOST_TEXT.format(tool="pay")
        assert tool_results(await store.load("s")) == [("c1", sent.content)]
    assert ran == []
