"""Tool calls that wait for a person's decision (issue 15, item 3).

Layout of this module:
    asking        requires_approval (flag or predicate) and a pre_tool_call Defer end the
                  chat with the pending calls; the calls of the batch that need none run
    resuming      approve / deny / edit per call; a denied call is answered, so the model
                  sees the reason and is not asked again; the events of both sides
    refusals      unknown call ids, decisions for other arguments, nothing pending, calls
                  left undecided, a new chat while calls wait
    restarts      a child process chats and exits, another restores the session and
                  resumes, on SQLite, PostgreSQL and Redis; a log tampered with behind the
                  store's back is refused; a corrupt approval record is a CorruptSessionError
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pexpect
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    ApprovalDecision,
    ApprovalMismatchError,
    AssistantMessage,
    ChatDone,
    CorruptSessionError,
    Defer,
    ModelSettings,
    PendingApproval,
    PreToolCallContext,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolMessage,
    UnknownApprovalError,
    UsageError,
    UserMessage,
    tool,
)
from hookloop._approval import arguments_digest
from hookloop._approval_log import approval_session_id
from hookloop.hooks import ApprovalDecisionContext, ApprovalRequestContext
from hookloop.sessions._codec import encode_message
from hookloop.testing import ScriptedModel, tool_call, tool_calls
from tests._approval_terminal import approval_chat
from tests.models._provider_server import ProviderServer, answer
from tests.sessions._backends import Backend

ROOT = Path(__file__).resolve().parents[1]  # where ``tests`` is importable as a package

ran: list[str] = []


@tool(requires_approval=lambda arguments: arguments["amount"] > 100)
def transfer(amount: int, to: str) -> str:
    """Transfer money; more than 100 needs approval."""
    ran.append(f"transfer {amount} {to}")
    return f"sent {amount} to {to}"


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file; always needs approval."""
    ran.append(f"delete {path}")
    return f"deleted {path}"


@tool
def balance() -> int:
    """The balance."""
    ran.append("balance")
    return 1000


def batch() -> Any:
    return tool_calls(
        ToolCall.create("transfer", {"amount": 500, "to": "bob"}, id="c1"),
        ToolCall.create("balance", {}, id="c2"),
        ToolCall.create("delete", {"path": "/tmp/x"}, id="c3"),
        ToolCall.create("transfer", {"amount": 50, "to": "carol"}, id="c4"),
        ToolCall.create("delete", {"path": "/tmp/y"}, id="c5"),
    )


def pending_for(
    call_id: str, name: str, arguments: dict[str, Any], message_id: str
) -> PendingApproval:
    text = ToolCall.create(name, arguments).arguments
    return PendingApproval(
        call_id=call_id,
        tool_name=name,
        arguments=text,
        digest=arguments_digest(call_id, name, text),
        message_id=message_id,
    )


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


def results(messages: Any) -> list[tuple[str, str, bool]]:
    return [(m.tool_call_id, m.content, m.is_error) for m in messages if isinstance(m, ToolMessage)]


# --- asking --------------------------------------------------------------------------------


async def test_a_parallel_batch_ends_with_the_calls_that_need_approval() -> None:
    model = ScriptedModel([batch()])
    agent = Agent(model, tools=[transfer, delete, balance])
    requests: list[ApprovalRequestContext] = []
    agent.add_hook("on_approval_request", requests.append)
    response = await agent.chat("pay bob, tidy up")
    assistant = response.message
    assert assistant.tool_calls == batch().tool_calls
    assert response.pending_approvals == (
        pending_for("c1", "transfer", {"amount": 500, "to": "bob"}, assistant.id),
        pending_for("c3", "delete", {"path": "/tmp/x"}, assistant.id),
        pending_for("c5", "delete", {"path": "/tmp/y"}, assistant.id),
    )
    assert sorted(ran) == ["balance", "transfer 50 carol"]
    assert results(response.messages) == [("c2", "1000", False), ("c4", "sent 50 to carol", False)]
    assert [(r.pending, r.call.id, r.tool.name, r.scope.name) for r in requests] == [
        (p, p.call_id, p.tool_name, "default") for p in response.pending_approvals
    ]
    assert await agent.pending_approvals() == response.pending_approvals
    # The blocking form, from code without an event loop, reads the same calls.
    assert await asyncio.to_thread(agent.pending_approvals_sync) == response.pending_approvals


