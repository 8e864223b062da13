"""Bugs found in review, each kept fixed by a test that reproduces it."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Sequence

import pytest

from hookloop import (
    Agent,
    AssistantMessage,
    ChatCancelledError,
    CircuitBreaker,
    CircuitOpenError,
    ContextBeforeRequestResult,
    ContextHooks,
    ContextOnErrorResult,
    ContextOverflowError,
    DefaultRetryStrategy,
    FallbackStrategy,
    Message,
    PreRequestContext,
    ProviderRequest,
    Scope,
    ServerError,
    Tool,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from hookloop.context import Compaction
from hookloop.testing import FunctionModel, ScriptedModel, tool_call, tool_calls


async def no_sleep(seconds: float) -> None:
    return None


def unanswered(messages: Sequence[Message]) -> list[str]:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [
        c.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.id not in answered
    ]


async def test_cancel_after_call_ids_were_reused_still_ends_cleanly() -> None:
    """A provider reusing call ids across turns must not resurrect an old result on cancel."""
    started = asyncio.Event()

    @tool
    async def slow(x: int) -> str:
        """Slow when x is 99."""
        if x == 99:
            started.set()
            await asyncio.Event().wait()
        return f"done {x}"

    model = ScriptedModel(
        [
            tool_calls(
                ToolCall(name="slow", arguments='{"x": 1}', id="call_0"),
                ToolCall(name="slow", arguments='{"x": 2}', id="call_1"),
            ),
            tool_call("slow", {"x": 99}, id="call_0"),
            "next",
        ]
    )
    agent = Agent(model, tools=[slow], retry=None)
    terminal: list[str] = []
    agent.add_hook("on_chat_abort", lambda ctx: terminal.append("abort"))
    agent.add_hook("on_chat_error", lambda ctx: terminal.append("error"))
    chat = asyncio.create_task(agent.chat("go"))
    await started.wait()
    agent.cancel("stop")
    with pytest.raises(ChatCancelledError):
        await chat
    assert terminal == ["abort"]
    last = agent.messages[-1]
    assert isinstance(last, ToolMessage)
    assert (last.tool_call_id, last.is_error) == ("call_0", True)
    assert "cancelled" in last.content


async def test_pre_request_rewrites_do_not_pile_up_on_retries() -> None:
    model = ScriptedModel([ServerError("b", status=503), ServerError("b", status=503), "ok"])
    agent = Agent(model, system_prompt="You help.", retry=DefaultRetryStrategy(sleep=no_sleep))

    def concise(ctx: PreRequestContext) -> ProviderRequest:
        return dataclasses.replace(ctx.request, system=f"{ctx.request.system}\nBe concise.")

    agent.add_hook("pre_request", concise)
    await agent.chat("hi")
    assert [r.system for r in model.requests] == ["You help.\nBe concise."] * 3


async def test_before_request_of_context_hooks_sees_the_built_request_every_attempt() -> None:
    seen: list[int] = []

    def before(**kwargs: object) -> ContextBeforeRequestResult:
        messages = kwargs["messages"]
        assert isinstance(messages, list)
        seen.append(len(messages))
        return ContextBeforeRequestResult(messages=[*messages, UserMessage(content="(note)")])

    model = ScriptedModel([ServerError("b", status=503), "ok"])
    agent = Agent(
        model,
        retry=DefaultRetryStrategy(sleep=no_sleep),
        plugins=[ContextHooks(before_request=before)],
    )
    await agent.chat("hi")
    assert seen == [1, 1]
    assert [len(r.messages) for r in model.requests] == [2, 2]


async def test_a_request_rewritten_in_after_model_call_is_repaired() -> None:
    @tool
    async def f() -> str:
        """Nothing."""
        return "ok"

    overflow = ContextOverflowError("prompt is too long")
    model = ScriptedModel([tool_call("f", {}, id="c1"), overflow, "ok"])

    def drop_two(**kwargs: object) -> ContextOnErrorResult:
        messages = kwargs["messages"]
        assert isinstance(messages, list)
        return ContextOnErrorResult(retry=True, messages=messages[2:])  # leaves tool(c1) alone

    agent = Agent(
        model, tools=[f], retry=None, plugins=[ContextHooks(on_error=drop_two, max_retries=1)]
    )
    await agent.chat("go")
    sent = model.requests[-1].messages
    assert not any(isinstance(m, ToolMessage) for m in sent)


async def test_reactive_compaction_leaves_the_history_alone_when_it_cannot_help() -> None:
    overflow = ContextOverflowError("prompt is too long")
    summarizer = FunctionModel(lambda request: "S" * 40_000, name="verbose")
    model = FunctionModel(lambda request: "never")
    agent = Agent(model, retry=None, plugins=[Compaction(summarizer=summarizer)])
    for i in range(6):
        agent.model = ScriptedModel([f"answer {i}"])
        await agent.chat(f"question {i}")
    before = agent.messages

    def always_too_long(request: ProviderRequest) -> str:
        raise overflow

    agent.model = FunctionModel(always_too_long)
    with pytest.raises(ContextOverflowError):
        await agent.chat("one more")
    assert agent.messages[: len(before)] == before


@pytest.mark.parametrize("where", ["on_response", "pre_tool_call"])
async def test_cancel_from_a_hook_in_the_chat_task_ends_the_chat_at_the_next_step(
    where: str,
) -> None:
    ran: list[str] = []

    @tool
    async def act() -> str:
        """Acts."""
        ran.append("act")
        return "acted"

    model = ScriptedModel([tool_call("act", {}), "final"])
    agent = Agent(model, tools=[act], retry=None)

    def stop(ctx: object) -> None:
        agent.cancel("stop")

    agent.add_hook(where, stop)  # type: ignore[call-overload]
    done: list[str] = []
    agent.add_hook("on_chat_done", lambda ctx: done.append("done"))
    with pytest.raises(ChatCancelledError):
        await agent.chat("go")
    assert ran == []
    assert done == []
    assert unanswered(agent.messages) == []


async def test_with_every_circuit_open_no_model_is_called() -> None:
    primary = ScriptedModel([ServerError("p", status=500)] * 3, name="primary")
    backup = ScriptedModel([ServerError("b", status=500)] * 3, name="backup")
    agent = Agent(primary, retry=FallbackStrategy([backup], cooldown=60.0))
    with pytest.raises(ServerError):
        await agent.chat("one")
    for _ in range(2):
        with pytest.raises(CircuitOpenError):
            await agent.chat("again")
    assert (len(primary.requests), len(backup.requests)) == (1, 1)


def test_a_failed_trial_after_the_cool_down_reopens_the_circuit_at_once() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=3, cooldown=10.0, clock=lambda: now[0])
    model = ScriptedModel([])
    for _ in range(3):
        breaker.record_failure(model)
    assert not breaker.allows(model)
    now[0] = 11.0
    assert breaker.allows(model)  # one trial
    breaker.record_failure(model)
    assert not breaker.allows(model)  # reopened by a single failure
    now[0] = 22.0
    breaker.record_success(model)
    assert breaker.allows(model)
    breaker.record_failure(model)
    assert breaker.allows(model)  # closed again: the threshold counts anew


async def test_context_hooks_count_their_own_retries_only() -> None:
    calls: list[int] = []

    def on_error(**kwargs: object) -> ContextOnErrorResult:
        calls.append(1)
        return ContextOnErrorResult(retry=True)

    model = ScriptedModel([ServerError("b", status=503), ContextOverflowError("too long"), "ok"])
    agent = Agent(
        model,
        retry=DefaultRetryStrategy(sleep=no_sleep),
        plugins=[ContextHooks(on_error=on_error, max_retries=1)],
    )
    assert (await agent.chat("hi")).text == "ok"
    assert calls == [1]


async def test_a_tool_whose_function_has_an_async_call_runs() -> None:
    class Lookup:
        async def __call__(self, city: str) -> str:
            return f"sunny in {city}"

    weather = Tool(
        name="weather",
        description="Weather.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        function=Lookup(),
    )
    agent = Agent(ScriptedModel([tool_call("weather", {"city": "Oslo"}), "ok"]), tools=[weather])
    await agent.chat("weather?")
    assert agent.messages[2].content == "sunny in Oslo"  # type: ignore[union-attr]


async def test_a_scope_context_that_is_not_text_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, system_prompt="base", retry=None)
    agent.scopes.register(Scope("profile", context=lambda: {"name": "Ann"}))  # type: ignore[arg-type,return-value]
    with caplog.at_level(logging.WARNING):
        assert (await agent.chat("hi")).text == "ok"
    assert model.requests[0].system == "base"
    assert "not a str" in caplog.text
