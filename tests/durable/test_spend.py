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

from tests._processes import finish, kill_at_stop
from tests.durable.test_recovery import spent_by
from tests.sessions._backends import ROOT


def start(spec: dict[str, Any]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.durable._spend_worker", json.dumps(spec)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_turn(
    directory: Path, engine: str, sessions: dict[str, str], worker: str, message: str, **more: str
) -> Any:
    spec = {"dir": str(directory), "engine": engine, "sessions": sessions}
    spec |= {"executor": worker, "message": message, **more}
    finish(start(spec))
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


def test_a_replayed_turn_counts_its_sub_agent_s_requests_once(tmp_path: Path) -> None:
    # The lead's first model call delegates to a sub-agent (one request); the worker is
    # killed in the lead's second model call, and the turn resumed: the sub-agent's tool
    # step comes back from its record, with what it spent.
    sessions = {"kind": "sqlite", "address": str(tmp_path / "s.db"), "prefix": ""}
    engine = f"sqlite:///{tmp_path / 'dbos.db'}"
    spec = {"dir": str(tmp_path), "engine": engine, "sessions": sessions, "executor": "w"}
    spec |= {"message": "m-1", "agent": "build_with_helper"}
    kill_at_stop(start({**spec, "stop": "model:1"}), tmp_path / "reached")
    assert run_turn(tmp_path, engine, sessions, "w", "m-1", agent="build_with_helper") == {
        "text": "done"
    }
    spent = spent_by(sessions)
    # The lead's two requests and the sub-agent's one, each once.
    assert (spent.requests, spent.tool_calls) == (3, 1)
    assert spent.usage.total_tokens == 2 * 110  # the sub-agent's answer and the last
