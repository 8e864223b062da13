"""The memory store contract: typed entries, the store base class, and input checks.

A store keeps :class:`MemoryEntry` objects of four types (``short_term``, ``long_term``,
``entity``, ``episodic``), finds them by full-text search, and may support replacing and
removing them. What a store can do is discoverable with :meth:`MemoryStore.supports`, so a
write the store cannot do is refused before anything is written.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, Final, Literal, TypeAlias

from .._errors import MemoryNotFoundError, MemoryRequestError
from .._messages import new_id
from .._stores._checks import check_limit
from ._text import query_words

__all__ = [
    "MEMORY_ACTIONS",
    "MEMORY_TYPES",
    "MemoryAction",
    "MemoryEntry",
    "MemoryStore",
    "MemoryTarget",
    "MemoryType",
]

MemoryType: TypeAlias = Literal["short_term", "long_term", "entity", "episodic"]
"""The kinds of memory: the conversation at hand, lasting facts, facts about a named thing
(a person, a project), and what happened when (episodes)."""

MEMORY_TYPES: Final[tuple[MemoryType, ...]] = ("short_term", "long_term", "entity", "episodic")
"""Every memory type, in the order above."""

MemoryAction: TypeAlias = Literal["add", "replace", "remove"]
"""What a write does: store a new entry, change an entry's text, or delete an entry."""

MEMORY_ACTIONS: Final[tuple[MemoryAction, ...]] = ("add", "replace", "remove")
"""Every memory action."""

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """One remembered piece of text.

    Attributes:
        id: The store's id for the entry (``mem_…`` for hookloop's stores).
        memory_type: Which kind of memory it is.
        content: The text.
        metadata: JSON-compatible data about the entry (source, tags, a user id…).
        created_at: When it was added (UTC).
        updated_at: When its text or metadata last changed (UTC); ``created_at`` until then.
        score: How well it matched a search (higher is better; comparable only within one
            search of one store); ``None`` outside search results.
    """

    id: str
    memory_type: MemoryType
    content: str
    metadata: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    score: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryTarget:
    """The entry a replace or remove applies to: by its id, or by a piece of its text.

    Attributes:
        memory_type: The type the entry must have.
        memory_id: The entry's id.
        match: Text that exactly one entry of that type contains (case-insensitive).
    """

    memory_type: MemoryType
    memory_id: str | None = None
    match: str | None = None

    @property
    def text(self) -> str:
        """The id or the text, for messages and for providers that take either."""
        return self.memory_id if self.memory_id is not None else self.match or ""


