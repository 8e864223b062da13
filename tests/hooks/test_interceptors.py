"""The hook contract (DESIGN.md sections 2 and 3, seed 002 "AG2B hooks").

Layout of this module:
    registration     add_hook / dispose / @hook / registration errors
    dispatch         firing order, sync and async handlers, changes during a dispatch,
                     no context object for an event without handlers
    lifecycle        the whole event sequence of a chat, on_chat_start / on_message / on_chat_done
    interceptors     pre_request, on_response, after_model_call, pre_tool_call,
                     on_tool_call_result, on_tool_call_error, typed returns (HookReturnError)
    tool failures    unknown / disabled / invalid arguments / raising tool
    throws           a throw in any handler ends the chat; the two exceptions to that rule
    terminal events  exactly one of on_chat_done / on_chat_abort / on_chat_error per chat
    scope hooks      synchronous, after the change is committed
    plugins          agent.use(plugin)
"""

import asyncio
import dataclasses
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pytest

import hookloop._loop
import hookloop.hooks
from hookloop import (
    AfterModelCallContext,
    Agent,
    AgentResponse,
    AssistantMessage,
    ChatAbortContext,
    ChatCancelledError,
    ChatDone,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    Disposer,
    HookRegistrationError,
    HookReturnError,
    MaxIterationsError,
    Message,
    MessageCommitted,
    MessageContext,
    Model,
    PreRequestContext,
    PreToolCallContext,
    ProviderRequest,
    ProviderResponse,
    ResponseContext,
    Scope,
    ScopeContext,
    ScopeNotFoundError,
    ServerError,
    Tool,
    ToolCall,
    ToolDisabledError,
    ToolErrorContext,
    ToolExecutionError,
    ToolMessage,
    ToolResultContext,
    ToolReturn,
    ToolValidationError,
    UnknownToolError,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.models.testing import (
    FunctionModel,
    ScriptedModel,
    text_response,
    tool_call,
    tool_calls,
)

CHAT_EVENTS = (
    "on_chat_start",
    "on_chat_done",
    "on_chat_abort",
    "on_chat_error",
    "on_message",
    "pre_request",
    "on_response",
    "after_model_call",
    "pre_tool_call",
    "on_tool_call_result",
    "on_tool_call_error",
)
SCOPE_EVENTS = ("on_scope_register", "on_scope_unregister")
TERMINAL_EVENTS = ("on_chat_done", "on_chat_abort", "on_chat_error")


# --- helpers ----------------------------------------------------------------------------


def bare_agent(model: Model, **kwargs: Any) -> Agent:
    """Hook mechanics are tested on an agent without the default retry and context plugins."""
    kwargs.setdefault("context", None)
    return Agent(model, retry=None, **kwargs)


def label(event: str, ctx: object) -> str:
    """A short, readable name for one firing of ``event``."""
    if isinstance(ctx, MessageContext):
        return f"{event}:{ctx.message.role}"
    if isinstance(ctx, (PreRequestContext, ResponseContext)):
        return f"{event}:{ctx.iteration}"
    if isinstance(ctx, AfterModelCallContext):
        return f"{event}:{ctx.iteration}:{ctx.attempt}"
    if isinstance(ctx, (PreToolCallContext, ToolResultContext, ToolErrorContext)):
        return f"{event}:{ctx.call.id}"
    if isinstance(ctx, ScopeContext):
        return f"{event}:{ctx.scope.name}"
    return event


class Recorder:
    """Observes events of an agent: ``events`` holds labels, ``contexts`` the contexts."""

    def __init__(
        self, agent: Agent, events: Iterable[str] = CHAT_EVENTS, *, order: int = 0
    ) -> None:
        self.events: list[str] = []
        self.contexts: dict[str, list[Any]] = defaultdict(list)
        for event in events:
            agent.add_hook(event, self._handler(event), order=order)  # type: ignore[call-overload]

    def _handler(self, event: str) -> Callable[[Any], None]:
        def record(ctx: Any) -> None:
            self.events.append(label(event, ctx))
            self.contexts[event].append(ctx)

        return record

    @property
    def terminal(self) -> list[str]:
        return [e for e in self.events if e in TERMINAL_EVENTS]


def make_agent(
    script: Iterable[Any], *, tools: Iterable[Tool] = (), **kwargs: Any
) -> tuple[Agent, ScriptedModel, Recorder]:
    """An agent on a scripted model, with a recorder on every chat event."""
    model = ScriptedModel(script)
    agent = bare_agent(model, tools=tools, **kwargs)
    return agent, model, Recorder(agent)


def summary(messages: Sequence[Message]) -> list[tuple[object, ...]]:
    """Messages without their random ids, for whole-list comparisons."""
    out: list[tuple[object, ...]] = []
    for m in messages:
        if isinstance(m, UserMessage):
            out.append(("user", m.content))
        elif isinstance(m, AssistantMessage):
            out.append(("assistant", m.content, [(c.id, c.name) for c in m.tool_calls]))
        elif isinstance(m, ToolMessage):
            out.append(("tool", m.tool_call_id, m.content, m.is_error))
        else:
            out.append((m.role, m.content))
    return out


def make_add(calls: list[tuple[int, int]] | None = None) -> Tool:
    """A fresh ``add(a, b)`` tool that logs its calls into ``calls``."""

    @tool
    async def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        if calls is not None:
            calls.append((a, b))
        return a + b

    return add


@tool
async def fail() -> str:
    """A tool that always raises."""
    raise ValueError("kaput")


def add_call(call_id: str = "c1", a: int = 1, b: int = 2) -> ToolCall:
    return ToolCall.create("add", {"a": a, "b": b}, id=call_id)


# --- registration -------------------------------------------------------------------------


async def test_add_hook_returns_a_disposer_that_removes_the_handler() -> None:
    agent, _, _ = make_agent(["one", "two"])
    seen: list[str] = []
    dispose = agent.add_hook("on_message", lambda ctx: seen.append(ctx.message.role))

    assert isinstance(dispose, Disposer)
    await agent.chat("first")
    dispose()
    await agent.chat("second")

    assert seen == ["user", "assistant"]


async def test_dispose_is_idempotent_and_leaves_other_registrations_alone() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []
    dispose_a = agent.add_hook("on_chat_start", lambda ctx: seen.append("a"))
    agent.add_hook("on_chat_start", lambda ctx: seen.append("b"))

    assert dispose_a.disposed is False
    dispose_a()
    dispose_a()
    dispose_a()
    assert dispose_a.disposed is True
    await agent.chat("hi")

    assert seen == ["b"]


async def test_same_function_registered_twice_is_two_registrations() -> None:
    agent, _, _ = make_agent(["one", "two"])
    seen: list[str] = []

    def on_start(ctx: ChatStartContext) -> None:
        seen.append(ctx.message.text)

    first = agent.add_hook("on_chat_start", on_start)
    agent.add_hook("on_chat_start", on_start)
    await agent.chat("a")
    first()
    first()  # idempotent: must not remove the second registration
    await agent.chat("b")

    assert seen == ["a", "a", "b"]


async def test_dispose_removes_exactly_its_own_registration() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []
    agent.add_hook("on_chat_start", lambda ctx: seen.append("first"))
    dispose_middle = agent.add_hook("on_chat_start", lambda ctx: seen.append("middle"))
    agent.add_hook("on_chat_start", lambda ctx: seen.append("last"))

    dispose_middle()
    await agent.chat("hi")

    assert seen == ["first", "last"]


async def test_hook_decorator_registers_and_returns_the_function_unchanged() -> None:
    agent, _, _ = make_agent(["one"])
    seen: list[str] = []

    def plain(ctx: ChatStartContext) -> None:
        seen.append("plain")

    decorated = agent.hook("on_chat_start")(plain)

    @agent.hook("on_chat_start", order=-1)
    def early(ctx: ChatStartContext) -> None:
        seen.append("early")

    await agent.chat("hi")

    assert decorated is plain
    assert callable(early)
    assert early.__name__ == "early"
    assert seen == ["early", "plain"]


@pytest.mark.parametrize("event", ["onMessage", "on_messages", "", "before_request"])
def test_unknown_event_raises_hook_registration_error(event: str) -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(HookRegistrationError, match="unknown hook event"):
        agent.add_hook(event, lambda ctx: None)  # type: ignore[call-overload]
    with pytest.raises(HookRegistrationError, match="unknown hook event"):
        agent.hook(event)(lambda ctx: None)  # type: ignore[arg-type]

    assert agent.hooks.handlers == {}


def test_non_callable_handler_is_rejected() -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(HookRegistrationError, match="callable"):
        agent.add_hook("on_message", "not a function")  # type: ignore[call-overload]
    assert agent.hooks.handlers == {}


@pytest.mark.parametrize("order", ["1", 1.0, True, None])
def test_order_must_be_an_int(order: object) -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(HookRegistrationError, match="order"):
        agent.add_hook("on_message", lambda ctx: None, order=order)  # type: ignore[call-overload]
    assert agent.hooks.handlers == {}


class AsyncCallable:
    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name

    async def __call__(self, ctx: object) -> None:
        await asyncio.sleep(0)
        self.log.append(self.name)


@pytest.mark.parametrize("event", SCOPE_EVENTS)
def test_async_handler_for_a_scope_event_is_rejected(event: str) -> None:
    agent = bare_agent(ScriptedModel([]))

    async def handler(ctx: ScopeContext) -> None:
        pass

    with pytest.raises(HookRegistrationError, match="plain functions"):
        agent.add_hook(event, handler)  # type: ignore[call-overload]
    with pytest.raises(HookRegistrationError, match="plain functions"):
        agent.add_hook(event, AsyncCallable([], "x"))  # type: ignore[call-overload]
    assert agent.hooks.handlers == {}


def test_registration_errors_are_usage_errors() -> None:
    assert issubclass(HookRegistrationError, UsageError)
    assert issubclass(HookReturnError, UsageError)
    assert issubclass(HookReturnError, TypeError)


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

    for name, cls in CONTEXT_CLASSES.items():
        monkeypatch.setattr(hookloop._loop, name, spy(name, cls))
    monkeypatch.setattr(hookloop.hooks, "ScopeContext", spy("ScopeContext", ScopeContext))
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


# --- lifecycle ----------------------------------------------------------------------------


async def test_full_event_order_of_a_chat_with_tool_calls() -> None:
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), tool_call("nope", {}, id="c2"), "three"],
        tools=[make_add()],
    )

    await agent.chat("what is 1 + 2?")

    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "after_model_call:0:1",
        "on_response:0",
        "on_message:assistant",
        "pre_tool_call:c1",
        "on_tool_call_result:c1",
        "on_message:tool",
        "pre_request:1",
        "after_model_call:1:1",
        "on_response:1",
        "on_message:assistant",
        "on_tool_call_error:c2",
        "on_message:tool",
        "pre_request:2",
        "after_model_call:2:1",
        "on_response:2",
        "on_message:assistant",
        "on_chat_done",
    ]