async def test_a_pre_tool_call_defer_makes_a_call_wait_with_its_reason() -> None:
    seen: list[str] = []

    def guard(ctx: PreToolCallContext) -> Defer | None:
        seen.append(ctx.call.id)
        return Defer(reason="balance is private") if ctx.call.name == "balance" else None

    model = ScriptedModel([tool_call("balance", {}, id="b1"), "It is 1000."])
    agent = Agent(model, tools=[balance])
    agent.add_hook("pre_tool_call", guard)
    response = await agent.chat("balance?")
    (pending,) = response.pending_approvals
    assert pending.reason == "balance is private"
    assert ran == []
    # On resume the approved call runs through the handlers again; their Defer is ignored.
    done = await agent.resume([pending.approve()])
    assert ran == ["balance"]
    assert seen == ["b1", "b1"]
    assert done.text == "It is 1000."
    assert done.pending_approvals == ()


async def test_a_predicate_that_raises_asks_for_approval() -> None:
    @tool(requires_approval=lambda arguments: 1 // 0 > 0)
    def risky() -> str:
        """Risky."""
        return "done"

    agent = Agent(ScriptedModel([tool_call("risky", {})]), tools=[risky])
    response = await agent.chat("go")
    assert [p.tool_name for p in response.pending_approvals] == ["risky"]


async def test_a_streamed_chat_ends_with_the_pending_calls() -> None:
    agent = Agent(ScriptedModel([batch()]), tools=[transfer, delete, balance])
    async with agent.chat_stream("pay bob") as stream:
        events = [event async for event in stream]
    last = events[-1]
    assert isinstance(last, ChatDone)
    assert [p.call_id for p in last.response.pending_approvals] == ["c1", "c3", "c5"]
    # Every call of the batch starts; the waiting ones never finish in this chat.
    started = [e.call.id for e in events if isinstance(e, ToolCallStarted)]
    finished = [e.call.id for e in events if isinstance(e, ToolCallFinished)]
    assert (started, sorted(finished)) == (["c1", "c2", "c3", "c4", "c5"], ["c2", "c4"])


# --- resuming --------------------------------------------------------------------------------


async def test_mixed_decisions_run_deny_and_edit_each_call_on_its_own() -> None:
    model = ScriptedModel([batch(), "Done: sent 100 to bob, kept /tmp/x, deleted /tmp/y."])
    agent = Agent(model, tools=[transfer, delete, balance])
    decided: list[ApprovalDecisionContext] = []
    agent.add_hook("on_approval_decision", decided.append)
    first = await agent.chat("pay bob, tidy up")
    c1, c3, c5 = first.pending_approvals
    decisions = [c5.approve(), c1.edit({"amount": 100, "to": "bob"}), c3.deny("keep /tmp/x")]
    response = await agent.resume(decisions)
    assert sorted(ran) == ["balance", "delete /tmp/y", "transfer 100 bob", "transfer 50 carol"]
    assert results(response.messages) == [
        ("c1", "sent 100 to bob", False),
        ("c3", "denied: keep /tmp/x", True),
        ("c5", "deleted /tmp/y", False),
    ]
    assert response.text == "Done: sent 100 to bob, kept /tmp/x, deleted /tmp/y."
    assert response.pending_approvals == ()
    # Events in call order, each with its pending call.
    assert [(d.pending, d.decision) for d in decided] == [
        (c1, decisions[1]),
        (c3, decisions[2]),
        (c5, decisions[0]),
    ]
    # The model's next request holds every call's answer: nothing is left to re-issue.
    sent = model.requests[1].messages
    assert results(sent) == [
        ("c2", "1000", False),
        ("c4", "sent 50 to carol", False),
        ("c1", "sent 100 to bob", False),
        ("c3", "denied: keep /tmp/x", True),
        ("c5", "deleted /tmp/y", False),
    ]
    assert await agent.pending_approvals() == ()


async def test_a_denied_call_is_answered_and_the_model_is_not_asked_again() -> None:
    model = ScriptedModel([tool_call("delete", {"path": "/etc"}, id="d1"), "Understood."])
    agent = Agent(model, tools=[delete])
    (pending,) = (await agent.chat("delete /etc")).pending_approvals
    response = await agent.resume([pending.deny("never delete /etc")])
    assert ran == []
    assert agent.messages[-2] == ToolMessage(
        tool_call_id="d1",
        tool_name="delete",
        content="denied: never delete /etc",
        is_error=True,
        id=agent.messages[-2].id,
    )
    assert response.text == "Understood."
    assert response.pending_approvals == ()
    assert len(model.requests) == 2


async def test_a_resumed_chat_may_wait_again() -> None:
    model = ScriptedModel(
        [
            tool_call("delete", {"path": "a"}, id="d1"),
            tool_call("delete", {"path": "b"}, id="d2"),
            "ok",
        ]
    )
    agent = Agent(model, tools=[delete])
    (first,) = (await agent.chat("go")).pending_approvals
    (second,) = (await agent.resume([first.approve()])).pending_approvals
    assert second.call_id == "d2"
    assert (await agent.resume([second.approve()])).text == "ok"
    assert ran == ["delete a", "delete b"]


def test_resume_sync_goes_on() -> None:
    agent = Agent(
        ScriptedModel([tool_call("delete", {"path": "a"}, id="d1"), "ok"]), tools=[delete]
    )
    (pending,) = agent.chat_sync("go").pending_approvals
    assert agent.pending_approvals_sync() == (pending,)
    assert agent.resume_sync([pending.approve()]).text == "ok"


@settings(max_examples=30, deadline=None)
@given(amount=st.integers(min_value=-(10**6), max_value=10**6))
def test_the_predicate_decides_per_call(amount: int) -> None:
    ran.clear()
    model = ScriptedModel([tool_call("transfer", {"amount": amount, "to": "x"}, id="t"), "ok"])
    agent = Agent(model, tools=[transfer])
    response = agent.chat_sync("pay")
    waits = amount > 100
    assert [p.call_id for p in response.pending_approvals] == (["t"] if waits else [])
    assert ran == ([] if waits else [f"transfer {amount} x"])


# --- refusals --------------------------------------------------------------------------------


async def waiting_agent() -> tuple[Agent, tuple[PendingApproval, ...]]:
    agent = Agent(ScriptedModel([batch(), "ok"]), tools=[transfer, delete, balance])
    return agent, (await agent.chat("go")).pending_approvals


async def test_a_decision_for_an_unknown_call_is_refused() -> None:
    agent, (c1, c3, c5) = await waiting_agent()
    stranger = ApprovalDecision(call_id="zz", action="approve", digest=c1.digest)
    with pytest.raises(UnknownApprovalError) as raised:
        await agent.resume([c1.approve(), c3.approve(), c5.approve(), stranger])
    assert raised.value.call_id == "zz"
    assert str(raised.value) == "no pending call has id 'zz'; pending: 'c1', 'c3', 'c5'"
    assert await agent.pending_approvals() == (c1, c3, c5)  # nothing ran
    assert sorted(ran) == ["balance", "transfer 50 carol"]


async def test_a_decision_made_for_other_arguments_is_refused() -> None:
    agent, (c1, c3, c5) = await waiting_agent()
    forged = dataclasses.replace(
        c1, arguments='{"amount":5,"to":"bob"}', digest=arguments_digest("c1", "transfer", "{}")
    )
    with pytest.raises(ApprovalMismatchError) as raised:
        await agent.resume([forged.approve(), c3.approve(), c5.approve()])
    # The decision carries the digest of what the item shows, not the digest it carries.
    assert (raised.value.call_id, raised.value.expected, raised.value.actual) == (
        "c1",
        arguments_digest("c1", "transfer", forged.arguments, forged.model_arguments),
        c1.digest,
    )
    assert await agent.pending_approvals() == (c1, c3, c5)


async def test_arguments_changed_in_the_history_since_the_request_are_refused() -> None:
    agent, (c1, c3, c5) = await waiting_agent()
    assistant = agent.messages[1]
    assert isinstance(assistant, AssistantMessage)
    changed = tuple(
        dataclasses.replace(c, arguments='{"amount": 5000, "to": "mallory"}') if c.id == "c1" else c
        for c in assistant.tool_calls
    )
    agent.history.import_history(
        [
            m if m is not assistant else dataclasses.replace(assistant, tool_calls=changed)
            for m in agent.messages
        ]
    )
    with pytest.raises(ApprovalMismatchError) as raised:
        await agent.resume([c1.approve(), c3.approve(), c5.approve()])
    assert raised.value.expected == c1.digest
    assert raised.value.actual == arguments_digest("c1", "transfer", changed[0].arguments)
    assert sorted(ran) == ["balance", "transfer 50 carol"]


async def test_resuming_with_nothing_pending_is_a_usage_error() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    with pytest.raises(UsageError, match="nothing to resume: no tool call is waiting for approval"):
        await agent.resume([])
    await agent.chat("hello")
    with pytest.raises(UsageError, match="nothing to resume"):
        await agent.resume([])


async def test_every_pending_call_needs_exactly_one_decision() -> None:
    agent, (c1, c3, c5) = await waiting_agent()
    with pytest.raises(UsageError, match=r"undecided: \['c3', 'c5'\]"):
        await agent.resume([c1.approve()])
    with pytest.raises(UsageError, match="call 'c1' is decided twice"):
        await agent.resume([c1.approve(), c1.deny("no"), c3.approve(), c5.approve()])
    with pytest.raises(UsageError, match="resume\\(\\) takes decisions"):
        await agent.resume(["yes"])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="deny\\(\\) needs a reason"):
        c1.deny("  ")
    with pytest.raises(UsageError, match="edit\\(\\) needs a JSON object"):
        c1.edit("[1, 2]")
    assert await agent.pending_approvals() == (c1, c3, c5)


