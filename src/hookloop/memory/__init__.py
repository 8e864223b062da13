"""Memory: typed entries in a store, the memory tool, and memory lifecycle hooks.

- :class:`MemoryStore` is the contract; :class:`SQLiteMemoryStore` (a file, the embedded
  default), :class:`PostgresMemoryStore` and :class:`RedisMemoryStore` implement all of it.
- :class:`ProviderMemoryStore` adapts your own object that follows the seed's method names
  (``store_<type>``, ``replace_<type>`` / ``update_<type>``, ``remove_<type>`` /
  ``delete_<type>``); ``Agent(memory=your_object)`` uses it by itself.
- :class:`MemoryHooks` and :class:`MemoryHooksPlugin`: react to compaction, memory writes,
  delegation and session switches.
- :func:`memory_tool` lets the model search and write memory through the agent.

See ``docs/memory.md``.
"""

from .._publish import publish as _publish
from ._base import (
    MEMORY_ACTIONS,
    MEMORY_TYPES,
    MemoryAction,
    MemoryEntry,
    MemoryStore,
    MemoryTarget,
    MemoryType,
)
from ._hooks import MemoryHooks, MemoryHooksPlugin
from ._postgres import PostgresMemoryStore
from ._provider import ProviderMemoryStore
from ._redis import RedisMemoryStore
from ._sqlite import SQLiteMemoryStore
from ._tool import memory_tool

__all__ = [
    "MEMORY_ACTIONS",
    "MEMORY_TYPES",
    "MemoryAction",
    "MemoryEntry",
    "MemoryHooks",
    "MemoryHooksPlugin",
    "MemoryStore",
    "MemoryTarget",
    "MemoryType",
    "PostgresMemoryStore",
    "ProviderMemoryStore",
    "RedisMemoryStore",
    "SQLiteMemoryStore",
    "memory_tool",
]

_publish(globals(), __all__)