async def test_on_chat_start_fires_before_the_user_message_is_committed() -> None:
    agent, _, rec = make_agent(["hello"])
    history_at_start: list[tuple[Message, ...]] = []
    agent.add_hook("on_chat_start", lambda ctx: history_at_start.append(agent.messages))

    await agent.chat("hi there")

    (ctx,) = rec.contexts["on_chat_start"]
    assert history_at_start == [()]
    assert isinstance(ctx.message, UserMessage)
    assert ctx.message.content == "hi there"
    assert ctx.message is agent.messages[0]


async def test_on_chat_done_receives_the_returned_response_with_the_answer_in_history() -> None:
    agent, _, rec = make_agent(["hello"])
    last_message: list[Message] = []
    agent.add_hook("on_chat_done", lambda ctx: last_message.append(agent.messages[-1]))

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_chat_done"]
    assert ctx.response is response
    assert isinstance(response, AgentResponse)
    assert last_message == [response.message]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "hello", [])]


async def test_on_message_fires_after_every_commit_with_the_committed_message() -> None:
    agent, _, rec = make_agent(
        [tool_calls(add_call("c1"), ToolCall.create("nope", {}, id="c2")), "three"],
        tools=[make_add()],
    )
    history_lengths: list[int] = []
    agent.add_hook("on_message", lambda ctx: history_lengths.append(len(agent.messages)))

    response = await agent.chat("hi")

    messages = [ctx.message for ctx in rec.contexts["on_message"]]
    unknown = rec.contexts["on_tool_call_error"][0].error
    assert summary(messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add"), ("c2", "nope")]),
        ("tool", "c1", "3", False),
        ("tool", "c2", str(unknown), True),
        ("assistant", "three", []),
    ]
    assert all(m is h for m, h in zip(messages, agent.messages, strict=True))
    assert history_lengths == [1, 2, 3, 4, 5]  # each fires after its message is in history
    assert list(response.messages) == messages


async def test_on_message_for_the_assistant_sees_the_on_response_rewrite() -> None:
    agent, _, rec = make_agent(["raw"])
    agent.add_hook(
        "on_response", lambda ctx: dataclasses.replace(ctx.response, content="rewritten")
    )

    await agent.chat("hi")

    assert summary([ctx.message for ctx in rec.contexts["on_message"]]) == [
        ("user", "hi"),
        ("assistant", "rewritten", []),
    ]


async def test_tool_messages_are_committed_in_call_order_when_a_later_call_finishes_first() -> None:
    second_done = asyncio.Event()
    finished: list[str] = []

    @tool
    async def slow() -> str:
        """Waits for ``quick``."""
        await second_done.wait()
        finished.append("slow")
        return "slow result"

    @tool
    async def quick() -> str:
        """Finishes at once."""
        finished.append("quick")
        second_done.set()
        return "quick result"

    agent, _, rec = make_agent(
        [tool_calls(ToolCall(name="slow", id="c1"), ToolCall(name="quick", id="c2")), "done"],
        tools=[slow, quick],
    )

    await agent.chat("hi")

    assert finished == ["quick", "slow"]
    assert summary([ctx.message for ctx in rec.contexts["on_message"]]) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "slow"), ("c2", "quick")]),
        ("tool", "c1", "slow result", False),
        ("tool", "c2", "quick result", False),
        ("assistant", "done", []),
    ]


async def test_interceptors_fire_before_their_step_runs_or_commits() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, _ = make_agent(
        [tool_calls(add_call("c1"), ToolCall.create("nope", {}, id="c2")), "done"],
        tools=[make_add(calls)],
    )
    seen: list[tuple[str, object, list[str]]] = []

    def roles() -> list[str]:
        return [m.role for m in agent.messages]

    agent.add_hook(
        "pre_request", lambda ctx: seen.append(("pre_request", len(model.requests), roles()))
    )
    agent.add_hook("on_response", lambda ctx: seen.append(("on_response", None, roles())))
    agent.add_hook(
        "pre_tool_call", lambda ctx: seen.append(("pre_tool_call", list(calls), roles()))
    )
    agent.add_hook(
        "on_tool_call_result",
        lambda ctx: seen.append(("on_tool_call_result", list(calls), roles())),
    )
    agent.add_hook(
        "on_tool_call_error", lambda ctx: seen.append(("on_tool_call_error", None, roles()))
    )

    await agent.chat("hi")

    after_call = ["user", "assistant"]
    assert seen[:2] == [("pre_request", 0, ["user"]), ("on_response", None, ["user"])]
    assert sorted(seen[2:5]) == [
        ("on_tool_call_error", None, after_call),
        ("on_tool_call_result", [(1, 2)], after_call),
        ("pre_tool_call", [], after_call),
    ]
    assert seen[5:] == [
        ("pre_request", 1, ["user", "assistant", "tool", "tool"]),
        ("on_response", None, ["user", "assistant", "tool", "tool"]),
    ]