async def test_a_new_chat_while_calls_wait_is_refused() -> None:
    agent, pending = await waiting_agent()
    with pytest.raises(UsageError, match=r"wait for approval: decide on them with agent\.resume"):
        await agent.chat("something else")
    assert await agent.pending_approvals() == pending


# --- restarts: real stores, real processes ----------------------------------------------------


def run_worker(backend: Backend, session_id: str, *args: str) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests._approval_worker", backend.spec_json(), session_id, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


async def test_another_process_restores_the_session_and_resumes(backend: Backend) -> None:
    lines = await asyncio.to_thread(run_worker, backend, "approve-me", "ask")
    *ran_first, pending_json = lines
    assert sorted(ran_first) == ["ran balance", "ran transfer 50 carol"]
    pending = [PendingApproval(**p) for p in json.loads(pending_json)]
    assert [(p.call_id, p.tool_name) for p in pending] == [
        ("c1", "transfer"),
        ("c3", "delete"),
        ("c5", "delete"),
    ]
    c1, c3, c5 = pending
    decisions = [c1.edit({"amount": 100, "to": "bob"}), c3.deny("keep /tmp/x"), c5.approve()]
    as_json = json.dumps([dataclasses.asdict(d) for d in decisions])
    lines = await asyncio.to_thread(run_worker, backend, "approve-me", "resume", as_json)
    found, *ran_second, answer = lines
    assert [PendingApproval(**p) for p in json.loads(found)] == pending
    assert sorted(ran_second) == ["ran delete /tmp/y", "ran transfer 100 bob"]
    assert json.loads(answer) == {"text": "All done.", "pending": 0}

    async with backend.store() as store:
        log = await store.load("approve-me")
        assert [m.role for m in log] == ["user", "assistant", *["tool"] * 5, "assistant"]
        assert results(log) == [
            ("c2", "1000", False),
            ("c4", "sent 50 to carol", False),
            ("c1", "sent 100 to bob", False),
            ("c3", "denied: keep /tmp/x", True),
            ("c5", "deleted /tmp/y", False),
        ]
        side = await store.load(approval_session_id("approve-me"))
        records = [json.loads(m.content) for m in side if isinstance(m, UserMessage)]  # type: ignore[arg-type]
        # Each request is recorded as soon as its call is found to wait (the calls of a
        # batch run concurrently); the decisions follow in call order.
        assert sorted((r["kind"], r["call_id"]) for r in records[:3]) == [
            ("request", "c1"),
            ("request", "c3"),
            ("request", "c5"),
        ]
        assert [(r["kind"], r["call_id"]) for r in records[3:]] == [
            ("decision", "c1"),
            ("decision", "c3"),
            ("decision", "c5"),
        ]
        assert [r.get("action") for r in records[3:]] == ["edit", "deny", "approve"]
        assert records[3]["arguments"] == '{"amount":100,"to":"bob"}'
        # A third process finds nothing left to decide.
        agent = Agent(ScriptedModel([]), plugins=[store.session("approve-me")])
        assert await agent.pending_approvals() == ()
        with pytest.raises(UsageError, match="nothing to resume"):
            await agent.resume([])


