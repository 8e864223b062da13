"""A plugin that writes every hook event of an agent as one readable line.

Example:
    >>> from hookloop import Agent
    >>> from hookloop.testing import ScriptedModel
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

from ._messages import AssistantMessage, Message, ToolMessage, UserMessage
from .hooks._dispatch import Phase
from .hooks._events import EVENT_TABLE, TraceFormat

if TYPE_CHECKING:
    from .hooks._host import AgentHost

__all__ = ["TracePlugin"]


class TracePlugin:
    """Writes a timeline of hook events: time since the chat started, event, summary.

    Its handlers run in :attr:`~hookloop.hooks.Phase.OBSERVE`, after the user's handlers,
    so interceptors' changes are visible, and it never changes anything.

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

    def init_agent(self, agent: AgentHost) -> None:
        """Register a tracing handler on every event (its table row says how it reads)."""
        for event in sorted(EVENT_TABLE):
            agent.hooks.add(event, self._handler(event), order=Phase.OBSERVE)

    def _handler(self, event: str) -> Callable[[Any], None]:
        describe = EVENT_TABLE[event].trace
        printer = _Printer(self._width)

        def trace(ctx: Any) -> None:
            if event == "on_chat_start":
                self._start = self._clock()
            elapsed = (self._clock() - self._start) * 1000
            self._write(f"{elapsed:7.1f} ms  {event:<20} {describe(ctx, printer)}")

        trace.__qualname__ = f"TracePlugin.{event}"
        return trace


class _Printer(TraceFormat):
    """The one-line forms the event table's ``trace`` functions use."""

    __slots__ = ("_width",)

    def __init__(self, width: int) -> None:
        self._width = width

    def cut(self, text: str) -> str:
        text = " ".join(text.split())
        return repr(text if len(text) <= self._width else text[: self._width - 1] + "…").replace(
            "'", '"'
        )

    def message(self, message: Message) -> str:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
            return f"assistant calls {calls}" + (
                f" and says {self.cut(message.content)}" if message.content else ""
            )
        if isinstance(message, ToolMessage):
            status = "error" if message.is_error else "result"
            return f"tool {message.tool_name} {status}: {self.cut(message.content)}"
        text = message.text if isinstance(message, UserMessage) else message.content
        return f"{message.role}: {self.cut(text)}"
