"""Guardrails: every position with sync and async checks and an agent judge; fail closed;
the input guardrail beside the first model call; what the history and the session log keep.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import pickle
import subprocess
import sys
from collections.abc import Callable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import pydantic
import pytest

from hookloop import (
    OUTPUT_TOOL_NAME,
    Agent,
    AssistantMessage,
    ChatCancelledError,
    GuardrailTripped,
    HookRegistrationError,
    ServerError,
    ToolCall,
    ToolMessage,
    TracePlugin,
    Usage,
    UsageLimitExceeded,
    UsageLimits,
    UserMessage,
    Verdict,
    tool,
)
from hookloop.guardrails import (
    Check,
    GuardrailVerdictContext,
    InputGuardrailContext,
    OutputGuardrailContext,
    ToolCallGuardrailContext,
    ToolResultGuardrailContext,
    input_guardrail,
    output_guardrail,
    pii,
    read_verdicts,
    tool_call_guardrail,
    tool_result_guardrail,
)
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.observe import JsonLinesTracePlugin, read_trace
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import FunctionModel, ScriptedModel, text_response, tool_call, tool_calls
from tests._processes import kill_at_stop

ROOT = Path(__file__).resolve().parents[1]
ran: list[str] = []

NOTHING_SPENT = Usage(cost=Decimal(0))  # a chat's total starts at a known cost of zero


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    ran.append(key)
    return f"the value of {key} is 42; write to bob@example.com"


@tool(requires_approval=True)
def wire(amount: int) -> str:
    """Wire money; needs approval."""
    ran.append(f"wire {amount}")
    return f"wired {amount}"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


Flavour = Literal["sync", "async"]
FLAVOURS: list[Flavour] = ["sync", "async"]


def as_check(fn: Callable[[Any], Verdict], flavour: Flavour) -> Check:
    """``fn`` itself, or an async function that returns what ``fn`` returns."""
    if flavour == "sync":
        return fn

    async def check(ctx: Any) -> Verdict:
        await asyncio.sleep(0)
        return fn(ctx)

    check.__name__ = fn.__name__
    return check


def agent_on(*script: Any, **options: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(list(script))
    return Agent(model, tools=[lookup, wire], retry=None, context=None, **options), model


def judge(*verdicts: Verdict) -> Agent:
    """An LLM judge on the scripted model: each check answers with the next verdict."""
    steps = [
        tool_call(
            OUTPUT_TOOL_NAME,
            {"action": v.action, "reason": v.reason, "replacement": v.replacement},
        )
        for v in verdicts
    ]
    return Agent(ScriptedModel(steps), name="judge", retry=None, context=None)


def assert_valid(messages: list[Any] | tuple[Any, ...]) -> None:
    """Every tool call in ``messages`` is answered, right after the message that made it."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            open_calls.discard(message.tool_call_id)
        else:
            assert not open_calls, f"unanswered calls {open_calls} before {message}"
        if isinstance(message, AssistantMessage):
            open_calls = {c.id for c in message.tool_calls}
    assert not open_calls


# --- input ------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_blocked_input_never_reaches_the_model_nor_the_history(flavour: Flavour) -> None:
    seen: list[str] = []

    def no_passwords(ctx: InputGuardrailContext) -> Verdict:
        seen.append(ctx.text)
        return Verdict.block("asks for a password", data={"word": "password"})

    agent, model = agent_on("never sent")
    agent.use(input_guardrail(as_check(no_passwords, flavour)))
    with pytest.raises(GuardrailTripped) as caught:
        await agent.chat("what is the admin password?")

    error = caught.value
    assert (error.position, error.guardrail) == ("input", "no_passwords")
    assert error.verdict == Verdict.block("asks for a password", data={"word": "password"})
    assert error.usage == NOTHING_SPENT
    assert seen == ["what is the admin password?"]
    assert model.requests == []
    assert agent.history.messages == ()


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_an_input_redaction_is_what_the_model_and_the_history_get(flavour: Flavour) -> None:
    def redact(ctx: InputGuardrailContext) -> Verdict:
        return Verdict.replace(ctx.text.replace("4242", "[card]"), "card number")

    later: list[str] = []
    agent, model = agent_on("ok")
    agent.use(input_guardrail(as_check(redact, flavour)))
    agent.add_hook("on_input_guardrail", lambda ctx: later.append(ctx.text), order=10)
    await agent.chat("pay with 4242")

    sent = model.requests[0].messages[-1]
    assert isinstance(sent, UserMessage)
    assert sent.content == "pay with [card]"
    assert [m.content for m in agent.history.messages] == ["pay with [card]", "ok"]
    assert later == ["pay with [card]"]  # a later handler sees the replacement


