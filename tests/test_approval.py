"""Tool calls that wait for a person's decision, in one process (``hookloop._approval``).

Layout of this module:
    asking        requires_approval (flag or predicate) and a pre_tool_call Defer end the
                  chat with the pending calls; the calls of the batch that need none run
    resuming      approve / deny / edit per call; a denied call is answered, so the model
                  sees the reason and is not asked again; the events of both sides
    decisions     exactly approve / deny / edit; approve takes no arguments, a denial needs
                  a reason; unknown call ids, decisions for other arguments (a changed copy,
                  a call changed in the history), nothing pending, calls left undecided, a
                  new chat while calls wait
    what runs     what the person approved runs, after a pre_tool_call rewrite, exactly once
                  (after a restart too); an edit runs as typed, or is refused before
                  anything runs
    before running  resume() without the deps a call needs keeps the calls waiting;
                  switch_session() without reset is refused while calls wait
    sub-agents    an approval inside a sub-agent is an error result for the parent model
    call order    an output tool's answer and the other calls' are committed in call order

The records that outlive a process are tested in ``test_approval_log.py``, the prompts of
``hookloop chat`` in ``tests/cli/test_terminal.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookloop
from hookloop import (
    Agent,
    ApprovalDecision,
    ApprovalEditError,
    ApprovalMismatchError,
    AssistantMessage,
    ChatDone,
    Defer,
    MissingDepsError,
    ModelSettings,
    PendingApproval,
    PreToolCallContext,
    RunContext,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    ToolMessage,
    ToolReturn,
    UnknownApprovalError,
    UsageError,
    tool,
)
from hookloop._approval import arguments_digest
from hookloop._approval_log import approval_session_id
from hookloop.hooks import ApprovalDecisionContext, ApprovalRequestContext
from hookloop.testing import ScriptedModel, tool_call, tool_calls
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
from tests.sessions._backends import Backend


@dataclass
class Bank:
    name: str


@tool(name="transfer", requires_approval=True)
def transfer_via_bank(ctx: RunContext[Bank], amount: int) -> str:
    """Transfer through the chat's bank.

    Args:
        amount: How much.
    """
    ran.append(f"transfer {amount} via {ctx.deps.name}")
    return f"sent {amount}"


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


async def waiting(*script: object) -> tuple[Agent, Any]:
    model = ScriptedModel([tool_call("pay", {"amount": 5000, "to": "mallory"}, id="c1"), *script])
    agent = Agent(model, tools=[pay])
    (pending,) = (await agent.chat("pay")).pending_approvals
    return agent, pending


# --- asking ----------------------------------------------------------------------------------


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


async def test_a_forcing_tool_choice_is_not_applied_again_after_the_decided_calls() -> None:
    model = ScriptedModel([tool_call("delete", {"path": "a"}, id="d1"), "ok"])
    agent = Agent(model, tools=[delete], settings=ModelSettings(tool_choice="required"))
    (pending,) = (await agent.chat("go")).pending_approvals
    await agent.resume([pending.approve()])
    assert [r.settings.tool_choice for r in model.requests] == ["required", "auto"]


# --- decisions -------------------------------------------------------------------------------


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
    assert answers(response.messages) == [("c1", "denied: no")]
    assert ran == []


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


@pytest.mark.parametrize("decisions", [None, "approve", {"c1": "approve"}, 3])
async def test_resume_refuses_what_is_not_a_list_of_decisions(decisions: object) -> None:
    agent, pending = await waiting_agent()
    before = sorted(ran)
    with pytest.raises(UsageError, match="resume\\(\\) takes"):
        await agent.resume(decisions)  # type: ignore[arg-type]
    assert await agent.pending_approvals() == pending  # nothing ran, nothing recorded
    assert sorted(ran) == before


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


async def test_a_call_changed_in_the_history_is_listed_and_only_a_denial_goes() -> None:
    agent = Agent(
        ScriptedModel([tool_call("pay", {"amount": 500}, id="c1"), "ok"]), tools=[pay_amount]
    )
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
    assert answers(response.messages) == [("c1", "denied: changed behind my back")]
    assert ran == []
    assert await agent.pending_approvals() == ()


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


# --- what runs -------------------------------------------------------------------------------


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
    assert answers(response.messages) == [("c1", "paid 1000 to bob")]
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
    assert answers(response.messages) == [("c1", "over budget")]
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
        side = await store.load(approval_session_id("s"))
        assert len(approval_records(side)) == 1  # no decision recorded
    assert ran == []


# --- before running --------------------------------------------------------------------------


async def test_resume_without_the_deps_a_call_needs_keeps_it_waiting(tmp_path: Path) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("transfer", {"amount": 5}, id="c1"), "done"])
        agent = Agent(model, tools=[transfer_via_bank], plugins=[store.session("s")])
        (pending,) = (await agent.chat("pay", deps=Bank("acme"))).pending_approvals
        before = agent.messages
        with pytest.raises(MissingDepsError) as raised:
            await agent.resume([pending.approve()])
        assert raised.value.tool_name == "transfer"
        assert agent.messages == before
        assert await agent.pending_approvals() == (pending,)
        side = await store.load(approval_session_id("s"))
        assert len(approval_records(side)) == 1  # no decision recorded
        response = await agent.resume([pending.approve()], deps=Bank("acme"))
        assert answers(response.messages) == [("c1", "sent 5")]
    assert ran == ["transfer 5 via acme"]


async def test_a_denial_needs_no_deps() -> None:
    agent = Agent(
        ScriptedModel([tool_call("transfer", {"amount": 5}, id="c1"), "ok"]),
        tools=[transfer_via_bank],
    )
    (pending,) = (await agent.chat("pay", deps=Bank("acme"))).pending_approvals
    response = await agent.resume([pending.deny("no")])
    assert answers(response.messages) == [("c1", "denied: no")]


async def test_switching_sessions_while_calls_wait_is_refused(tmp_path: Path) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("pay", {"amount": 500}, id="c1"), "paid", "hi"])
        agent = Agent(model, tools=[pay_amount], plugins=[store.session("s1")])
        (pending,) = (await agent.chat("pay 500")).pending_approvals
        before = agent.session_id
        with pytest.raises(UsageError, match="before switching"):
            await agent.switch_session("s2")
        assert agent.session_id == before
        assert await agent.pending_approvals() == (pending,)
        await agent.resume([pending.approve()])
        await agent.switch_session("s2")  # nothing waits now: the conversation goes on
        assert answers(await store.load("s2")) == [("c1", "paid 500")]
        assert (await agent.chat("hello")).text == "hi"


async def test_a_switch_with_reset_leaves_the_waiting_calls_in_their_session(
    tmp_path: Path,
) -> None:
    backend = Backend(kind="sqlite", address=str(tmp_path / "s.db"))
    async with backend.store() as store:
        model = ScriptedModel([tool_call("pay", {"amount": 500}, id="c1"), "hi", "paid"])
        agent = Agent(model, tools=[pay_amount], plugins=[store.session("s1")])
        (pending,) = (await agent.chat("pay 500")).pending_approvals
        await agent.switch_session("s2", reset=True)
        assert await agent.pending_approvals() == ()
        assert (await agent.chat("hello")).text == "hi"
        await agent.switch_session("s1")  # back: its calls still wait
        assert await agent.pending_approvals() == (pending,)
        await agent.resume([pending.approve()])
    assert ran == ["pay 500"]


# --- sub-agents ------------------------------------------------------------------------------


async def test_a_sub_agents_waiting_call_is_an_error_result_for_the_parent_model() -> None:
    sub = Agent(
        ScriptedModel([tool_call("pay", {"amount": 7}, id="s1"), "paid"]),
        tools=[pay_amount],
        name="payer",
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
    assert answers(response.messages) == [
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


async def test_a_sub_agent_whose_calls_wait_is_refused_a_new_task_as_its_chat_would_be() -> None:
    sub_model = ScriptedModel([tool_call("pay", {"amount": 7}, id="s1"), "paid"])
    sub = Agent(sub_model, tools=[pay_amount], name="payer")
    parent_model = ScriptedModel(
        [
            tool_call("payer", {"task": "pay 7"}, id="p1"),
            "It waits.",
            tool_call("payer", {"task": "pay 8"}, id="p2"),
            "It still waits.",
        ]
    )
    parent = Agent(parent_model, tools=[sub.as_tool()])
    await parent.chat("pay 7")
    response = await parent.chat("pay 8")
    # Refused before the sub-agent's model is asked: its history keeps the waiting call.
    assert answers(response.messages) == [
        (
            "p2",
            "tool 'payer' failed: UsageError: tool calls of the last chat wait for approval: "
            "decide on them with agent.resume(decisions) before the next chat",
        )
    ]
    with pytest.raises(UsageError, match="wait for approval"):
        await parent.delegate("pay 9", to=sub)
    with pytest.raises(UsageError, match="wait for approval"):
        await sub.chat("pay 10")
    assert len(sub_model.requests) == 1
    (pending,) = await sub.pending_approvals()
    assert pending.call_id == "s1"
    await sub.resume([pending.approve()])
    assert ran == ["pay 7"]
    assert sub.history.messages[-1].content == "paid"


# --- call order ------------------------------------------------------------------------------


class Answer(pydantic.BaseModel):
    total: int


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
