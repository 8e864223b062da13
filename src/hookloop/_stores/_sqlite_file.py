"""SQLite helpers shared by the memory and session stores."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from .._errors import CorruptStoreError

__all__ = ["naming_damage", "use_wal"]

_DAMAGED: Final = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


@contextmanager
def naming_damage(path: object) -> Iterator[None]:
    """Raise SQLite's "malformed" and "not a database" as :class:`CorruptStoreError`."""
    try:
        yield
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _DAMAGED:
            raise CorruptStoreError(store=str(path), reason=str(exc)) from exc
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
