"""``ToolRetryStrategy``: running a failed tool again, on the ``on_tool_call_error`` event."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Collection
from typing import TYPE_CHECKING

from .._errors import ToolExecutionError
from ..hooks._contexts import ToolErrorContext
from ..hooks._host import attach_once
from ._backoff import JITTER_RNG, Backoff
from ._model_retry import Sleep

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["ToolRetryStrategy"]


class ToolRetryStrategy:
    """Runs a tool again when its function raised one of ``retry_on``.

    The sibling of :class:`ModelRetryStrategy` for tools: its unit of work is one tool call.
    It acts only on errors the tool's own function raised (invalid arguments or an unknown
    tool need the model to change its call, not a second run), waits with ``backoff``, and
    sets ``retry`` on the event. Like the model strategies it never stacks a wait on a
    retry another handler already asked for, and serves exactly one agent.

    Override :meth:`should_retry` for other rules.

    Args:
        retry_on: Exception types (of the tool's own exception) worth another run.
        max_attempts: Runs per tool call, the first one included.
        backoff: Waits between runs.
        tools: Names of the tools to retry; ``None`` for all.
        rng: Random source for the jitter.
        sleep: The async sleep to wait with.
    """

    name = "tool-retry"

    def __init__(
        self,
        *,
        retry_on: tuple[type[BaseException], ...] = (Exception,),
        max_attempts: int = 3,
        backoff: Backoff | None = None,
        tools: Collection[str] | None = None,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        self.retry_on = retry_on
        self.max_attempts = max_attempts
        self.backoff = backoff or Backoff(base=0.2, max_delay=5.0)
        self.tools = frozenset(tools) if tools is not None else None
        self._rng = rng if rng is not None else JITTER_RNG
        self._sleep = sleep
        self._previous: dict[str, float] = {}
        self._agent: AgentHost | None = None

    def init_agent(self, agent: AgentHost) -> None:
        """Attach to ``agent``.

        Raises:
            UsageError: This instance already serves another agent.
        """
        self._agent = attach_once(
            repr(self.name), self._agent, agent, "it keeps per-agent state", owner=self
        )
        agent.add_hook("on_tool_call_error", self.retry_tool)

    def should_retry(self, ctx: ToolErrorContext) -> bool:
        """Whether the failed run in ``ctx`` is worth another one."""
        error = ctx.error
        if not isinstance(error, ToolExecutionError) or ctx.attempt >= self.max_attempts:
            return False
        if self.tools is not None and ctx.call.name not in self.tools:
            return False
        return isinstance(error.__cause__, self.retry_on)

    async def retry_tool(self, ctx: ToolErrorContext) -> None:
        """The ``on_tool_call_error`` handler."""
        call_id = ctx.call.id
        if ctx.attempt == 1:
            self._previous.pop(call_id, None)
        if ctx.retry or not self.should_retry(ctx):
            self._previous.pop(call_id, None)
            return
        wait = self.backoff.delay(ctx.attempt, rng=self._rng, previous=self._previous.get(call_id))
        self._previous[call_id] = wait
        if wait > 0:
            await self._sleep(wait)
        ctx.retry = True
