"""The plugin API: what a plugin is, how it registers hooks, and the one-agent guard.

A plugin is an object with a ``name`` and ``init_agent(agent)``; it registers its handlers
with ``agent.add_hook``, whose typed overloads match each event to its context type.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    overload,
    runtime_checkable,
)

from .._approval import Defer
from .._errors import UsageError
from .._messages import ToolCall
from ..models._base import ProviderRequest, ProviderResponse
from ._contexts import (
    AfterModelCallContext,
    ApprovalDecisionContext,
    ApprovalRequestContext,
    BackoffWaitContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    CompactionContext,
    DelegationContext,
    FirstChunkContext,
    MemoryWriteContext,
    MessageContext,
    OutputReturn,
    OutputValidationErrorContext,
    PreCompressContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    ScopeContext,
    SessionSwitchContext,
    SubAgentEventContext,
    ToolErrorContext,
    ToolResultContext,
    ToolReturn,
    TrimContext,
)
from ._dispatch import Disposer, HookRegistry
from ._events import HookEvent

if TYPE_CHECKING:
    from .._agent import Agent

__all__ = ["HookHost", "Plugin", "attach_once"]


@runtime_checkable
class Plugin(Protocol):
    """Something that adds several hooks at once: ``agent.use(plugin)``.

    ``init_agent`` registers the plugin's hooks with ``agent.add_hook``; the disposer that
    ``use`` returns removes all of them.
    """

    @property
    def name(self) -> str:
        """A stable name for the plugin."""
        ...

    def init_agent(self, agent: Agent) -> None:
        """Register the plugin's hooks on ``agent``."""
        ...


_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C")
_R = TypeVar("_R")

# A handler takes the event's context and returns its result, or an awaitable of it.
_Fn: TypeAlias = Callable[[_C], _R | Awaitable[_R]]
ChatStartHandler: TypeAlias = _Fn[ChatStartContext, object]
ChatDoneHandler: TypeAlias = _Fn[ChatDoneContext, object]
ChatAbortHandler: TypeAlias = _Fn[ChatAbortContext, object]
ChatErrorHandler: TypeAlias = _Fn[ChatErrorContext, object]
MessageHandler: TypeAlias = _Fn[MessageContext, object]
PreRequestHandler: TypeAlias = _Fn[PreRequestContext, ProviderRequest | ProviderResponse | None]
ResponseHandler: TypeAlias = _Fn[ResponseContext, ProviderResponse | None]
AfterModelCallHandler: TypeAlias = _Fn[AfterModelCallContext, object]
PreToolCallHandler: TypeAlias = _Fn[
    PreToolCallContext, ToolCall | ToolReturn | Exception | Defer | None
]
ToolResultHandler: TypeAlias = _Fn[ToolResultContext, ToolReturn | None]
ToolErrorHandler: TypeAlias = _Fn[ToolErrorContext, Exception | None]
ApprovalRequestHandler: TypeAlias = _Fn[ApprovalRequestContext, object]
ApprovalDecisionHandler: TypeAlias = _Fn[ApprovalDecisionContext, object]
PreCompressHandler: TypeAlias = _Fn[PreCompressContext, str | None]
MemoryWriteHandler: TypeAlias = _Fn[MemoryWriteContext, object]
DelegationHandler: TypeAlias = _Fn[DelegationContext, object]
SessionSwitchHandler: TypeAlias = _Fn[SessionSwitchContext, object]
SubAgentEventHandler: TypeAlias = _Fn[SubAgentEventContext, object]
FirstChunkHandler: TypeAlias = _Fn[FirstChunkContext, object]
BackoffWaitHandler: TypeAlias = _Fn[BackoffWaitContext, object]
TrimHandler: TypeAlias = _Fn[TrimContext, object]
CompactionHandler: TypeAlias = _Fn[CompactionContext, object]
OutputValidationErrorHandler: TypeAlias = _Fn[
    OutputValidationErrorContext, str | OutputReturn | None
]
ScopeHandler: TypeAlias = Callable[[ScopeContext], object]
_ScopeEvent: TypeAlias = Literal["on_scope_register", "on_scope_unregister"]