async def test_an_agent_judge_blocks_the_input_and_its_tokens_count() -> None:
    verdict = ToolCall.create(OUTPUT_TOOL_NAME, {"action": "block", "reason": "off topic"})
    answer = ProviderResponse(
        tool_calls=(verdict,), finish_reason="tool_calls", usage=Usage(input_tokens=7)
    )
    referee = Agent(ScriptedModel([answer]), name="judge", retry=None, context=None)
    agent, model = agent_on("never sent")
    agent.use(input_guardrail(referee))
    with pytest.raises(GuardrailTripped, match="off topic") as caught:
        await agent.chat("tell me a joke")
    assert caught.value.usage == Usage(input_tokens=7)  # the judge's tokens are the chat's
    assert caught.value.guardrail == "judge"
    assert caught.value.verdict.action == "block"
    assert model.requests == []
    # The judge was asked about the text, and has a history of its one check only.
    (asked,) = [m for m in referee.history.messages if isinstance(m, UserMessage)]
    assert "tell me a joke" in asked.text


async def test_an_agent_judge_allows_and_the_chat_goes_on() -> None:
    referee = judge(Verdict.allow(), Verdict.allow())
    agent, _ = agent_on("first", "second")
    agent.use(input_guardrail(referee))
    assert (await agent.chat("one")).text == "first"
    assert (await agent.chat("two")).text == "second"
    # Each check stands alone: the judge's history holds the last one only.
    (asked,) = [m for m in referee.history.messages if isinstance(m, UserMessage)]
    assert "two" in asked.text
    assert "one" not in asked.text


# --- fail closed ---------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_guardrail_that_raises_is_a_trip_with_the_cause(flavour: Flavour) -> None:
    def broken(ctx: object) -> Verdict:
        raise ConnectionError("moderation service down")

    agent, model = agent_on("never sent")
    agent.use(input_guardrail(as_check(broken, flavour)))
    with pytest.raises(GuardrailTripped, match="unknown verdict") as caught:
        await agent.chat("hello")
    assert isinstance(caught.value.__cause__, ConnectionError)
    assert caught.value.verdict.action == "block"
    assert "moderation service down" in caught.value.verdict.reason
    assert model.requests == []


GUARDRAILS = {
    "input": input_guardrail,
    "output": output_guardrail,
    "tool_call": tool_call_guardrail,
    "tool_result": tool_result_guardrail,
}


@pytest.mark.parametrize("failure", ["raises", "returns a str"])
@pytest.mark.parametrize("flavour", FLAVOURS)
@pytest.mark.parametrize("position", list(GUARDRAILS))
async def test_a_guardrail_that_fails_trips_in_every_position(
    position: str, flavour: Flavour, failure: str
) -> None:
    # Fail closed wherever it stands, alone on its row (the tool rows call a lone sync
    # guardrail themselves) or with another guardrail before it.
    def broken(ctx: object) -> Verdict:
        if failure == "raises":
            raise ConnectionError("moderation service down")
        return "allow"  # type: ignore[return-value]

    for company in (False, True):
        ran.clear()
        agent, _ = agent_on(tool_call("lookup", {"key": "k"}, id="c1"), "the answer")
        make = GUARDRAILS[position]
        if company:
            agent.use(make(lambda ctx: Verdict.allow(), name="first"))  # type: ignore[operator]
        agent.use(make(as_check(broken, flavour), name="broken"))  # type: ignore[operator]
        with pytest.raises(GuardrailTripped, match="unknown verdict") as caught:
            await agent.chat("hello")
        assert (caught.value.guardrail, caught.value.position) == ("broken", position)
        cause = caught.value.__cause__
        assert isinstance(cause, ConnectionError if failure == "raises" else TypeError)
        assert ran == (["k"] if position in ("output", "tool_result") else [])
        assert_valid(agent.history.messages)
        stored = [m.content for m in agent.history.messages if not isinstance(m, UserMessage)]
        assert "the answer" not in stored  # never stored past a guardrail that failed
        if position == "tool_result":  # nor the result it checked
            assert not any("42" in str(content) for content in stored)


@pytest.mark.parametrize("returned", [None, True, "allow", {"action": "allow"}])
async def test_a_guardrail_that_returns_no_verdict_is_a_trip(returned: object) -> None:
    agent, _ = agent_on("never sent")
    agent.use(output_guardrail(lambda ctx: returned, name="sloppy"))  # type: ignore[arg-type, return-value]
    with pytest.raises(GuardrailTripped, match="unknown verdict") as caught:
        await agent.chat("hello")
    assert caught.value.guardrail == "sloppy"
    assert [type(m) for m in agent.history.messages] == [UserMessage]  # no answer stored


async def test_a_verdict_its_position_does_not_take_is_a_trip() -> None:
    agent, model = agent_on("never sent")
    agent.use(input_guardrail(lambda ctx: Verdict.reject("nope"), name="wrong"))
    with pytest.raises(GuardrailTripped, match="'reject' is not a verdict the input") as caught:
        await agent.chat("hello")
    assert caught.value.verdict.data["returned"] == "reject"
    assert model.requests == []


async def test_a_plain_hook_on_the_row_is_a_guardrail_too() -> None:
    agent, _ = agent_on("never sent")

    def handler(ctx: InputGuardrailContext) -> Verdict | None:
        return Verdict.block("no") if "bad" in ctx.text else None  # None: no opinion

    agent.add_hook("on_input_guardrail", handler)
    with pytest.raises(GuardrailTripped) as caught:
        await agent.chat("a bad word")
    assert caught.value.guardrail.endswith("handler")


