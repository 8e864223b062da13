"""A session's limits on durable turns: a second worker sees what the first one spent.

Each turn runs in a worker process of its own (another executor id): the session's spend
comes only from its log.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests._processes import finish
from tests.sessions._backends import ROOT


def run_turn(
    directory: Path, engine: str, sessions: dict[str, str], worker: str, message: str
) -> Any:
    spec = {"dir": str(directory), "engine": engine, "sessions": sessions}
    spec |= {"executor": worker, "message": message}
    finish(
        subprocess.Popen(
            [sys.executable, "-m", "tests.durable._spend_worker", json.dumps(spec)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    return json.loads((directory / f"{message}.json").read_text())


def check_second_worker_stops(directory: Path, engine: str, sessions: dict[str, str]) -> None:
    assert run_turn(directory, engine, sessions, "worker-1", "m-1") == {"text": "done"}
    # Another worker: the session's one request is spent, so its turn sends nothing.
    second = run_turn(directory, engine, sessions, "worker-2", "m-2")
    assert second == {"limit": "requests", "maximum": 1, "used": 2}
    assert (directory / "calls").read_text().splitlines() == ["model"]


def test_a_second_sqlite_worker_sees_what_the_first_spent(tmp_path: Path) -> None:
    sessions = {"kind": "sqlite", "address": str(tmp_path / "s.db"), "prefix": ""}
    check_second_worker_stops(tmp_path, f"sqlite:///{tmp_path / 'dbos.db'}", sessions)


def test_a_second_postgres_worker_sees_what_the_first_spent(
    tmp_path: Path, database_url: str, postgres_isolated_dsn: str
) -> None:
    sessions = {"kind": "postgres", "address": postgres_isolated_dsn, "prefix": ""}
    check_second_worker_stops(tmp_path, database_url, sessions)