async def test_observer_return_values_are_ignored() -> None:
    agent, _, _ = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )
    for event in ("on_chat_start", "on_message", "after_model_call", "on_chat_done"):
        agent.add_hook(event, lambda ctx: "ignored")  # type: ignore[call-overload]
        agent.add_hook(event, lambda ctx: text_response("ignored too"))  # type: ignore[call-overload]

    response = await agent.chat("hi")

    assert response.text == "done"
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "3", False),
        ("assistant", "done", []),
    ]


async def test_chat_stream_fires_the_same_hooks() -> None:
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )

    async with agent.chat_stream("hi") as stream:
        kinds = [event.type async for event in stream]

    assert kinds[-1] == "chat_done"
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "after_model_call:0:1",
        "on_response:0",
        "on_message:assistant",
        "pre_tool_call:c1",
        "on_tool_call_result:c1",
        "on_message:tool",
        "pre_request:1",
        "after_model_call:1:1",
        "on_response:1",
        "on_message:assistant",
        "on_chat_done",
    ]


# --- pre_request --------------------------------------------------------------------------


async def test_pre_request_sees_each_iteration_and_its_request() -> None:
    agent, model, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"],
        tools=[make_add()],
        system_prompt="be brief",
    )

    await agent.chat("hi")

    first, second = rec.contexts["pre_request"]
    assert [first.iteration, second.iteration] == [0, 1]
    assert first.request is model.requests[0]
    assert second.request is model.requests[1]
    assert first.request.system == "be brief"
    assert summary(first.request.messages) == [("user", "hi")]
    assert [t.name for t in first.request.tools] == ["add"]
    assert summary(second.request.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "3", False),
    ]


async def test_pre_request_can_replace_the_request_and_each_handler_sees_the_previous() -> None:
    agent, model, rec = make_agent(["ok"], system_prompt="base")
    seen_by_second: list[str | None] = []

    def first(ctx: PreRequestContext) -> ProviderRequest:
        return dataclasses.replace(ctx.request, system=f"{ctx.request.system}\nBe concise.")

    def second(ctx: PreRequestContext) -> None:
        seen_by_second.append(ctx.request.system)

    def third(ctx: PreRequestContext) -> ProviderRequest:
        return dataclasses.replace(ctx.request, messages=(UserMessage(content="rewritten"),))

    agent.add_hook("pre_request", first)
    agent.add_hook("pre_request", second)
    agent.add_hook("pre_request", third)
    await agent.chat("hi")

    sent = model.requests[0]
    assert seen_by_second == ["base\nBe concise."]
    assert sent.system == "base\nBe concise."
    assert summary(sent.messages) == [("user", "rewritten")]
    assert rec.contexts["on_response"][0].request is sent
    assert rec.contexts["after_model_call"][0].request is sent
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "ok", [])]


async def test_pre_request_response_short_circuits_the_chain_and_the_model() -> None:
    agent, model, rec = make_agent([], system_prompt="base")
    later: list[int] = []
    cached = text_response("from cache")

    def rewrite(ctx: PreRequestContext) -> ProviderRequest:
        return dataclasses.replace(ctx.request, system="rewritten")

    agent.add_hook("pre_request", rewrite)
    agent.add_hook("pre_request", lambda ctx: cached)
    agent.add_hook("pre_request", lambda ctx: later.append(ctx.iteration))
    response = await agent.chat("hi")

    assert model.requests == []
    assert later == []
    assert response.text == "from cache"
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "on_response:0",  # on_response runs on the supplied response
        "on_message:assistant",
        "on_chat_done",
    ]  # and after_model_call does not fire: there was no model call
    (ctx,) = rec.contexts["on_response"]
    assert ctx.response is cached
    assert ctx.request.system == "rewritten"
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "from cache", [])]


async def test_on_response_can_rewrite_a_short_circuit_response() -> None:
    agent, model, _ = make_agent([])
    agent.add_hook("pre_request", lambda ctx: text_response("  cached  "))
    agent.add_hook(
        "on_response",
        lambda ctx: dataclasses.replace(ctx.response, content=ctx.response.content.strip()),
    )

    response = await agent.chat("hi")

    assert response.text == "cached"
    assert model.requests == []


async def test_pre_request_short_circuit_with_tool_calls_runs_the_tools() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, _ = make_agent(["done"], tools=[make_add(calls)])

    def first_iteration_from_cache(ctx: PreRequestContext) -> ProviderResponse | None:
        return tool_call("add", {"a": 2, "b": 3}, id="c1") if ctx.iteration == 0 else None

    agent.add_hook("pre_request", first_iteration_from_cache)
    response = await agent.chat("hi")

    assert calls == [(2, 3)]
    assert len(model.requests) == 1
    assert response.iterations == 2
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "5", False),
        ("assistant", "done", []),
    ]


# --- on_response --------------------------------------------------------------------------


async def test_on_response_handlers_all_run_and_compose() -> None:
    agent, model, rec = make_agent(["  hello world  "])
    seen: list[str] = []

    def trim(ctx: ResponseContext) -> ProviderResponse:
        seen.append(f"trim saw {ctx.response.content!r}")
        return dataclasses.replace(ctx.response, content=ctx.response.content.strip())

    def upper(ctx: ResponseContext) -> ProviderResponse:
        seen.append(f"upper saw {ctx.response.content!r}")
        return dataclasses.replace(ctx.response, content=ctx.response.content.upper())

    def observe(ctx: ResponseContext) -> None:
        seen.append(f"observe saw {ctx.response.content!r}")

    agent.add_hook("on_response", trim)
    agent.add_hook("on_response", observe)
    agent.add_hook("on_response", upper)
    agent.add_hook("on_response", observe)
    response = await agent.chat("hi")

    assert seen == [
        "trim saw '  hello world  '",
        "observe saw 'hello world'",
        "upper saw 'hello world'",
        "observe saw 'HELLO WORLD'",
    ]
    assert response.text == "HELLO WORLD"
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "HELLO WORLD", [])]
    (ctx,) = rec.contexts["on_response"]
    assert ctx.iteration == 0
    assert ctx.request is model.requests[0]


async def test_on_response_can_drop_tool_calls_and_set_the_finish_reason() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, _ = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1", content="thinking")], tools=[make_add(calls)]
    )
    agent.add_hook(
        "on_response",
        lambda ctx: dataclasses.replace(ctx.response, tool_calls=(), finish_reason="length"),
    )

    response = await agent.chat("hi")

    assert calls == []
    assert len(model.requests) == 1
    assert response.finish_reason == "length"
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "thinking", [])]


async def test_on_response_can_add_tool_calls() -> None:
    calls: list[tuple[int, int]] = []
    agent, _, _ = make_agent(["no tools", "done"], tools=[make_add(calls)])

    def add_a_call(ctx: ResponseContext) -> ProviderResponse | None:
        if ctx.iteration == 0:
            return tool_calls(add_call("c9", 4, 5))
        return None

    agent.add_hook("on_response", add_a_call)
    await agent.chat("hi")

    assert calls == [(4, 5)]
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c9", "add")]),
        ("tool", "c9", "9", False),
        ("assistant", "done", []),
    ]


# --- after_model_call -----------------------------------------------------------------------


async def test_after_model_call_fields_on_success() -> None:
    answer = text_response("hello")
    agent, model, rec = make_agent([answer])

    await agent.chat("hi")

    (ctx,) = rec.contexts["after_model_call"]
    assert (ctx.iteration, ctx.attempt) == (0, 1)
    assert ctx.request is model.requests[0]
    assert ctx.response is answer
    assert ctx.error is None
    assert ctx.retry is False