@pytest.mark.parametrize("returned", [None, "allow"])
async def test_a_guardrail_check_is_its_rows_handler_held_to_a_verdict(returned: object) -> None:
    # The check itself is the row's handler (nothing around it: it runs for every tool call),
    # named after the guardrail; the row holds it to returning a Verdict.
    agent, _ = agent_on("never sent")

    def check(ctx: InputGuardrailContext) -> Verdict:
        return returned  # type: ignore[return-value]

    agent.use(input_guardrail(check, name="held"))
    (handler,) = agent.hooks.handlers["on_input_guardrail"]
    assert (handler.fn, handler.label) == (check, "held")
    with pytest.raises(GuardrailTripped, match="unknown verdict") as caught:
        await agent.chat("hello")
    assert caught.value.guardrail == "held"
    assert isinstance(caught.value.__cause__, TypeError)
    assert "not a Verdict" in str(caught.value.__cause__)


# --- beside the first model call ---------------------------------------------------------


class BlockingModel(FunctionModel):
    """A model whose call waits until it is cancelled; a guardrail beside it trips then."""

    def __init__(self) -> None:
        super().__init__(self._wait)
        self.started = asyncio.Event()
        self.cancelled: list[bool] = []

    async def _wait(self, request: ProviderRequest) -> ProviderResponse:
        self.started.set()
        try:
            await asyncio.Event().wait()  # until cancelled
        except asyncio.CancelledError:
            self.cancelled.append(True)
            raise
        raise AssertionError("not reached")

    def moderated(self) -> Agent:
        """An agent on this model whose guardrail beside its call blocks once it started."""

        async def moderation(ctx: InputGuardrailContext) -> Verdict:
            await self.started.wait()  # the model call is in flight
            return Verdict.block("abusive")

        agent = Agent(self, retry=None, context=None)
        agent.use(input_guardrail(moderation, run_beside=True))
        return agent


async def test_a_guardrail_beside_the_model_call_cancels_it_when_it_trips() -> None:
    model = BlockingModel()
    agent = model.moderated()
    with pytest.raises(GuardrailTripped, match="abusive") as caught:
        await agent.chat("you are useless")

    assert model.cancelled == [True]
    assert caught.value.usage == NOTHING_SPENT  # the call was cut short: it reports nothing
    # Beside the call, the message was sent, so it is committed; the answer never came.
    assert [type(m) for m in agent.history.messages] == [UserMessage]
    assert not agent.is_running


async def test_a_guardrail_beside_trips_a_streamed_chat_too() -> None:
    model = BlockingModel()
    agent = model.moderated()
    events: list[str] = []
    with pytest.raises(GuardrailTripped, match="abusive"):
        async for event in agent.chat_stream("you are useless"):
            events.append(type(event).__name__)
    assert model.cancelled == [True]
    assert events == ["MessageCommitted"]  # the user's message, nothing after it


async def test_cancelling_the_chat_cancels_the_guardrail_beside() -> None:
    checking, stopped = asyncio.Event(), asyncio.Event()
    guard_cancelled: list[bool] = []

    async def slow_model(request: ProviderRequest) -> ProviderResponse:
        await asyncio.Event().wait()
        raise AssertionError("not reached")

    async def moderation(ctx: InputGuardrailContext) -> Verdict:
        checking.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            guard_cancelled.append(True)
            stopped.set()
            raise
        raise AssertionError("not reached")

    agent = Agent(FunctionModel(slow_model), retry=None, context=None)
    agent.use(input_guardrail(moderation, run_beside=True))
    task = asyncio.ensure_future(agent.chat("hi"))
    await checking.wait()
    agent.cancel("user left")
    with pytest.raises(ChatCancelledError, match="user left"):
        await task
    await asyncio.wait_for(stopped.wait(), 60)  # (a failure guard, not a timing)
    assert guard_cancelled == [True]


async def test_a_guardrail_beside_that_trips_after_the_answer_keeps_it_out() -> None:
    answered = asyncio.Event()

    def model(request: ProviderRequest) -> ProviderResponse:
        answered.set()
        return text_response("an answer", usage=Usage(input_tokens=5, output_tokens=2))

    async def moderation(ctx: InputGuardrailContext) -> Verdict:
        await answered.wait()  # slower than the model
        return Verdict.block("abusive")

    agent = Agent(FunctionModel(model), retry=None, context=None)
    agent.use(input_guardrail(moderation, run_beside=True))
    with pytest.raises(GuardrailTripped) as caught:
        await agent.chat("hi")
    assert caught.value.usage == Usage(input_tokens=5, output_tokens=2)  # what it spent
    assert [type(m) for m in agent.history.messages] == [UserMessage]


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_passing_guardrail_beside_lets_the_chat_finish(flavour: Flavour) -> None:
    agent, _ = agent_on(tool_call("lookup", {"key": "a"}), "done")
    agent.use(input_guardrail(as_check(lambda ctx: Verdict.allow(), flavour), run_beside=True))
    assert (await agent.chat("hi")).text == "done"
    assert ran == ["a"]


