"""Durable engines that cannot use their database: typed one-line errors, never a silent race."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hookloop import RunError, StoreError, UsageError
from hookloop.durable import DBOSEngine, SessionQueue
from tests.durable._workers_support import GUARD, ROOT

NOWHERE = "postgresql://app:s3cret@127.0.0.1:1/app"  # nothing listens on port 1


async def test_an_engine_whose_database_cannot_be_reached_raises_a_store_error() -> None:
    engine = DBOSEngine(NOWHERE)
    with pytest.raises(StoreError) as caught:
        await engine.launch()
    assert isinstance(caught.value, RunError)
    assert "\n" not in str(caught.value)
    assert "s3cret" not in str(caught.value)
    assert caught.value.store == "postgresql://app:***@127.0.0.1:1/app"
    assert str(caught.value).startswith(f"the durable turns' database {caught.value.store}")
    assert "Connection refused" in str(caught.value)


async def test_a_session_queue_whose_database_cannot_be_reached_raises_a_store_error() -> None:
    queue = SessionQueue(NOWHERE)
    assert "s3cret" not in repr(queue)
    with pytest.raises(StoreError) as caught:
        await queue.launch()
    assert "\n" not in str(caught.value)
    assert "Connection refused" in str(caught.value)


def engine_process(path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.durable._sqlite_engine", str(path)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def test_a_second_process_on_one_sqlite_file_is_refused_at_launch(tmp_path: Path) -> None:
    path = tmp_path / "dbos.db"
    first = engine_process(path)
    try:
        assert first.stdout is not None
        assert first.stdin is not None
        assert first.stdout.readline() == "ready\n"
        second = engine_process(path)
        said, _ = second.communicate(timeout=GUARD)
        assert second.returncode == 3
        assert said.startswith(
            f"refused StoreError: another process runs durable turns on the SQLite file {path}"
        )
        # The first one was not disturbed: it runs its turns as before.
        first.stdin.write("hello\n")
        first.stdin.flush()
        assert first.stdout.readline().strip() != ""
    finally:
        first.communicate(timeout=GUARD)
    assert first.returncode == 0
    # Once the first process has ended, the file is free again.
    again = engine_process(path)
    try:
        assert again.stdout is not None
        assert again.stdout.readline() == "ready\n"
    finally:
        again.communicate(timeout=GUARD)


@pytest.mark.parametrize(
    ("url", "python", "sqlite", "refused"),
    [
        ("sqlite:///turns.db", (3, 12), (3, 40, 1), True),  # a Python built on an older SQLite
        ("sqlite:///turns.db", (3, 13), (3, 41, 9), True),
        ("sqlite:///turns.db", (3, 12), (3, 42, 0), False),
        ("sqlite:///turns.db", (3, 11), (3, 40, 1), False),  # DBOS stamps rows otherwise there
        ("postgresql://u@127.0.0.1/db", (3, 12), (3, 40, 1), False),
    ],
)
def test_a_sqlite_dbos_cannot_write_is_refused_by_name(
    url: str, python: tuple[int, ...], sqlite: tuple[int, ...], refused: bool
) -> None:
    from hookloop.durable._dbos import _check_sqlite

    if refused:
        with pytest.raises(UsageError, match=r"SQLite 3\.42 or later.*this Python has SQLite 3\."):
            _check_sqlite(url, python, sqlite)
    else:
        _check_sqlite(url, python, sqlite)
