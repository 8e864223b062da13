"""Approvals fail closed (issue 21, items 1-6), each defect pinned by a test.

Layout of this module:
    decisions       an action other than exactly approve / deny / edit is refused when the
                    decision is made (so nothing can run or be recorded); approve with
                    arguments is refused; a denial's reason is never empty
    binding         a stored copy of a pending item whose arguments were changed (its digest
                    kept) gives ApprovalMismatchError, in this process and after a restart
    what runs       the pending item shows what the tool will receive after pre_tool_call
                    rewrites; that, or the person's edit, runs exactly (no second rewrite)
    crashes         a real process SIGKILLed after recording its decisions, at the two
                    moments that matter: every decision recorded (the calls may have run),
                    part of them recorded (none ran)
    call order      an output tool's answer and the other calls' are committed in call order
    the rest        ``hookloop chat`` (a raising predicate is one line; an invalid edit is
                    asked again), a damaged side record is repaired, ScriptStep refuses a str,
                    side sessions are not listed as conversations
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pexpect
import pydantic
import pytest

from hookloop import (
    Agent,
    ApprovalDecision,
    ApprovalEditError,
    ApprovalMismatchError,
    CorruptSessionError,
    PendingApproval,
    PreToolCallContext,
    ToolCall,
    ToolMessage,
    ToolReturn,
    UsageError,
    tool,
)
from hookloop._approval_log import SET_ASIDE_TEXT, approval_session_id, encode_decision
from hookloop._errors import RESULT_LOST_TEXT
from hookloop.testing import ScriptedModel, ScriptStep, tool_call, tool_calls
from tests import _approval_worker as approval_worker
from tests._approval_terminal import PROMPT, approval_chat
from tests.models._provider_server import ProviderServer, answer
from tests.sessions._backends import Backend

ROOT = Path(__file__).resolve().parents[1]  # where ``tests`` is importable as a package
GUARD = 120  # seconds a worker may take to reach its stop; only a failing test waits this long

ran: list[str] = []


@tool(requires_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay someone; always needs approval.

    Args:
        amount: How much, in cents.
        to: Whom.
    """
    ran.append(f"pay {amount} {to}")
    return f"paid {amount} to {to}"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


def results(messages: Any) -> list[tuple[str, str]]:
    return [(m.tool_call_id, m.content) for m in messages if isinstance(m, ToolMessage)]


async def waiting(*script: object) -> tuple[Agent, Any]:
    model = ScriptedModel([tool_call("pay", {"amount": 5000, "to": "mallory"}, id="c1"), *script])
    agent = Agent(model, tools=[pay])
    (pending,) = (await agent.chat("pay")).pending_approvals
    return agent, pending


# --- decisions (item 1) -------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["Deny", "DENY", "reject", "no", "", None, "approve ", 1])
async def test_an_action_other_than_approve_deny_or_edit_is_refused(action: object) -> None:
    agent, pending = await waiting("sent")
    with pytest.raises(UsageError, match="action must be exactly 'approve', 'deny' or 'edit'"):
        # What a web page sends back, built into a decision as the docs show.
        ApprovalDecision(call_id=pending.call_id, action=action, digest=pending.digest)  # type: ignore[arg-type]
    assert ran == []
    assert await agent.pending_approvals() == (pending,)


async def test_approve_with_arguments_is_refused_and_a_denial_needs_a_reason() -> None:
    agent, pending = await waiting("ok")
    with pytest.raises(UsageError, match="make an edit"):
        ApprovalDecision(
            call_id="c1", action="approve", digest=pending.digest, arguments='{"amount": 1}'
        )
    for reason in ("", "   "):
        with pytest.raises(UsageError, match="a denial needs a reason"):
            ApprovalDecision(call_id="c1", action="deny", digest=pending.digest, reason=reason)
    with pytest.raises(UsageError, match="an edit needs a JSON object"):
        ApprovalDecision(call_id="c1", action="edit", digest=pending.digest)
    response = await agent.resume(
        [ApprovalDecision(call_id="c1", action="deny", digest="x", reason="no")]
    )
    assert results(response.messages) == [("c1", "denied: no")]
    assert ran == []


