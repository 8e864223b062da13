"""Turn what ``Agent(memory=...)`` was given into a store and, if it has hooks, a plugin."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import UsageError
from ._base import MemoryStore
from ._hooks import MemoryHooksPlugin, implements_memory_hooks
from ._provider import ProviderMemoryStore, is_memory_provider

if TYPE_CHECKING:
    from ..hooks._host import AgentHost


def attach_memory(agent: AgentHost, memory: object) -> MemoryStore | None:
    """The store for ``memory``; its memory hooks, if any, are registered on ``agent``.

    ``memory`` may be a :class:`MemoryStore`, an object with ``store_<type>`` methods (the
    seed's convention), an object with memory hooks only, or any mix of these.

    Raises:
        UsageError: ``memory`` is none of these.
    """
    if memory is None:
        return None
    store: MemoryStore | None = None
    if isinstance(memory, MemoryStore):
        store = memory
    elif is_memory_provider(memory):
        store = ProviderMemoryStore(memory)
    has_hooks = implements_memory_hooks(memory)
    if store is None and not has_hooks:
        raise UsageError(
            f"memory must be a MemoryStore, an object with store_<type> methods, or an object "
            f"with memory hooks; got {type(memory).__name__}"
        )
    if has_hooks:
        agent.use(MemoryHooksPlugin(memory))
    return store
