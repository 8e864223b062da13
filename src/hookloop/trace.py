"""A plugin that writes every hook event of an agent as one readable line.

Example:
    >>> from hookloop import Agent
    >>> from hookloop.models.testing import ScriptedModel
    >>> agent = Agent(ScriptedModel(["Hello!"]))
    >>> _ = agent.use(TracePlugin(write=print, clock=lambda: 0.0))
    >>> _ = agent.chat_sync("Hi")  # doctest: +NORMALIZE_WHITESPACE
      0.0 ms  on_chat_start        "Hi"
      0.0 ms  on_message           user: "Hi"
      0.0 ms  pre_request          iteration 0: 1 message, 0 tools
      0.0 ms  after_model_call     attempt 1: ok
      0.0 ms  on_response          text "Hello!"
      0.0 ms  on_message           assistant: "Hello!"
      0.0 ms  on_chat_done         1 iteration, 0 tokens in, 0 out
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .hooks import (
    EVENTS,
    AfterModelCallContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    DelegationContext,
    MemoryWriteContext,
    MessageContext,
    PreCompressContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    ScopeContext,
    SessionSwitchContext,
    SubAgentEventContext,
    ToolErrorContext,
    ToolResultContext,
)
from .messages import AssistantMessage, Message, ToolMessage, UserMessage

if TYPE_CHECKING:
    from .agent import Agent

__all__ = ["TracePlugin"]


class TracePlugin:
    """Writes a timeline of hook events: time since the chat started, event, summary.

    Its handlers run after every other handler of the same event (``order`` of one
    million), so interceptors' changes are visible, and it never changes anything.

    Args:
        write: Where each line goes (``print`` by default).
        clock: Seconds as a float; injectable for tests.
        width: Longest text excerpt shown.
    """

    name = "trace"

    def __init__(
        self,
        write: Callable[[str], object] = print,
        *,
        clock: Callable[[], float] = time.perf_counter,
        width: int = 60,
    ) -> None:
        self._write = write
        self._clock = clock
        self._width = width
        self._start = clock()

    def init_agent(self, agent: Agent) -> None:
        """Register a tracing handler on every event."""
        for event in sorted(EVENTS):
            agent.hooks.add(event, self._handler(event), order=1_000_000)

    def _handler(self, event: str) -> Callable[[Any], None]:
        describe = getattr(self, f"_{event}")

        def trace(ctx: Any) -> None:
            if event == "on_chat_start":
                self._start = self._clock()
            elapsed = (self._clock() - self._start) * 1000
            self._write(f"{elapsed:7.1f} ms  {event:<20} {describe(ctx)}")

        trace.__qualname__ = f"TracePlugin.{event}"
        return trace

    def _cut(self, text: str) -> str:
        text = " ".join(text.split())
        return repr(text if len(text) <= self._width else text[: self._width - 1] + "…").replace(
            "'", '"'
        )

    def _message(self, message: Message) -> str:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
            return f"assistant calls {calls}" + (
                f" and says {self._cut(message.content)}" if message.content else ""
            )
        if isinstance(message, ToolMessage):
            status = "error" if message.is_error else "result"
            return f"tool {message.tool_name} {status}: {self._cut(message.content)}"
        text = message.text if isinstance(message, UserMessage) else message.content
        return f"{message.role}: {self._cut(text)}"

    def _on_chat_start(self, ctx: ChatStartContext) -> str:
        return self._cut(ctx.message.text)

    def _on_chat_done(self, ctx: ChatDoneContext) -> str:
        r = ctx.response
        s = "" if r.iterations == 1 else "s"
        return (
            f"{r.iterations} iteration{s}, {r.usage.input_tokens} tokens in, "
            f"{r.usage.output_tokens} out"
        )

    def _on_chat_abort(self, ctx: ChatAbortContext) -> str:
        return f"cancelled: {ctx.reason!r}"

    def _on_chat_error(self, ctx: ChatErrorContext) -> str:
        return f"{type(ctx.error).__name__}: {ctx.error}"

    def _on_message(self, ctx: MessageContext) -> str:
        return self._message(ctx.message)

    def _pre_request(self, ctx: PreRequestContext) -> str:
        n = len(ctx.request.messages)
        tools = len(ctx.request.tools)
        return (
            f"iteration {ctx.iteration}: {n} message{'' if n == 1 else 's'}, "
            f"{tools} tool{'' if tools == 1 else 's'}"
        )

    def _after_model_call(self, ctx: AfterModelCallContext) -> str:
        outcome = "ok" if ctx.error is None else f"{type(ctx.error).__name__}: {ctx.error}"
        return f"attempt {ctx.attempt}: {outcome}" + (", retrying" if ctx.retry else "")

    def _on_response(self, ctx: ResponseContext) -> str:
        r = ctx.response
        if r.tool_calls:
            return f"{len(r.tool_calls)} tool call(s): " + ", ".join(c.name for c in r.tool_calls)
        return f"text {self._cut(r.content)}"

    def _pre_tool_call(self, ctx: PreToolCallContext) -> str:
        return f"{ctx.call.name}({ctx.call.arguments}) in scope {ctx.scope.name!r}"

    def _on_tool_call_result(self, ctx: ToolResultContext) -> str:
        return f"{ctx.call.name} -> {self._cut(str(ctx.result))}"

    def _on_tool_call_error(self, ctx: ToolErrorContext) -> str:
        return f"{ctx.call.name} failed: {type(ctx.error).__name__}: {ctx.error}"

    def _on_pre_compress(self, ctx: PreCompressContext) -> str:
        n = len(ctx.messages)
        return f"{n} message{'' if n == 1 else 's'} about to be summarised"

    def _on_scope_register(self, ctx: ScopeContext) -> str:
        return f"scope {ctx.scope.name!r} with {len(ctx.scope.tools)} tool(s)"

    def _on_scope_unregister(self, ctx: ScopeContext) -> str:
        return f"scope {ctx.scope.name!r} removed"

    def _on_memory_write(self, ctx: MemoryWriteContext) -> str:
        return f"{ctx.action} {ctx.memory_type} {ctx.entry.id}: {self._cut(ctx.content)}"

    def _on_delegation(self, ctx: DelegationContext) -> str:
        return f"{' > '.join(ctx.path)}: {self._cut(ctx.result)}"

    def _on_session_switch(self, ctx: SessionSwitchContext) -> str:
        reset = ", history reset" if ctx.reset else ""
        return f"{ctx.previous_session_id} -> {ctx.new_session_id}{reset}"

    def _on_subagent_event(self, ctx: SubAgentEventContext) -> str:
        return f"{' > '.join(ctx.path)}: {ctx.event}"
