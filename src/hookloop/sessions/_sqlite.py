"""Sessions in a SQLite file: the default store, with nothing to install.

The file is in WAL mode. An append is one ``INSERT ... SELECT`` statement, so one
transaction: it takes the next seq from the session's record and a trigger moves the record
on. The common append runs right on the event loop's thread, on a connection that never
waits (see ``SQLiteSessionStore._append_now``); everything that may wait (opening, reads,
a lock held by another process, a new session, checkpoints) runs on one thread of the
store's own, so the event loop never waits for the disk or for another process. Writers in
several processes queue for SQLite's write lock (up to ``busy_timeout``) and never lose or
overwrite a message.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from .._approval_log import is_approval_session
from .._errors import (
    CorruptSessionError,
    SessionConflictError,
    SessionExistsError,
    SessionNotFoundError,
    UsageError,
)
from .._messages import Message
from .._stores._schema import check_schema_version
from .._stores._sqlite_file import naming_damage, use_wal
from .._stores._sqlite_thread import SQLiteThread
from ._base import SessionStore
from ._codec import MESSAGE_FORMAT, decode_messages, decode_rows, encode_message
from ._sqlite_sql import (
    CHECKPOINT_EVERY,
    SCHEMA,
    AppendArgs,
    Done,
    InfoRow,
    as_int,
    checkpoint,
    delete_rows,
    delete_session,
    existing,
    info_from_row,
    insert,
    record_state,
    select_info,
    select_infos,
    select_messages,
    statements,
    transaction,
)
from ._types import SCHEMA_VERSION, Retention, SessionInfo, StoredMessage

__all__ = ["SQLiteSessionStore"]

logger = logging.getLogger(__name__)


class SQLiteSessionStore(SessionStore):
    """Sessions in a SQLite file: the default store, standard library only.

    Good for one process, and for a few processes on one machine sharing the file (they
    take turns for the write lock). Not for a network file system.

    Durability: with ``synchronous="normal"`` (the default) a committed message survives the
    process being killed at any point; after a power failure or an OS crash the last
    transactions before it may be missing, but the file is never corrupted (SQLite's WAL
    guarantee). ``synchronous="full"`` also survives power loss, at the price of an
    ``fsync`` per append (a few hundred appends/s on a typical disk instead of thousands).
    A file damaged from outside (truncated, a header or page overwritten) makes each call
    that reaches the damage raise :class:`~hookloop.CorruptStoreError` naming it.

    Args:
        path: The database file; it is created if missing (its directory must exist).
        retention: What to keep; see :class:`~hookloop.sessions.Retention`.
        synchronous: ``"normal"`` or ``"full"``, as described above.
        busy_timeout: Seconds to wait for another process's write lock before an append
            fails with :class:`~hookloop.StoreError` ("database is locked").
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
        self._thread = SQLiteThread(str(self.path), self._connect, name="hookloop-sqlite")
        # The event loop's own connection, for appends that cannot block (see _append_now).
        self._direct: sqlite3.Connection | None = None
        self._direct_lock = threading.Lock()
        self._ready = False  # the worker has connected: the schema is there and checked
        self._unchecked = 0  # direct appends since the last checkpoint
        self._checkpointing = False  # appends go to the thread, behind the checkpoint

    def __repr__(self) -> str:
        return f"SQLiteSessionStore({str(self.path)!r})"

    # --- on the store's thread ----------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        # isolation_level=None: no implicit transactions; each method says BEGIN itself.
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_ms}")
            use_wal(conn, timeout=self._busy_ms / 1000)
            conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
            self._migrate(conn)
            if self.retention.prunes:
                self._prune(conn)
        except BaseException:
            conn.close()
            raise
        self._ready = True
        return conn

    def _migrate(self, conn: sqlite3.Connection) -> None:
        with transaction(conn):
            conn.execute(
                "CREATE TABLE IF NOT EXISTS hookloop_meta (key TEXT PRIMARY KEY, value TEXT)"
            )
            row = conn.execute(
                "SELECT value FROM hookloop_meta WHERE key = 'sessions_schema'"
            ).fetchone()
            if row is None:
                # Statement by statement: executescript() would commit the transaction.
                for statement in statements(SCHEMA):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO hookloop_meta VALUES ('sessions_schema', ?)", (SCHEMA_VERSION,)
                )
                return
            check_schema_version(row[0], supported=SCHEMA_VERSION, store=str(self.path))
            # Migrations from older versions go here, one step per version.

    async def close(self) -> None:
        """Close the connections and end the store's thread."""
        with self._direct_lock:
            direct, self._direct = self._direct, None
            self._ready = False
            if direct is not None:
                direct.close()
        await self._thread.close()

    # --- appending ----------------------------------------------------------------------

    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        data = encode_message(message)
        args = (session_id, message.id, MESSAGE_FORMAT, data, self._clock(), expected_seq)
        seq = None
        if self._ready and self._synchronous == "normal":
            with naming_damage(self.path):
                seq = self._append_now(args)
        if seq is None:
            return await self._thread.run(self._append, args)
        if self.retention.max_messages is not None:
            await self._thread.run(self._trim, session_id, seq)
        return seq

    def _append_now(self, args: AppendArgs) -> int | None:
        """The common append, on the event loop's thread; ``None`` when it could block.

        A hop to the store's thread and back costs more than the append itself (and, on a
        busy machine, a scheduler delay each way). In WAL mode with ``synchronous=NORMAL``
        a commit only writes to the log, without ``fsync``, so the event loop can do it: on
        a connection that never waits for a lock (``busy_timeout = 0``) and never
        checkpoints (the store's thread does, every ``CHECKPOINT_EVERY`` appends, while
        appends queue behind it there). A busy database, a new session, a conflict or a
        second thread go to the store's thread.
        """
        if self._checkpointing or not self._direct_lock.acquire(blocking=False):
            return None
        try:
            conn = self._direct
            if conn is None:
                conn = self._direct = self._connect_direct()
            try:
                seq = insert(conn, args)
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                return None
            except Done as done:
                return done.seq
        finally:
            self._direct_lock.release()
        if seq is not None:
            self._unchecked += 1
            if self._unchecked >= CHECKPOINT_EVERY and self._thread.started:
                self._unchecked = 0
                self._checkpointing = True
                self._thread.post(self._checkpoint)
        return seq

    def _checkpoint(self, conn: sqlite3.Connection) -> None:
        try:
            checkpoint(conn, self._busy_ms)
        finally:
            self._checkpointing = False

    def _connect_direct(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 0")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        return conn

    def _append(self, conn: sqlite3.Connection, args: AppendArgs) -> int:
        try:
            try:
                seq = insert(conn, args)  # one statement: its own transaction
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:
                    raise
                seq = None  # another process wrote first: queue for the lock below
            if seq is None:
                seq = self._append_slowly(conn, args)
        except Done as done:  # the message was there already; nothing was written
            return done.seq
        self._trim(conn, args[0], seq)
        return seq

    def _trim(self, conn: sqlite3.Connection, session_id: str, seq: int) -> None:
        limit = self.retention.max_messages
        # A side session's records (approvals, spend, verdicts) are kept whole: retention
        # is for conversations, and a dropped request would lose a call that waits.
        if limit is not None and seq > limit and not is_approval_session(session_id):
            conn.execute(
                "DELETE FROM hookloop_messages WHERE session_id = ? AND seq <= ?",
                (session_id, seq - limit),
            )

    def _append_slowly(self, conn: sqlite3.Connection, args: AppendArgs) -> int:
        """A new session, a conflict, a repeated message, or a busy database."""
        session_id, message_id, _, data, now, expected_seq = args
        with transaction(conn):  # holds the write lock: nothing changes under us
            seq = insert(conn, args)
            if seq is not None:
                return seq
            found = existing(conn, session_id, message_id, data)
            if found is not None:
                raise Done(found)
            state = record_state(conn, session_id)
            state.check()
            row = (state.last_seq,) if state.has_record else None
            if row is None and not expected_seq:
                conn.execute(
                    "INSERT INTO hookloop_sessions VALUES (?, NULL, ?, ?, 0, 0)",
                    (session_id, now, now),
                )
                seq = insert(conn, args)
                if seq is not None:
                    return seq
            actual = 0 if row is None else as_int(row[0], session_id, "last_seq")
            raise SessionConflictError(
                f"session {session_id!r} is at seq {actual}, not at the expected "
                f"{expected_seq}: another writer appended first; nothing was written",
                session_id=session_id,
                expected_seq=expected_seq,
                actual_seq=actual,
            )

    # --- reading ------------------------------------------------------------------------

    async def _read_records(
        self, session_id: str, unreadable: list[CorruptSessionError] | None
    ) -> list[StoredMessage]:
        rows = await self._thread.run(select_messages, session_id)
        return decode_rows(session_id, rows, unreadable)

    async def _read_messages(self, session_id: str) -> list[Message]:
        rows = await self._thread.run(select_messages, session_id)
        return decode_messages(session_id, rows)

    async def _read_info(self, session_id: str) -> SessionInfo | None:
        row = await self._thread.run(select_info, session_id)
        return None if row is None else info_from_row(row)

    async def _read_infos(self, limit: int | None) -> list[SessionInfo]:
        rows = await self._thread.run(select_infos, -1 if limit is None else limit)
        out: list[SessionInfo] = []
        for row in rows:
            try:
                out.append(info_from_row(row))
            except CorruptSessionError as exc:
                logger.warning("%s; left out of the list", exc)
        return out

    # --- sessions as a whole ------------------------------------------------------------

    async def _create_session(self, session_id: str, parent_id: str | None) -> SessionInfo:
        return info_from_row(await self._thread.run(self._create, session_id, parent_id))

    def _create(self, conn: sqlite3.Connection, session_id: str, parent_id: str | None) -> InfoRow:
        now = self._clock()
        with transaction(conn):
            try:
                conn.execute(
                    "INSERT INTO hookloop_sessions VALUES (?, ?, ?, ?, 0, 0)",
                    (session_id, parent_id, now, now),
                )
            except sqlite3.IntegrityError:
                raise SessionExistsError(session_id) from None
            return (session_id, parent_id, now, now, 0, 0)

    async def _fork_session(self, session_id: str, new_id: str) -> SessionInfo:
        return info_from_row(await self._thread.run(self._fork, session_id, new_id))

    def _fork(self, conn: sqlite3.Connection, session_id: str, new_id: str) -> InfoRow:
        now = self._clock()
        with transaction(conn):
            source = select_info(conn, session_id)
            if source is None:
                raise SessionNotFoundError(session_id)
            if select_info(conn, new_id) is not None:
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
            row = select_info(conn, new_id)
            assert row is not None
            return row

    async def _delete_session(self, session_id: str) -> bool:
        return await self._thread.run(delete_session, session_id)

    async def _repair_session(self, session_id: str) -> SessionInfo:
        return info_from_row(await self._thread.run(self._repair, session_id))

    def _repair(self, conn: sqlite3.Connection, session_id: str) -> InfoRow:
        with transaction(conn):
            state = record_state(conn, session_id)
            if not state.has_record and not state.count:
                raise SessionNotFoundError(session_id)
            last_seq = state.repaired_last_seq()
            if not state.has_record:  # its times, as well as the log tells them
                first, last = conn.execute(
                    "SELECT min(created_at), max(created_at) FROM hookloop_messages "
                    "WHERE session_id = ?",
                    (session_id,),
                ).fetchone()
                conn.execute(
                    "INSERT INTO hookloop_sessions VALUES (?, NULL, ?, ?, ?, ?)",
                    (session_id, first, last, state.count, last_seq),
                )
            else:
                conn.execute(
                    "UPDATE hookloop_sessions SET last_seq = ?, message_count = ? "
                    "WHERE session_id = ?",
                    (last_seq, state.count, session_id),
                )
            row = select_info(conn, session_id)
            assert row is not None
            return row

    async def prune(self) -> int:
        """Apply ``max_sessions`` and ``max_age`` now; see :meth:`SessionStore.prune`."""
        return await self._thread.run(self._prune)

    def _prune(self, conn: sqlite3.Connection) -> int:
        retention = self.retention
        if not retention.prunes:
            return 0
        with transaction(conn):
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
                delete_rows(conn, session_id)
        return len(doomed)
