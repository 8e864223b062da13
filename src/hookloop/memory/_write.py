"""The one path every memory write takes: checks, the store, then ``on_memory_write``.

``agent.store_memory()`` and the model's memory tool both come here, so the rules are the
same for both: nothing is written unless every check passes, and ``on_memory_write`` fires
after each write that succeeded, never after one that failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from .._errors import MemoryRequestError
from ..hooks._contexts import MemoryWriteContext
from ..hooks._dispatch import notify_reporting
from ..hooks._events import ON_MEMORY_WRITE
from ._base import (
    MemoryEntry,
    MemoryTarget,
    MemoryType,
    check_action,
    check_content,
    check_metadata,
    check_type,
)

if TYPE_CHECKING:
    from ..hooks._host import AgentHost


async def write_memory(
    agent: AgentHost,
    content: str,
    *,
    memory_type: object,
    action: object,
    metadata: Mapping[str, Any] | None,
    memory_id: str | None,
    match: str | None,
    source: Literal["api", "tool"],
) -> MemoryEntry:
    """Check, write through ``agent.memory``, then fire ``on_memory_write``.

    Raises:
        MemoryRequestError: No store, an unknown type or action, an action the store
            cannot do for that type, or malformed arguments. Nothing was written.
        MemoryNotFoundError: A replace or remove named an entry that does not exist.
    """
    store = agent.memory
    if store is None:
        raise MemoryRequestError(f"agent {agent.name!r} has no memory: pass Agent(memory=...)")
    checked_action = check_action(action)
    checked_type = check_type(memory_type)
    if not store.supports(checked_action, checked_type):
        raise MemoryRequestError(
            f"{store!r} cannot {checked_action} {checked_type} memories; nothing was written"
        )
    if metadata is not None:
        metadata = check_metadata(metadata)
    if checked_action == "add":
        if memory_id is not None or match is not None:
            raise MemoryRequestError("an add takes no memory_id or match: it makes a new entry")
        entry = await store.add(check_content(content), checked_type, metadata)
    elif checked_action == "replace":
        target = _target(checked_type, memory_id, match)
        entry = await store.replace(target, check_content(content), metadata)
    else:  # remove: the content names the entry when no id or match is given (the seed's form)
        if memory_id is None and match is None:
            match = content
        target = _target(checked_type, memory_id, match)
        entry = await store.remove(target)
    if hs := agent.hooks.handlers.get(ON_MEMORY_WRITE):
        reported = entry.metadata
        if checked_action == "remove" and metadata:  # e.g. why it was removed
            reported = {**entry.metadata, **metadata}
        ctx = MemoryWriteContext(
            action=checked_action,
            memory_type=checked_type,
            content=entry.content,
            metadata=reported,
            entry=entry,
            source=source,
        )
        await notify_reporting(hs, ctx)
    return entry


def _target(memory_type: MemoryType, memory_id: str | None, match: str | None) -> MemoryTarget:
    if memory_id is not None and match is not None:
        raise MemoryRequestError("give memory_id or match, not both")
    if memory_id is not None:
        if not isinstance(memory_id, str) or not memory_id:
            raise MemoryRequestError(f"memory_id must be a non-empty str, got {memory_id!r}")
        return MemoryTarget(memory_type=memory_type, memory_id=memory_id)
    if not isinstance(match, str) or not match.strip():
        raise MemoryRequestError(
            "a replace or remove needs the entry's memory_id, or a match: text that exactly "
            "one entry contains"
        )
    return MemoryTarget(memory_type=memory_type, match=match)