class HookHost:
    """Gives a class ``add_hook`` and the ``@hook`` decorator over ``self.hooks``."""

    hooks: HookRegistry

    # One overload per event, so a type checker matches each handler to its context.
    @overload
    def add_hook(
        self, event: Literal["on_chat_start"], handler: ChatStartHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_chat_done"], handler: ChatDoneHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_chat_abort"], handler: ChatAbortHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_chat_error"], handler: ChatErrorHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_message"], handler: MessageHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["pre_request"], handler: PreRequestHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_response"], handler: ResponseHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["after_model_call"], handler: AfterModelCallHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["pre_tool_call"], handler: PreToolCallHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_tool_call_result"], handler: ToolResultHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_tool_call_error"], handler: ToolErrorHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_approval_request"],
        handler: ApprovalRequestHandler,
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_approval_decision"],
        handler: ApprovalDecisionHandler,
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_pre_compress"], handler: PreCompressHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_memory_write"], handler: MemoryWriteHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_delegation"], handler: DelegationHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_session_switch"], handler: SessionSwitchHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_subagent_event"], handler: SubAgentEventHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_first_chunk"], handler: FirstChunkHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_backoff_wait"], handler: BackoffWaitHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_trim"], handler: TrimHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_compaction"], handler: CompactionHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_output_validation_error"],
        handler: OutputValidationErrorHandler,
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: _ScopeEvent, handler: ScopeHandler, *, order: int = 0
    ) -> Disposer: ...
    def add_hook(self, event: str, handler: Callable[[Any], Any], *, order: int = 0) -> Disposer:
        """Register ``handler`` for ``event`` and return a disposer that removes it.

        Args:
            event: The event's name, e.g. ``"pre_request"``; see ``docs/hooks.md``.
            handler: A sync or async function taking the event's context.
            order: Lower runs first; equal orders run in registration order. ``0`` is the
                user phase; the built-in plugins sit in named phases around it
                (:class:`Phase`).

        Raises:
            HookRegistrationError: The event is unknown or the handler cannot be used.
        """
        return self.hooks.add(event, handler, order=order)

    def hook(self, event: HookEvent, *, order: int = 0) -> Callable[[_F], _F]:
        """Decorator form of :meth:`add_hook`; returns the function unchanged.

        Example:
            >>> from hookloop import Agent
            >>> from hookloop.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hi there."]))
            >>> @agent.hook("on_message")
            ... def log(ctx):
            ...     print(ctx.message.role)
            >>> _ = agent.chat_sync("Hello")
            user
            assistant
        """

        def register(fn: _F) -> _F:
            self.hooks.add(event, fn, order=order)
            return fn

        return register


def attach_once(
    plugin: object, current: Agent | None, agent: Agent, why: str, *, owner: object = None
) -> Agent:
    """The "one plugin instance, one agent" guard; returns ``agent`` to keep.

    Call it first in ``init_agent`` as ``self._agent = attach_once(..., owner=self)``.
    With ``owner``, the guard also releases the plugin when it leaves the agent: the
    disposer :meth:`Agent.use <hookloop.Agent.use>` returned (or a failed ``init_agent``)
    sets ``owner._agent`` back to ``None``, so the plugin can then serve another agent.

    Args:
        plugin: How the error names the plugin, e.g. ``"retry strategy 'default'"``.
        current: The agent the plugin serves already, if any.
        agent: The agent it is being attached to.
        why: Why it cannot serve two, e.g. ``"it keeps per-call state"``.
        owner: The plugin object, whose ``_agent`` attribute holds the agent it serves.

    Raises:
        UsageError: The plugin is attached to another agent already.
    """
    if current is not None and current is not agent:
        raise UsageError(
            f"{plugin} is already attached to agent {current.name!r}; {why}, "
            "so give each agent its own"
        )
    if owner is not None and current is None:
        agent.hooks.adopt(Disposer(lambda: _release(owner, agent)))
    return agent


def _release(owner: object, agent: Agent) -> None:
    if getattr(owner, "_agent", None) is agent:
        owner._agent = None  # type: ignore[attr-defined]  # the attribute attach_once fills