async def test_after_model_call_error_without_retry_ends_the_chat() -> None:
    boom = ServerError("boom", status=500)
    agent, model, rec = make_agent([boom, "never"])

    with pytest.raises(ServerError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    (ctx,) = rec.contexts["after_model_call"]
    assert (ctx.iteration, ctx.attempt) == (0, 1)
    assert ctx.request is model.requests[0]
    assert ctx.response is None
    assert ctx.error is boom
    assert len(model.requests) == 1
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "after_model_call:0:1",
        "on_chat_error",
    ]
    assert rec.contexts["on_chat_error"][0].error is boom


async def test_after_model_call_retry_makes_another_attempt() -> None:
    boom = ServerError("boom", status=500)
    agent, model, rec = make_agent([boom, "recovered"])

    def retry_errors(ctx: AfterModelCallContext) -> None:
        if ctx.error is not None:
            ctx.retry = True

    agent.add_hook("after_model_call", retry_errors)
    response = await agent.chat("hi")

    assert response.text == "recovered"
    assert len(model.requests) == 2
    first, second = rec.contexts["after_model_call"]
    assert (first.attempt, first.error, first.response) == (1, boom, None)
    assert (second.attempt, second.error) == (2, None)
    assert second.response is not None
    assert second.response.content == "recovered"
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "after_model_call:0:1",
        "pre_request:0",
        "after_model_call:0:2",
        "on_response:0",
        "on_message:assistant",
        "on_chat_done",
    ]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "recovered", [])]


async def test_after_model_call_retry_on_a_successful_response_discards_it() -> None:
    agent, model, rec = make_agent(["first answer", "second answer"])

    fired: list[int] = []

    def retry_once(ctx: AfterModelCallContext) -> None:
        fired.append(ctx.attempt)
        ctx.retry = len(fired) == 1  # counted here, so a wrong attempt number cannot loop

    agent.add_hook("after_model_call", retry_once)
    response = await agent.chat("hi")

    assert fired == [1, 2]
    assert response.text == "second answer"
    assert len(model.requests) == 2
    assert [ctx.response.content for ctx in rec.contexts["on_response"]] == ["second answer"]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "second answer", [])]


async def test_after_model_call_can_replace_the_request_for_the_retry() -> None:
    agent, model, _ = make_agent([ServerError("too big", status=500), "ok"], system_prompt="long")
    pre_request_saw: list[tuple[int, str | None]] = []
    agent.add_hook(
        "pre_request", lambda ctx: pre_request_saw.append((ctx.iteration, ctx.request.system))
    )

    def shrink_and_retry(ctx: AfterModelCallContext) -> None:
        if ctx.error is not None:
            ctx.request = dataclasses.replace(ctx.request, system="short")
            ctx.retry = True

    agent.add_hook("after_model_call", shrink_and_retry)
    await agent.chat("hi")

    assert [r.system for r in model.requests] == ["long", "short"]
    assert pre_request_saw == [(0, "long"), (0, "short")]


async def test_after_model_call_attempt_is_one_on_every_new_model_call() -> None:
    script = [
        ServerError("a", status=500),
        ServerError("b", status=500),
        tool_call("add", {"a": 1, "b": 2}, id="c1"),
        ServerError("c", status=500),
        "done",
    ]
    agent, _, rec = make_agent(script, tools=[make_add()])

    def retry_errors(ctx: AfterModelCallContext) -> None:
        ctx.retry = ctx.error is not None

    agent.add_hook("after_model_call", retry_errors)
    await agent.chat("hi")

    assert [e for e in rec.events if e.startswith("after_model_call")] == [
        "after_model_call:0:1",
        "after_model_call:0:2",
        "after_model_call:0:3",
        "after_model_call:1:1",
        "after_model_call:1:2",
    ]


# --- pre_tool_call ------------------------------------------------------------------------


async def test_pre_tool_call_context_holds_the_call_tool_and_scope() -> None:
    add = make_add()
    agent, _, rec = make_agent([tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[add])

    await agent.chat("hi")

    (ctx,) = rec.contexts["pre_tool_call"]
    assert ctx.call == add_call("c1")
    assert ctx.tool is add
    assert ctx.scope is agent.scopes.get("default")


async def test_pre_tool_call_can_replace_the_call_and_each_handler_sees_the_previous() -> None:
    calls: list[tuple[int, int]] = []
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add(calls)]
    )
    seen: list[str] = []

    def double_a(ctx: PreToolCallContext) -> ToolCall:
        args = ctx.call.parsed_arguments()
        return ToolCall.create("add", {**args, "a": args["a"] * 10})

    def observe(ctx: PreToolCallContext) -> None:
        seen.append(ctx.call.arguments)

    def bump_b(ctx: PreToolCallContext) -> ToolCall:
        args = ctx.call.parsed_arguments()
        return dataclasses.replace(ctx.call, arguments=f'{{"a": {args["a"]}, "b": 7}}')

    agent.add_hook("pre_tool_call", double_a)
    agent.add_hook("pre_tool_call", observe)
    agent.add_hook("pre_tool_call", bump_b)
    await agent.chat("hi")

    assert seen == ['{"a": 10, "b": 2}']
    assert calls == [(10, 7)]
    (result_ctx,) = rec.contexts["on_tool_call_result"]
    assert result_ctx.call.arguments == '{"a": 10, "b": 7}'
    assert result_ctx.result == 17
    # The history still answers the call the model made, so it stays valid.
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "17", False),
        ("assistant", "done", []),
    ]


async def test_pre_tool_call_result_short_circuits_the_chain_and_the_tool() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add(calls)]
    )
    later: list[str] = []
    agent.add_hook("pre_tool_call", lambda ctx: ToolReturn({"cached": True}))
    agent.add_hook("pre_tool_call", lambda ctx: later.append(ctx.call.id))

    response = await agent.chat("hi")

    assert calls == []
    assert later == []
    assert response.text == "done"
    (ctx,) = rec.contexts["on_tool_call_result"]  # still runs on the supplied result
    assert ctx.result == {"cached": True}
    assert ctx.tool.name == "add"
    assert ctx.scope.name == "default"
    assert rec.contexts["on_tool_call_error"] == []
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", '{"cached":true}', False),
        ("assistant", "done", []),
    ]
    assert summary(model.requests[1].messages)[-1] == ("tool", "c1", '{"cached":true}', False)


async def test_pre_tool_call_can_short_circuit_with_a_none_result() -> None:
    calls: list[tuple[int, int]] = []
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add(calls)]
    )
    agent.add_hook("pre_tool_call", lambda ctx: ToolReturn(None))

    await agent.chat("hi")

    assert calls == []
    assert [ctx.result for ctx in rec.contexts["on_tool_call_result"]] == [None]
    assert summary(agent.messages)[2] == ("tool", "c1", "null", False)


async def test_pre_tool_call_error_short_circuits_and_the_chat_goes_on() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "sorry"], tools=[make_add(calls)]
    )
    denied = PermissionError("Not permitted")
    later: list[str] = []
    agent.add_hook("pre_tool_call", lambda ctx: denied)
    agent.add_hook("pre_tool_call", lambda ctx: later.append(ctx.call.id))

    response = await agent.chat("hi")

    assert calls == []
    assert later == []
    assert response.text == "sorry"
    (ctx,) = rec.contexts["on_tool_call_error"]  # still runs on the supplied error
    assert ctx.error is denied
    assert ctx.tool.name == "add"
    assert ctx.scope.name == "default"
    assert rec.contexts["on_tool_call_result"] == []
    assert rec.terminal == ["on_chat_done"]
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "Not permitted", True),
        ("assistant", "sorry", []),
    ]
    assert summary(model.requests[1].messages)[-1] == ("tool", "c1", "Not permitted", True)


