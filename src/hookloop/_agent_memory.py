"""The agent's memory methods: ``store_memory``, ``search_memory``, ``memory_tool``.

A part of :class:`~hookloop.Agent` (it inherits them), kept apart so that the facade's module
stays readable at one sitting; each method hands the work to ``memory/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._background import run_sync
from ._errors import MemoryRequestError
from ._tools import Tool
from .hooks._host import AgentHost
from .memory._base import MemoryAction, MemoryEntry, MemoryStore, MemoryType
from .memory._tool import memory_tool
from .memory._write import write_memory

__all__ = ["MemoryMethods"]


class MemoryMethods(AgentHost):
    """What an agent does with its memory store (see ``docs/memory.md``)."""

    memory: MemoryStore | None
    name: str

    async def store_memory(
        self,
        content: str,
        *,
        memory_type: MemoryType = "long_term",
        action: MemoryAction = "add",
        metadata: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        match: str | None = None,
    ) -> MemoryEntry:
        """Write to :attr:`memory`; ``on_memory_write`` fires after the write succeeds.

        Args:
            content: The text to add; for ``"replace"``, the new text; for ``"remove"``,
                the text that names the entry when neither ``memory_id`` nor ``match`` is
                given.
            memory_type: ``"short_term"``, ``"long_term"``, ``"entity"`` or ``"episodic"``.
            action: ``"add"`` a new entry, ``"replace"`` an entry's text, or ``"remove"``
                an entry.
            metadata: JSON-compatible data kept with the entry; for ``"replace"``, ``None``
                keeps the entry's metadata.
            memory_id: The entry a replace or remove applies to.
            match: Or: text that exactly one entry of ``memory_type`` contains
                (case-insensitive).

        Returns:
            The entry written (for ``"remove"``, as it was).

        Raises:
            MemoryRequestError: (a ``ValueError``) an unknown type or action, an action the
                store does not support, no store, or malformed arguments. Nothing was
                written and no hook fired.
            MemoryNotFoundError: No entry has that id or contains that text.
        """
        return await write_memory(
            self,
            content,
            memory_type=memory_type,
            action=action,
            metadata=metadata,
            memory_id=memory_id,
            match=match,
            source="api",
        )

    def store_memory_sync(
        self,
        content: str,
        *,
        memory_type: MemoryType = "long_term",
        action: MemoryAction = "add",
        metadata: Mapping[str, Any] | None = None,
        memory_id: str | None = None,
        match: str | None = None,
    ) -> MemoryEntry:
        """Blocking :meth:`store_memory` for code without an event loop.

        Raises:
            UsageError: Called while an event loop is running in this thread.
        """
        return run_sync(
            self.store_memory(
                content,
                memory_type=memory_type,
                action=action,
                metadata=metadata,
                memory_id=memory_id,
                match=match,
            ),
            "store_memory_sync",
        )

    async def search_memory(
        self, query: str, *, memory_type: MemoryType | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        """The entries of :attr:`memory` that best match ``query``, best first.

        Raises:
            MemoryRequestError: The agent has no memory store, or the type is unknown.
        """
        store = self.memory
        if store is None:
            raise MemoryRequestError(f"agent {self.name!r} has no memory: pass Agent(memory=...)")
        return await store.search(query, memory_type=memory_type, limit=limit)

    def memory_tool(self, *, name: str = "memory", description: str | None = None) -> Tool:
        """A tool the model can call to search and write :attr:`memory`.

        Its writes go through :meth:`store_memory`'s path, so ``on_memory_write`` fires
        for them. Register it like any tool:
        ``agent.scopes.register(Scope("memory", tools=[agent.memory_tool()]))``.

        Raises:
            UsageError: The agent has no memory store.
        """
        return memory_tool(self, name=name, description=description)
