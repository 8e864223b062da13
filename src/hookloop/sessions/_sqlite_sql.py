"""The SQL of the SQLite session store: the schema, and the statements its thread runs."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from .._approval_log import SIDE_PREFIX, SIDE_SUFFIX
from .._errors import CorruptSessionError, SessionConflictError
from ._base import utc
from ._codec import Row
from ._consistency import MAX_SEQ, RecordState
from ._types import SessionInfo

__all__ = [
    "APPEND",
    "CHECKPOINT_EVERY",
    "INFO_COLUMNS",
    "SCHEMA",
    "AppendArgs",
    "Done",
    "InfoRow",
    "as_int",
    "checkpoint",
    "delete_rows",
    "delete_session",
    "existing",
    "info_from_row",
    "insert",
    "record_state",
    "select_info",
    "select_infos",
    "select_messages",
    "statements",
    "transaction",
]

SCHEMA = """
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
# session that does not exist yet or is not at expected_seq (the last two parameters).
# A record at the largest integer matches nothing either: last_seq + 1 would be a REAL.
# Plain ``?`` placeholders, bound in order (insert() orders them): Python 3.12 warns about
# numbered ones (``?1``) bound from a sequence, and 3.14 refuses them.
APPEND = (
    "INSERT INTO hookloop_messages "
    "SELECT session_id, last_seq + 1, ?, ?, ?, ? FROM hookloop_sessions "
    f"WHERE session_id = ? AND (? IS NULL OR last_seq = ?) AND last_seq < {MAX_SEQ} "
    "RETURNING seq"
)
AppendArgs = tuple[str, str, int, str, float, int | None]

# Direct appends do not checkpoint; the store's thread does, after this many of them (about
# as often as SQLite's own default of 1,000 log pages).
CHECKPOINT_EVERY = 300

INFO_COLUMNS = "session_id, parent_id, created_at, updated_at, message_count, last_seq"

InfoRow = tuple[object, object, object, object, object, object]


class Done(Exception):
    """Ends an append's transaction without writing; carries the seq to return."""

    def __init__(self, seq: int) -> None:
        super().__init__(seq)
        self.seq = seq


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def checkpoint(conn: sqlite3.Connection, busy_ms: int) -> None:
    """Copy the log into the database file and let the next append start the log afresh.

    The store sends its appends through its thread, behind this, while it runs: a
    checkpoint racing with appends would never catch up, and the log would grow without
    end. ``RESTART`` also waits (at most 100 ms) for other processes' readers to leave the
    log; when it cannot finish, the next checkpoint tries again.
    """
    conn.execute("PRAGMA busy_timeout = 100")
    try:
        conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
    finally:
        conn.execute(f"PRAGMA busy_timeout = {busy_ms}")


def insert(conn: sqlite3.Connection, args: AppendArgs) -> int | None:
    """Run the append statement; its seq, or ``None`` when it matched no session record."""
    session_id, message_id, message_format, data, created_at, expected = args
    bound = (message_id, message_format, data, created_at, session_id, expected, expected)
    try:
        rows = conn.execute(APPEND, bound).fetchall()  # to the end: that ends the statement
    except sqlite3.IntegrityError:
        found = existing(conn, session_id, message_id, data)
        if found is not None:
            raise Done(found) from None
        record_state(conn, session_id).check()
        raise CorruptSessionError(
            session_id=session_id,
            seq=None,
            reason="its record's last_seq is behind the messages stored",
        ) from None
    return as_int(rows[0][0], session_id, "last_seq") if rows else None


def record_state(conn: sqlite3.Connection, session_id: str) -> RecordState:
    """The session's record against its log, read in one statement."""
    last_seq, has_record, first, top, count = conn.execute(
        "SELECT (SELECT last_seq FROM hookloop_sessions WHERE session_id = ?), "
        "EXISTS (SELECT 1 FROM hookloop_sessions WHERE session_id = ?), "
        "min(seq), max(seq), count(*) FROM hookloop_messages WHERE session_id = ?",
        (session_id, session_id, session_id),
    ).fetchone()
    return RecordState(session_id, bool(has_record), last_seq, first, top, count)


def statements(script: str) -> list[str]:
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


def existing(conn: sqlite3.Connection, session_id: str, message_id: str, data: str) -> int | None:
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
    return as_int(row[0], session_id, "seq")


def select_messages(conn: sqlite3.Connection, session_id: str) -> list[Row]:
    return conn.execute(
        "SELECT seq, message_id, format, data FROM hookloop_messages "
        "WHERE session_id = ? ORDER BY seq",
        (session_id,),
    ).fetchall()


def select_info(conn: sqlite3.Connection, session_id: str) -> InfoRow | None:
    row: InfoRow | None = conn.execute(
        f"SELECT {INFO_COLUMNS} FROM hookloop_sessions WHERE session_id = ?", (session_id,)
    ).fetchone()
    return row


# Approval side sessions are not conversations: list_sessions() leaves them out (the rule
# of _approval_log.is_approval_session, as GLOB patterns: GLOB, unlike LIKE, minds case).
_CONVERSATIONS = (
    f"NOT (session_id GLOB '*{SIDE_SUFFIX}' OR session_id GLOB '{SIDE_PREFIX}{'[0-9a-f]' * 64}')"
)


def select_infos(conn: sqlite3.Connection, limit: int) -> list[InfoRow]:
    return conn.execute(
        f"SELECT {INFO_COLUMNS} FROM hookloop_sessions WHERE {_CONVERSATIONS} "
        "ORDER BY updated_at DESC, session_id LIMIT ?",
        (limit,),
    ).fetchall()


def delete_session(conn: sqlite3.Connection, session_id: str) -> bool:
    with transaction(conn):
        return delete_rows(conn, session_id)


def delete_rows(conn: sqlite3.Connection, session_id: str) -> bool:
    # The record first, so that the trigger has no counter to update per message.
    found = conn.execute(
        "DELETE FROM hookloop_sessions WHERE session_id = ?", (session_id,)
    ).rowcount
    conn.execute("DELETE FROM hookloop_messages WHERE session_id = ?", (session_id,))
    return found > 0


def as_int(value: object, session_id: str, column: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise CorruptSessionError(
        session_id=session_id, seq=None, reason=f"{column} is {value!r}, not an integer"
    )


def info_from_row(row: InfoRow) -> SessionInfo:
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
        message_count=as_int(count, sid, "message_count"),
        last_seq=as_int(last_seq, sid, "last_seq"),
    )