_checked_by: contextvars.ContextVar[str] = contextvars.ContextVar("checked_by", default="")


@pytest.mark.parametrize("waits", [False, True])
async def test_a_guardrail_beside_runs_in_a_task_of_its_own(waits: bool) -> None:
    """Its own task from its first line (its context, asyncio.current_task()); on Python
    3.12+ one that lets the message pass without waiting leaves no task behind."""
    seen: list[tuple[str, int]] = []
    tasks: list[asyncio.Task[Any] | None] = []

    def model(request: ProviderRequest) -> ProviderResponse:
        seen.append((_checked_by.get(), len(asyncio.all_tasks())))
        return text_response("done")

    async def moderation(ctx: InputGuardrailContext) -> Verdict:
        _checked_by.set("moderation")
        tasks.append(asyncio.current_task())
        if waits:
            await asyncio.sleep(0)
            tasks.append(asyncio.current_task())
        return Verdict.allow()

    agent = Agent(FunctionModel(model), retry=None, context=None)
    agent.use(input_guardrail(moderation, run_beside=True))
    assert (await agent.chat("hi")).text == "done"
    eager = sys.version_info >= (3, 12)
    # The test's task, and the guardrail's while it has not finished.
    assert seen == [("", 1 if eager and not waits else 2)]
    assert _checked_by.get() == ""
    assert asyncio.current_task() not in tasks
    assert len(set(tasks)) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_timeout_inside_a_guardrail_beside_ends_only_its_own_wait(stream: bool) -> None:
    """asyncio.timeout and anyio's cancel scopes (httpx's) cancel the guardrail's task."""
    import anyio

    checked = asyncio.Event()

    async def model(request: ProviderRequest) -> ProviderResponse:
        await checked.wait()  # the guardrail's timeouts went off meanwhile
        return text_response("done")

    async def moderation(ctx: InputGuardrailContext) -> Verdict:
        with anyio.move_on_after(0):  # a request that timed out: fail open
            await anyio.sleep_forever()
        try:
            async with asyncio.timeout(0):
                await asyncio.Event().wait()
        except TimeoutError:
            pass
        checked.set()
        return Verdict.allow()

    agent = Agent(FunctionModel(model), retry=None, context=None)
    agent.use(input_guardrail(moderation, run_beside=True))
    if stream:
        async with agent.chat_stream("hi") as events:
            kinds = [type(event).__name__ async for event in events]
        assert kinds[-1] == "ChatDone"
    else:
        assert (await agent.chat("hi")).text == "done"


async def test_a_guardrail_beside_is_cancelled_with_a_chat_that_fails_at_once() -> None:
    events: list[str] = []

    def fails(request: ProviderRequest) -> ProviderResponse:
        raise ServerError("down", status=500)

    async def moderation(ctx: InputGuardrailContext) -> Verdict:
        events.append("started")
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            events.append("cancelled")
            raise
        return Verdict.allow()

    agent = Agent(FunctionModel(fails), retry=None, context=None)
    agent.use(input_guardrail(moderation, run_beside=True))
    with pytest.raises(ServerError):
        await agent.chat("hi")
    for _ in range(5):  # the cancellation's turns of the event loop
        await asyncio.sleep(0)
    # Never started (a task cancelled before its first step), or cancelled where it waits.
    assert events in ([], ["started", "cancelled"])


async def test_a_guardrail_beside_cannot_redact() -> None:
    agent, _ = agent_on("an answer")
    agent.use(input_guardrail(lambda ctx: Verdict.replace("x"), name="late", run_beside=True))
    with pytest.raises(GuardrailTripped, match="'replace' is not a verdict"):
        await agent.chat("hi")


# --- output ---------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_blocked_answer_is_not_stored_and_the_tool_pairs_stay(
    flavour: Flavour, tmp_path: Path
) -> None:
    def no_numbers(ctx: OutputGuardrailContext) -> Verdict:
        return Verdict.block("a number") if "42" in ctx.text else Verdict.allow()

    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        agent, _ = agent_on(
            tool_call("lookup", {"key": "a"}), "it is 42", plugins=[store.session("s")]
        )
        agent.use(output_guardrail(as_check(no_numbers, flavour)))
        with pytest.raises(GuardrailTripped, match="a number"):
            await agent.chat("what is a?")

        kinds = [type(m) for m in agent.history.messages]
        assert kinds == [UserMessage, AssistantMessage, ToolMessage]
        stored = await store.load("s")
        assert stored == list(agent.history.messages)
        assert all("it is 42" not in str(m) for m in stored)
        assert_valid(stored)


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_an_output_replacement_is_the_answer(flavour: Flavour) -> None:
    agent, _ = agent_on("mail bob@example.com")
    agent.use(output_guardrail(as_check(lambda ctx: Verdict.replace("mail [email]"), flavour)))
    response = await agent.chat("who?")
    assert (response.text, response.output) == ("mail [email]", "mail [email]")
    assert agent.history.messages[-1].content == "mail [email]"


