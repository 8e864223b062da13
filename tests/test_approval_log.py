"""Approval records that outlive a process (``hookloop._approval_log``), on every store.

Layout of this module:
    restarts      a child process chats and exits, another restores the session and
                  resumes; a log tampered with behind the store's back is refused; a stored
                  copy changed before a restart is refused
    one source    a new process (a new store and agent) refuses chat() and chat_stream()
                  while the session's calls wait, as the process that asked does
    what waits    the history's call, not the side record's copy; a record whose digest does
                  not match its fields, a corrupt record and a foreign one are corrupt
    as soon as    the request is in the store while another call of the batch still runs
    claims        two workers resuming one session: the decision is claimed before the call
                  runs, so it runs once; a call claimed by a process that died is not run
    crashes       a real process SIGKILLed after recording its decisions, at the two moments
                  that matter: every decision recorded (the calls may have run), part of them
                  recorded (none ran); a denial recorded without a reason
    repairs       a damaged side record is repaired and its call set aside; side sessions are
                  not listed as conversations
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hookloop import (
    Agent,
    ApprovalMismatchError,
    AssistantMessage,
    CorruptSessionError,
    PendingApproval,
    SessionConflictError,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
    tool,
)
from hookloop._approval import arguments_digest
from hookloop._approval_log import SET_ASIDE_TEXT, approval_session_id, encode_decision
from hookloop._errors import RESULT_LOST_TEXT
from hookloop.hooks import Phase
from hookloop.sessions._codec import encode_message
from hookloop.testing import ScriptedModel, tool_call, tool_calls
from tests import _approval_worker as approval_worker
from tests._approval_tools import (
    answers,
    approval_records,
    balance,
    batch,
    delete,
    pay,
    pay_amount,
    ran,
    results,
    transfer,
)
from tests._processes import kill_at_stop
from tests.sessions._backends import Backend

ROOT = Path(__file__).resolve().parents[1]  # where ``tests`` is importable as a package


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


# --- restarts --------------------------------------------------------------------------------


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
        records = approval_records(await store.load(approval_session_id("approve-me")))
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
        side = await store.load(approval_session_id("s"))
        assert len(approval_records(side)) == 1  # no decision recorded
    assert ran == []


# --- one source ------------------------------------------------------------------------------


def asking_model() -> ScriptedModel:
    return ScriptedModel([tool_call("pay", {"amount": 500}, id="c1")])


async def asked(backend: Backend, session_id: str) -> None:
    """A first process: its chat ends with ``pay(500)`` waiting."""
    async with backend.store() as store:
        agent = Agent(asking_model(), tools=[pay_amount], plugins=[store.session(session_id)])
        assert [p.call_id for p in (await agent.chat("pay 500")).pending_approvals] == ["c1"]


async def test_a_new_process_refuses_a_chat_while_the_sessions_calls_wait(
    backend: Backend,
) -> None:
    await asked(backend, "s")
    async with backend.store() as store:
        model = ScriptedModel(["something else"])
        agent = Agent(model, tools=[pay_amount], plugins=[store.session("s")])
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


# --- what waits ------------------------------------------------------------------------------


async def side_record(
    backend: Backend, session_id: str
) -> tuple[UserMessage, int, dict[str, object]]:
    async with backend.store() as store:
        records = await store.records(approval_session_id(session_id))
    (record,) = [r for r in records if "hookloop.approval" in str(r.message.content)]
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
        agent = Agent(ScriptedModel(["ok"]), tools=[pay_amount], plugins=[store.session("s")])
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
        agent = Agent(ScriptedModel(["ok"]), tools=[pay_amount], plugins=[store.session("s")])
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
        assert answers(await store.load("s")) == [("c1", "denied: not what I was asked about")]
    assert ran == []


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
        seq = await store.append(side, UserMessage(content="hello"))
        agent = Agent(ScriptedModel([]), plugins=[store.session("foreign")])
        with pytest.raises(CorruptSessionError) as raised:
            await agent.pending_approvals()
        assert (raised.value.session_id, raised.value.seq, raised.value.reason) == (
            side,
            seq,
            "not an approval record",
        )


def test_the_side_session_id_fits_the_stores_limit() -> None:
    assert approval_session_id("chat") == "chat:approvals"
    long = approval_session_id("x" * 256)
    assert long == "approvals:" + hashlib.sha256(b"x" * 256).hexdigest()


# --- as soon as ------------------------------------------------------------------------------


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
        seen.append([r["call_id"] for r in approval_records(side)])
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
        agent = Agent(model, tools=[pay_amount, report], plugins=[store.session("s")])
        agent.add_hook("on_approval_request", lambda ctx: asked_for.set())
        response = await agent.chat("report and pay")
    assert seen == [["c1"]]
    assert [p.call_id for p in response.pending_approvals] == ["c1"]
    assert answers(response.messages) == [("c0", "report")]


# --- claims ----------------------------------------------------------------------------------


async def test_two_workers_resuming_one_session_run_the_call_once(backend: Backend) -> None:
    await asked(backend, "s")
    async with backend.store() as one, backend.store() as two:
        w1 = Agent(ScriptedModel(["done"]), tools=[pay_amount], plugins=[one.session("s")])
        w2 = Agent(ScriptedModel(["done"]), tools=[pay_amount], plugins=[two.session("s")])
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
        assert answers(await one.load("s")) == [("c1", "paid 500")]
        side = await one.load(approval_session_id("s"))
        kinds = [r["kind"] for r in approval_records(side)]
        assert kinds == ["request", "decision"]


async def test_two_workers_resuming_at_once_run_the_call_once(backend: Backend) -> None:
    await asked(backend, "s")
    async with backend.store() as one, backend.store() as two:
        workers = [
            Agent(ScriptedModel(["done"]), tools=[pay_amount], plugins=[store.session("s")])
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
        assert answers(await one.load("s")) == [("c1", "paid 500")]


async def test_a_call_claimed_by_a_process_that_died_is_not_run_again(backend: Backend) -> None:
    await asked(backend, "s")
    async with backend.store() as store:  # the process that decided died before the result
        (pending,) = await Agent(
            ScriptedModel([]), tools=[pay_amount], plugins=[store.session("s")]
        ).pending_approvals()
        await store.append(
            approval_session_id("s"), encode_decision(pending.approve(), pending.message_id)
        )
    async with backend.store() as store:
        model = ScriptedModel(["What was lost?"])
        agent = Agent(model, tools=[pay_amount], plugins=[store.session("s")])
        assert await agent.pending_approvals() == ()
        await agent.chat("did it go through?")  # not refused: the call is decided
        (sent,) = [m for m in model.requests[0].messages if isinstance(m, ToolMessage)]
        # Every decision of the batch was recorded, so it may have run: not run again (pay
        # is not idempotent), and the model is told so, in the log too.
        assert (sent.tool_call_id, sent.is_error) == ("c1", True)
        assert sent.content == RESULT_LOST_TEXT.format(tool="pay")
        assert answers(await store.load("s")) == [("c1", sent.content)]
    assert ran == []


# --- crashes: a real process, SIGKILLed ------------------------------------------------------


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
    return kill_at_stop(process, reached).splitlines()


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
        assert answers(response.messages) == [
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
        assert answers(await store.load("s")) == [
            ("c2", "1000"),
            ("c4", "sent 50 to carol"),
            ("c1", "sent 500 to bob"),
            ("c3", "denied: keep"),
            ("c5", "deleted /tmp/y"),
        ]


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
        assert answers(await store.load("s")) == [("c1", "denied: no reason given")]
    assert ran == []


# --- repairs ---------------------------------------------------------------------------------


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
        assert answers(await store.load("s")) == [("c1", SET_ASIDE_TEXT)]
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
