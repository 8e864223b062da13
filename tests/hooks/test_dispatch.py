"""The hook contract: dispatch.

Firing order, sync and async handlers, changes during a dispatch, no context object for an event
without handlers.

Part of DESIGN.md sections 2 and 3 (seed 002 "AG2B hooks").
"""

import asyncio
import dataclasses
from collections.abc import Callable

import pytest

import hookloop._loop
import hookloop._model_call
import hookloop._tool_calls
import hookloop.hooks._dispatch
from hookloop import (
    AfterModelCallContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    Disposer,
    HookReturnError,
    MessageContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    Scope,
    ServerError,
    ToolCall,
    ToolErrorContext,
    ToolResultContext,
)
from hookloop.hooks import ScopeContext
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import (
    ScriptedModel,
    tool_call,
    tool_calls,
)
from tests.hooks._support import (
    AsyncCallable,
    add_call,
    bare_agent,
    fail,
    make_add,
    make_agent,
)

# --- dispatch ---------------------------------------------------------------------------


async def test_handlers_fire_in_ascending_order_then_registration_order() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []
    for name, order in [("a", 5), ("b", -1), ("c", 0), ("d", 0), ("e", -1), ("f", 5)]:
        agent.add_hook("on_chat_start", lambda ctx, n=name: seen.append(n), order=order)

    await agent.chat("hi")

    assert seen == ["b", "e", "c", "d", "a", "f"]


async def test_order_also_applies_to_interceptor_chains() -> None:
    agent, model, _ = make_agent(["one"], system_prompt="base")

    def append(suffix: str) -> Callable[[PreRequestContext], ProviderRequest]:
        def handler(ctx: PreRequestContext) -> ProviderRequest:
            return dataclasses.replace(ctx.request, system=f"{ctx.request.system}+{suffix}")

        return handler

    agent.add_hook("pre_request", append("late"), order=10)
    agent.add_hook("pre_request", append("early"), order=-10)
    agent.add_hook("pre_request", append("middle"))
    await agent.chat("hi")

    assert model.requests[0].system == "base+early+middle+late"


async def test_async_handlers_are_awaited_one_at_a_time_in_order() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []

    async def slow(ctx: MessageContext) -> None:
        seen.append(f"slow-start:{ctx.message.role}")
        for _ in range(3):
            await asyncio.sleep(0)
        seen.append(f"slow-end:{ctx.message.role}")

    def fast(ctx: MessageContext) -> None:
        seen.append(f"fast:{ctx.message.role}")

    agent.add_hook("on_message", slow)
    agent.add_hook("on_message", fast)
    agent.add_hook("on_message", AsyncCallable(seen, "callable"))
    await agent.chat("hi")

    assert seen == [
        "slow-start:user",
        "slow-end:user",
        "fast:user",
        "callable",
        "slow-start:assistant",
        "slow-end:assistant",
        "fast:assistant",
        "callable",
    ]


async def test_async_interceptor_return_value_is_used() -> None:
    agent, _, _ = make_agent(["hello"])

    async def shout(ctx: ResponseContext) -> ProviderResponse:
        await asyncio.sleep(0)
        return dataclasses.replace(ctx.response, content=ctx.response.content.upper())

    agent.add_hook("on_response", shout)
    response = await agent.chat("hi")

    assert response.text == "HELLO"


async def test_sync_handler_returning_an_awaitable_is_awaited() -> None:
    agent, _, _ = make_agent(["hello"])
    seen: list[str] = []

    async def record(ctx: MessageContext) -> None:
        seen.append(ctx.message.role)

    agent.add_hook("on_message", lambda ctx: record(ctx))
    await agent.chat("hi")

    assert seen == ["user", "assistant"]


async def test_hook_added_during_a_dispatch_fires_from_the_next_dispatch() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []

    def late(ctx: MessageContext) -> None:
        seen.append(f"late:{ctx.message.role}")

    def adder(ctx: MessageContext) -> None:
        seen.append(f"adder:{ctx.message.role}")
        if ctx.message.role == "user":
            agent.add_hook("on_message", late)

    agent.add_hook("on_message", adder)
    await agent.chat("hi")

    assert seen == ["adder:user", "adder:assistant", "late:assistant"]


async def test_hook_for_a_later_event_added_during_a_chat_fires_in_that_chat() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []

    def add_message_hook(ctx: ChatStartContext) -> None:
        agent.add_hook("on_message", lambda ctx: seen.append(ctx.message.role))

    agent.add_hook("on_chat_start", add_message_hook)
    await agent.chat("hi")

    assert seen == ["user", "assistant"]


async def test_hook_removed_during_a_dispatch_still_runs_in_that_dispatch() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []
    disposers: list[Disposer] = []

    def remover(ctx: MessageContext) -> None:
        seen.append(f"remover:{ctx.message.role}")
        disposers[0]()

    agent.add_hook("on_message", remover)
    disposers.append(
        agent.add_hook("on_message", lambda ctx: seen.append(f"victim:{ctx.message.role}"))
    )
    await agent.chat("hi")

    assert seen == ["remover:user", "victim:user", "remover:assistant"]


async def test_handler_that_disposes_itself_runs_once() -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"])
    agent = bare_agent(model, tools=[make_add()])
    seen: list[int] = []
    disposers: list[Disposer] = []

    def once(ctx: PreRequestContext) -> None:
        seen.append(ctx.iteration)
        disposers[0]()

    disposers.append(agent.add_hook("pre_request", once))
    await agent.chat("hi")

    assert seen == [0]
    assert "pre_request" not in agent.hooks.handlers


