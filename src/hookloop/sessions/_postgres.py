"""Sessions in PostgreSQL, for many worker processes on many machines.

Built on asyncpg (``pip install 'hookloop[postgres]'``) rather than psycopg: asyncio-native,
PostgreSQL's binary protocol, no libpq to install, automatic prepared statements. An append
is one round trip: a call of the ``hookloop_append`` function the schema creates, which is a
transaction of its own.

Concurrency: an append increments the session row's ``last_seq`` with an ``UPDATE``,
which locks the row until the transaction ends. A second writer's ``UPDATE`` of the same
session waits for that commit and then increments the new value, so two writers always get
distinct, contiguous sequence numbers; a writer that passed ``expected_seq`` instead finds
no row matching it and gets :class:`~hookloop.SessionConflictError`. Messages are
inserted, never updated: a primary key on ``(session_id, seq)`` makes an overwrite
impossible even if the counter were wrong.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Coroutine
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeAlias, TypeVar, cast

from .._approval_log import SIDE_PREFIX, SIDE_SUFFIX, is_approval_session
from .._errors import (
    CorruptSessionError,
    SessionConflictError,
    SessionExistsError,
    SessionNotFoundError,
    UsageError,
)
from .._extras import import_extra
from .._loopbound import LoopBound
from .._messages import Message
from .._stores._checks import check_int, check_text
from .._stores._pools import abandon_pool, close_pool
from .._stores._reach import cannot_reach, postgres_lost, without_password
from .._stores._schema import check_schema_version
from ._base import SessionStore, utc
from ._codec import MESSAGE_FORMAT, Row, decode_messages, decode_rows, encode_message
from ._consistency import RecordState
from ._postgres_sql import INFO_COLUMNS, SCHEMA, SCHEMA_LOCK
from ._types import SCHEMA_VERSION, Retention, SessionInfo, StoredMessage

if TYPE_CHECKING:
    import asyncpg

__all__ = ["PostgresSessionStore"]

_Conn: TypeAlias = "asyncpg.pool.PoolConnectionProxy[asyncpg.Record]"

logger = logging.getLogger(__name__)

_P = ParamSpec("_P")
_T = TypeVar("_T")


def _reconnecting(
    call: Callable[Concatenate[PostgresSessionStore, _P], Coroutine[Any, Any, _T]],
) -> Callable[Concatenate[PostgresSessionStore, _P], Coroutine[Any, Any, _T]]:
    """Run a store call again once when its connection was lost; then a :class:`StoreError`.

    A server restart (or a failover) leaves the pool's idle connections dead: the next call
    on one fails, and asyncpg replaces it. Every call is safe to run again: an append is
    idempotent by message id, the others read or are single transactions.
    """

    @functools.wraps(call)
    async def reconnecting(self: PostgresSessionStore, /, *a: _P.args, **k: _P.kwargs) -> _T:
        try:
            return await call(self, *a, **k)
        except Exception as exc:
            if not postgres_lost(exc):
                raise
            logger.info("%s: the connection was lost (%s); trying again", self, exc)
        try:
            return await call(self, *a, **k)
        except Exception as exc:
            if not postgres_lost(exc):
                raise
            raise cannot_reach("session store", self._where(), exc) from exc

    return reconnecting


class PostgresSessionStore(SessionStore):
    """Sessions in PostgreSQL: any number of worker processes can share them.

    The tables (``hookloop_meta``, ``hookloop_sessions``, ``hookloop_messages``) are created
    on first use in the first schema of the connection's ``search_path``; put
    ``?options=-c%20search_path%3Dmyschema`` in the DSN to use another schema.

    Durability is PostgreSQL's: a message is committed when :meth:`append` returns (with
    the server's default ``synchronous_commit = on``, also across a server crash).

    Args:
        dsn: A libpq connection string, e.g. ``postgresql://user@host:5432/db``.
        pool: An asyncpg pool of your own to use instead of ``dsn`` (the store does not
            close it). Use it to pass asyncpg options, e.g. ``statement_cache_size=0``
            behind PgBouncer in transaction mode.
        retention: What to keep; see :class:`~hookloop.sessions.Retention`.
        max_connections: The size of the store's own pool.
        clock: Returns the current time as POSIX seconds (tests pass a fake one).

    Raises:
        UsageError: Neither or both of ``dsn`` and ``pool``, or a bad argument.
    """

    def __init__(
        self,
        dsn: str | None = None,
        *,
        pool: asyncpg.Pool[asyncpg.Record] | None = None,
        retention: Retention | None = None,
        max_connections: int = 10,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(retention=retention)
        if (dsn is None) == (pool is None):
            raise UsageError("PostgresSessionStore needs exactly one of dsn= or pool=")
        if dsn is not None:
            check_text(dsn, "dsn", empty=False)
        self._max_connections = check_int(max_connections, "max_connections", minimum=1)
        self._dsn = dsn
        self._given = pool
        self._pools: LoopBound[asyncpg.Pool[asyncpg.Record]] = LoopBound(
            self._open, self._close_pool, self._abandon_pool
        )
        self._clock = clock

    def __repr__(self) -> str:
        return f"PostgresSessionStore({self._where()})"

    def _where(self) -> str:
        return "a pool" if self._dsn is None else without_password(self._dsn)

    async def _ensure(self) -> asyncpg.Pool[asyncpg.Record]:
        return await self._pools.get()

    async def _open(self) -> asyncpg.Pool[asyncpg.Record]:
        """The running loop's pool, its schema checked (and pruned); once per loop."""
        pool = self._given
        if pool is None:
            pool = await _asyncpg().create_pool(
                self._dsn, min_size=1, max_size=self._max_connections, reset=_keep_session
            )
        try:
            async with pool.acquire() as conn:
                await self._migrate(conn)
                if self.retention.prunes:
                    await self._prune(conn)
        except BaseException:
            await self._close_pool(pool)
            raise
        return pool

    async def _close_pool(self, pool: asyncpg.Pool[asyncpg.Record]) -> None:
        if pool is not self._given:
            await close_pool(pool)

    def _abandon_pool(self, pool: asyncpg.Pool[asyncpg.Record]) -> None:
        if pool is not self._given:
            abandon_pool(pool)

    async def _migrate(self, conn: _Conn) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS hookloop_meta (key text PRIMARY KEY, value text)"
            )
            found = await conn.fetchval(
                "SELECT value FROM hookloop_meta WHERE key = 'sessions_schema'"
            )
            if found is None:
                for statement in SCHEMA:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO hookloop_meta VALUES ('sessions_schema', $1)", str(SCHEMA_VERSION)
                )
                return
            check_schema_version(found, supported=SCHEMA_VERSION, store=self._where())
            # Migrations from older versions go here, one step per version.

    async def close(self) -> None:
        """Close the running loop's pool (a pool passed in stays open).

        Used from several event loops (threads), the store has a pool per loop; each is
        closed in its own loop, or dropped once that loop has ended.
        """
        await self._pools.close()

    def _now(self) -> datetime:
        return utc(self._clock())

    # --- appending ----------------------------------------------------------------------

    @_reconnecting
    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        data = encode_message(message)
        pool = await self._ensure()
        args = (
            session_id,
            message.id,
            MESSAGE_FORMAT,
            data,
            expected_seq,
            self._now(),
            # A side session's records (approvals, spend, verdicts) are kept whole.
            None if is_approval_session(session_id) else self.retention.max_messages,
        )
        for attempt in (1, 2):
            try:
                row = await pool.fetchrow(
                    "SELECT * FROM hookloop_append($1,$2,$3,$4,$5,$6,$7)", *args
                )
                break
            except _asyncpg().UniqueViolationError as exc:
                if exc.constraint_name == "hookloop_messages_id" and attempt == 1:
                    continue  # the same message appended concurrently: now it is a duplicate
                (await _record_state(pool, session_id)).check()
                raise CorruptSessionError(
                    session_id=session_id,
                    seq=None,
                    reason=f"its record's last_seq is behind the messages stored ({exc})",
                ) from None
            except _asyncpg().NumericValueOutOfRangeError:  # last_seq + 1 beyond bigint
                (await _record_state(pool, session_id)).check()
                raise
        assert row is not None
        status, seq = row[0], int(row[1])
        if status in ("ok", "duplicate"):
            return seq
        if status == "id_taken":
            raise SessionConflictError(
                f"session {session_id!r} already holds another message with id "
                f"{message.id!r} (seq {seq}); nothing was written",
                session_id=session_id,
            )
        # A record that disagrees with the log refuses every append: say so, not "conflict".
        (await _record_state(pool, session_id)).check()
        raise SessionConflictError(
            f"session {session_id!r} is at seq {seq}, not at the expected {expected_seq}: "
            "another writer appended first; nothing was written",
            session_id=session_id,
            expected_seq=expected_seq,
            actual_seq=seq,
        )

    # --- reading ------------------------------------------------------------------------

    async def _read_records(
        self, session_id: str, unreadable: list[CorruptSessionError] | None
    ) -> list[StoredMessage]:
        return decode_rows(session_id, await self._rows(session_id), unreadable)

    async def _read_messages(self, session_id: str) -> list[Message]:
        return decode_messages(session_id, await self._rows(session_id))

    @_reconnecting
    async def _rows(self, session_id: str) -> list[Row]:
        pool = await self._ensure()
        rows = await pool.fetch(
            "SELECT seq, message_id, format, data FROM hookloop_messages "
            "WHERE session_id = $1 ORDER BY seq",
            session_id,
        )
        # asyncpg's records index and unpack like the rows' tuples: no copy of 10k rows.
        return cast("list[Row]", rows)

    @_reconnecting
    async def _read_info(self, session_id: str) -> SessionInfo | None:
        pool = await self._ensure()
        row = await pool.fetchrow(
            f"SELECT {INFO_COLUMNS} FROM hookloop_sessions WHERE session_id = $1", session_id
        )
        return None if row is None else _info(row)

    @_reconnecting
    async def _read_infos(self, limit: int | None) -> list[SessionInfo]:
        pool = await self._ensure()
        # Approval side sessions are not conversations (_approval_log.is_approval_session).
        rows = await pool.fetch(
            f"SELECT {INFO_COLUMNS} FROM hookloop_sessions WHERE session_id !~ $2 "
            "ORDER BY updated_at DESC, session_id LIMIT $1",
            limit,
            f"({SIDE_SUFFIX}$)|(^{SIDE_PREFIX}[0-9a-f]{{64}}$)",
        )
        out: list[SessionInfo] = []
        for row in rows:
            try:
                out.append(_info(row))
            except CorruptSessionError as exc:
                logger.warning("%s; left out of the list", exc)
        return out

    # --- sessions as a whole ------------------------------------------------------------

    @_reconnecting
    async def _create_session(self, session_id: str, parent_id: str | None) -> SessionInfo:
        pool = await self._ensure()
        row = await pool.fetchrow(
            "INSERT INTO hookloop_sessions VALUES ($1, $2, $3, $3, 0, 0) "
            f"ON CONFLICT (session_id) DO NOTHING RETURNING {INFO_COLUMNS}",
            session_id,
            parent_id,
            self._now(),
        )
        if row is None:
            raise SessionExistsError(session_id)
        return _info(row)

    @_reconnecting
    async def _fork_session(self, session_id: str, new_id: str) -> SessionInfo:
        pool = await self._ensure()
        async with pool.acquire() as conn, conn.transaction():
            # FOR SHARE: appends to the source wait until the copy is made.
            source = await conn.fetchrow(
                "SELECT message_count, last_seq FROM hookloop_sessions "
                "WHERE session_id = $1 FOR SHARE",
                session_id,
            )
            if source is None:
                raise SessionNotFoundError(session_id)
            row = await conn.fetchrow(
                "INSERT INTO hookloop_sessions VALUES ($1, $2, $3, $3, $4, $5) "
                f"ON CONFLICT (session_id) DO NOTHING RETURNING {INFO_COLUMNS}",
                new_id,
                session_id,
                self._now(),
                source[0],
                source[1],
            )
            if row is None:
                raise SessionExistsError(new_id)
            await conn.execute(
                "INSERT INTO hookloop_messages "
                "SELECT $1, seq, message_id, format, data FROM hookloop_messages "
                "WHERE session_id = $2",
                new_id,
                session_id,
            )
            return _info(row)

    @_reconnecting
    async def _delete_session(self, session_id: str) -> bool:
        pool = await self._ensure()
        async with pool.acquire() as conn, conn.transaction():
            return await _delete_rows(conn, session_id)

    @_reconnecting
    async def _repair_session(self, session_id: str) -> SessionInfo:
        pool = await self._ensure()
        async with pool.acquire() as conn, conn.transaction():
            # Appends wait for this lock (their UPDATE), so the log stays as it is read here.
            await conn.execute(
                "SELECT 1 FROM hookloop_sessions WHERE session_id = $1 FOR UPDATE", session_id
            )
            state = await _record_state(conn, session_id)
            if not state.has_record and not state.count:
                raise SessionNotFoundError(session_id)
            last_seq = state.repaired_last_seq()
            now = self._now()
            await conn.execute(
                "INSERT INTO hookloop_sessions VALUES ($1, NULL, $2, $2, $3, $4) "
                "ON CONFLICT (session_id) DO UPDATE SET message_count = EXCLUDED.message_count, "
                "last_seq = EXCLUDED.last_seq",
                session_id,
                now,
                state.count,
                last_seq,
            )
            row = await conn.fetchrow(
                f"SELECT {INFO_COLUMNS} FROM hookloop_sessions WHERE session_id = $1", session_id
            )
        assert row is not None
        return _info(row)

    @_reconnecting
    async def prune(self) -> int:
        """Apply ``max_sessions`` and ``max_age`` now; see :meth:`SessionStore.prune`."""
        pool = await self._ensure()
        async with pool.acquire() as conn:
            return await self._prune(conn)

    async def _prune(self, conn: _Conn) -> int:
        retention = self.retention
        if not retention.prunes:
            return 0
        async with conn.transaction():
            # Each chosen session with its (updated_at, last_seq) when it was chosen.
            doomed: dict[str, tuple[object, object]] = {}
            if retention.max_age is not None:
                cutoff = utc(self._clock() - retention.max_age.total_seconds())
                rows = await conn.fetch(
                    "SELECT session_id, updated_at, last_seq FROM hookloop_sessions "
                    "WHERE updated_at < $1",
                    cutoff,
                )
                doomed.update((r[0], (r[1], r[2])) for r in rows)
            if retention.max_sessions is not None:
                rows = await conn.fetch(
                    "SELECT session_id, updated_at, last_seq FROM hookloop_sessions "
                    "ORDER BY updated_at DESC, session_id OFFSET $1",
                    retention.max_sessions,
                )
                doomed.update((r[0], (r[1], r[2])) for r in rows)
            deleted = 0
            for session_id in sorted(doomed):  # one lock order for concurrent prunes
                deleted += await _delete_unchanged(conn, session_id, doomed[session_id])
        return deleted


