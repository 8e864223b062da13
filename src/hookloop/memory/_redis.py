"""Memory in Redis, with a word index kept in Redis sets and BM25 ranking.

Needs the ``redis`` extra (``pip install 'hookloop[redis]'``). Plain Redis has no full-text
search (that is the RediSearch module), so the store keeps its own index: a set of entry
ids per word. Writes are MULTI/EXEC transactions, and a replace or remove re-reads the
entry under WATCH, so concurrent writers never leave the index out of step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

from .._errors import MemoryRequestError
from .._extras import import_extra
from .._loopbound import LoopBound
from .._stores._checks import check_limit, check_text
from .._stores._pools import abandon_client, close_client
from .._stores._reach import reachable, redis_lost, without_password
from ._base import (
    MemoryEntry,
    MemoryStore,
    MemoryTarget,
    MemoryType,
    check_type,
    dump_metadata,
    from_micros,
    new_entry,
    replacement,
    search_terms,
    to_micros,
    utc_now,
    vanished,
)
from ._text import bm25, words

__all__ = ["RedisMemoryStore"]

_FIELDS: Final = ("memory_type", "content", "metadata", "created_us", "updated_us", "seq")
_WATCH_ATTEMPTS: Final = 20


class RedisMemoryStore(MemoryStore):
    """Memory in Redis under one key prefix, with word search ranked by BM25.

    Keys, all under ``prefix``: ``e:<id>`` (a hash per entry), ``all`` and ``t:<type>``
    (entry ids ordered by insertion), ``w:<word>`` (the ids of the entries containing the
    word), ``seq`` and ``words`` (counters). A search reads the sets of the query's words
    and then those entries, so its cost grows with the number of matching entries.

    Args:
        url: A ``redis://`` or ``rediss://`` URL, database number included.
        prefix: Prepended to every key, so several stores can share a database.
        clock: Returns the current time (UTC); injectable for tests.
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "hookloop:memory:",
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.url = check_text(url, "url", empty=False)
        self.prefix = check_text(prefix, "prefix")
        self._clock = clock
        # redis-py's async pipeline methods are typed as awaitables; here they are queued calls.
        self._client: LoopBound[Any] = LoopBound(self._open, close_client, abandon_client)

    def __repr__(self) -> str:
        return f"RedisMemoryStore(prefix={self.prefix!r})"

    def _where(self) -> str:
        return without_password(self.url)

    async def _open(self) -> Any:
        redis = import_extra("redis.asyncio", extra="redis", by=type(self).__name__)
        return redis.Redis.from_url(self.url, decode_responses=True)

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    # -- the MemoryStore API -----------------------------------------------------------------

    @reachable(redis_lost, "memory store")
    async def add(
        self, content: str, memory_type: MemoryType, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Store a new entry and return it."""
        now = self._clock()
        entry = new_entry(content, memory_type, metadata, now)
        client = await self._client.get()
        seq = await client.incr(self._key("seq"))
        entry_words = words(entry.content)
        async with client.pipeline(transaction=True) as pipe:
            pipe.hset(
                self._key("e", entry.id),
                mapping={
                    "memory_type": entry.memory_type,
                    "content": entry.content,
                    "metadata": dump_metadata(entry.metadata),
                    "created_us": to_micros(entry.created_at),
                    "updated_us": to_micros(entry.updated_at),
                    "seq": seq,
                    "length": len(entry_words),
                },
            )
            pipe.zadd(self._key("all"), {entry.id: seq})
            pipe.zadd(self._key("t", entry.memory_type), {entry.id: seq})
            for word in set(entry_words):
                pipe.sadd(self._key("w", word), entry.id)
            pipe.incrby(self._key("words"), len(entry_words))
            await pipe.execute()
        return entry

    @reachable(redis_lost, "memory store")
    async def search(
        self, query: str, *, memory_type: MemoryType | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        """The best BM25 matches of ``query``, best first."""
        terms = search_terms(query, memory_type, limit)
        if not terms:
            return []
        client = await self._client.get()
        async with client.pipeline(transaction=False) as pipe:
            for term in terms:
                pipe.smembers(self._key("w", term))
            pipe.zcard(self._key("all"))
            pipe.get(self._key("words"))
            *sets, documents, total_words = await pipe.execute()
        frequency = {term: len(ids) for term, ids in zip(terms, sets, strict=True)}
        candidates = sorted(set().union(*sets))
        if not candidates:
            return []
        average = int(total_words or 0) / max(int(documents), 1)
        scored: list[tuple[float, int, MemoryEntry]] = []
        for memory_id, fields in zip(
            candidates, await self._fetch(client, candidates), strict=True
        ):
            if fields is None or (memory_type is not None and fields[0] != memory_type):
                continue
            score = bm25(
                terms,
                words(fields[1]),
                document_frequency=frequency,
                documents=int(documents),
                average_length=average,
            )
            scored.append((score, int(fields[5]), _entry(memory_id, fields, score=score)))
        scored.sort(key=lambda item: (-item[0], -item[1]))
        return [entry for _, _, entry in scored[:limit]]

    @reachable(redis_lost, "memory store")
    async def get(self, memory_id: str) -> MemoryEntry | None:
        """The entry with this id, or ``None``."""
        client = await self._client.get()
        fields = (await self._fetch(client, [memory_id]))[0]
        return None if fields is None else _entry(memory_id, fields)

    @reachable(redis_lost, "memory store")
    async def entries(
        self, *, memory_type: MemoryType | None = None, limit: int | None = None
    ) -> list[MemoryEntry]:
        """Entries, newest first."""
        key = self._key("all") if memory_type is None else self._key("t", check_type(memory_type))
        checked = check_limit(limit, error=MemoryRequestError)
        stop = -1 if checked is None else checked - 1
        client = await self._client.get()
        ids: list[str] = await client.zrevrange(key, 0, stop)
        fetched = await self._fetch(client, ids)
        return [_entry(i, f) for i, f in zip(ids, fetched, strict=True) if f is not None]

    @reachable(redis_lost, "memory store")
    async def replace(
        self, target: MemoryTarget, content: str, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Change an entry's text (and metadata, unless ``None``); returns it as stored."""
        entry, changed = await replacement(self, target, content, metadata, self._clock)
        new_words = words(content)

        def write(pipe: Any, old_content: str) -> None:
            old_words = words(old_content)
            pipe.hset(
                self._key("e", entry.id),
                mapping={
                    "content": changed.content,
                    "metadata": dump_metadata(changed.metadata),
                    "updated_us": to_micros(changed.updated_at),
                    "length": len(new_words),
                },
            )
            for word in set(old_words) - set(new_words):
                pipe.srem(self._key("w", word), entry.id)
            for word in set(new_words) - set(old_words):
                pipe.sadd(self._key("w", word), entry.id)
            pipe.incrby(self._key("words"), len(new_words) - len(old_words))

        await self._watched(entry, write)
        return changed

    @reachable(redis_lost, "memory store")
    async def remove(self, target: MemoryTarget) -> MemoryEntry:
        """Delete an entry; returns it as it was."""
        entry = await self.resolve(target)

        def write(pipe: Any, old_content: str) -> None:
            old_words = words(old_content)
            pipe.delete(self._key("e", entry.id))
            pipe.zrem(self._key("all"), entry.id)
            pipe.zrem(self._key("t", entry.memory_type), entry.id)
            for word in set(old_words):
                pipe.srem(self._key("w", word), entry.id)
            pipe.incrby(self._key("words"), -len(old_words))

        await self._watched(entry, write)
        return entry

    async def close(self) -> None:
        """Close the client; the next call opens a new one."""
        await self._client.close()

    # -- helpers -------------------------------------------------------------------------------

    async def _fetch(self, client: Any, ids: list[str]) -> list[list[str] | None]:
        """The stored fields (in ``_FIELDS`` order) of each id; ``None`` for a missing one."""
        if not ids:
            return []
        async with client.pipeline(transaction=False) as pipe:
            for memory_id in ids:
                pipe.hmget(self._key("e", memory_id), list(_FIELDS))
            rows: list[list[str | None]] = await pipe.execute()
        return [None if row[0] is None else [str(v) for v in row] for row in rows]

    async def _watched(self, entry: MemoryEntry, write: Callable[[Any, str], None]) -> None:
        """Run ``write`` in a transaction that fails if the entry changes meanwhile.

        ``write`` gets the pipeline and the content the entry has right now (its index words
        are what must be taken out). Retried when another writer got in between.
        """
        watch_error = import_extra(
            "redis.exceptions", extra="redis", by=type(self).__name__
        ).WatchError
        key = self._key("e", entry.id)
        client = await self._client.get()
        for _ in range(_WATCH_ATTEMPTS):
            async with client.pipeline(transaction=True) as pipe:
                try:
                    await pipe.watch(key)
                    current = await pipe.hget(key, "content")
                    if current is None:
                        raise vanished(entry)
                    pipe.multi()
                    write(pipe, current)
                    await pipe.execute()
                    return
                except watch_error:
                    continue
        raise MemoryRequestError(
            f"memory {entry.id!r} kept changing under other writers; gave up after "
            f"{_WATCH_ATTEMPTS} attempts and wrote nothing (try again)"
        )


def _entry(memory_id: str, fields: list[str], *, score: float | None = None) -> MemoryEntry:
    memory_type, content, metadata, created_us, updated_us, _ = fields
    return MemoryEntry(
        id=memory_id,
        memory_type=memory_type,  # type: ignore[arg-type]  # written by add() from a checked type
        content=content,
        metadata=json.loads(metadata),
        created_at=from_micros(int(created_us)),
        updated_at=from_micros(int(updated_us)),
        score=score,
    )
