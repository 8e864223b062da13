"""How a durable turn runs its calls as steps, and tells a replay from a first run.

A turn run again after a crash re-executes from the top: each step that finished returns
its recorded output instead of running, so until the first step whose body runs again,
the code between steps (hooks such as ``on_chat_start`` and ``on_message``) is re-running
what the first run did. :func:`replaying` tells it so.
"""

from __future__ import annotations

import asyncio
import contextvars
import hashlib
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from .._approval import PendingApproval
from .._errors import ToolResultLostError
from .._limits import Spend
from .._messages import AssistantMessage, ToolCall, ToolMessage
from .._run_context import DurableTurn, durable_turn
from ..hooks._contexts import MessageContext
from ..hooks._dispatch import Phase
from ..models._base import ProviderResponse
from ._engine import DurableEngine

if TYPE_CHECKING:
    from ..hooks._host import AgentHost
from ._records import decode_model_call, decode_tool_call, encode_model_call, encode_tool_call

__all__ = ["TurnSteps", "replaying"]

BEGIN_STEP = "hookloop.begin"
MODEL_STEP = "hookloop.model"
TOOL_STEP = "hookloop.tool"
TOOL_STARTED_STEP = "hookloop.tool_started"


def replaying() -> bool:
    """Whether the code running now re-runs what an earlier run of its durable turn did.

    ``True`` in a durable turn run again after its worker died, from its start until the
    first model or tool call that was not recorded as finished, or the first message it
    commits that the session did not hold (the worker died before storing it, so no
    ``on_message`` saw it; it does, with ``False``): hooks that fire outside a
    call (``on_chat_start``, ``on_message``, ``on_chat_done``...) see it, and can skip side
    effects they had before. Hooks that fire inside a recorded call (``pre_request``,
    ``pre_tool_call``, ``on_tool_call_result``...) do not fire again on a replay at all.
    ``False`` outside a durable turn.
    """
    turn = durable_turn.get()
    return isinstance(turn, TurnSteps) and turn.replaying


class TurnSteps:
    """The step runner of one durable turn (the loop's ``StepRunner``).

    Tool calls are recorded one at a time, in the order the loop starts them (a lock),
    so each replay meets the steps in the recorded order. A call of a tool that is not
    idempotent first records a "started" step: when that comes back recorded but the
    tool's own step runs, the tool was running when the worker died.
    """

    def __init__(self, engine: DurableEngine, workflow_id: str) -> None:
        self._engine = engine
        self.workflow_id = workflow_id
        self.replaying = False
        self.agent: AgentHost | None = None  # the turn's, once built
        self._lock = asyncio.Lock()

    async def begin(self) -> contextvars.Token[DurableTurn | None]:
        """The turn's first step, which tells a replay; makes :func:`replaying` answer."""
        ran = False

        async def body() -> str:
            nonlocal ran
            ran = True
            return ""

        await self._engine.step(BEGIN_STEP, body)
        self.replaying = not ran
        return durable_turn.set(self)

    def watch_commits(self, agent: AgentHost, stored: set[str]) -> None:
        """End the replay at the first message the turn commits that is not in ``stored``.

        ``stored``: the ids of the session's messages when the replay began. A message an
        earlier run made (in a recorded step) but did not store, because the worker died
        first, is news to the hooks that see it.
        """

        async def on_message(ctx: MessageContext) -> None:
            if ctx.message.id not in stored:
                self.replaying = False

        # Right after the session recorder, before the user's handlers.
        agent.add_hook("on_message", on_message, order=Phase.RECORD)

    def end(self, token: contextvars.Token[DurableTurn | None]) -> None:
        """Undo :meth:`begin`'s hold on :func:`replaying`."""
        durable_turn.reset(token)

    async def model_call(
        self, run: Callable[[bool], Awaitable[ProviderResponse]]
    ) -> tuple[ProviderResponse, AssistantMessage]:
        """One model call as a step; see the loop's ``StepRunner``."""

        async def body() -> str:
            restarted, self.replaying = self.replaying, False
            response = await run(restarted)
            return encode_model_call(response, response.to_message())

        text = await self._step(MODEL_STEP, body)
        return decode_model_call(text, self.workflow_id, MODEL_STEP)

    async def _step(self, name: str, body: Callable[[], Awaitable[str]]) -> str:
        """The engine's step; past the last record of an engine that says so, no replay.

        An engine whose every call replays the turn's earlier part (Temporal) knows when the
        records run out (``caught_up()``): the code after that point never ran before, even
        when it commits nothing new (a turn that ends waiting for approval, or raising a
        recorded error), so its hooks and events are a first run's.
        """
        try:
            return await self._engine.step(name, body)
        finally:
            caught_up = getattr(self._engine, "caught_up", None)
            if caught_up is not None and caught_up():
                self.replaying = False

    async def tool_call(
        self,
        call: ToolCall,
        idempotent: bool,
        run: Callable[[], Awaitable[tuple[ToolMessage | PendingApproval, Spend | None]]],
        lost: Callable[[ToolResultLostError], Awaitable[ToolMessage]],
    ) -> tuple[ToolMessage | PendingApproval, Spend | None]:
        """One tool call as a step; see the loop's ``StepRunner``."""
        ran = False
        async with self._lock:
            in_flight = False
            if not idempotent:
                ran = False

                async def started() -> str:
                    nonlocal ran
                    ran = True
                    self.replaying = False
                    return call.id

                await self._step(TOOL_STARTED_STEP, started)
                in_flight = not ran

            async def body() -> str:
                nonlocal ran
                ran = True
                self.replaying = False
                if in_flight:
                    error = ToolResultLostError(tool_name=call.name, call_id=call.id)
                    return encode_tool_call(await lost(error))
                return encode_tool_call(*await run())

            text = await self._step(TOOL_STEP, body)
        message, spent = decode_tool_call(text, self.workflow_id, TOOL_STEP)
        return message, None if ran else spent  # counted already when it ran here

    def closing_id(self, call_id: str) -> str:
        """``"msg_closed_<hash of the workflow id and call id>"``: the same in every run."""
        key = f"{self.workflow_id}\0{call_id}".encode()
        return f"msg_closed_{hashlib.sha256(key).hexdigest()[:32]}"

    def idempotency_key(self, call_id: str) -> str:
        """``"<workflow id>:<call id>"``: the same whenever the call runs."""
        return f"{self.workflow_id}:{call_id}"