async def test_a_denial_recorded_without_a_reason_still_tells_the_model_why(
    tmp_path: Path,
) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        agent = Agent(
            ScriptedModel([tool_call("pay", {"amount": 1, "to": "x"}, id="c1")]),
            tools=[pay],
            plugins=[store.session("s")],
        )
        (pending,) = (await agent.chat("pay")).pending_approvals
        # A record an earlier version could write (a decision made by hand, without reason).
        side = approval_session_id("s")
        data = json.loads(encode_decision(pending.deny("x"), pending.message_id).content)  # type: ignore[arg-type]
        await store.append(side, dataclasses.replace(
            encode_decision(pending.deny("x"), pending.message_id),
            content=json.dumps({**data, "reason": ""}),
        ))  # fmt: skip
    async with backend.store() as store:
        model = ScriptedModel(["ok"])
        agent = Agent(model, tools=[pay], plugins=[store.session("s")])
        await agent.chat("and?")
        assert results(await store.load("s")) == [("c1", "denied: no reason given")]
    assert ran == []


# --- binding (item 2) ---------------------------------------------------------------------------


async def test_a_stored_copy_whose_arguments_were_changed_is_refused() -> None:
    agent, pending = await waiting("sent")
    row = dataclasses.asdict(pending)  # what a UI keeps, and shows later
    row["arguments"] = json.dumps({"amount": 5, "to": "bob"})  # the digest is kept
    shown = type(pending)(**row)
    for decision in (shown.approve(), shown.edit({"amount": 5, "to": "bob"})):
        with pytest.raises(ApprovalMismatchError) as raised:
            await agent.resume([decision])
        assert raised.value.actual == pending.digest
    assert ran == []
    assert await agent.pending_approvals() == (pending,)
    await agent.resume([pending.approve()])  # the item as it was listed
    assert ran == ["pay 5000 mallory"]


async def test_a_stored_copy_changed_before_a_restart_is_refused(tmp_path: Path) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("pay", {"amount": 5000, "to": "mallory"}, id="c1")])
        agent = Agent(model, tools=[pay], plugins=[store.session("s")])
        (pending,) = (await agent.chat("pay")).pending_approvals
    row = {**dataclasses.asdict(pending), "arguments": '{"amount": 5, "to": "bob"}'}
    async with backend.store() as store:
        later = Agent(ScriptedModel(["sent"]), tools=[pay], plugins=[store.session("s")])
        with pytest.raises(ApprovalMismatchError):
            await later.resume([type(pending)(**row).approve()])
        assert len(await store.load(approval_session_id("s"))) == 1  # no decision recorded
    assert ran == []


# --- what runs (item 3) -------------------------------------------------------------------------


def in_cents(ctx: PreToolCallContext) -> ToolCall:
    """A units hook: the model speaks euros, the tool takes cents."""
    arguments = json.loads(ctx.call.arguments)
    arguments["amount"] *= 100
    return dataclasses.replace(ctx.call, arguments=json.dumps(arguments))


async def test_the_person_approves_what_runs_after_a_rewrite_and_it_runs_once_rewritten() -> None:
    model = ScriptedModel([tool_call("pay", {"amount": 10, "to": "bob"}, id="c1"), "done"])
    agent = Agent(model, tools=[pay])
    agent.add_hook("pre_tool_call", in_cents)
    (pending,) = (await agent.chat("pay bob 10 euros")).pending_approvals
    assert json.loads(pending.arguments) == {"amount": 1000, "to": "bob"}
    assert json.loads(pending.model_arguments or "") == {"amount": 10, "to": "bob"}
    assert pending.rewritten
    response = await agent.resume([pending.approve()])
    assert ran == ["pay 1000 bob"]  # not 100000: the rewrite is not applied again
    assert results(response.messages) == [("c1", "paid 1000 to bob")]
    # The model's call stays as the model made it in the history.
    assert agent.messages[1].tool_calls[0].arguments == '{"amount": 10, "to": "bob"}'  # type: ignore[union-attr]


async def test_an_edit_runs_exactly_as_typed_and_a_handler_cannot_change_it() -> None:
    model = ScriptedModel([tool_call("pay", {"amount": 10, "to": "bob"}, id="c1"), "done"])
    agent = Agent(model, tools=[pay])
    agent.add_hook("pre_tool_call", in_cents)
    seen: list[str] = []
    agent.add_hook("pre_tool_call", lambda ctx: seen.append(ctx.call.arguments), order=1)
    (pending,) = (await agent.chat("pay bob 10 euros")).pending_approvals
    await agent.resume([pending.edit({"amount": 700, "to": "bob"})])
    assert ran == ["pay 700 bob"]
    # The handlers still see the call (what runs), and may still answer it; their new
    # call is not used.
    assert seen == ['{"amount": 1000, "to": "bob"}', '{"amount": 70000, "to": "bob"}']


