"""The memory tool: lets the model search its memory and write to it.

Its writes take the same path as ``agent.store_memory()``, so the same checks apply and
``on_memory_write`` fires for them too (with ``source="tool"``). A refused or failed write
becomes a tool error the model reads; the chat goes on.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from .._errors import UsageError
from .._tools import Tool
from ._base import MEMORY_ACTIONS, MemoryType
from ._write import write_memory

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["memory_tool"]

_DESCRIPTION = (
    "Search your long-lived memory, or write to it. action='search' finds memories whose words "
    "match `query`. action='add' stores `content` as a new memory. action='replace' changes "
    "the memory named by `old_text` (its id, or a piece of its text that only it contains) "
    "to `content`. action='remove' deletes the memory named by `old_text`. Memory types: "
    "short_term (this conversation), long_term (lasting facts and preferences), entity "
    "(facts about a person, place or thing), episodic (what happened, and when)."
)


def memory_tool(
    agent: AgentHost,
    *,
    name: str = "memory",
    description: str | None = None,
    search_limit: int = 5,
) -> Tool:
    """A tool over ``agent.memory`` for the model: search, add, replace and remove.

    Only the actions and memory types the store supports are offered to the model.

    Args:
        agent: The agent whose memory the tool uses; its hooks see the writes.
        name: The tool's name.
        description: What the model is told; a description of the actions by default.
        search_limit: The most memories one search returns.

    Raises:
        UsageError: The agent has no memory store.
    """
    store = agent.memory
    if store is None:
        raise UsageError(f"agent {agent.name!r} has no memory: pass Agent(memory=...) first")
    types = store.memory_types
    actions = ["search"] + [
        action for action in MEMORY_ACTIONS if any(store.supports(action, t) for t in types)
    ]
    default_type: MemoryType = "long_term" if "long_term" in types else types[0]

    async def memory(
        action: str,
        content: str = "",
        memory_type: str | None = None,
        old_text: str = "",
        query: str = "",
    ) -> str:
        current = agent.memory
        if current is None:
            raise UsageError(f"agent {agent.name!r} no longer has a memory store")
        if action == "search":
            hits = await current.search(
                query or content,
                memory_type=memory_type,  # type: ignore[arg-type]  # the schema's enum
                limit=search_limit,
            )
            if not hits:
                return f"no memories match {query or content!r}"
            return json.dumps(
                [{"id": h.id, "memory_type": h.memory_type, "content": h.content} for h in hits],
                ensure_ascii=False,
            )
        chosen = memory_type or default_type
        memory_id: str | None = None
        match: str | None = None
        if action != "add":
            selector = old_text or (content if action == "remove" else "")
            known = await current.get(selector) if selector else None
            if known is not None and known.memory_type == chosen:
                memory_id = selector
            else:
                match = selector
        entry = await write_memory(
            agent,
            content,
            memory_type=chosen,
            action=action,
            metadata=None,
            memory_id=memory_id,
            match=match,
            source="tool",
        )
        done = {"add": "stored", "replace": "replaced", "remove": "removed"}[action]
        return f"{done} {entry.memory_type} memory {entry.id}: {entry.content}"

    type_choice: Any = Literal.__getitem__(tuple(types))
    action_choice: Any = Literal.__getitem__(tuple(actions))
    memory.__annotations__ = {
        "action": action_choice,
        "content": str,
        "memory_type": type_choice | None,
        "old_text": str,
        "query": str,
        "return": str,
    }
    memory.__doc__ = f"""{description or _DESCRIPTION}

    Args:
        action: What to do: {", ".join(actions)}.
        content: The text to store (add), the new text (replace).
        memory_type: The kind of memory; for writes, {default_type} when not given; for a
            search, every kind when not given.
        old_text: replace and remove: the id of the memory, or a piece of its text that no
            other memory contains.
        query: search: the words to look for.
    """
    return Tool.from_function(memory, name=name, description=description or _DESCRIPTION)
