"""Sessions in a SQLite file: the default store, with nothing to install.

The standard library's ``sqlite3`` blocks, so every database call runs on one thread of the
store's own: the event loop never waits on the disk or on another process's lock, and the
calls are serialised, as one connection needs. The file is in WAL mode; each append is one
``BEGIN IMMEDIATE`` ... ``COMMIT`` transaction, so writers in several processes queue for
the write lock (up to ``busy_timeout``) and never lose or overwrite a message.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Literal, TypeVar

from ..errors import (
    CorruptSessionError,
    SessionConflictError,
    SessionExistsError,
    SessionNotFoundError,
    SessionSchemaError,
    UsageError,
)
from ..messages import Message
from ._base import SessionStore, check_expected_seq, check_limit, check_session_id, utc
from ._codec import MESSAGE_FORMAT, Row, decode_rows, encode_message
from ._thread import Worker
from ._types import SCHEMA_VERSION, Retention, SessionInfo, StoredMessage

__all__ = ["SqliteSessionStore"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_SCHEMA = """
CREATE TABLE hookloop_sessions (
    session_id TEXT PRIMARY KEY,
    parent_id TEXT,
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    message_count INTEGER NOT NULL,
    last_seq INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX hookloop_sessions_updated ON hookloop_sessions (updated_at);
CREATE TABLE hookloop_messages (
    session_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    format INTEGER NOT NULL,
    data TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (session_id, seq)
) WITHOUT ROWID;
CREATE UNIQUE INDEX hookloop_messages_id ON hookloop_messages (session_id, message_id);
CREATE TRIGGER hookloop_message_added AFTER INSERT ON hookloop_messages BEGIN
    UPDATE hookloop_sessions SET
        last_seq = max(last_seq, NEW.seq),
        message_count = message_count + 1,
        updated_at = max(updated_at, NEW.created_at)
    WHERE session_id = NEW.session_id;
END;
CREATE TRIGGER hookloop_message_removed AFTER DELETE ON hookloop_messages BEGIN
    UPDATE hookloop_sessions SET message_count = message_count - 1
    WHERE session_id = OLD.session_id;
END;
"""

# An append is this one statement, so one implicit transaction: it takes the next seq from
# the session's record, and the trigger above moves the record on. No row comes back for a
# session that does not exist yet or is not at ?6 (expected_seq).
_APPEND = (
    "INSERT INTO hookloop_messages "
    "SELECT session_id, last_seq + 1, ?2, ?3, ?4, ?5 FROM hookloop_sessions "
    "WHERE session_id = ?1 AND (?6 IS NULL OR last_seq = ?6) RETURNING seq"
)
_AppendArgs = tuple[str, str, int, str, float, int | None]

_INFO_COLUMNS = "session_id, parent_id, created_at, updated_at, message_count, last_seq"


class SqliteSessionStore(SessionStore):
    """Sessions in a SQLite file: the default store, standard library only.

    Good for one process, and for a few processes on one machine sharing the file (they
    take turns for the write lock). Not for a network file system.

    Durability: with ``synchronous="normal"`` (the default) a committed message survives the
    process being killed at any point; after a power failure or an OS crash the last
    transactions before it may be missing, but the file is never corrupted (SQLite's WAL
    guarantee). ``synchronous="full"`` also survives power loss, at the price of an
    ``fsync`` per append (a few hundred appends/s on a typical disk instead of thousands).

    Args:
        path: The database file; it is created if missing (its directory must exist).
        retention: What to keep; see :class:`~hookloop.sessions.Retention`.
        synchronous: ``"normal"`` or ``"full"``, as described above.
        busy_timeout: Seconds to wait for another process's write lock before an append
            fails with ``sqlite3.OperationalError``.
        clock: Returns the current time as POSIX seconds (tests pass a fake one).

    Raises:
        UsageError: An argument of the wrong type or value.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        retention: Retention | None = None,
        synchronous: Literal["normal", "full"] = "normal",
        busy_timeout: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(retention=retention)
        if not isinstance(path, (str, os.PathLike)):
            raise UsageError(f"path must be a str or a path, got {type(path).__name__}")
        if synchronous not in ("normal", "full"):
            raise UsageError(f"synchronous must be 'normal' or 'full', got {synchronous!r}")
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, (int, float)):
            raise UsageError(f"busy_timeout must be a number of seconds, got {busy_timeout!r}")
        self.path = Path(path)
        self._synchronous = synchronous
        self._busy_ms = max(0, int(busy_timeout * 1000))
        self._clock = clock
        self._worker: Worker | None = None
        self._conn: sqlite3.Connection | None = None  # touched on the worker thread only

    def __repr__(self) -> str:
        return f"SqliteSessionStore({str(self.path)!r})"

    # --- the thread ---------------------------------------------------------------------

    async def _run(self, fn: Callable[..., _T], *args: object) -> _T:
        worker = self._worker
        if worker is None:
            worker = self._worker = Worker("hookloop-sqlite")
        return await worker.run(partial(self._call, fn, args))

    def _call(self, fn: Callable[..., _T], args: tuple[object, ...]) -> _T:
        if self._conn is None:
            self._conn = self._connect()
        return fn(self._conn, *args)

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; each method says BEGIN itself.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            self._migrate(conn)
            if self.retention.prunes:
                self._prune(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        with _transaction(conn):
            conn.execute(
                "CREATE TABLE IF NOT EXISTS hookloop_meta (key TEXT PRIMARY KEY, value TEXT)"
            )
            row = conn.execute(
                "SELECT value FROM hookloop_meta WHERE key = 'sessions_schema'"
            ).fetchone()
            if row is None:
                # Statement by statement: executescript() would commit the transaction.
                for statement in _statements(_SCHEMA):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO hookloop_meta VALUES ('sessions_schema', ?)", (SCHEMA_VERSION,)
                )
                return
            found = row[0]
            try:
                version = int(found)
            except (TypeError, ValueError):
                raise SessionSchemaError(
                    store=str(self.path), found=str(found), supported=SCHEMA_VERSION
                ) from None
            if version > SCHEMA_VERSION or version < 1:
                raise SessionSchemaError(
                    store=str(self.path), found=version, supported=SCHEMA_VERSION
                )
            # Migrations from older versions go here, one step per version.

    async def close(self) -> None:
        """Close the connection and end the store's thread."""
        worker, self._worker = self._worker, None
        if worker is None:
            return

        def close() -> None:
            conn, self._conn = self._conn, None
            if conn is not None:
                conn.close()

        try:
            await worker.run(close)
        finally:
            worker.stop()

    # --- appending ----------------------------------------------------------------------

    async def append(
        self, session_id: str, message: Message, *, expected_seq: int | None = None
    ) -> int:
        """Append ``message`` and commit it; see :meth:`SessionStore.append`."""
        check_session_id(session_id)
        check_expected_seq(expected_seq)
        data = encode_message(message)
        return await self._run(self._append, session_id, message.id, data, expected_seq)

    def _append(
        self,
        conn: sqlite3.Connection,
        session_id: str,
        message_id: str,
        data: str,
        expected_seq: int | None,
    ) -> int:
        args = (session_id, message_id, MESSAGE_FORMAT, data, self._clock(), expected_seq)
        try:
            try:
                seq = _insert(conn, args)  # one statement: its own transaction
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                seq = None  # another process wrote first: queue for the lock below
            if seq is None:
                seq = self._append_slowly(conn, args)
        except _Done as done:  # the message was there already; nothing was written
            return done.seq
        limit = self.retention.max_messages
        if limit is not None and seq > limit:
            conn.execute(
                "DELETE FROM hookloop_messages WHERE session_id = ? AND seq <= ?",
                (session_id, seq - limit),
            )
        return seq

    def _append_slowly(self, conn: sqlite3.Connection, args: _AppendArgs) -> int:
        """A new session, a conflict, a repeated message, or a busy database."""
        session_id, message_id, _, data, now, expected_seq = args
        with _transaction(conn):  # holds the write lock: nothing changes under us
            seq = _insert(conn, args)
            if seq is not None:
                return seq
            found = _existing(conn, session_id, message_id, data)
            if found is not None:
                raise _Done(found)
            row = conn.execute(
                "SELECT last_seq FROM hookloop_sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None and not expected_seq:
                conn.execute(
                    "INSERT INTO hookloop_sessions VALUES (?, NULL, ?, ?, 0, 0)",
                    (session_id, now, now),
                )
                seq = _insert(conn, args)
                if seq is not None:
                    return seq
            actual = 0 if row is None else _int(row[0], session_id, "last_seq")
            raise SessionConflictError(
                f"session {session_id!r} is at seq {actual}, not at the expected "
                f"{expected_seq}: another writer appended first; nothing was written",
                session_id=session_id,
                expected_seq=expected_seq,
                actual_seq=actual,
            )

    # --- reading ------------------------------------------------------------------------

    async def records(self, session_id: str) -> list[StoredMessage]:
        """Every message of the session, oldest first; see :meth:`SessionStore.records`."""
        check_session_id(session_id)
        rows = await self._run(_select_messages, session_id)
        return decode_rows(session_id, rows)

    async def info(self, session_id: str) -> SessionInfo | None:
        """The session's metadata, or ``None``; see :meth:`SessionStore.info`."""
        check_session_id(session_id)
        row = await self._run(_select_info, session_id)
        return None if row is None else _info(row)

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        """The sessions, most recently updated first; see :meth:`SessionStore.list_sessions`."""
        check_limit(limit)
        rows = await self._run(_select_infos, -1 if limit is None else limit)
        out: list[SessionInfo] = []
        for row in rows:
            try:
                out.append(_info(row))
            except CorruptSessionError as exc:
                logger.warning("%s; left out of the list", exc)
        return out

    # --- sessions as a whole ------------------------------------------------------------

    async def create(self, session_id: str, *, parent_id: str | None = None) -> SessionInfo:
        """Create an empty session; see :meth:`SessionStore.create`."""
        check_session_id(session_id)
        if parent_id is not None:
            check_session_id(parent_id, "parent_id")
        return _info(await self._run(self._create, session_id, parent_id))

    def _create(self, conn: sqlite3.Connection, session_id: str, parent_id: str | None) -> Row6:
        now = self._clock()
        with _transaction(conn):
            try:
                conn.execute(
                    "INSERT INTO hookloop_sessions VALUES (?, ?, ?, ?, 0, 0)",
                    (session_id, parent_id, now, now),
                )
            except sqlite3.IntegrityError:
                raise SessionExistsError(session_id) from None
            return (session_id, parent_id, now, now, 0, 0)

    async def fork(self, session_id: str, new_id: str) -> SessionInfo:
        """Copy a session under a new id; see :meth:`SessionStore.fork`."""
        check_session_id(session_id)
        check_session_id(new_id, "new_id")
        return _info(await self._run(self._fork, session_id, new_id))

    def _fork(self, conn: sqlite3.Connection, session_id: str, new_id: str) -> Row6:
        now = self._clock()
        with _transaction(conn):
            source = _select_info(conn, session_id)
            if source is None:
                raise SessionNotFoundError(session_id)
            if _select_info(conn, new_id) is not None:
                raise SessionExistsError(new_id)
            last_seq = source[5]
            conn.execute(
                "INSERT INTO hookloop_sessions VALUES (?, ?, ?, ?, 0, 0)",
                (new_id, session_id, now, now),
            )
            conn.execute(  # the trigger counts them
                "INSERT INTO hookloop_messages SELECT ?, seq, message_id, format, data, "
                "created_at FROM hookloop_messages WHERE session_id = ?",
                (new_id, session_id),
            )
            conn.execute(
                "UPDATE hookloop_sessions SET last_seq = ?, updated_at = ? WHERE session_id = ?",
                (last_seq, now, new_id),
            )
            row = _select_info(conn, new_id)
            assert row is not None
            return row

    async def delete(self, session_id: str) -> bool:
        """Delete the session and its messages; see :meth:`SessionStore.delete`."""
        check_session_id(session_id)
        return await self._run(_delete, session_id)

    async def prune(self) -> int:
        """Apply ``max_sessions`` and ``max_age`` now; see :meth:`SessionStore.prune`."""
        return await self._run(self._prune)

    def _prune(self, conn: sqlite3.Connection) -> int:
        retention = self.retention
        if not retention.prunes:
            return 0
        with _transaction(conn):
            doomed: set[str] = set()
            if retention.max_age is not None:
                cutoff = self._clock() - retention.max_age.total_seconds()
                doomed.update(
                    r[0]
                    for r in conn.execute(
                        "SELECT session_id FROM hookloop_sessions WHERE updated_at < ?", (cutoff,)
                    )
                )
            if retention.max_sessions is not None:
                doomed.update(
                    r[0]
                    for r in conn.execute(
                        "SELECT session_id FROM hookloop_sessions "
                        "ORDER BY updated_at DESC, session_id LIMIT -1 OFFSET ?",
                        (retention.max_sessions,),
                    )
                )
            for session_id in doomed:
                _delete_rows(conn, session_id)
        return len(doomed)


# --- helpers run on the store's thread ----------------------------------------------------

Row6 = tuple[object, object, object, object, object, object]


class _Done(Exception):
    """Ends an append's transaction without writing; carries the seq to return."""

    def __init__(self, seq: int) -> None:
        super().__init__(seq)
        self.seq = seq


@contextmanager
def _transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _insert(conn: sqlite3.Connection, args: _AppendArgs) -> int | None:
    """Run the append statement; its seq, or ``None`` when it matched no session record."""
    session_id, message_id, _, data, _, _ = args
    try:
        rows = conn.execute(_APPEND, args).fetchall()  # to the end: that ends the statement
    except sqlite3.IntegrityError:
        found = _existing(conn, session_id, message_id, data)
        if found is not None:
            raise _Done(found) from None
        raise CorruptSessionError(
            session_id=session_id,
            seq=None,
            reason="its record's last_seq is behind the messages stored",
        ) from None
    return _int(rows[0][0], session_id, "last_seq") if rows else None


def _statements(script: str) -> list[str]:
    """The statements of a script whose trigger bodies hold ``;`` too."""
    out: list[str] = []
    current = ""
    for piece in script.split(";"):
        current += piece + ";"
        if sqlite3.complete_statement(current):
            if current.strip(" \n;"):
                out.append(current.strip())
            current = ""
    return out


def _existing(conn: sqlite3.Connection, session_id: str, message_id: str, data: str) -> int | None:
    """The seq of this very message if the session has it; a conflict if it differs."""
    row = conn.execute(
        "SELECT seq, data FROM hookloop_messages WHERE session_id = ? AND message_id = ?",
        (session_id, message_id),
    ).fetchone()
    if row is None:
        return None
    if row[1] != data:
        raise SessionConflictError(
            f"session {session_id!r} already holds another message with id {message_id!r} "
            f"(seq {row[0]}); nothing was written",
            session_id=session_id,
        )
    return _int(row[0], session_id, "seq")


def _select_messages(conn: sqlite3.Connection, session_id: str) -> list[Row]:
    return conn.execute(
        "SELECT seq, message_id, format, data FROM hookloop_messages "
        "WHERE session_id = ? ORDER BY seq",
        (session_id,),
    ).fetchall()


def _select_info(conn: sqlite3.Connection, session_id: str) -> Row6 | None:
    row: Row6 | None = conn.execute(
        f"SELECT {_INFO_COLUMNS} FROM hookloop_sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return row


def _select_infos(conn: sqlite3.Connection, limit: int) -> list[Row6]:
    return conn.execute(
        f"SELECT {_INFO_COLUMNS} FROM hookloop_sessions "
        "ORDER BY updated_at DESC, session_id LIMIT ?",
        (limit,),
    ).fetchall()


def _delete(conn: sqlite3.Connection, session_id: str) -> bool:
    with _transaction(conn):
        return _delete_rows(conn, session_id)


def _delete_rows(conn: sqlite3.Connection, session_id: str) -> bool:
    # The record first, so that the trigger has no counter to update per message.
    found = conn.execute(
        "DELETE FROM hookloop_sessions WHERE session_id = ?", (session_id,)
    ).rowcount
    conn.execute("DELETE FROM hookloop_messages WHERE session_id = ?", (session_id,))
    return found > 0


def _int(value: object, session_id: str, column: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise CorruptSessionError(
        session_id=session_id, seq=None, reason=f"{column} is {value!r}, not an integer"
    )


def _info(row: Row6) -> SessionInfo:
    session_id, parent_id, created_at, updated_at, count, last_seq = row
    sid = str(session_id)
    if parent_id is not None and not isinstance(parent_id, str):
        raise CorruptSessionError(session_id=sid, seq=None, reason=f"parent_id is {parent_id!r}")
    try:
        created = utc(float(created_at))  # type: ignore[arg-type]
        updated = utc(float(updated_at))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError, OSError):
        raise CorruptSessionError(
            session_id=sid, seq=None, reason=f"timestamps {created_at!r}, {updated_at!r}"
        ) from None
    return SessionInfo(
        session_id=sid,
        parent_id=parent_id,
        created_at=created,
        updated_at=updated,
        message_count=_int(count, sid, "message_count"),
        last_seq=_int(last_seq, sid, "last_seq"),
    )
