"""Helpers shared by the hook tests: agents without default plugins, an event recorder."""

import asyncio
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hookloop import (
    AfterModelCallContext,
    Agent,
    AssistantMessage,
    Message,
    MessageContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    Tool,
    ToolCall,
    ToolErrorContext,
    ToolMessage,
    ToolResultContext,
    UserMessage,
    tool,
)
from hookloop.hooks import ScopeContext
from hookloop.models import Model
from hookloop.testing import ScriptedModel

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


class AsyncCallable:
    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name

    async def __call__(self, ctx: object) -> None:
        await asyncio.sleep(0)
        self.log.append(self.name)
