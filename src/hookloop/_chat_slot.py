"""The chat slot: one chat at a time per agent, shared by ``chat``, ``chat_stream`` and delegation.

Each agent has one :class:`ChatSlot`. A chat claims it before its first step (a second claim
raises :class:`~hookloop.ConcurrentChatError` and changes nothing), runs through
:meth:`ChatSlot.drive`, and gives it back when it ends, however it ends.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from ._errors import ConcurrentChatError
from .hooks._host import AgentHost

if TYPE_CHECKING:
    from ._agent import Default
    from ._approval import ApprovalDecision
    from ._limits import ChatLimits
    from ._loop import ChatRun
    from ._messages import UserMessage
    from ._output import OutputSpec
    from ._setup import Resumption, StepRunner
    from ._stream_events import AgentEvent, AgentResponse

__all__ = ["ChatHost", "ChatSlot", "current_slot"]


@runtime_checkable
class ChatHost(AgentHost, Protocol):
    """An agent as the code that starts its chats sees it: delegation and durable turns.

    Beyond :class:`~hookloop.AgentHost`: the chat slot, how a chat of a message is
    started on it, and what a chat runs with by default. Only ``_agent.py`` implements it.
    """

    _output: OutputSpec[Any] | None
    _limits: ChatLimits  # a chat's usage and repeat limits when it is given none

    @property
    def _slot(self) -> ChatSlot:
        """The slot that keeps one chat at a time on this agent (made when first used)."""
        ...

    async def _start(
        self,
        message: UserMessage | Resumption,
        emit: Callable[[AgentEvent], Awaitable[None]] | None,
        deps: object = ...,
        output: OutputSpec[Any] | Literal[Default.DEFAULT] | None = ...,
        steps: StepRunner | None = None,
        *,
        limits: ChatLimits | None = None,
    ) -> ChatRun:
        """A chat of ``message`` holding the slot; run it with ``_slot.drive``.

        Raises ``UsageError`` while tool calls of an earlier chat wait for approval.
        """
        ...

    async def _resumed(
        self,
        decisions: Iterable[ApprovalDecision],
        emit: Callable[[AgentEvent], Awaitable[None]] | None,
        deps: object,
        output: OutputSpec[Any] | None,
        limits: ChatLimits,
        steps: StepRunner | None = None,
    ) -> ChatRun:
        """The chat ``resume()`` drives, its decisions checked, holding the slot."""
        ...

    async def chat(self, message: str) -> AgentResponse[Any]:
        """One chat of ``message`` (see ``Agent.chat``)."""
        ...

    async def aclose(self) -> None:
        """Wait for the agent's background work, then close its plugins' connections."""
        ...


_CURRENT: ContextVar[ChatSlot | None] = ContextVar("hookloop_current_slot", default=None)


def current_slot() -> ChatSlot | None:
    """The slot of the chat running in this context (its task, tools and hooks), or ``None``.

    It is how a sub-agent tool finds the agent it works for.
    """
    return _CURRENT.get()


class _Holding:
    """The block of :meth:`ChatSlot.holding`: its end ends the hold, however it ends.

    A class, not a ``@contextmanager`` generator: every chat starts in one, and the
    generator's machinery took 11k instructions a chat (about a tenth of the bare loop's
    fixed cost per chat).
    """

    __slots__ = ("slot",)

    def __init__(self, slot: ChatSlot) -> None:
        self.slot = slot

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self.slot.starting = False


class ChatSlot:
    """Whether a chat is running on one agent, and which.

    Attributes:
        owner: The agent the slot belongs to.
        run: The chat holding the slot, or ``None``.
        starting: A start is awaiting what it checks before it claims the slot.
    """

    __slots__ = ("owner", "run", "starting")

    def __init__(self, owner: ChatHost) -> None:
        self.owner = owner
        self.run: ChatRun | None = None
        self.starting = False

    def holding(self, action: str) -> _Holding:
        """Keep the slot while a start awaits its checks (the restored history, waiting calls).

        A restore replaces the history: a second start, ``resume`` or session switch that
        awaited the same checks meanwhile would do it under the first chat. Leave the block
        before :meth:`claim`.

        Raises:
            ConcurrentChatError: A chat holds the slot, or another start does.
        """
        self.refuse(action)
        self.starting = True
        return _Holding(self)

    def claim(self, run: ChatRun) -> ChatRun:
        """Make ``run`` the agent's chat; returns it.

        Raises:
            ConcurrentChatError: Another chat holds the slot, or is starting.
        """
        if self.run is not None or self.starting:
            raise ConcurrentChatError(
                f"agent {self.owner.name!r} is already running a chat; one chat at a time per "
                "agent (wait for it, cancel it, or close its stream first)"
            )
        self.run = run
        return run

    def release(self, run: ChatRun) -> None:
        """Free the slot if ``run`` holds it; calling it again does nothing."""
        if self.run is run:
            self.run = None

    async def drive(self, run: ChatRun) -> AgentResponse:
        """Run the claimed ``run`` to its end, then release the slot."""
        token = _CURRENT.set(self)
        try:
            return await run.run()
        finally:
            _CURRENT.reset(token)
            self.release(run)

    def cancel(self, reason: object) -> bool:
        """Ask the running chat to end; ``False`` when none is running."""
        run = self.run
        return run.cancel(reason) if run is not None else False

    def refuse(self, action: str) -> None:
        """Raise if a chat is running: ``action`` must wait until it has ended.

        Raises:
            ConcurrentChatError: A chat holds the slot, or is starting.
        """
        if self.run is not None or self.starting:
            raise ConcurrentChatError(
                f"agent {self.owner.name!r} cannot {action} while a chat is running"
            )