class MemoryStore(ABC):
    """Where an agent's memory lives. Subclass it for a backend of your own.

    Implement :meth:`add`, :meth:`search`, :meth:`get` and :meth:`entries`; override
    :meth:`replace` and :meth:`remove` if the backend can do them (:meth:`supports` sees
    the override). hookloop ships :class:`~hookloop.memory.SQLiteMemoryStore` (a file, the
    embedded default), :class:`~hookloop.memory.PostgresMemoryStore` and
    :class:`~hookloop.memory.RedisMemoryStore`, which support everything.

    A store is used as ``async with store:`` or closed with :meth:`close`.
    """

    memory_types: tuple[MemoryType, ...] = MEMORY_TYPES
    """The memory types this store keeps."""

    def supports(self, action: MemoryAction, memory_type: MemoryType) -> bool:
        """Whether the store can do ``action`` on entries of ``memory_type``."""
        if memory_type not in self.memory_types:
            return False
        overridden = {
            "add": True,
            "replace": type(self).replace is not MemoryStore.replace,
            "remove": type(self).remove is not MemoryStore.remove,
        }
        return overridden.get(action, False)

    @abstractmethod
    async def add(
        self, content: str, memory_type: MemoryType, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Store a new entry and return it.

        Raises:
            MemoryRequestError: Unknown type, empty content, or metadata that is not JSON.
        """

    @abstractmethod
    async def search(
        self, query: str, *, memory_type: MemoryType | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        """The entries that best match ``query``, best first, each with its ``score``.

        Words are matched case-insensitively; an entry matching more of the query's words
        (or matching them more often) ranks higher. A query without words finds nothing.
        """

    @abstractmethod
    async def get(self, memory_id: str) -> MemoryEntry | None:
        """The entry with this id, or ``None``."""

    @abstractmethod
    async def entries(
        self, *, memory_type: MemoryType | None = None, limit: int | None = None
    ) -> list[MemoryEntry]:
        """Entries, newest first; of one type if ``memory_type`` is given."""

    async def replace(
        self, target: MemoryTarget, content: str, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Change the text (and, unless ``metadata`` is ``None``, the metadata) of an entry.

        Returns the entry as stored now; ``created_at`` stays, ``updated_at`` moves.

        Raises:
            MemoryNotFoundError: No entry of the target's type has that id or text.
            MemoryRequestError: The text matches several entries, or the store cannot
                replace.
        """
        raise MemoryRequestError(f"{type(self).__name__} cannot replace memory entries")

    async def remove(self, target: MemoryTarget) -> MemoryEntry:
        """Delete an entry and return it as it was.

        Raises:
            MemoryNotFoundError: No entry of the target's type has that id or text.
            MemoryRequestError: The text matches several entries, or the store cannot
                remove.
        """
        raise MemoryRequestError(f"{type(self).__name__} cannot remove memory entries")

    async def find(self, match: str, memory_type: MemoryType) -> list[MemoryEntry]:
        """The entries of ``memory_type`` whose text contains ``match`` (case-insensitive).

        The default reads every entry of the type; backends override it with a query.
        """
        needle = match.casefold()
        entries = await self.entries(memory_type=memory_type)
        return [e for e in entries if needle in e.content.casefold()]

    async def resolve(self, target: MemoryTarget) -> MemoryEntry:
        """The one entry ``target`` names.

        Raises:
            MemoryNotFoundError: No entry of the target's type has that id or text.
            MemoryRequestError: The text is in several entries of the type.
        """
        if target.memory_id is not None:
            entry = await self.get(target.memory_id)
            if entry is None or entry.memory_type != target.memory_type:
                raise MemoryNotFoundError(
                    f"no {target.memory_type} memory has the id {target.memory_id!r}",
                    memory_type=target.memory_type,
                    target=target.memory_id,
                )
            return entry
        match = target.match or ""
        found = await self.find(match, target.memory_type)
        if not found:
            raise MemoryNotFoundError(
                f"no {target.memory_type} memory contains {match!r}",
                memory_type=target.memory_type,
                target=match,
            )
        if len(found) > 1:
            ids = ", ".join(e.id for e in found[:5])
            raise MemoryRequestError(
                f"{len(found)} {target.memory_type} memories contain {match!r} ({ids}"
                f"{', …' if len(found) > 5 else ''}); give more of the text, or the id"
            )
        return found[0]

    async def close(self) -> None:  # noqa: B027 - optional, like the other defaults
        """Release connections and files; the default does nothing."""

    async def __aenter__(self) -> MemoryStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


# --- checks shared by every store and by the agent ----------------------------------------


def check_type(memory_type: object) -> MemoryType:
    """Return ``memory_type`` if it is a memory type, else raise MemoryRequestError."""
    if memory_type not in MEMORY_TYPES:
        raise MemoryRequestError(
            f"unknown memory type {memory_type!r}; use one of {', '.join(MEMORY_TYPES)}"
        )
    return memory_type


def check_action(action: object) -> MemoryAction:
    """Return ``action`` if it is a memory action, else raise MemoryRequestError."""
    if action not in MEMORY_ACTIONS:
        raise MemoryRequestError(
            f"unknown memory action {action!r}; use one of {', '.join(MEMORY_ACTIONS)}"
        )
    return action


def check_content(content: object) -> str:
    """Return ``content`` if it is a non-blank str, else raise MemoryRequestError."""
    if not isinstance(content, str) or not content.strip():
        raise MemoryRequestError(f"memory content must be a non-empty str, got {content!r:.80}")
    return content


def check_metadata(metadata: object) -> dict[str, Any]:
    """A JSON-compatible copy of ``metadata`` (``None`` is ``{}``).

    Raises:
        MemoryRequestError: Not a mapping with str keys, or a value JSON cannot hold
            (including NaN and infinity).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping) or not all(isinstance(k, str) for k in metadata):
        raise MemoryRequestError(f"metadata must be a mapping with str keys, got {metadata!r:.80}")
    try:
        copied: dict[str, Any] = json.loads(json.dumps(dict(metadata), allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise MemoryRequestError(f"metadata must be JSON-compatible: {exc}") from exc
    return copied


def search_terms(query: str, memory_type: object, limit: object) -> list[str]:
    """Check a search's arguments and return the words of ``query`` (none: no match).

    Raises:
        MemoryRequestError: An unknown memory type or a bad limit.
    """
    if memory_type is not None:
        check_type(memory_type)
    if check_limit(limit, error=MemoryRequestError) is None:
        raise MemoryRequestError("a search's limit must be a positive int, got None")
    return query_words(query)


def new_entry(content: object, memory_type: object, metadata: object, now: datetime) -> MemoryEntry:
    """A checked entry to add, with a new id, made at ``now``.

    Raises:
        MemoryRequestError: The content, type or metadata is not acceptable.
    """
    return MemoryEntry(
        id=new_id("mem"),
        memory_type=check_type(memory_type),
        content=check_content(content),
        metadata=check_metadata(metadata),
        created_at=now,
        updated_at=now,
    )


def replaced_entry(
    entry: MemoryEntry, content: str, metadata: Mapping[str, Any] | None, now: datetime
) -> MemoryEntry:
    """``entry`` with new text (and metadata, unless ``None``), changed at ``now``."""
    return MemoryEntry(
        id=entry.id,
        memory_type=entry.memory_type,
        content=content,
        metadata=entry.metadata if metadata is None else dict(metadata),
        created_at=entry.created_at,
        updated_at=now,
    )


async def replacement(
    store: MemoryStore,
    target: MemoryTarget,
    content: object,
    metadata: object,
    clock: Callable[[], datetime],
) -> tuple[MemoryEntry, MemoryEntry]:
    """Check a replace's arguments and find its entry: the entry, and the entry to store.

    What every backend's :meth:`MemoryStore.replace` does before it writes.

    Raises:
        MemoryRequestError: The content or metadata is not acceptable, or the target's text
            is in several entries.
        MemoryNotFoundError: No entry of the target's type has that id or text.
    """
    checked = check_content(content)
    new_metadata = None if metadata is None else check_metadata(metadata)
    entry = await store.resolve(target)
    return entry, replaced_entry(entry, checked, new_metadata, clock())


def dump_metadata(metadata: Mapping[str, Any]) -> str:
    """Metadata as compact JSON text, for backends that store text."""
    return json.dumps(metadata, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def to_micros(moment: datetime) -> int:
    """Microseconds since the epoch, exactly (the form the SQLite and Redis stores keep)."""
    delta = moment.astimezone(UTC) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """The UTC datetime of ``micros`` microseconds since the epoch."""
    return _EPOCH + timedelta(microseconds=micros)


def utc_now() -> datetime:
    """The current time in UTC: the stores' default clock."""
    return datetime.now(UTC)


def finite(score: float) -> float:
    """A search score that is a finite float (0.0 for NaN), whatever the backend computed."""
    return score if math.isfinite(score) else 0.0


def vanished(entry: MemoryEntry) -> MemoryNotFoundError:
    """The error for an entry that another writer removed between lookup and write."""
    return MemoryNotFoundError(
        f"{entry.memory_type} memory {entry.id!r} was removed by another writer meanwhile",
        memory_type=entry.memory_type,
        target=entry.id,
    )