def test_disposing_the_only_handler_removes_the_event_from_the_registry() -> None:
    agent = bare_agent(ScriptedModel([]))
    dispose = agent.add_hook("on_response", lambda ctx: None)
    assert set(agent.hooks.handlers) == {"on_response"}

    dispose()

    assert agent.hooks.handlers == {}


CONTEXT_CLASSES = {
    "ChatStartContext": ChatStartContext,
    "ChatDoneContext": ChatDoneContext,
    "ChatAbortContext": ChatAbortContext,
    "ChatErrorContext": ChatErrorContext,
    "MessageContext": MessageContext,
    "PreRequestContext": PreRequestContext,
    "ResponseContext": ResponseContext,
    "AfterModelCallContext": AfterModelCallContext,
    "PreToolCallContext": PreToolCallContext,
    "ToolResultContext": ToolResultContext,
    "ToolErrorContext": ToolErrorContext,
}


@pytest.fixture
def built_contexts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records the name of every hook context the loop (or the scope registry) builds."""
    built: list[str] = []

    def spy(name: str, cls: type) -> Callable[..., object]:
        def build(**fields: object) -> object:
            built.append(name)
            return cls(**fields)

        return build

    def spy_maker(name: str, make: Callable[..., object]) -> Callable[..., object]:
        def build(*fields: object) -> object:
            built.append(name)
            return make(*fields)

        return build

    # The chat, its model calls, its tool calls: a context is made by its class or by the
    # maker of its class (hooks._contexts.maker, "<class>.make").
    for module in (hookloop._loop, hookloop._model_call, hookloop._tool_calls):
        for attribute, value in list(vars(module).items()):
            if attribute in CONTEXT_CLASSES:
                monkeypatch.setattr(module, attribute, spy(attribute, value))
            owner = getattr(value, "__qualname__", "").removesuffix(".make")
            if callable(value) and owner != value.__qualname__ and owner in CONTEXT_CLASSES:
                monkeypatch.setattr(module, attribute, spy_maker(owner, value))
    monkeypatch.setattr(hookloop.hooks._dispatch, "ScopeContext", spy("ScopeContext", ScopeContext))
    return built


async def test_events_without_handlers_build_no_context(built_contexts: list[str]) -> None:
    script = [
        tool_calls(
            add_call("c1"), ToolCall.create("nope", {}, id="c2"), ToolCall(name="fail", id="c3")
        ),
        "done",
    ]
    agent = bare_agent(ScriptedModel(script), tools=[make_add(), fail])
    agent.scopes.register(Scope("extra"))
    agent.scopes.unregister("extra")
    response = await agent.chat("hi")
    failing = bare_agent(ScriptedModel([ServerError("boom", status=500)]))
    with pytest.raises(ServerError):
        await failing.chat("hi")

    assert response.text == "done"
    assert built_contexts == []


async def test_only_events_with_handlers_build_a_context(built_contexts: list[str]) -> None:
    agent = bare_agent(
        ScriptedModel([tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"]), tools=[make_add()]
    )
    dispose = agent.add_hook("on_tool_call_result", lambda ctx: None)
    agent.add_hook("on_message", lambda ctx: None)
    dispose()

    await agent.chat("hi")

    assert built_contexts == ["MessageContext"] * 4


async def test_after_model_call_handlers_run_in_order_whether_plain_or_async() -> None:
    # The plain ones are called without a coroutine (notify_plainly) until the first async
    # handler or awaitable return; everything after is awaited in order all the same.
    agent, model, _ = make_agent([ServerError("busy", status=503), "done"])
    seen: list[str] = []

    def plain(name: str) -> Callable[[AfterModelCallContext], None]:
        return lambda ctx: seen.append(f"{name}:{ctx.attempt}")

    async def retry_once(ctx: AfterModelCallContext) -> None:
        seen.append(f"awaited:{ctx.attempt}")
        if ctx.error is not None:
            ctx.retry = True

    async def late(ctx: AfterModelCallContext) -> None:
        seen.append(f"async:{ctx.attempt}")

    agent.add_hook("after_model_call", plain("first"), order=-20)
    agent.add_hook("after_model_call", lambda ctx: retry_once(ctx), order=-10)
    agent.add_hook("after_model_call", plain("second"), order=-5)
    agent.add_hook("after_model_call", late, order=5)
    agent.add_hook("after_model_call", plain("last"), order=10)

    response = await agent.chat("hi")

    assert response.text == "done"
    assert len(model.requests) == 2
    order = ["first", "awaited", "second", "async", "last"]
    assert seen == [f"{n}:1" for n in order] + [f"{n}:2" for n in order]


async def test_a_plain_after_model_call_handler_that_raises_is_named() -> None:
    agent, _, _ = make_agent(["done"])

    def broken(ctx: AfterModelCallContext) -> None:
        raise RuntimeError("broken handler")

    agent.add_hook("after_model_call", broken)
    with pytest.raises(RuntimeError, match="broken handler") as raised:
        await agent.chat("hi")
    assert any("'after_model_call' hook handler" in note for note in raised.value.__notes__)

    agent, _, _ = make_agent(["done"])

    def sets_fixed(ctx: AfterModelCallContext) -> None:
        ctx.attempt = 7  # type: ignore[misc]

    agent.add_hook("after_model_call", sets_fixed)
    with pytest.raises(HookReturnError, match=r"set ctx\.attempt"):
        await agent.chat("hi")
