"""The plugin API: what a plugin is, what it may use of an agent, and the one-agent guard.

A plugin is an object with a ``name`` and ``init_agent(agent)``; ``agent`` is an
:class:`AgentHost`, the part of an agent that plugins, the loop, a tool's run context and the
chat slot program against. A plugin registers its handlers with ``agent.add_hook``, whose
typed overloads (generated from the event table) match each event to its context type.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import (
    TYPE_CHECKING,
    Any,
    Literal,
    Protocol,
    TypeAlias,
    TypeGuard,
    TypeVar,
    overload,
    runtime_checkable,
)

from .._approval import Defer
from .._errors import UsageError
from .._messages import ToolCall
from .._verdict import Verdict
from ..models._base import Model, ProviderRequest, ProviderResponse
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
    GuardrailVerdictContext,
    InputGuardrailContext,
    MemoryWriteContext,
    MessageContext,
    OutputGuardrailContext,
    OutputReturn,
    OutputValidationErrorContext,
    PreCompressContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    ScopeContext,
    SessionSwitchContext,
    SubAgentEventContext,
    ToolCallGuardrailContext,
    ToolErrorContext,
    ToolResultContext,
    ToolResultGuardrailContext,
    ToolReturn,
    TrimContext,
)
from ._dispatch import Disposer, HookRegistry
from ._events import HookEvent

if TYPE_CHECKING:
    from .._background import BackgroundTasks
    from .._tools import ScopeRegistry
    from ..context._history import ChatHistory
    from ..memory._base import MemoryStore
    from ..retry._model_retry import ModelRetryStrategy

__all__ = ["AgentHost", "HookHost", "Plugin", "attach_once", "is_plugin"]

_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C")
_R = TypeVar("_R")

# A handler takes the event's context and returns its result, or an awaitable of it.
_Fn: TypeAlias = Callable[[_C], _R | Awaitable[_R]]


class HookHost(Protocol):
    """Something with a hook registry: ``add_hook`` and the ``@hook`` decorator over ``hooks``.

    :class:`AgentHost` is one; a class that subclasses it gets both methods.
    """

    hooks: HookRegistry
    """The hook registry; prefer :meth:`add_hook`."""

    # One overload per event, so a type checker matches each handler to its context.
    # --- generated from EVENT_TABLE by `python tests/hooks/test_event_table.py`; do not edit ---
    @overload
    def add_hook(
        self,
        event: Literal["on_chat_start"],
        handler: _Fn[ChatStartContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_chat_done"],
        handler: _Fn[ChatDoneContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_chat_abort"],
        handler: _Fn[ChatAbortContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_chat_error"],
        handler: _Fn[ChatErrorContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_message"],
        handler: _Fn[MessageContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["pre_request"],
        handler: _Fn[PreRequestContext, ProviderRequest | ProviderResponse | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_response"],
        handler: _Fn[ResponseContext, ProviderResponse | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["after_model_call"],
        handler: _Fn[AfterModelCallContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["pre_tool_call"],
        handler: _Fn[PreToolCallContext, ToolCall | ToolReturn | Exception | Defer | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_tool_call_result"],
        handler: _Fn[ToolResultContext, ToolReturn | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_tool_call_error"],
        handler: _Fn[ToolErrorContext, Exception | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_approval_request"],
        handler: _Fn[ApprovalRequestContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_approval_decision"],
        handler: _Fn[ApprovalDecisionContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_pre_compress"],
        handler: _Fn[PreCompressContext, str | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_scope_register"],
        handler: Callable[[ScopeContext], object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_scope_unregister"],
        handler: Callable[[ScopeContext], object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_memory_write"],
        handler: _Fn[MemoryWriteContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_delegation"],
        handler: _Fn[DelegationContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_session_switch"],
        handler: _Fn[SessionSwitchContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_subagent_event"],
        handler: _Fn[SubAgentEventContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_first_chunk"],
        handler: _Fn[FirstChunkContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_backoff_wait"],
        handler: _Fn[BackoffWaitContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_trim"],
        handler: _Fn[TrimContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_compaction"],
        handler: _Fn[CompactionContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_output_validation_error"],
        handler: _Fn[OutputValidationErrorContext, str | OutputReturn | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_input_guardrail"],
        handler: _Fn[InputGuardrailContext, Verdict | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_input_guardrail_beside"],
        handler: _Fn[InputGuardrailContext, Verdict | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_output_guardrail"],
        handler: _Fn[OutputGuardrailContext, Verdict | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_tool_call_guardrail"],
        handler: _Fn[ToolCallGuardrailContext, Verdict | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_tool_result_guardrail"],
        handler: _Fn[ToolResultGuardrailContext, Verdict | None],
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_guardrail_verdict"],
        handler: _Fn[GuardrailVerdictContext, object],
        *,
        order: int = 0,
    ) -> Disposer: ...
    # --- end of the generated overloads ---
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


@runtime_checkable
class AgentHost(HookHost, Protocol):
    """What plugins, the loop, a tool's run context and the chat slot may use of an agent.

    :class:`~hookloop.Agent` is the implementation; a plugin's ``init_agent`` receives one,
    and a tool's :class:`~hookloop.RunContext` names one. Program against these members
    only: the rest of ``Agent`` (chatting, approvals, delegation, memory writes) is the
    application's. Besides them, a host has ``hooks``, :meth:`add_hook` and :meth:`hook`.
    """

    name: str
    """The agent's name, for logs and delegation paths."""
    session_id: str
    """The session the agent is in."""
    model: Model
    """The model each chat starts from (a ``pre_request`` handler picks an attempt's)."""
    history: ChatHistory
    """The conversation: messages, system prompt, token budget and counter."""
    scopes: ScopeRegistry
    """The scopes of tools and context."""
    memory: MemoryStore | None
    """Where memory writes go, or ``None``."""
    retry_strategy: ModelRetryStrategy | None
    """The model retry strategy in use, or ``None``."""
    deps: object
    """The default dependencies of a chat's tools (``NO_DEPS`` for none)."""

    @property
    def plugins(self) -> tuple[Plugin, ...]:
        """The plugins in use, in the order they were added."""
        ...

    @property
    def is_running(self) -> bool:
        """Whether a chat is running now."""
        ...

    @property
    def background(self) -> BackgroundTasks:
        """Tasks the agent started that nobody awaits; ``aclose()`` waits for them."""
        ...

    def use(self, plugin: Plugin) -> Disposer:
        """Add a plugin: it registers its hooks now; the disposer removes them all."""
        ...


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

    def init_agent(self, agent: AgentHost) -> None:
        """Register the plugin's hooks on ``agent``."""
        ...


def is_plugin(obj: object) -> TypeGuard[Plugin]:
    """``isinstance(obj, Plugin)``, as the runtime protocol check reads it, at a tenth of its cost.

    A ``name`` and an ``init_agent`` that is not ``None``. ``Agent()`` checks every plugin it
    is given (its default window and retry strategy too): the protocol's own check took
    about a third of making an agent.
    """
    return hasattr(obj, "name") and getattr(obj, "init_agent", None) is not None


_H = TypeVar("_H", bound=AgentHost)


def attach_once(
    plugin: object, current: _H | None, agent: _H, why: str, *, owner: object = None
) -> _H:
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


def _release(owner: object, agent: AgentHost) -> None:
    if getattr(owner, "_agent", None) is agent:
        owner._agent = None  # type: ignore[attr-defined]  # the attribute attach_once fills