class Invoice(pydantic.BaseModel):
    total: int


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_an_output_guardrail_sees_the_validated_typed_output(flavour: Flavour) -> None:
    seen: list[object] = []

    def cap(ctx: OutputGuardrailContext) -> Verdict:
        seen.append(ctx.output)
        assert isinstance(ctx.output, Invoice)
        return Verdict.block("too much") if ctx.output.total > 100 else Verdict.allow()

    agent, _ = agent_on(
        tool_call("lookup", {"key": "a"}),
        tool_call(OUTPUT_TOOL_NAME, {"total": 500}),
        output_type=Invoice,
    )
    agent.use(output_guardrail(as_check(cap, flavour)))
    with pytest.raises(GuardrailTripped, match="too much"):
        await agent.chat("bill me")
    assert seen == [Invoice(total=500)]
    # The answer (the output tool call) is not stored: no call is left unanswered.
    assert [type(m) for m in agent.history.messages] == [UserMessage, AssistantMessage, ToolMessage]
    assert_valid(agent.history.messages)


async def test_a_typed_output_cannot_be_replaced() -> None:
    agent, _ = agent_on(tool_call(OUTPUT_TOOL_NAME, {"total": 5}), output_type=Invoice)
    agent.use(output_guardrail(lambda ctx: Verdict.replace("{}"), name="rewrite"))
    with pytest.raises(GuardrailTripped, match="'replace' is not a verdict the output"):
        await agent.chat("bill me")


async def test_an_agent_judge_blocks_the_answer() -> None:
    agent, _ = agent_on("a rude answer")
    agent.use(output_guardrail(judge(Verdict.block("rude"))))
    with pytest.raises(GuardrailTripped, match="rude") as caught:
        await agent.chat("hi")
    assert caught.value.position == "output"
    assert [type(m) for m in agent.history.messages] == [UserMessage]


# --- tool calls ------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_rejected_tool_call_does_not_run_and_the_model_reads_why(flavour: Flavour) -> None:
    seen: list[dict[str, Any]] = []

    def no_secrets(ctx: ToolCallGuardrailContext) -> Verdict:
        seen.append(dict(ctx.arguments))
        if ctx.arguments["key"] == "secret":
            return Verdict.reject("that key is secret")
        return Verdict.allow()

    agent, model = agent_on(tool_call("lookup", {"key": "secret"}, id="c1"), "ok, I cannot")
    agent.use(tool_call_guardrail(as_check(no_secrets, flavour)))
    assert (await agent.chat("look up secret")).text == "ok, I cannot"
    assert ran == []
    assert seen == [{"key": "secret"}]
    answer = model.requests[1].messages[-1]
    assert isinstance(answer, ToolMessage)
    assert (answer.tool_call_id, answer.is_error) == ("c1", True)
    assert "that key is secret" in answer.content


async def test_a_blocked_tool_call_stops_the_chat_and_every_call_is_answered() -> None:
    batch = tool_calls(
        ToolCall.create("lookup", {"key": "a"}, id="c1"),
        ToolCall.create("lookup", {"key": "rm -rf"}, id="c2"),
    )
    agent, model = agent_on(batch, "never")
    agent.use(
        tool_call_guardrail(
            lambda ctx: (
                Verdict.block("dangerous") if "rm" in ctx.arguments["key"] else Verdict.allow()
            ),
            name="shell",
        )
    )
    with pytest.raises(GuardrailTripped, match="dangerous") as caught:
        await agent.chat("go")
    assert caught.value.position == "tool_call"
    assert len(model.requests) == 1
    assert_valid(agent.history.messages)
    assert "c2" in {m.tool_call_id for m in agent.history.messages if isinstance(m, ToolMessage)}


async def test_a_tool_call_guardrail_checks_after_approval_or_before_it() -> None:
    stages: list[tuple[str, str]] = []

    def watch(label: str) -> Callable[[ToolCallGuardrailContext], Verdict]:
        def check(ctx: ToolCallGuardrailContext) -> Verdict:
            stages.append((label, ctx.approval))
            return Verdict.allow()

        return check

    agent, _ = agent_on(tool_call("wire", {"amount": 5}), "sent")
    agent.use(tool_call_guardrail(watch("after")))
    agent.use(tool_call_guardrail(watch("before"), before_approval=True))
    response = await agent.chat("wire 5")
    (pending,) = response.pending_approvals
    assert stages == [("before", "pending")]  # before the person is asked
    await agent.resume([pending.approve()])
    assert stages == [("before", "pending"), ("after", "approved")]
    assert ran == ["wire 5"]


async def test_a_rejection_before_approval_asks_nobody() -> None:
    agent, _ = agent_on(tool_call("wire", {"amount": 10_000}), "ok")
    agent.use(
        tool_call_guardrail(
            lambda ctx: Verdict.reject("over the limit"), name="limit", before_approval=True
        )
    )
    response = await agent.chat("wire 10000")
    assert response.pending_approvals == ()
    assert response.text == "ok"
    assert ran == []


