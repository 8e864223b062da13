"""Memory lifecycle hooks (the seed's ``MemoryHooks``) and the plugin that wires them in.

An object implements any of ``on_pre_compress``, ``on_memory_write``, ``on_delegation``
and ``on_session_switch``, and any of their async twins ``aon_*``. :class:`MemoryHooksPlugin`
registers one handler per hook the object has (a hook it lacks costs nothing) on the agent's
events of the same names. ``Agent(memory=obj)`` does this by itself.

Rules, in the seed's words and ours:

- Only one twin runs. Under ``await agent.chat()`` (and the other async methods) the async
  twin is preferred and runs as a background task that ``await agent.aclose()`` waits for;
  under ``agent.chat_sync()`` (and the other sync methods) the sync twin runs in line. A
  lone twin runs in either case (a lone async twin is awaited in line under a sync method).
- ``on_pre_compress`` is the exception to "background": its text goes into the summary (or,
  where none is written, into the requests in place of the messages left out), so the
  chosen twin is awaited.
- A failing hook is logged at WARNING (logger ``hookloop.memory._hooks``) and never breaks
  the loop.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from .._background import in_sync_entry
from .._errors import UsageError
from .._messages import dump_messages
from ..hooks._contexts import (
    DelegationContext,
    MemoryWriteContext,
    PreCompressContext,
    SessionSwitchContext,
)
from ..hooks._events import ON_DELEGATION, ON_MEMORY_WRITE, ON_PRE_COMPRESS, ON_SESSION_SWITCH

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["MEMORY_HOOK_NAMES", "MemoryHooks", "MemoryHooksPlugin", "implements_memory_hooks"]

logger = logging.getLogger(__name__)

MEMORY_HOOK_NAMES: Final = (
    "on_pre_compress",
    "on_memory_write",
    "on_delegation",
    "on_session_switch",
)
"""The sync hook names; each has an async twin named ``a`` + the name."""

_ALL_NAMES: Final = (*MEMORY_HOOK_NAMES, *(f"a{name}" for name in MEMORY_HOOK_NAMES))

_Args = tuple[tuple[object, ...], dict[str, object]]


def implements_memory_hooks(obj: object) -> bool:
    """Whether ``obj`` has at least one memory hook (sync or async)."""
    return any(callable(getattr(obj, name, None)) for name in _ALL_NAMES)


@runtime_checkable
class MemoryHooks(Protocol):
    """React to the agent's memory lifecycle. Every method is optional.

    ``isinstance(obj, MemoryHooks)`` is true when ``obj`` has at least one of them. Each
    sync hook may have an async twin (``aon_pre_compress``…) with the same arguments.
    """

    # Every method is optional, so the usual check (all methods present) would refuse most
    # real implementations: one hook is enough to be a MemoryHooks.
    @classmethod
    def __subclasshook__(cls, other: type) -> Any:
        if cls is MemoryHooks and implements_memory_hooks(other):
            return True
        return NotImplemented

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str | None:
        """Compaction is about to summarise ``messages`` (dicts, as ``dump_messages`` makes).

        Return text to keep, word for word, in the summary; ``None`` for nothing.
        """

    async def aon_pre_compress(self, messages: list[dict[str, Any]]) -> str | None:
        """Async twin of :meth:`on_pre_compress`; awaited, as its text is needed."""

    def on_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        """A write succeeded: ``action`` on memory type ``target`` with this text."""

    async def aon_memory_write(
        self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
    ) -> None:
        """Async twin of :meth:`on_memory_write`."""

    def on_delegation(
        self,
        task: str,
        result: str,
        *,
        agent_name: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """A sub-agent called ``agent_name`` finished ``task`` with ``result``."""

    async def aon_delegation(
        self,
        task: str,
        result: str,
        *,
        agent_name: str = "",
        metadata: dict[str, Any] | None = None,
    ) -> None:
        """Async twin of :meth:`on_delegation`."""

    def on_session_switch(
        self, new_session_id: str, *, parent_session_id: str = "", reset: bool = False
    ) -> None:
        """The agent switched to session ``new_session_id`` (``""`` parent: a fresh start)."""

    async def aon_session_switch(
        self, new_session_id: str, *, parent_session_id: str = "", reset: bool = False
    ) -> None:
        """Async twin of :meth:`on_session_switch`."""


def _memory_write_args(ctx: MemoryWriteContext) -> _Args:
    return (ctx.action, ctx.memory_type, ctx.content, dict(ctx.metadata)), {}


def _delegation_args(ctx: DelegationContext) -> _Args:
    return (ctx.task, ctx.result), {"agent_name": ctx.agent_name, "metadata": dict(ctx.metadata)}


def _session_switch_args(ctx: SessionSwitchContext) -> _Args:
    kwargs: dict[str, object] = {
        "parent_session_id": ctx.parent_session_id or "",
        "reset": ctx.reset,
    }
    return (ctx.new_session_id,), kwargs


_REPORTS: Final[dict[str, Callable[[Any], _Args]]] = {
    ON_MEMORY_WRITE: _memory_write_args,
    ON_DELEGATION: _delegation_args,
    ON_SESSION_SWITCH: _session_switch_args,
}


class MemoryHooksPlugin:
    """Registers the hooks of a :class:`MemoryHooks` object on an agent.

    ``agent.use(MemoryHooksPlugin(obj))``; ``Agent(memory=obj)`` does it for you when
    ``obj`` has memory hooks. See the module docstring for which twin runs.

    Args:
        hooks: The object with the hooks.

    Raises:
        UsageError: ``hooks`` has none of the memory hooks.
    """

    name = "memory-hooks"

    def __init__(self, hooks: object) -> None:
        if not implements_memory_hooks(hooks):
            raise UsageError(
                f"{type(hooks).__name__} has no memory hook; implement one of "
                f"{', '.join(MEMORY_HOOK_NAMES)} (or an aon_* twin)"
            )
        self.hooks = hooks

    def init_agent(self, agent: AgentHost) -> None:
        """Register one handler per hook the object implements, and none for the others.

        Nothing, if the agent has this object's hooks already (``Agent(memory=obj)`` and
        ``agent.use(MemoryHooksPlugin(obj))`` together): each hook still runs once.
        """
        if any(isinstance(p, MemoryHooksPlugin) and p.hooks is self.hooks for p in agent.plugins):
            return
        for event in MEMORY_HOOK_NAMES:
            sync = _callable(self.hooks, event)
            async_twin = _callable(self.hooks, f"a{event}")
            if sync is None and async_twin is None:
                continue
            label = f"{type(self.hooks).__name__}.{event}"
            if event == ON_PRE_COMPRESS:
                agent.add_hook(ON_PRE_COMPRESS, _compress_handler(label, sync, async_twin))
            else:
                handler = _report_handler(agent, label, _REPORTS[event], sync, async_twin)
                agent.hooks.add(event, handler)

    def __repr__(self) -> str:
        return f"MemoryHooksPlugin({self.hooks!r})"


def _callable(obj: object, name: str) -> Callable[..., Any] | None:
    fn = getattr(obj, name, None)
    return fn if callable(fn) else None


def _report_handler(
    agent: AgentHost,
    label: str,
    args_of: Callable[[Any], _Args],
    sync: Callable[..., Any] | None,
    async_twin: Callable[..., Any] | None,
) -> Callable[[Any], Any]:
    if async_twin is None:
        assert sync is not None

        def call_sync(ctx: object) -> None:
            args, kwargs = args_of(ctx)
            _guarded(label, sync, args, kwargs)

        call_sync.__qualname__ = label
        return call_sync

    async_label = _async_label(label)

    async def call(ctx: object) -> None:
        args, kwargs = args_of(ctx)
        if not in_sync_entry():
            work = _guarded_async(async_label, async_twin, args, kwargs)
            _ = agent.background.spawn(work, f"memory hook {async_label}")
        elif sync is not None:
            _guarded(label, sync, args, kwargs)
        else:  # the loop ends with the sync call: the lone async twin cannot outlive it
            await _guarded_async(async_label, async_twin, args, kwargs)

    call.__qualname__ = label
    return call


def _compress_handler(
    label: str, sync: Callable[..., Any] | None, async_twin: Callable[..., Any] | None
) -> Callable[[PreCompressContext], Any]:
    if async_twin is None:
        assert sync is not None

        def call_sync(ctx: PreCompressContext) -> str | None:
            return _text(label, _guarded(label, sync, (dump_messages(ctx.messages),), {}))

        call_sync.__qualname__ = label
        return call_sync

    async_label = _async_label(label)

    async def call(ctx: PreCompressContext) -> str | None:
        args = (dump_messages(ctx.messages),)
        if in_sync_entry() and sync is not None:
            return _text(label, _guarded(label, sync, args, {}))
        return _text(async_label, await _guarded_async(async_label, async_twin, args, {}))

    call.__qualname__ = label
    return call


def _async_label(label: str) -> str:
    owner, _, name = label.rpartition(".")
    return f"{owner}.a{name}"


def _guarded(
    label: str, fn: Callable[..., Any], args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    try:
        result = fn(*args, **kwargs)
    except Exception:
        logger.warning("memory hook %s raised; ignored", label, exc_info=True)
        return None
    if inspect.isawaitable(result):  # a sync name that returned a coroutine: not awaited here
        logger.warning(
            "memory hook %s returned an awaitable, which is not awaited; name it %s",
            label,
            _async_label(label),
        )
        if inspect.iscoroutine(result):
            result.close()
        return None
    return result


async def _guarded_async(
    label: str, fn: Callable[..., Any], args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    try:
        return await _call_async(fn, args, kwargs)
    except Exception:
        logger.warning("memory hook %s raised; ignored", label, exc_info=True)
        return None


async def _call_async(
    fn: Callable[..., Any], args: tuple[object, ...], kwargs: dict[str, object]
) -> object:
    result = fn(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


def _text(label: str, result: object) -> str | None:
    if result is None or isinstance(result, str):
        return result
    logger.warning(
        "memory hook %s returned %s, not a str; its text is not kept", label, type(result).__name__
    )
    return None
