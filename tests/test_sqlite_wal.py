"""Switching a SQLite file to WAL while another connection holds it (two stores opening)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest

from hookloop._stores._sqlite_file import use_wal


def test_the_switch_waits_for_a_connection_that_holds_the_file(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE t (x)")
    opener = sqlite3.connect(path, isolation_level=None)
    opener.execute("PRAGMA busy_timeout = 5000")
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        opener.execute("PRAGMA journal_mode = WAL")  # busy_timeout does not apply here
    release = threading.Timer(0.2, lambda: holder.execute("COMMIT"))
    release.start()
    use_wal(opener, timeout=60)  # the timer thread may start late on a loaded machine
    release.join()
    assert opener.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    holder.close()
    opener.close()


def test_the_switch_gives_up_after_its_timeout(tmp_path: Path) -> None:
    path = tmp_path / "held.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("CREATE TABLE t (x)")
    opener = sqlite3.connect(path, isolation_level=None)
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        use_wal(opener, timeout=0.1)
    holder.close()
    opener.close()