async def _delete_unchanged(conn: _Conn, session_id: str, seen: tuple[object, object]) -> bool:
    """Delete the session unless it changed since it was chosen (``seen``: updated_at, last_seq).

    An append may commit between the choice and the delete; the session is then the
    newest, and deleting it would delete the message just committed. The row lock (FOR
    UPDATE) keeps appends out until the transaction ends, so the re-check holds.
    """
    row = await conn.fetchrow(
        "SELECT updated_at, last_seq FROM hookloop_sessions WHERE session_id = $1 FOR UPDATE",
        session_id,
    )
    if row is None or (row[0], row[1]) != seen:
        return False
    return await _delete_rows(conn, session_id)


async def _delete_rows(conn: _Conn, session_id: str) -> bool:
    # The session row first: an append locks it (its UPDATE) until it commits, so this waits
    # for a running append and then sees its message in the DELETE below; an append that
    # comes later waits for this transaction and then finds no session. Deleting the
    # messages first would miss the message of an append committing in between, leaving it
    # without a session.
    status: str = await conn.execute(
        "DELETE FROM hookloop_sessions WHERE session_id = $1", session_id
    )
    await conn.execute("DELETE FROM hookloop_messages WHERE session_id = $1", session_id)
    return status != "DELETE 0"


async def _record_state(conn: _Conn | asyncpg.Pool, session_id: str) -> RecordState:
    """The session's record against its log, read in one statement (one snapshot)."""
    row = await conn.fetchrow(
        "SELECT (SELECT last_seq FROM hookloop_sessions WHERE session_id = $1), "
        "EXISTS (SELECT 1 FROM hookloop_sessions WHERE session_id = $1), "
        "min(seq), max(seq), count(*) FROM hookloop_messages WHERE session_id = $1",
        session_id,
    )
    assert row is not None
    last_seq, has_record, first, top, count = tuple(row)
    return RecordState(session_id, bool(has_record), last_seq, first, top, int(count))


def _asyncpg() -> ModuleType:
    """The driver, imported on connecting, so the store loads without asyncpg."""
    return import_extra("asyncpg", extra="postgres", by="PostgresSessionStore")


def _info(row: asyncpg.Record) -> SessionInfo:
    session_id, parent_id, created_at, updated_at, count, last_seq = tuple(row)
    return SessionInfo(
        session_id=session_id,
        parent_id=parent_id,
        created_at=created_at,
        updated_at=updated_at,
        message_count=int(count),
        last_seq=int(last_seq),
    )


async def _keep_session(conn: asyncpg.Connection[asyncpg.Record]) -> None:
    """The pool's reset: nothing to undo, so no round trip when a connection goes back.

    The store never changes a connection's session state (no SET, LISTEN or session-level
    advisory lock); asyncpg still rolls back a transaction left open, before this runs.
    """
