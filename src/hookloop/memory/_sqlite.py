"""The embedded default memory store: one SQLite file, searched with FTS5.

Only the standard library is needed. Every call runs on the store's own thread (the one
the session store uses too, :class:`hookloop._stores._sqlite_thread.SQLiteThread`), so a slow disk
never blocks the event loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from typing import Any, Final

from .._errors import MemoryRequestError
from .._stores._checks import check_identifier, check_limit
from .._stores._sqlite_file import use_wal
from .._stores._sqlite_thread import SQLiteThread
from ._base import (
    MemoryEntry,
    MemoryStore,
    MemoryTarget,
    MemoryType,
    check_type,
    dump_metadata,
    finite,
    from_micros,
    new_entry,
    replacement,
    search_terms,
    to_micros,
    utc_now,
    vanished,
)
from ._text import indexed_text

__all__ = ["SQLiteMemoryStore"]

_BUSY_TIMEOUT: Final = 30.0  # seconds to wait for another connection's write lock
_COLUMNS: Final = "id, memory_type, content, metadata, created_us, updated_us"


class SQLiteMemoryStore(MemoryStore):
    """Memory in a SQLite file (or ``":memory:"``), with FTS5 full-text search.

    The file is created on first use; several stores (and processes) may share it, each
    with its own ``table``. Files use write-ahead logging, so readers never wait for a
    writer. Search ranks with BM25 over the words of each entry. A damaged file (truncated,
    or a header or page overwritten) makes each call raise
    :class:`~hookloop.CorruptStoreError` naming it.

    Args:
        path: The database file, or ``":memory:"`` for a store that lives as long as the
            object.
        table: The table to use (and ``<table>_fts`` for the index): letters, digits and
            ``_``.
        clock: Returns the current time (UTC); injectable for tests.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        table: str = "hookloop_memory",
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.path = os.fspath(path)
        self.table = check_identifier(table, "table")
        self._clock = clock
        self._thread = SQLiteThread(self.path, self._connect, name="hookloop-sqlite-memory")

    def __repr__(self) -> str:
        return f"SQLiteMemoryStore({self.path!r}, table={self.table!r})"

    # -- the MemoryStore API -----------------------------------------------------------------

    async def add(
        self, content: str, memory_type: MemoryType, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Store a new entry and return it."""
        now = self._clock()
        entry = new_entry(content, memory_type, metadata, now)
        await self._thread.run(self._insert, entry)
        return entry

    async def search(
        self, query: str, *, memory_type: MemoryType | None = None, limit: int = 10
    ) -> list[MemoryEntry]:
        """The best BM25 matches of ``query``, best first."""
        terms = search_terms(query, memory_type, limit)
        if not terms:
            return []
        return await self._thread.run(self._search, terms, memory_type, limit)

    async def get(self, memory_id: str) -> MemoryEntry | None:
        """The entry with this id, or ``None``."""
        rows = await self._thread.run(self._select, "id = ?", (memory_id,), None)
        return rows[0] if rows else None

    async def entries(
        self, *, memory_type: MemoryType | None = None, limit: int | None = None
    ) -> list[MemoryEntry]:
        """Entries, newest first."""
        check_limit(limit, error=MemoryRequestError)
        if memory_type is None:
            return await self._thread.run(self._select, "1", (), limit)
        return await self._thread.run(
            self._select, "memory_type = ?", (check_type(memory_type),), limit
        )

    async def find(self, match: str, memory_type: MemoryType) -> list[MemoryEntry]:
        """Entries of ``memory_type`` containing ``match``, case-insensitively."""
        where = "memory_type = ? AND hookloop_contains(content, ?)"
        return await self._thread.run(self._select, where, (check_type(memory_type), match), None)

    async def replace(
        self, target: MemoryTarget, content: str, metadata: Mapping[str, Any] | None = None
    ) -> MemoryEntry:
        """Change an entry's text (and metadata, unless ``None``); returns it as stored."""
        entry, changed = await replacement(self, target, content, metadata, self._clock)
        if not await self._thread.run(self._update, changed):
            raise vanished(entry)
        return changed

    async def remove(self, target: MemoryTarget) -> MemoryEntry:
        """Delete an entry; returns it as it was."""
        entry = await self.resolve(target)
        if not await self._thread.run(self._delete, entry.id):
            raise vanished(entry)
        return entry

    async def close(self) -> None:
        """Close the connection; the next call opens it again."""
        await self._thread.close()

    # -- on the store's thread ---------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            # As long as the session store waits: on a busy machine another process's
            # write (or its switch to WAL) can hold the file for seconds.
            conn.execute(f"PRAGMA busy_timeout = {int(_BUSY_TIMEOUT * 1000)}")
            if self.path != ":memory:" and not self.path.startswith("file::memory:"):
                use_wal(conn, timeout=_BUSY_TIMEOUT)
            conn.create_function("hookloop_contains", 2, _contains, deterministic=True)
            table = self.table
            with _transaction(conn):
                conn.execute(
                    f'CREATE TABLE IF NOT EXISTS "{table}" ('
                    "seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
                    "memory_type TEXT NOT NULL, content TEXT NOT NULL, metadata TEXT NOT NULL, "
                    "created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL)"
                )
                conn.execute(
                    f'CREATE INDEX IF NOT EXISTS "{table}_type" ON "{table}" (memory_type, seq)'
                )
                conn.execute(
                    f'CREATE VIRTUAL TABLE IF NOT EXISTS "{table}_fts" USING fts5('
                    "words, tokenize = 'unicode61 remove_diacritics 0')"
                )
        except sqlite3.DatabaseError as exc:
            conn.close()
            if "fts5" in str(exc):
                exc.add_note("this Python's sqlite3 was built without FTS5, which the store needs")
            raise
        return conn

    def _insert(self, conn: sqlite3.Connection, entry: MemoryEntry) -> None:
        with _transaction(conn):
            cursor = conn.execute(
                f'INSERT INTO "{self.table}" ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)',
                (
                    entry.id,
                    entry.memory_type,
                    entry.content,
                    dump_metadata(entry.metadata),
                    to_micros(entry.created_at),
                    to_micros(entry.updated_at),
                ),
            )
            conn.execute(
                f'INSERT INTO "{self.table}_fts" (rowid, words) VALUES (?, ?)',
                (cursor.lastrowid, indexed_text(entry.content)),
            )

    def _update(self, conn: sqlite3.Connection, entry: MemoryEntry) -> bool:
        with _transaction(conn):
            row = conn.execute(
                f'SELECT seq FROM "{self.table}" WHERE id = ?', (entry.id,)
            ).fetchone()
            if row is None:
                return False
            conn.execute(
                f'UPDATE "{self.table}" SET content = ?, metadata = ?, updated_us = ? '
                "WHERE seq = ?",
                (entry.content, dump_metadata(entry.metadata), to_micros(entry.updated_at), row[0]),
            )
            conn.execute(
                f'UPDATE "{self.table}_fts" SET words = ? WHERE rowid = ?',
                (indexed_text(entry.content), row[0]),
            )
        return True

    def _delete(self, conn: sqlite3.Connection, memory_id: str) -> bool:
        with _transaction(conn):
            row = conn.execute(
                f'SELECT seq FROM "{self.table}" WHERE id = ?', (memory_id,)
            ).fetchone()
            if row is None:
                return False
            conn.execute(f'DELETE FROM "{self.table}" WHERE seq = ?', (row[0],))
            conn.execute(f'DELETE FROM "{self.table}_fts" WHERE rowid = ?', (row[0],))
        return True

    def _select(
        self, conn: sqlite3.Connection, where: str, args: tuple[object, ...], limit: int | None
    ) -> list[MemoryEntry]:
        sql = f'SELECT {_COLUMNS} FROM "{self.table}" WHERE {where} ORDER BY seq DESC'
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [_entry(row) for row in conn.execute(sql, args)]

    def _search(
        self,
        conn: sqlite3.Connection,
        terms: list[str],
        memory_type: MemoryType | None,
        limit: int,
    ) -> list[MemoryEntry]:
        table = self.table
        # Each word quoted: a word is letters and digits only, so it cannot break the quotes.
        expression = " OR ".join(f'"{term}"' for term in terms)
        sql = (
            f"SELECT m.id, m.memory_type, m.content, m.metadata, m.created_us, m.updated_us, "
            f'bm25("{table}_fts") AS rank FROM "{table}_fts" '
            f'JOIN "{table}" AS m ON m.seq = "{table}_fts".rowid '
            f'WHERE "{table}_fts" MATCH ?'
        )
        args: list[object] = [expression]
        if memory_type is not None:
            sql += " AND m.memory_type = ?"
            args.append(memory_type)
        sql += " ORDER BY rank, m.seq DESC LIMIT ?"
        args.append(limit)
        # FTS5's bm25() is lower-is-better; scores here are higher-is-better.
        return [_entry(row[:6], score=finite(-row[6])) for row in conn.execute(sql, args)]


@contextlib.contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """Run the block as one write transaction, rolled back if it raises.

    The connection is in autocommit mode (``isolation_level=None``), where ``with conn:``
    opens none: an entry's row and its index row would commit apart.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:  # SQLite may have rolled back already (e.g. a full disk)
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _entry(row: tuple[Any, ...], *, score: float | None = None) -> MemoryEntry:
    memory_id, memory_type, content, metadata, created_us, updated_us = row
    return MemoryEntry(
        id=memory_id,
        memory_type=memory_type,
        content=content,
        metadata=json.loads(metadata),
        created_at=from_micros(created_us),
        updated_at=from_micros(updated_us),
        score=score,
    )


def _contains(content: str | None, match: str | None) -> bool:
    return bool(
        content is not None and match is not None and match.casefold() in content.casefold()
    )