async def test_a_handler_may_still_answer_a_decided_call() -> None:
    model = ScriptedModel([tool_call("pay", {"amount": 10, "to": "bob"}, id="c1"), "done"])
    agent = Agent(model, tools=[pay])
    decided: list[bool] = []

    def budget(ctx: PreToolCallContext) -> ToolReturn | None:
        decided.append(True)
        return ToolReturn("over budget") if len(decided) > 1 else None

    agent.add_hook("pre_tool_call", budget)
    (pending,) = (await agent.chat("pay")).pending_approvals
    response = await agent.resume([pending.approve()])
    assert results(response.messages) == [("c1", "over budget")]
    assert ran == []


async def test_the_rewritten_arguments_survive_a_restart(tmp_path: Path) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("pay", {"amount": 10, "to": "bob"}, id="c1")])
        agent = Agent(model, tools=[pay], plugins=[store.session("s")])
        agent.add_hook("pre_tool_call", in_cents)
        (asked,) = (await agent.chat("pay")).pending_approvals
    async with backend.store() as store:
        later = Agent(ScriptedModel(["done"]), tools=[pay], plugins=[store.session("s")])
        later.add_hook("pre_tool_call", in_cents)
        (pending,) = await later.pending_approvals()
        assert pending == asked
        assert json.loads(pending.arguments) == {"amount": 1000, "to": "bob"}
        await later.resume([pending.approve()])
    assert ran == ["pay 1000 bob"]


async def test_an_edit_the_tool_cannot_take_is_refused_before_anything_runs(
    tmp_path: Path,
) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("pay", {"amount": 1, "to": "x"}, id="c1"), "done"])
        agent = Agent(model, tools=[pay], plugins=[store.session("s")])
        (pending,) = (await agent.chat("pay")).pending_approvals
        with pytest.raises(ApprovalEditError) as raised:
            await agent.resume([pending.edit({"amount": "lots", "to": "x"})])
        assert (raised.value.call_id, raised.value.tool_name) == ("c1", "pay")
        assert "amount" in raised.value.problem
        assert await agent.pending_approvals() == (pending,)
        assert len(await store.load(approval_session_id("s"))) == 1  # no decision recorded
    assert ran == []


# --- crashes (item 4): a real process, SIGKILLed -------------------------------------------------


