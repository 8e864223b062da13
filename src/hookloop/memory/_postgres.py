"""Memory in PostgreSQL, searched with its built-in full-text search (``tsvector``).

Needs the ``postgres`` extra (``pip install 'hookloop[postgres]'``, which installs asyncpg).
Several processes may share one table: every write is one statement, so none is lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .._errors import MemoryRequestError
from .._extras import import_extra
from .._loopbound import LoopBound
from .._stores._checks import check_identifier, check_limit, check_text
from .._stores._pools import abandon_pool, close_pool
from .._stores._reach import postgres_lost, reachable, without_password
from ._base import (
    MemoryEntry,
    MemoryStore,
    MemoryTarget,
    MemoryType,
    check_type,
    dump_metadata,
    finite,
    new_entry,
    replacement,
    search_terms,
    utc_now,
    vanished,
)
from ._text import indexed_text

if TYPE_CHECKING:
    import asyncpg

__all__ = ["PostgresMemoryStore"]

_COLUMNS = "id, memory_type, content, metadata::text, created_at, updated_at"


class PostgresMemoryStore(MemoryStore):
    """Memory in a PostgreSQL table, with full-text search ranked by ``ts_rank``.

    The table (with a GIN index over the words of each entry) is created on first use.
    Words are indexed with the ``simple`` configuration over hookloop's own word splitting,
    so a search finds the same entries here as on SQLite and Redis.

    Args:
        dsn: A libpq connection string or URL (``postgresql://user@host/db``).
        table: The table to use: letters, digits and ``_``.
        schema: The schema of the table; by default the connection's ``search_path``.
        clock: Returns the current time (UTC); injectable for tests.
        min_size: Connections the pool keeps open.
        max_size: Connections the pool opens at most.
    """

    def __init__(
        self,
        dsn: str,
        *,
        table: str = "hookloop_memory",
        schema: str | None = None,
        clock: Callable[[], datetime] = utc_now,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        self.dsn = check_text(dsn, "dsn", empty=False)
        self.table = check_identifier(table, "table")
        self.schema = None if schema is None else check_identifier(schema, "schema")
        self._name = f'"{table}"' if schema is None else f'"{schema}"."{table}"'
        self._clock = clock
        self._pool: LoopBound[asyncpg.Pool] = LoopBound(self._open, close_pool, abandon_pool)
        self._min_size = min_size
        self._max_size = max_size

    def __repr__(self) -> str:
        return f"PostgresMemoryStore(table={self._name!r})"

    def _where(self) -> str:
        return without_password(self.dsn)

    async def _open(self) -> asyncpg.Pool:
        pool: asyncpg.Pool = await import_extra(
            "asyncpg", extra="postgres", by=type(self).__name__
        ).create_pool(self.dsn, min_size=self._min_size, max_size=self._max_size)
        try:
            async with pool.acquire() as conn, conn.transaction():
                # Two processes creating the table at once would collide in the catalog.
                await conn.execute(
                    "SELECT pg_advisory_xact_lock(hashtext($1))", f"hookloop:{self._name}"
                )
                await conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {self._name} ("
                    "seq BIGSERIAL PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
                    "memory_type TEXT NOT NULL, content TEXT NOT NULL, metadata JSONB NOT NULL, "
                    "created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL, "
                    "words TSVECTOR NOT NULL)"
                )
                await conn.execute(
                    f'CREATE INDEX IF NOT EXISTS "{self.table}_words" '
                    f"ON {self._name} USING GIN (words)"
                )
                await conn.execute(
                    f'CREATE INDEX IF NOT EXISTS "{self.table}_type" '
                    f"ON {self._name} (memory_type, seq)"
                )
        except BaseException:
            await pool.close()
            raise
        return pool

    # -- the MemoryStore API -----------------------------------------------------------------

    @reachable(postgres_lost, "memory store")
    async def add(
        self, content: str, memory_type: MemoryType, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Store a new entry and return it."""
        now = self._clock()
        entry = new_entry(content, memory_type, metadata, now)
        _refuse_nul(entry.content, entry.metadata)
        pool = await self._pool.get()
        await pool.execute(
            f"INSERT INTO {self._name} "
            "(id, memory_type, content, metadata, created_at, updated_at, words) "
            "VALUES ($1, $2, $3, $4::jsonb, $5, $6, to_tsvector('simple', $7))",
            entry.id,
            entry.memory_type,
            entry.content,
            dump_metadata(entry.metadata),
            entry.created_at,
            entry.updated_at,
            indexed_text(entry.content),
        )
        return entry

    @reachable(postgres_lost, "memory store")
    async def search(
        self, query: str, *, memory_type: MemoryType | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        """The best ``ts_rank`` matches of ``query``, best first."""
        terms = search_terms(query, memory_type, limit)
        if not terms:
            return []
        # A word is letters and digits only, so it needs no quoting inside a tsquery.
        args: list[object] = [" | ".join(terms), limit]
        sql = (
            f"SELECT {_COLUMNS}, ts_rank(words, q, 1) AS score "
            f"FROM {self._name}, to_tsquery('simple', $1) AS q WHERE words @@ q"
        )
        if memory_type is not None:
            sql += " AND memory_type = $3"
            args.append(memory_type)
        sql += " ORDER BY score DESC, seq DESC LIMIT $2"
        pool = await self._pool.get()
        rows = await pool.fetch(sql, *args)
        return [_entry(row, score=finite(float(row["score"]))) for row in rows]

    @reachable(postgres_lost, "memory store")
    async def get(self, memory_id: str) -> MemoryEntry | None:
        """The entry with this id, or ``None``."""
        if "\x00" in memory_id:  # PostgreSQL text cannot hold it, so no id has it
            return None
        pool = await self._pool.get()
        row = await pool.fetchrow(f"SELECT {_COLUMNS} FROM {self._name} WHERE id = $1", memory_id)
        return None if row is None else _entry(row)

    @reachable(postgres_lost, "memory store")
    async def entries(
        self, *, memory_type: MemoryType | None = None, limit: int | None = None
    ) -> list[MemoryEntry]:
        """Entries, newest first."""
        sql = f"SELECT {_COLUMNS} FROM {self._name}"
        args: list[object] = []
        if memory_type is not None:
            sql += " WHERE memory_type = $1"
            args.append(check_type(memory_type))
        sql += " ORDER BY seq DESC"
        checked = check_limit(limit, error=MemoryRequestError)
        if checked is not None:
            sql += f" LIMIT {checked}"
        pool = await self._pool.get()
        return [_entry(row) for row in await pool.fetch(sql, *args)]

    @reachable(postgres_lost, "memory store")
    async def find(self, match: str, memory_type: MemoryType) -> list[MemoryEntry]:
        """Entries of ``memory_type`` containing ``match``, case-insensitively.

        Compared with ``str.casefold()`` as on the other backends ("STRASSE" finds
        "Straße"); SQL's ``lower()`` folds differently (and by the server's locale), so it
        cannot even narrow the rows down: every entry of the type is read.
        """
        pool = await self._pool.get()
        rows = await pool.fetch(
            f"SELECT {_COLUMNS} FROM {self._name} WHERE memory_type = $1 ORDER BY seq DESC",
            check_type(memory_type),
        )
        needle = match.casefold()
        return [e for e in map(_entry, rows) if needle in e.content.casefold()]

    @reachable(postgres_lost, "memory store")
    async def replace(
        self, target: MemoryTarget, content: str, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Change an entry's text (and metadata, unless ``None``); returns it as stored."""
        _refuse_nul(str(content), metadata)
        entry, changed = await replacement(self, target, content, metadata, self._clock)
        pool = await self._pool.get()
        status = await pool.execute(
            f"UPDATE {self._name} SET content = $2, metadata = $3::jsonb, updated_at = $4, "
            "words = to_tsvector('simple', $5) WHERE id = $1",
            changed.id,
            changed.content,
            dump_metadata(changed.metadata),
            changed.updated_at,
            indexed_text(changed.content),
        )
        if status != "UPDATE 1":
            raise vanished(entry)
        return changed

    @reachable(postgres_lost, "memory store")
    async def remove(self, target: MemoryTarget) -> MemoryEntry:
        """Delete an entry; returns it as it was."""
        entry = await self.resolve(target)
        pool = await self._pool.get()
        status = await pool.execute(f"DELETE FROM {self._name} WHERE id = $1", entry.id)
        if status != "DELETE 1":
            raise vanished(entry)
        return entry

    async def close(self) -> None:
        """Close the connection pool; the next call opens a new one."""
        await self._pool.close()


def _refuse_nul(content: str, metadata: Mapping[str, Any] | None) -> None:
    """PostgreSQL's text and jsonb cannot hold U+0000; refuse it before asyncpg does."""
    if "\x00" in content or (metadata is not None and _has_nul(metadata)):
        raise MemoryRequestError(
            "PostgreSQL cannot store the NUL character (U+0000) in memory text or metadata"
        )


def _has_nul(value: object) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, Mapping):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_nul(v) for v in value)
    return False


def _entry(row: asyncpg.Record, *, score: float | None = None) -> MemoryEntry:
    return MemoryEntry(
        id=row["id"],
        memory_type=row["memory_type"],
        content=row["content"],
        metadata=_json(row["metadata"]),
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        score=score,
    )


def _json(text: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads(text)
    return value