async def stored_waiting_agent(backend: Backend, session_id: str) -> tuple[PendingApproval, ...]:
    async with backend.store() as store:
        agent = Agent(
            ScriptedModel([batch()]),
            tools=[transfer, delete, balance],
            plugins=[store.session(session_id)],
        )
        return (await agent.chat("go")).pending_approvals


async def test_arguments_tampered_with_in_the_store_are_refused(backend: Backend) -> None:
    c1, c3, c5 = await stored_waiting_agent(backend, "tampered")
    async with backend.store() as store:
        (record,) = [r for r in await store.records("tampered") if r.message.role == "assistant"]
        assistant = record.message
        assert isinstance(assistant, AssistantMessage)
        calls = tuple(
            dataclasses.replace(c, arguments='{"amount":9999,"to":"mallory"}')
            if c.id == "c1"
            else c
            for c in assistant.tool_calls
        )
    forged = encode_message(dataclasses.replace(assistant, tool_calls=calls))
    await backend.set_row("tampered", record.seq, data=forged)
    async with backend.store() as store:
        agent = Agent(ScriptedModel(["ok"]), tools=[transfer, delete, balance])
        agent.use(store.session("tampered"))
        with pytest.raises(ApprovalMismatchError) as raised:
            await agent.resume([c1.approve(), c3.approve(), c5.approve()])
        assert (raised.value.call_id, raised.value.expected) == ("c1", c1.digest)
        assert sorted(ran) == ["balance", "transfer 50 carol"]
        assert len(await store.load("tampered")) == 4  # nothing was run or recorded