# --- tool results -------------------------------------------------------------------------------


@pytest.mark.parametrize("flavour", FLAVOURS)
async def test_a_tool_result_is_replaced_before_the_model_sees_it(flavour: Flavour) -> None:
    def scrub(ctx: ToolResultGuardrailContext) -> Verdict:
        return Verdict.replace(ctx.text.replace("bob@example.com", "[email]"), "e-mail")

    agent, model = agent_on(tool_call("lookup", {"key": "a"}), "done")
    agent.use(tool_result_guardrail(as_check(scrub, flavour)))
    await agent.chat("a?")
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage)
    assert sent.content == "the value of a is 42; write to [email]"
    assert agent.history.messages[2] == sent


async def test_sync_and_async_result_guardrails_run_in_order_on_the_last_replacement() -> None:
    # Sync checks run without a coroutine until the first async one (or a sync one that
    # returns an awaitable); the order and every replacement must hold across that switch.
    seen: list[tuple[str, str]] = []

    def first(ctx: ToolResultGuardrailContext) -> Verdict:
        seen.append(("first", ctx.text))
        return Verdict.allow()

    async def second(ctx: ToolResultGuardrailContext) -> Verdict:
        await asyncio.sleep(0)
        seen.append(("second", ctx.text))
        return Verdict.replace("[second]")

    def third(ctx: ToolResultGuardrailContext) -> Any:
        async def later() -> Verdict:
            seen.append(("third", ctx.text))
            return Verdict.replace(ctx.text + " [third]")

        return later()  # a sync function that returns a coroutine: awaited all the same

    def fourth(ctx: ToolResultGuardrailContext) -> Verdict:
        seen.append(("fourth", ctx.text))
        return Verdict.allow()

    agent, model = agent_on(tool_call("lookup", {"key": "a"}), "done")
    for check in (first, second, third, fourth):
        agent.use(tool_result_guardrail(check))
    await agent.chat("a?")
    original = "the value of a is 42; write to bob@example.com"
    assert seen == [
        ("first", original),
        ("second", original),
        ("third", "[second]"),
        ("fourth", "[second] [third]"),
    ]
    sent = model.requests[1].messages[-1]
    assert isinstance(sent, ToolMessage)
    assert sent.content == "[second] [third]"


@pytest.mark.parametrize("where", ["second, async", "second, a returned coroutine", "first"])
async def test_a_tool_call_guardrail_that_fails_after_sync_ones_passed_is_a_trip(
    where: str,
) -> None:
    passed: list[str] = []

    def fine(ctx: ToolCallGuardrailContext) -> Verdict:
        passed.append("fine")
        return Verdict.allow()

    def broken_now(ctx: ToolCallGuardrailContext) -> Verdict:
        raise RuntimeError("broken check")

    async def broken_later(ctx: ToolCallGuardrailContext) -> Verdict:
        raise RuntimeError("broken check")

    def returns_broken(ctx: ToolCallGuardrailContext) -> Any:
        return broken_later(ctx)

    checks: list[Callable[[Any], Any]] = {
        "first": [broken_now, fine],
        "second, async": [fine, broken_later, fine],
        "second, a returned coroutine": [fine, returns_broken, fine],
    }[where]
    agent, _ = agent_on(tool_call("lookup", {"key": "a"}, id="c1"), "never")
    for check in checks:
        agent.use(tool_call_guardrail(check))
    with pytest.raises(GuardrailTripped, match="broken check") as caught:
        await agent.chat("a?")
    assert isinstance(caught.value.__cause__, RuntimeError)
    assert ran == []
    assert passed == ([] if where == "first" else ["fine"])
    assert_valid(agent.history.messages)


async def test_a_blocked_tool_result_is_not_stored() -> None:
    agent, model = agent_on(tool_call("lookup", {"key": "a"}), "never")
    agent.use(tool_result_guardrail(lambda ctx: Verdict.block("leak"), name="leak"))
    with pytest.raises(GuardrailTripped, match="leak"):
        await agent.chat("a?")
    assert ran == ["a"]
    assert_valid(agent.history.messages)
    assert all("bob@example.com" not in str(m) for m in agent.history.messages)
    assert len(model.requests) == 1


async def test_an_agent_judge_on_tool_calls_rejects() -> None:
    agent, _ = agent_on(tool_call("lookup", {"key": "a"}), "fine")
    agent.use(tool_call_guardrail(judge(Verdict.reject("not now"))))
    assert (await agent.chat("a?")).text == "fine"
    assert ran == []


# --- seen by other plugins, the trace and the session log ------------------------------------


async def test_verdicts_reach_observers_and_the_trace() -> None:
    lines: list[str] = []
    verdicts: list[tuple[str, str, str]] = []
    agent, _ = agent_on("ok")
    agent.use(TracePlugin(write=lines.append))
    agent.add_hook(
        "on_guardrail_verdict",
        lambda ctx: verdicts.append((ctx.position, ctx.guardrail, ctx.verdict.action)),
    )
    agent.use(input_guardrail(lambda ctx: Verdict.replace("hello"), name="tidy"))
    agent.use(output_guardrail(lambda ctx: Verdict.allow(), name="fine"))
    await agent.chat("hellooo")
    assert verdicts == [("input", "tidy", "replace")]  # an allow changes nothing
    assert any("on_guardrail_verdict" in line and "'tidy': replace" in line for line in lines)
    assert any("on_output_guardrail" in line for line in lines)