async def test_pre_tool_call_runs_before_the_argument_check_and_can_repair_arguments() -> None:
    calls: list[tuple[int, int]] = []
    agent, _, rec = make_agent(
        [tool_call("add", "{broken json", id="c1"), "done"], tools=[make_add(calls)]
    )
    agent.add_hook(
        "pre_tool_call", lambda ctx: dataclasses.replace(ctx.call, arguments='{"a": 2, "b": 2}')
    )

    await agent.chat("hi")

    assert calls == [(2, 2)]
    assert rec.contexts["on_tool_call_error"] == []
    assert summary(agent.messages)[2] == ("tool", "c1", "4", False)


async def test_pre_tool_call_runs_for_a_disabled_tool_and_can_short_circuit_it() -> None:
    @tool(enabled=False)
    async def secret() -> str:
        """Disabled."""
        raise AssertionError("a disabled tool must not run")

    agent, _, rec = make_agent([tool_call("secret", {}, id="c1"), "done"], tools=[secret])
    agent.add_hook("pre_tool_call", lambda ctx: ToolReturn("served by a hook"))

    await agent.chat("hi")

    assert [e for e in rec.events if "tool_call" in e] == [
        "pre_tool_call:c1",
        "on_tool_call_result:c1",
    ]
    assert summary(agent.messages)[2] == ("tool", "c1", "served by a hook", False)


async def test_pre_tool_call_is_skipped_for_an_unknown_tool() -> None:
    agent, _, rec = make_agent([tool_call("nope", {}, id="c1"), "done"], tools=[make_add()])
    seen: list[str] = []
    agent.add_hook("pre_tool_call", lambda ctx: seen.append(ctx.call.id))

    await agent.chat("hi")

    assert seen == []
    assert [e for e in rec.events if "tool_call" in e] == ["on_tool_call_error:c1"]


# --- on_tool_call_result ------------------------------------------------------------------


async def test_on_tool_call_result_handlers_all_run_and_compose() -> None:
    add = make_add()
    agent, _, _ = make_agent([tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[add])
    seen: list[object] = []

    def wrap(ctx: ToolResultContext) -> ToolReturn:
        seen.append(("wrap", ctx.call.id, ctx.tool is add, ctx.scope.name, ctx.result))
        return ToolReturn({"sum": ctx.result})

    def observe(ctx: ToolResultContext) -> None:
        seen.append(("observe", ctx.result))

    def redact(ctx: ToolResultContext) -> ToolReturn:
        seen.append(("redact", ctx.result))
        return ToolReturn({**ctx.result, "redacted": True})  # type: ignore[dict-item]

    agent.add_hook("on_tool_call_result", wrap)
    agent.add_hook("on_tool_call_result", observe)
    agent.add_hook("on_tool_call_result", redact)
    agent.add_hook("on_tool_call_result", observe)
    await agent.chat("hi")

    assert seen == [
        ("wrap", "c1", True, "default", 3),
        ("observe", {"sum": 3}),
        ("redact", {"sum": 3}),
        ("observe", {"sum": 3, "redacted": True}),
    ]
    assert summary(agent.messages)[2] == ("tool", "c1", '{"sum":3,"redacted":true}', False)


async def test_on_tool_call_result_tool_return_none_makes_the_result_null() -> None:
    agent, _, _ = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )
    seen: list[object] = []
    agent.add_hook("on_tool_call_result", lambda ctx: ToolReturn(None))
    agent.add_hook("on_tool_call_result", lambda ctx: seen.append(ctx.result))

    await agent.chat("hi")

    assert seen == [None]
    assert summary(agent.messages)[2] == ("tool", "c1", "null", False)


# --- tool failures and on_tool_call_error ------------------------------------------------


async def test_unknown_tool_fires_on_tool_call_error_without_tool_or_scope() -> None:
    agent, model, rec = make_agent(
        [tool_call("nope", {"x": 1}, id="c1"), "done"], tools=[make_add()]
    )

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert ctx.tool is None
    assert ctx.scope is None
    assert ctx.call == ToolCall.create("nope", {"x": 1}, id="c1")
    assert isinstance(ctx.error, UnknownToolError)
    assert (ctx.error.tool_name, ctx.error.call_id) == ("nope", "c1")
    assert response.text == "done"
    assert rec.terminal == ["on_chat_done"]
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "nope")]),
        ("tool", "c1", str(ctx.error), True),
        ("assistant", "done", []),
    ]
    assert len(model.requests) == 2


async def test_disabled_tool_fires_on_tool_call_error() -> None:
    @tool(enabled=False)
    async def secret() -> str:
        """Disabled."""
        raise AssertionError("a disabled tool must not run")

    agent, _, rec = make_agent([tool_call("secret", {}, id="c1"), "done"], tools=[secret])

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolDisabledError)
    assert ctx.tool is secret
    assert ctx.scope.name == "default"
    assert response.text == "done"
    assert "'secret'" in str(ctx.error)
    assert summary(agent.messages)[2] == ("tool", "c1", str(ctx.error), True)


async def test_tool_of_a_disabled_scope_fires_on_tool_call_error() -> None:
    add = make_add()
    agent, _, rec = make_agent([tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"])
    off = Scope("off", tools=[add], enabled=False)
    agent.scopes.register(off)

    await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolDisabledError)
    assert (ctx.tool, ctx.scope) == (add, off)
    assert summary(agent.messages)[2] == ("tool", "c1", str(ctx.error), True)


@pytest.mark.parametrize(
    "arguments",
    [{"a": "one", "b": 2}, "{not json", {"a": 1}, "[1, 2]"],
    ids=["wrong-type", "invalid-json", "missing-field", "not-an-object"],
)
async def test_invalid_arguments_fire_on_tool_call_error(
    arguments: dict[str, object] | str,
) -> None:
    calls: list[tuple[int, int]] = []
    agent, _, rec = make_agent(
        [tool_call("add", arguments, id="c1"), "done"], tools=[make_add(calls)]
    )

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolValidationError)
    assert (ctx.error.tool_name, ctx.error.call_id) == ("add", "c1")
    assert ctx.tool.name == "add"
    assert calls == []
    assert response.text == "done"
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", str(ctx.error), True),
        ("assistant", "done", []),
    ]


async def test_raising_tool_becomes_a_tool_execution_error_with_its_cause() -> None:
    agent, _, rec = make_agent([tool_call("fail", {}, id="c1"), "done"], tools=[fail])

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolExecutionError)
    assert isinstance(ctx.error.__cause__, ValueError)
    assert str(ctx.error.__cause__) == "kaput"
    assert ctx.tool is fail
    assert response.text == "done"
    assert rec.terminal == ["on_chat_done"]
    assert "kaput" in str(ctx.error)  # the model is told what went wrong
    assert summary(agent.messages)[2] == ("tool", "c1", str(ctx.error), True)


async def test_on_tool_call_error_handlers_all_run_and_compose() -> None:
    agent, model, _ = make_agent([tool_call("fail", {}, id="c1"), "done"], tools=[fail])
    seen: list[str] = []

    def classify(ctx: ToolErrorContext) -> Exception:
        seen.append(f"classify saw {type(ctx.error).__name__}")
        return RuntimeError("the tool is broken")

    def observe(ctx: ToolErrorContext) -> None:
        seen.append(f"observe saw {ctx.error}")

    def prefix(ctx: ToolErrorContext) -> Exception:
        seen.append(f"prefix saw {ctx.error}")
        return RuntimeError(f"error: {ctx.error}")

    agent.add_hook("on_tool_call_error", classify)
    agent.add_hook("on_tool_call_error", observe)
    agent.add_hook("on_tool_call_error", prefix)
    agent.add_hook("on_tool_call_error", observe)
    await agent.chat("hi")

    assert seen == [
        "classify saw ToolExecutionError",
        "observe saw the tool is broken",
        "prefix saw the tool is broken",
        "observe saw error: the tool is broken",
    ]
    assert summary(agent.messages)[2] == ("tool", "c1", "error: the tool is broken", True)
    assert summary(model.requests[1].messages)[-1] == (
        "tool",
        "c1",
        "error: the tool is broken",
        True,
    )