async def test_a_corrupt_approval_record_is_a_corrupt_session_error(backend: Backend) -> None:
    await stored_waiting_agent(backend, "broken")
    side = approval_session_id("broken")
    await backend.set_row(side, 2, data="{not json")
    async with backend.store() as store:
        agent = Agent(ScriptedModel([]), plugins=[store.session("broken")])
        with pytest.raises(CorruptSessionError) as raised:
            await agent.pending_approvals()
        assert (raised.value.session_id, raised.value.seq) == (side, 2)


async def test_a_foreign_record_in_the_approval_log_is_a_corrupt_session_error(
    backend: Backend,
) -> None:
    await stored_waiting_agent(backend, "foreign")
    side = approval_session_id("foreign")
    async with backend.store() as store:
        await store.append(side, UserMessage(content="hello"))
        agent = Agent(ScriptedModel([]), plugins=[store.session("foreign")])
        with pytest.raises(CorruptSessionError) as raised:
            await agent.pending_approvals()
        assert (raised.value.session_id, raised.value.seq, raised.value.reason) == (
            side,
            4,
            "not an approval record",
        )


def test_the_side_session_id_fits_the_stores_limit() -> None:
    assert approval_session_id("chat") == "chat:approvals"
    long = approval_session_id("x" * 256)
    assert long == "approvals:" + hashlib.sha256(b"x" * 256).hexdigest()


# --- the terminal -------------------------------------------------------------------------------


def test_hookloop_chat_asks_y_n_e_for_each_call_that_needs_approval(tmp_path: Path) -> None:
    calls = (
        ("call_a", "delete_file", '{"path": "a"}'),
        ("call_b", "delete_file", '{"path": "b"}'),
        ("call_c", "delete_file", '{"path": "c"}'),
    )
    with ProviderServer() as server:
        server.add(
            answer("chat.completions", calls=calls, stream=True),
            answer("chat.completions", "Deleted a and c2; kept b."),
        )
        with approval_chat(server, tmp_path) as child:
            child.sendline("Tidy up.")
            child.expect_exact('  delete_file({"path": "a"}) needs approval\r\n')
            child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
            child.sendline("y")
            child.expect_exact('  delete_file({"path": "b"}) needs approval\r\n')
            child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
            child.sendline("n")
            child.expect_exact("  why not? ")
            child.sendline("b is still needed")
            child.expect_exact('  delete_file({"path": "c"}) needs approval\r\n')
            child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
            child.sendline("e")
            child.expect_exact("  arguments as JSON: ")
            child.sendline("[1]")
            child.expect_exact("  edit() needs a JSON object of arguments, got '[1]'\r\n")
            child.expect_exact("  run it? [y]es, [n]o, [e]dit: ")
            child.sendline("e")
            child.expect_exact("  arguments as JSON: ")
            child.sendline('{"path": "c2"}')
            child.expect_exact("  delete_file -> deleted a\r\n")
            child.expect_exact("  delete_file ! denied: b is still needed\r\n")
            child.expect_exact("  delete_file -> deleted c2\r\n")
            child.expect_exact("model> Deleted a and c2; kept b.\r\n")
            child.expect_exact("you> ")
            child.sendeof()
            child.expect(pexpect.EOF)
        assert child.exitstatus == 0
        sent = server.received[1].body["messages"]
    assert [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"] == [
        ("call_a", "deleted a"),
        ("call_b", "denied: b is still needed"),
        ("call_c", "deleted c2"),
    ]


async def test_a_forcing_tool_choice_is_not_applied_again_after_the_decided_calls() -> None:
    model = ScriptedModel([tool_call("delete", {"path": "a"}, id="d1"), "ok"])
    agent = Agent(model, tools=[delete], settings=ModelSettings(tool_choice="required"))
    (pending,) = (await agent.chat("go")).pending_approvals
    await agent.resume([pending.approve()])
    assert [r.settings.tool_choice for r in model.requests] == ["required", "auto"]