async def test_a_trace_without_guardrails_shows_no_guard_rows(tmp_path: Path) -> None:
    lines: list[str] = []
    agent, _ = agent_on(tool_call("lookup", {"key": "a"}), "ok")
    agent.use(TracePlugin(write=lines.append))
    await agent.chat("hi")
    assert lines
    assert not any("guardrail" in line for line in lines)


async def test_the_json_lines_trace_records_guardrails_and_verdicts(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    agent, _ = agent_on(tool_call("lookup", {"key": "a"}), "ok")
    with JsonLinesTracePlugin(path) as trace:
        agent.use(trace)
        agent.use(tool_call_guardrail(lambda ctx: Verdict.allow(), name="calls"))
        agent.use(tool_result_guardrail(pii(action="redact")))
        await agent.chat("hi")
    events = [record["event"] for record in read_trace(path)]
    assert "on_tool_call_guardrail" in events
    assert "on_guardrail_verdict" in events


async def test_verdict_records_outlive_the_process_and_explain_the_history(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    async with SQLiteSessionStore(path) as store:
        agent, _ = agent_on("fine", plugins=[store.session("s")])
        agent.use(input_guardrail(lambda ctx: Verdict.block("no card numbers"), name="cards"))
        with pytest.raises(GuardrailTripped):
            await agent.chat("my card is 4242 4242 4242 4242")
    async with SQLiteSessionStore(path) as store:
        restored = Agent(ScriptedModel(["hi"]), plugins=[store.session("s")])
        assert await restored.pending_approvals() == ()  # the approval log passes over them
        await restored.chat("hello")
        assert [m.content for m in restored.history.messages] == ["hello", "hi"]
        (record,) = await read_verdicts(store, "s")
        assert (record.position, record.guardrail) == ("input", "cards")
        assert record.verdict == Verdict.block("no card numbers")
        assert "4242" not in str(record)  # the blocked text is not kept
        assert await store.list_sessions() == [await store.info("s")]


async def test_verdicts_beside_waiting_approvals_leave_the_approval_log_readable(
    tmp_path: Path,
) -> None:
    batch = tool_calls(
        ToolCall.create("wire", {"amount": 5}, id="c1"),
        ToolCall.create("lookup", {"key": "secret"}, id="c2"),
    )
    refuse = tool_call_guardrail(
        lambda ctx: Verdict.reject("secret") if ctx.call.name == "lookup" else Verdict.allow(),
        name="secrets",
        before_approval=True,
    )
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        agent, _ = agent_on(batch, plugins=[store.session("s"), refuse])
        (pending,) = (await agent.chat("go")).pending_approvals
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        later = Agent(
            ScriptedModel(["wired"]), tools=[lookup, wire], plugins=[store.session("s"), refuse]
        )
        assert [p.call_id for p in await later.pending_approvals()] == ["c1"]
        assert (await later.resume([pending.approve()])).text == "wired"
        assert ran == ["wire 5"]
        (record,) = await read_verdicts(store, "s")
        assert (record.call_id, record.verdict.action) == ("c2", "reject")


async def test_a_verdict_observer_that_raises_ends_the_chat() -> None:
    agent, _ = agent_on("ok")

    def refuse(ctx: GuardrailVerdictContext) -> None:
        raise RuntimeError("observer failed")

    agent.add_hook("on_guardrail_verdict", refuse)
    agent.use(input_guardrail(lambda ctx: Verdict.replace("x"), name="tidy"))
    with pytest.raises(RuntimeError, match="observer failed"):
        await agent.chat("hi")


# --- kill -9 during an output guardrail ---------------------------------------------------------


def killed_in_output_guardrail(db: Path, reached: Path) -> None:
    """A process chats into session "s" of ``db``; SIGKILLed inside its output guardrail."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests._guardrail_worker", str(db), str(reached)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    kill_at_stop(process, reached)


async def test_a_process_killed_during_an_output_guardrail_stores_no_unchecked_answer(
    tmp_path: Path,
) -> None:
    db, reached = tmp_path / "s.db", tmp_path / "reached"
    killed_in_output_guardrail(db, reached)

    async with SQLiteSessionStore(db) as store:
        stored = await store.load("s")
        # The turn's tool pair was committed as it ran; the answer under check was not.
        assert [type(m) for m in stored] == [UserMessage, AssistantMessage, ToolMessage]
        assert all("UNCHECKED" not in str(m) for m in stored)
        assert_valid(stored)
        agent = Agent(ScriptedModel(["again"]), tools=[lookup], plugins=[store.session("s")])
        assert (await agent.chat("still there?")).text == "again"
        assert_valid(agent.history.messages)


async def test_a_disposed_guardrail_checks_no_more() -> None:
    agent, _ = agent_on("first", "second")
    dispose = agent.use(output_guardrail(lambda ctx: Verdict.block("no"), name="strict"))
    agent.add_hook("on_output_guardrail", lambda ctx: None, order=5)
    assert agent.hooks.guards == 2
    with pytest.raises(GuardrailTripped):
        await agent.chat("one")
    dispose()
    dispose()  # idempotent: counted once
    assert agent.hooks.guards == 1
    assert (await agent.chat("two")).text == "second"
    assert [m.content for m in agent.history.messages] == ["one", "two", "second"]


async def test_an_agent_judge_is_held_to_what_the_chat_has_left() -> None:
    referee = judge(Verdict.allow())
    referee_model = referee.model
    agent, model = agent_on("never sent", limits=UsageLimits(requests=0))
    agent.use(input_guardrail(referee))
    with pytest.raises(GuardrailTripped) as caught:
        await agent.chat("hello")
    assert isinstance(caught.value.__cause__, UsageLimitExceeded)  # fail closed
    assert isinstance(referee_model, ScriptedModel)
    assert referee_model.requests == []  # the judge was not asked: nothing left to spend
    assert model.requests == []


def test_a_verdict_and_a_trip_pickle_as_a_durable_engine_stores_an_error() -> None:
    verdict = Verdict.block("no", data={"word": "password", "at": [3]})
    tripped = GuardrailTripped(
        verdict=verdict, guardrail="g", position="input", usage=Usage(input_tokens=2)
    )
    again = pickle.loads(pickle.dumps(tripped))
    assert isinstance(again, GuardrailTripped)
    assert (again.verdict, again.guardrail, again.position) == (verdict, "g", "input")
    assert again.verdict.data["word"] == "password"
    with pytest.raises(TypeError):
        again.verdict.data["word"] = "x"  # type: ignore[index]  # read-only again
    assert pickle.loads(pickle.dumps(Verdict.allow())) == Verdict.allow()


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ScoredVerdict(Verdict):
    score: float = 0.0


class PlainVerdict(Verdict):
    pass


class OwnVerdict(Verdict):
    @classmethod
    def allow(cls, reason: str = "", *, data: Mapping[str, object] = {}) -> Verdict:
        return cls(action="allow", reason=f"own: {reason}")


class OwnChildVerdict(OwnVerdict):
    pass


class AllowMixin:
    @classmethod
    def allow(cls, reason: str = "", *, data: Mapping[str, object] = {}) -> Verdict:
        return Verdict(action="allow", reason="mixin")


class MixedVerdict(AllowMixin, Verdict):
    pass


async def test_a_plain_allow_is_one_shared_verdict_and_a_subclass_allows_with_its_own() -> None:
    assert Verdict.allow() is Verdict.allow()
    assert Verdict.allow("fine") == Verdict(action="allow", reason="fine")
    for kind in (ScoredVerdict, PlainVerdict):
        allowed = kind.allow()
        assert (type(allowed), allowed.action) == (kind, "allow")
        assert type(kind.block("no")) is kind
        assert pickle.loads(pickle.dumps(kind.allow))() == allowed  # the method itself
    # An allow of its own, or a mixin's, stays the subclass's (and its subclasses').
    assert (OwnChildVerdict.allow("x").reason, MixedVerdict.allow().reason) == ("own: x", "mixin")
    # A subclass's allow goes on in the loop, as the shared one does.
    agent, _ = agent_on(tool_call("lookup", {"key": "k"}, id="c1"), "done")
    agent.use(tool_call_guardrail(lambda ctx: ScoredVerdict.allow(), name="scored"))
    assert (await agent.chat("go")).text == "done"
    assert ran == ["k"]


@pytest.mark.parametrize(
    ("event", "name", "skips"),
    [
        ("on_message", "g", None),
        ("on_input_guardrail", "", None),
        ("on_tool_call_guardrail", "g", "later"),
    ],
)
def test_a_guardrail_registration_is_checked(event: str, name: str, skips: str | None) -> None:
    agent, _ = agent_on("never sent")
    with pytest.raises(HookRegistrationError):
        agent.hooks.add_guardrail(event, lambda ctx: Verdict.allow(), name=name, skips=skips)


async def test_a_check_after_an_async_one_is_held_to_a_verdict_too() -> None:
    # From the first async handler on, the row's dispatch calls the rest: the same rule.
    async def allows(ctx: InputGuardrailContext) -> Verdict:
        return Verdict.allow()

    agent, model = agent_on("never sent")
    agent.use(input_guardrail(allows))
    agent.use(input_guardrail(lambda ctx: None, name="late"))  # type: ignore[arg-type, return-value]
    agent.add_hook("on_input_guardrail", lambda ctx: None)  # a plain hook: no opinion
    with pytest.raises(GuardrailTripped, match="unknown verdict") as caught:
        await agent.chat("hello")
    assert caught.value.guardrail == "late"
    assert isinstance(caught.value.__cause__, TypeError)
    assert model.requests == []