async def test_on_tool_call_error_sees_the_call_as_pre_tool_call_left_it() -> None:
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )
    agent.add_hook(
        "pre_tool_call", lambda ctx: dataclasses.replace(ctx.call, arguments='{"a": "x"}')
    )

    await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolValidationError)
    assert ctx.call.arguments == '{"a": "x"}'
    assert agent.messages[2].tool_call_id == "c1"  # type: ignore[union-attr]


# --- typed interceptor returns -------------------------------------------------------------

BAD_RETURNS = [
    ("pre_request", "a string"),
    ("pre_request", {"request": None}),
    ("pre_request", ToolReturn("x")),
    ("on_response", "a string"),
    ("on_response", {"response": text_response("x")}),
    ("pre_tool_call", {"result": 1}),
    ("pre_tool_call", "a string"),
    ("on_tool_call_result", 42),
    ("on_tool_call_result", {"result": 1}),
    ("on_tool_call_error", "a message"),
    ("on_tool_call_error", ValueError),  # the class, not an instance
]


@pytest.mark.parametrize(("event", "bad"), BAD_RETURNS)
async def test_wrong_return_type_raises_hook_return_error_and_ends_the_chat(
    event: str, bad: object
) -> None:
    agent, model, rec = make_agent(
        [tool_calls(add_call("c1"), ToolCall.create("nope", {}, id="c2")), "never"],
        tools=[make_add()],
    )

    def bad_handler(ctx: object) -> object:
        return bad

    agent.add_hook(event, bad_handler)  # type: ignore[call-overload]

    with pytest.raises(HookReturnError) as raised:
        await agent.chat("hi")

    error = raised.value
    assert isinstance(error, UsageError)
    assert isinstance(error, TypeError)
    assert f"{event!r} handler" in str(error)
    assert "bad_handler" in str(error)
    assert type(bad).__name__ in str(error)
    assert rec.terminal == ["on_chat_error"]
    assert rec.contexts["on_chat_error"][0].error is error
    assert len(model.requests) == (0 if event == "pre_request" else 1)


# --- throws -------------------------------------------------------------------------------

# event, model calls made before the throw ends the chat
THROWING = [
    ("on_chat_start", 0),
    ("on_message", 0),
    ("pre_request", 0),
    ("after_model_call", 1),
    ("on_response", 1),
    ("pre_tool_call", 1),
    ("on_tool_call_result", 1),
    ("on_tool_call_error", 1),
]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(("event", "model_calls"), THROWING)
async def test_throw_in_a_handler_ends_the_chat_and_reaches_the_caller(
    event: str, model_calls: int, is_async: bool
) -> None:
    agent, model, rec = make_agent(
        [tool_calls(add_call("c1"), ToolCall.create("nope", {}, id="c2")), "never"],
        tools=[make_add()],
    )
    boom = RuntimeError(f"boom in {event}")
    later: list[str] = []

    def explode(ctx: object) -> None:
        raise boom

    async def explode_async(ctx: object) -> None:
        await asyncio.sleep(0)
        raise boom

    agent.add_hook(event, explode_async if is_async else explode)  # type: ignore[call-overload]
    agent.add_hook(event, lambda ctx: later.append(event))  # type: ignore[call-overload]

    with pytest.raises(RuntimeError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    assert later == []  # the rest of the chain does not run
    assert rec.terminal == ["on_chat_error"]
    assert rec.events[-1] == "on_chat_error"
    assert rec.contexts["on_chat_error"][0].error is boom
    handler_name = "explode_async" if is_async else "explode"
    assert any(f"{event!r}" in note and handler_name in note for note in boom.__notes__)
    assert len(model.requests) == model_calls  # the model never sees what went wrong


async def test_throw_in_on_message_for_a_later_message_ends_the_chat() -> None:
    agent, model, rec = make_agent(["answer", "never"])
    boom = RuntimeError("no assistant messages")

    def reject_assistant(ctx: MessageContext) -> None:
        if ctx.message.role == "assistant":
            raise boom

    agent.add_hook("on_message", reject_assistant)

    with pytest.raises(RuntimeError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    assert rec.events[-3:] == ["on_response:0", "on_message:assistant", "on_chat_error"]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "answer", [])]
    assert model.remaining == 1


async def test_history_stays_valid_after_a_throw_during_tool_calls() -> None:
    agent, model, rec = make_agent(
        [tool_calls(add_call("c1"), add_call("c2", 3, 4)), "second chat"],
        tools=[make_add()],
    )

    def explode_on_c1(ctx: PreToolCallContext) -> None:
        if ctx.call.id == "c1":
            raise RuntimeError("boom")

    dispose = agent.add_hook("pre_tool_call", explode_on_c1)
    with pytest.raises(RuntimeError):
        await agent.chat("hi")
    dispose()

    # Every call of the assistant message is answered once, in call order; c1 never ran.
    answers = agent.messages[2:]
    assert [m.tool_call_id for m in answers] == ["c1", "c2"]  # type: ignore[union-attr]
    assert isinstance(answers[0], ToolMessage)
    assert answers[0].is_error is True
    # ... and on_message reported each of those commits.
    assert [ctx.message for ctx in rec.contexts["on_message"]] == list(agent.messages)
    assert rec.terminal == ["on_chat_error"]
    # The next chat sends a valid history.
    response = await agent.chat("again")
    assert response.text == "second chat"
    assert summary(model.requests[-1].messages)[:4] == summary(agent.messages)[:4]


async def test_concurrent_throws_in_tool_hooks_leave_no_unretrieved_task_exception() -> None:
    loop = asyncio.get_running_loop()
    created: list[asyncio.Task[Any]] = []

    def recording_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        created.append(task)
        return task

    agent = bare_agent(
        ScriptedModel([tool_calls(add_call("c1"), add_call("c2", 3, 4))]), tools=[make_add()]
    )

    def explode(ctx: PreToolCallContext) -> None:
        raise RuntimeError(f"boom {ctx.call.id}")

    agent.add_hook("pre_tool_call", explode)
    previous = loop.get_task_factory()
    loop.set_task_factory(recording_factory)
    try:
        with pytest.raises(RuntimeError, match="boom c1"):  # the first in call order wins
            await agent.chat("hi")
    finally:
        loop.set_task_factory(previous)

    # asyncio logs "Task exception was never retrieved" for a task whose exception nobody
    # looked at; _log_traceback is the flag it checks.
    never_retrieved = [
        str(task.exception())
        for task in created
        if task.done() and not task.cancelled() and task._log_traceback  # type: ignore[attr-defined]
    ]
    assert never_retrieved == []


async def test_throw_in_on_chat_error_is_logged_and_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    boom = ServerError("boom", status=500)
    agent, _, rec = make_agent([boom])
    seen: list[Exception] = []

    def broken_reporter(ctx: ChatErrorContext) -> None:
        raise ValueError("reporter is broken")

    agent.add_hook("on_chat_error", broken_reporter)
    agent.add_hook("on_chat_error", lambda ctx: seen.append(ctx.error))

    with caplog.at_level(logging.ERROR, logger="hookloop"), pytest.raises(ServerError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    assert not getattr(boom, "__notes__", [])  # not blamed on a hook
    assert seen == [boom]  # later handlers still run
    assert rec.terminal == ["on_chat_error"]
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert "on_chat_error" in record.getMessage()
    assert "broken_reporter" in record.getMessage()
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "reporter is broken"


async def test_throw_in_on_chat_done_reaches_the_caller_without_on_chat_error() -> None:
    agent, _, rec = make_agent(["answer"])
    boom = RuntimeError("done handler broke")

    def explode(ctx: ChatDoneContext) -> None:
        raise boom

    agent.add_hook("on_chat_done", explode)

    with pytest.raises(RuntimeError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    assert any("'on_chat_done'" in note and "explode" in note for note in boom.__notes__)
    assert rec.terminal == ["on_chat_done"]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "answer", [])]


