"""SQLite helpers shared by the memory and session stores."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from .._errors import CorruptStoreError, StoreError, error_line

__all__ = ["naming_damage", "use_wal"]

_DAMAGED: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
# The file cannot be opened, read or written (a missing folder, no permission, a full or
# failing disk), or another connection held it locked for the whole busy timeout.
_UNUSABLE: Final = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_PERM,
    }
)


@contextmanager
def naming_damage(path: object) -> Iterator[None]:
    """Raise SQLite's "malformed" and "not a database" as :class:`CorruptStoreError`.

    A file that cannot be opened, read or written, or that stayed locked by another
    connection for the whole busy timeout, raises :class:`StoreError`.
    """
    try:
        yield
    except sqlite3.DatabaseError as exc:
        code = getattr(exc, "sqlite_errorcode", 0) & 0xFF
        if code in _DAMAGED:
            raise CorruptStoreError(store=str(path), reason=str(exc)) from exc
        if code in _UNUSABLE:
            raise StoreError(
                f"the store's file {path} cannot be used: {error_line(exc)}", store=str(path)
            ) from exc
        raise


def use_wal(conn: sqlite3.Connection, *, timeout: float = 5.0) -> None:
    """Switch the file to WAL, waiting for other connections that hold it.

    Changing the journal mode needs the file to itself and does not wait through
    ``busy_timeout``: a store opening while another one creates its tables gets "database
    is locked" at once. Once any connection has switched, the mode is kept in the file.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() == "wal":
                return
            time.sleep(0.01)