def resumed_and_killed(backend: Backend, decisions: str, stop: str, reached: Path) -> list[str]:
    """A worker resumes with ``decisions``; once it writes ``reached`` (at ``stop``, where it
    then waits for ever), it is SIGKILLed. Returns what it printed."""
    command = [sys.executable, "-m", "tests._approval_worker", backend.spec_json(), "s"]
    process = subprocess.Popen(
        [*command, "resume", decisions, stop, str(reached)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + GUARD
    while not reached.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            _, errors = process.communicate()
            pytest.fail(f"the worker never reached its stop: {errors}")
        time.sleep(0.02)  # polling a file, not waiting for something to happen
    os.kill(process.pid, signal.SIGKILL)
    out, _ = process.communicate()
    return out.splitlines()


async def killed_while_resuming(
    backend: Backend, reached: Path, stop: str
) -> tuple[tuple[PendingApproval, ...], list[str]]:
    """This process asks; a worker resumes (approve c1, deny c3, approve c5), killed at ``stop``.

    Returns the calls that were pending, and what the killed worker printed.
    """
    async with backend.store() as store:
        asking = approval_worker.make_agent(store, "s", [approval_worker.BATCH])
        pending = (await asking.chat("pay bob, tidy up")).pending_approvals
    c1, c3, c5 = pending
    made = [dataclasses.asdict(d) for d in (c1.approve(), c3.deny("keep"), c5.approve())]
    lines = await asyncio.to_thread(resumed_and_killed, backend, json.dumps(made), stop, reached)
    return pending, lines


def ran_here(capsys: pytest.CaptureFixture[str]) -> list[str]:
    """What the worker's tools ran in this process since the last call."""
    return sorted(line for line in capsys.readouterr().out.splitlines() if line.startswith("ran "))


async def test_a_process_killed_after_every_decision_was_recorded(
    backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, lines = await killed_while_resuming(backend, tmp_path / "reached", "transfer")
    assert "ran transfer 500 bob" in lines  # it ran, and its result never reached the log
    ran_here(capsys)
    # The next chat (here, another process) answers every decided call, in call order: the
    # denial with its reason, the transfer (not idempotent) as possibly run, never again;
    # the delete (idempotent) runs again.
    async with backend.store() as store:
        agent = approval_worker.make_agent(store, "s", ["Noted."])
        response = await agent.chat("what happened?")
        assert ran_here(capsys) == ["ran delete /tmp/y"]
        assert results(response.messages) == [
            ("c1", RESULT_LOST_TEXT.format(tool="transfer")),
            ("c3", "denied: keep"),
            ("c5", "deleted /tmp/y"),
        ]
        assert response.text == "Noted."
        log = await store.load("s")
    assert [m.tool_call_id for m in log if isinstance(m, ToolMessage)] == [
        "c2", "c4", "c1", "c3", "c5",
    ]  # fmt: skip
    assert [m.role for m in log][-2:] == ["user", "assistant"]


async def test_a_process_killed_after_part_of_the_decisions_was_recorded(
    backend: Backend, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (_, c3, c5), lines = await killed_while_resuming(backend, tmp_path / "reached", "decision")
    assert not any(line.startswith("ran ") for line in lines)  # nothing ran
    ran_here(capsys)
    # c1's decision is recorded: it is pending nowhere; the others still wait, so a chat is
    # refused, and the next resume decides them and runs c1 too, once, in call order.
    async with backend.store() as store:
        agent = approval_worker.make_agent(store, "s", ["All done."])
        assert [p.call_id for p in await agent.pending_approvals()] == ["c3", "c5"]
        with pytest.raises(UsageError, match="wait for approval"):
            await agent.chat("what happened?")
        response = await agent.resume([c3.deny("keep"), c5.approve()])
        assert ran_here(capsys) == ["ran delete /tmp/y", "ran transfer 500 bob"]
        assert response.text == "All done."
        assert results(await store.load("s")) == [
            ("c2", "1000"),
            ("c4", "sent 50 to carol"),
            ("c1", "sent 500 to bob"),
            ("c3", "denied: keep"),
            ("c5", "deleted /tmp/y"),
        ]


# --- call order (item 5) --------------------------------------------------------------------------


class Answer(pydantic.BaseModel):
    total: int


@tool
def balance() -> int:
    """The balance."""
    ran.append("balance")
    return 1000


async def test_an_output_answer_beside_an_earlier_call_is_committed_in_call_order() -> None:
    batch = tool_calls(
        ToolCall.create("balance", {}, id="c1"),
        ToolCall.create("final_result", {"total": 3}, id="c2"),
    )
    agent = Agent(ScriptedModel([batch]), tools=[balance], output_type=Answer)
    response = await agent.chat("total?")
    assert response.output == Answer(total=3)
    assert [
        (m.tool_call_id, m.is_error) for m in response.messages if isinstance(m, ToolMessage)
    ] == [
        ("c1", True),
        ("c2", False),
    ]


async def test_an_invalid_output_beside_an_earlier_call_is_committed_in_call_order() -> None:
    batch = tool_calls(
        ToolCall.create("balance", {}, id="c1"),
        ToolCall.create("final_result", {"total": "many"}, id="c2"),
    )
    model = ScriptedModel([batch, tool_call("final_result", {"total": 3}, id="c3")])
    agent = Agent(model, tools=[balance], output_type=Answer)
    response = await agent.chat("total?")
    assert response.output == Answer(total=3)
    answered = [
        (m.tool_call_id, m.is_error) for m in response.messages if isinstance(m, ToolMessage)
    ]
    assert answered == [("c1", False), ("c2", True), ("c3", False)]
    assert ran == ["balance"]


# --- the rest (item 6) ----------------------------------------------------------------------------


def test_hookloop_chat_shows_a_raising_predicate_in_one_line_and_asks_again_for_a_bad_edit(
    tmp_path: Path,
) -> None:
    calls = (
        ("call_a", "risky", '{"path": "a"}'),
        ("call_b", "delete_file", '{"path": "b"}'),
    )
    with ProviderServer() as server:
        server.add(
            answer("chat.completions", calls=calls, stream=True),
            answer("chat.completions", "Done."),
        )
        with approval_chat(server, tmp_path, "risky", "delete_file") as child:
            child.sendline("Go.")
            child.expect_exact('  risky({"path": "a"}) needs approval\r\n')
            before = child.before or ""
            child.expect_exact(PROMPT)
            child.sendline("y")
            child.expect_exact(PROMPT)
            child.sendline("e")
            child.expect_exact("  arguments as JSON: ")
            child.sendline('{"path": 5}')
            child.expect_exact(
                "  the edit of call 'call_b' is refused: invalid arguments for tool "
                "'delete_file': path: Input should be a valid string\r\n"
            )
            child.expect_exact(PROMPT)
            child.sendline("e")
            child.expect_exact("  arguments as JSON: ")
            child.sendline('{"path": "b2"}')
            child.expect_exact("model> Done.\r\n")
            child.expect_exact("you> ")
            child.sendeof()
            child.expect(pexpect.EOF)
        assert child.exitstatus == 0
        sent = server.received[1].body["messages"]
    assert "Traceback" not in before
    assert [line for line in before.splitlines() if "requires_approval" in line] == [
        "requires_approval() of tool 'risky' raised ZeroDivisionError: integer division or "
        "modulo by zero; asking for approval"
    ]
    assert [(m["tool_call_id"], m["content"]) for m in sent if m["role"] == "tool"] == [
        ("call_a", "risked a"),
        ("call_b", "deleted b2"),
    ]


def test_a_script_step_refuses_a_str_response_when_it_is_made() -> None:
    with pytest.raises(UsageError, match=r"takes a ProviderResponse, got str \(for a text"):
        ScriptStep(response="text")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="takes an exception"):
        ScriptStep(error="boom")  # type: ignore[arg-type]


async def test_the_approval_side_session_is_not_listed_as_a_conversation(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        long_id = "x" * 250  # its side session has the hashed form of the id
        for session_id in ("s", long_id):
            agent = Agent(
                ScriptedModel([tool_call("pay", {"amount": 1, "to": "x"}, id="c1")]),
                tools=[pay],
                plugins=[store.session(session_id)],
            )
            await agent.chat("pay")
            assert await store.info(approval_session_id(session_id)) is not None
        await store.append("t:approval", ToolMessage(tool_call_id="a", tool_name="b", content="c"))
        listed = [info.session_id for info in await store.list_sessions()]
        assert sorted(listed) == sorted(["s", long_id, "t:approval"])
        assert len(await store.list_sessions(limit=2)) == 2  # the side sessions take no room
        with pytest.raises(UsageError, match="form of an approval side session"):
            store.session("s:approvals")


async def test_a_damaged_side_record_is_repaired_and_the_call_set_aside(backend: Backend) -> None:
    async with backend.store() as store:
        agent = Agent(
            ScriptedModel([tool_call("pay", {"amount": 1, "to": "x"}, id="c1")]),
            tools=[pay],
            plugins=[store.session("s")],
        )
        assert len((await agent.chat("pay")).pending_approvals) == 1
    await backend.set_row(approval_session_id("s"), 1, data="{not json")
    async with backend.store() as store:
        recorder = store.session("s")
        model = ScriptedModel(["I will check first."])
        agent = Agent(model, tools=[pay], plugins=[recorder])
        with pytest.raises(CorruptSessionError):
            await agent.pending_approvals()
        with pytest.raises(CorruptSessionError):
            await agent.chat("and?")
        assert await recorder.repair_approvals() == ("c1",)
        assert await recorder.repair_approvals() == ()  # sound now: left as it is
        assert await agent.pending_approvals() == ()
        await agent.chat("and?")
        assert results(await store.load("s")) == [("c1", SET_ASIDE_TEXT)]
    assert ran == []


async def test_a_side_session_whose_own_record_is_broken_is_repaired(backend: Backend) -> None:
    async with backend.store() as store:
        model = ScriptedModel([tool_call("pay", {"amount": 1, "to": "x"}, id="c1"), "paid"])
        recorder = store.session("s")
        agent = Agent(model, tools=[pay], plugins=[recorder])
        (pending,) = (await agent.chat("pay")).pending_approvals
        await backend.set_record(approval_session_id("s"), None)  # its messages remain
        with pytest.raises(CorruptSessionError):  # the decision cannot be recorded
            await agent.resume([pending.approve()])
        assert ran == []
        assert await recorder.repair_approvals() == ()  # the records read well: none set aside
        await agent.resume([pending.approve()])
    assert ran == ["pay 1 x"]