async def test_chat_stream_reraises_a_hook_throw_after_on_chat_error() -> None:
    agent, _, rec = make_agent(["answer"])
    boom = RuntimeError("boom")

    def explode(ctx: ResponseContext) -> None:
        raise boom

    agent.add_hook("on_response", explode)

    received: list[object] = []
    with pytest.raises(RuntimeError) as raised:
        async with agent.chat_stream("hi") as stream:
            async for event in stream:
                received.append(event)

    assert raised.value is boom
    assert rec.terminal == ["on_chat_error"]
    assert not any(isinstance(e, ChatDone) for e in received)
    assert [e.message.role for e in received if isinstance(e, MessageCommitted)] == ["user"]


# --- terminal events ----------------------------------------------------------------------


def blocking_model(started: asyncio.Event) -> FunctionModel:
    """A model whose first call blocks until the chat is cancelled."""

    async def answer(request: ProviderRequest) -> str:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return FunctionModel(answer)


async def test_success_fires_only_on_chat_done() -> None:
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )

    await agent.chat("hi")

    assert rec.terminal == ["on_chat_done"]


async def test_provider_error_fires_only_on_chat_error() -> None:
    boom = ServerError("boom", status=500)
    agent, _, rec = make_agent([boom])

    with pytest.raises(ServerError):
        await agent.chat("hi")

    assert rec.terminal == ["on_chat_error"]
    assert rec.contexts["on_chat_error"][0].error is boom


async def test_hook_throw_fires_only_on_chat_error() -> None:
    agent, _, rec = make_agent(["answer"])
    agent.add_hook("on_response", lambda ctx: 1 / 0)

    with pytest.raises(ZeroDivisionError):
        await agent.chat("hi")

    assert rec.terminal == ["on_chat_error"]
    assert isinstance(rec.contexts["on_chat_error"][0].error, ZeroDivisionError)


async def test_max_iterations_fires_only_on_chat_error() -> None:
    model = FunctionModel(lambda request: tool_call("add", {"a": 1, "b": 2}))
    agent = bare_agent(model, tools=[make_add()], max_iterations=2)
    rec = Recorder(agent)

    with pytest.raises(MaxIterationsError) as raised:
        await agent.chat("hi")

    assert raised.value.max_iterations == 2
    assert rec.terminal == ["on_chat_error"]
    assert rec.contexts["on_chat_error"][0].error is raised.value
    assert len(model.requests) == 2


async def test_agent_cancel_during_the_model_call_fires_only_on_chat_abort() -> None:
    started = asyncio.Event()
    agent = bare_agent(blocking_model(started))
    rec = Recorder(agent)

    chat = asyncio.create_task(agent.chat("hi"))
    await started.wait()
    assert agent.cancel("user pressed stop") is True

    with pytest.raises(ChatCancelledError) as raised:
        await chat

    assert raised.value.reason == "user pressed stop"
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "on_chat_abort",
    ]
    assert rec.contexts["on_chat_abort"][0].reason == "user pressed stop"
    assert agent.cancel() is False  # nothing is running any more


async def test_agent_cancel_during_a_tool_closes_the_call_and_fires_only_on_chat_abort() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Blocks until cancelled."""
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    agent, _, rec = make_agent([tool_call("wait_forever", {}, id="c1")], tools=[wait_forever])

    chat = asyncio.create_task(agent.chat("hi"))
    await started.wait()
    agent.cancel()
    with pytest.raises(ChatCancelledError):
        await chat

    assert rec.terminal == ["on_chat_abort"]
    assert summary([ctx.message for ctx in rec.contexts["on_message"]]) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "wait_forever")]),
        ("tool", "c1", hookloop._loop.CANCELLED_TOOL_TEXT, True),
    ]
    assert summary(agent.messages) == summary([c.message for c in rec.contexts["on_message"]])


async def test_task_cancellation_fires_only_on_chat_abort_and_stays_a_cancelled_error() -> None:
    started = asyncio.Event()
    agent = bare_agent(blocking_model(started))
    rec = Recorder(agent)

    chat = asyncio.create_task(agent.chat("hi"))
    await started.wait()
    chat.cancel("shutting down")

    with pytest.raises(asyncio.CancelledError):
        await chat

    assert rec.terminal == ["on_chat_abort"]
    assert rec.contexts["on_chat_abort"][0].reason == "shutting down"


async def test_throw_in_on_chat_abort_is_logged_and_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = asyncio.Event()
    agent = bare_agent(blocking_model(started))
    rec = Recorder(agent)
    seen: list[object] = []

    def broken(ctx: ChatAbortContext) -> None:
        raise ValueError("abort handler is broken")

    agent.add_hook("on_chat_abort", broken)
    agent.add_hook("on_chat_abort", lambda ctx: seen.append(ctx.reason))

    chat = asyncio.create_task(agent.chat("hi"))
    await started.wait()
    agent.cancel("stop")
    with caplog.at_level(logging.ERROR, logger="hookloop"), pytest.raises(ChatCancelledError):
        await chat

    assert seen == ["stop"]
    assert rec.terminal == ["on_chat_abort"]
    (record,) = caplog.records
    assert "on_chat_abort" in record.getMessage()
    assert "broken" in record.getMessage()
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "abort handler is broken"


async def test_cancel_from_inside_a_hook_fires_only_on_chat_abort() -> None:
    agent, model, rec = make_agent(["never"])

    def stop_after_user_message(ctx: MessageContext) -> None:
        agent.cancel("enough")

    agent.add_hook("on_message", stop_after_user_message)

    with pytest.raises(ChatCancelledError):
        await agent.chat("hi")
    await asyncio.sleep(0)  # no stray cancellation is left on the caller's task

    assert model.requests == []
    assert rec.terminal == ["on_chat_abort"]


async def test_each_chat_gets_exactly_one_terminal_event() -> None:
    agent, _, rec = make_agent(["one", ServerError("boom", status=500), "three"])

    await agent.chat("a")
    with pytest.raises(ServerError):
        await agent.chat("b")
    await agent.chat("c")

    assert rec.terminal == ["on_chat_done", "on_chat_error", "on_chat_done"]


# --- scope hooks --------------------------------------------------------------------------


def test_on_scope_register_fires_synchronously_after_the_scope_is_committed() -> None:
    agent = bare_agent(ScriptedModel([]))
    rec = Recorder(agent, SCOPE_EVENTS)
    seen: list[tuple[bool, bool]] = []
    add = make_add()
    scope = Scope("math", tools=[add])
    agent.add_hook(
        "on_scope_register",
        lambda ctx: seen.append(("math" in agent.scopes, agent.scopes.lookup("add") is not None)),
    )

    agent.scopes.register(scope)

    assert rec.events == ["on_scope_register:math"]  # already fired when register() returned
    assert rec.contexts["on_scope_register"][0].scope is scope
    assert seen == [(True, True)]


def test_on_scope_unregister_fires_synchronously_after_the_scope_is_removed() -> None:
    agent = bare_agent(ScriptedModel([]))
    rec = Recorder(agent, SCOPE_EVENTS)
    seen: list[tuple[bool, bool]] = []
    scope = Scope("math", tools=[make_add()])
    agent.add_hook(
        "on_scope_unregister",
        lambda ctx: seen.append(("math" in agent.scopes, agent.scopes.lookup("add") is not None)),
    )
    agent.scopes.register(scope)

    removed = agent.scopes.unregister("math")

    assert removed is scope
    assert rec.events == ["on_scope_register:math", "on_scope_unregister:math"]
    assert rec.contexts["on_scope_unregister"][0].scope is scope
    assert seen == [(False, False)]


def test_scope_disposer_fires_on_scope_unregister_once() -> None:
    agent = bare_agent(ScriptedModel([]))
    rec = Recorder(agent, SCOPE_EVENTS)

    dispose = agent.scopes.register(Scope("math"))
    dispose()
    dispose()

    assert rec.events == ["on_scope_register:math", "on_scope_unregister:math"]


def test_failed_scope_changes_fire_no_scope_hook() -> None:
    agent = bare_agent(ScriptedModel([]))
    agent.scopes.register(Scope("math"))
    rec = Recorder(agent, SCOPE_EVENTS)

    with pytest.raises(UsageError):
        agent.scopes.register(Scope("math"))
    with pytest.raises(ScopeNotFoundError):
        agent.scopes.unregister("nope")

    assert rec.events == []


def test_throw_in_on_scope_register_propagates_and_the_scope_stays_registered() -> None:
    agent = bare_agent(ScriptedModel([]))
    boom = RuntimeError("register hook broke")
    later: list[str] = []

    def explode(ctx: ScopeContext) -> None:
        raise boom

    agent.add_hook("on_scope_register", explode)
    agent.add_hook("on_scope_register", lambda ctx: later.append(ctx.scope.name))

    with pytest.raises(RuntimeError) as raised:
        agent.scopes.register(Scope("math", tools=[make_add()]))

    assert raised.value is boom
    assert any("'on_scope_register'" in note and "explode" in note for note in boom.__notes__)
    assert later == []
    assert "math" in agent.scopes
    assert agent.scopes.lookup("add") is not None


def test_throw_in_on_scope_unregister_propagates_and_the_scope_stays_removed() -> None:
    agent = bare_agent(ScriptedModel([]))
    agent.scopes.register(Scope("math", tools=[make_add()]))
    boom = RuntimeError("unregister hook broke")

    def explode(ctx: ScopeContext) -> None:
        raise boom

    agent.add_hook("on_scope_unregister", explode)

    with pytest.raises(RuntimeError) as raised:
        agent.scopes.unregister("math")

    assert raised.value is boom
    assert any("'on_scope_unregister'" in note and "explode" in note for note in boom.__notes__)
    assert "math" not in agent.scopes
    assert agent.scopes.lookup("add") is None


async def test_scope_hooks_fire_during_a_chat_and_do_not_end_it() -> None:
    agent, _, rec = make_agent(["done"])
    agent.add_hook("on_scope_register", rec._handler("on_scope_register"))
    agent.add_hook("on_chat_start", lambda ctx: agent.scopes.register(Scope("late")))

    await agent.chat("hi")

    assert rec.events[:3] == ["on_chat_start", "on_scope_register:late", "on_message:user"]
    assert rec.terminal == ["on_chat_done"]


# --- plugins ------------------------------------------------------------------------------


class AuditPlugin:
    """Registers three hooks on two events, one of them with the decorator."""

    def __init__(self, name: str = "audit") -> None:
        self.name = name
        self.log: list[str] = []

    def init_agent(self, agent: Agent) -> None:
        agent.add_hook("on_chat_start", lambda ctx: self.log.append("start"))
        agent.add_hook("on_message", lambda ctx: self.log.append(ctx.message.role))

        @agent.hook("on_chat_done", order=5)
        def done(ctx: ChatDoneContext) -> None:
            self.log.append("done")


class BrokenPlugin:
    name = "broken"

    def init_agent(self, agent: Agent) -> None:
        agent.add_hook("on_message", lambda ctx: None)
        agent.add_hook("pre_request", lambda ctx: None)
        raise RuntimeError("plugin setup failed")


async def test_use_registers_the_plugin_hooks_and_its_disposer_removes_them_all() -> None:
    agent, _, _ = make_agent(["one", "two"])
    before = dict(agent.hooks.handlers)
    plugin = AuditPlugin()

    dispose = agent.use(plugin)
    await agent.chat("a")

    assert plugin.log == ["start", "user", "assistant", "done"]
    assert agent.plugins == (plugin,)

    dispose()
    dispose()
    await agent.chat("b")

    assert plugin.log == ["start", "user", "assistant", "done"]
    assert agent.hooks.handlers == before  # the recorder's own hooks are untouched
    assert agent.plugins == ()


async def test_plugins_passed_to_the_constructor_are_used() -> None:
    plugin = AuditPlugin()
    agent = bare_agent(ScriptedModel(["one"]), plugins=[plugin])

    await agent.chat("a")

    assert agent.plugins == (plugin,)
    assert plugin.log == ["start", "user", "assistant", "done"]


def test_using_the_same_plugin_twice_raises_usage_error() -> None:
    agent = bare_agent(ScriptedModel([]))
    plugin = AuditPlugin()
    agent.use(plugin)
    registered = dict(agent.hooks.handlers)

    with pytest.raises(UsageError, match="already used"):
        agent.use(plugin)

    assert agent.hooks.handlers == registered
    assert agent.plugins == (plugin,)


def test_a_disposed_plugin_can_be_used_again() -> None:
    agent = bare_agent(ScriptedModel([]))
    plugin = AuditPlugin()
    agent.use(plugin)()

    agent.use(plugin)

    assert agent.plugins == (plugin,)
    assert sorted(agent.hooks.handlers) == ["on_chat_done", "on_chat_start", "on_message"]


def test_two_plugin_instances_are_separate_plugins() -> None:
    agent = bare_agent(ScriptedModel([]))
    first, second = AuditPlugin("a"), AuditPlugin("b")

    dispose_first = agent.use(first)
    agent.use(second)
    dispose_first()

    assert agent.plugins == (second,)
    assert {event: len(hs) for event, hs in agent.hooks.handlers.items()} == {
        "on_chat_start": 1,
        "on_message": 1,
        "on_chat_done": 1,
    }


def test_a_plugin_whose_init_agent_raises_leaves_no_hooks_behind() -> None:
    agent = bare_agent(ScriptedModel([]))
    agent.add_hook("on_message", lambda ctx: None)
    before = dict(agent.hooks.handlers)

    with pytest.raises(RuntimeError, match="plugin setup failed"):
        agent.use(BrokenPlugin())

    assert agent.hooks.handlers == before
    assert agent.plugins == ()


class CompositePlugin:
    """Uses a sub-plugin from its own init_agent, then optionally fails."""

    name = "composite"

    def __init__(self, *, fail: bool = False) -> None:
        self.sub = AuditPlugin("sub")
        self.fail = fail

    def init_agent(self, agent: Agent) -> None:
        agent.add_hook("pre_request", lambda ctx: None)
        agent.use(self.sub)
        if self.fail:
            raise RuntimeError("composite setup failed")


def test_a_failed_composite_plugin_leaves_neither_hooks_nor_plugins_behind() -> None:
    agent = bare_agent(ScriptedModel([]))
    plugin = CompositePlugin(fail=True)

    with pytest.raises(RuntimeError, match="composite setup failed"):
        agent.use(plugin)

    assert agent.hooks.handlers == {}
    assert agent.plugins == ()  # the sub-plugin's hooks are gone, so it is not in use either


def test_disposing_a_composite_plugin_removes_its_sub_plugin_too() -> None:
    agent = bare_agent(ScriptedModel([]))
    plugin = CompositePlugin()
    dispose = agent.use(plugin)
    assert agent.plugins == (plugin.sub, plugin)

    dispose()

    assert agent.hooks.handlers == {}
    assert agent.plugins == ()
    agent.use(plugin.sub)  # and it can be used on its own again
    assert agent.plugins == (plugin.sub,)


@pytest.mark.parametrize("not_a_plugin", [object(), "plugin", lambda agent: None])
def test_use_rejects_an_object_that_is_not_a_plugin(not_a_plugin: object) -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(UsageError, match="not a plugin"):
        agent.use(not_a_plugin)  # type: ignore[arg-type]
