"""A durable turn's worker killed with SIGKILL mid-turn, then restarted: the turn completes.

Each test runs ``_turn_worker.py`` in a child process, waits for the file it writes when it
reaches the stop (a model call, the idempotent tool, the other tool), kills it, and starts
the same worker (same ``executor_id``) again, which resumes the turn. The run's ``log`` counts
every model call, tool run and hook; the history is compared with an uninterrupted run's.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from hookloop import Agent, ToolResultLostError
from hookloop._errors import RESULT_LOST_TEXT
from hookloop.limits import Spend
from hookloop.sessions import SessionRecorder, dump_messages, load_messages
from hookloop.testing import FunctionModel
from tests._once import once_per_run
from tests._processes import finish, kill_at_stop
from tests.conftest import unique_name
from tests.sessions._backends import ROOT, open_store

USAGE = {
    "input_tokens": 1110,
    "output_tokens": 6,
    "cached_input_tokens": 0,
    "reasoning_tokens": 0,
    "cache_write_tokens": 0,
    "cost": None,  # the scripted model has no price
}


def spec(directory: Path, engine: str, sessions: dict[str, str], stop: str, turn: str) -> str:
    return json.dumps(
        {"dir": str(directory), "engine": engine, "sessions": sessions, "stop": stop, "turn": turn}
    )


def start(arguments: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.durable._turn_worker", arguments],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_turn(
    directory: Path, engine: str, sessions: dict[str, str], stop: str, turn: str = "t-1"
) -> float:
    """Run the turn, killed at ``stop`` and restarted; returns seconds from kill to the end.

    The restarted worker is another process: on DBOS the same ``executor_id``, on Temporal
    any worker of the task queue.
    """
    directory.mkdir()
    if stop != "none":
        kill_at_stop(start(spec(directory, engine, sessions, stop, turn)), directory / "reached")
    killed = time.monotonic()
    finish(start(spec(directory, engine, sessions, "none", turn)))
    return time.monotonic() - killed


def log(directory: Path) -> list[str]:
    return (directory / "log").read_text().splitlines()


def stored(sessions: dict[str, str]) -> list[dict[str, Any]]:
    import asyncio

    async def read() -> list[dict[str, Any]]:
        store = open_store(sessions)
        try:
            records = await store.records("s-1")
        finally:
            await store.close()
        assert [r.seq for r in records] == list(range(1, len(records) + 1))  # no gap
        return dump_messages(r.message for r in records)

    return asyncio.run(read())


def spent_by(sessions: dict[str, str]) -> Spend:
    """What session s-1's spend records say it spent, as a new process reads them."""
    import asyncio

    async def read() -> Spend:
        store = open_store(sessions)
        try:
            recorder = SessionRecorder(store, "s-1")
            Agent(FunctionModel(lambda request: "unused"), plugins=[recorder])
            return await recorder.spent()
        finally:
            await store.close()

    return asyncio.run(read())


def without_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without their own ids, which each run draws anew (tool call ids stay)."""
    return [{k: v for k, v in m.items() if k != "id"} for m in messages]


def check_turn(directory: Path, sessions: dict[str, str], baseline: list[dict[str, Any]]) -> None:
    """The response is the session log, once each, and matches the uninterrupted run."""
    response = json.loads((directory / "response.json").read_text())
    log_messages = stored(sessions)
    assert response["messages"] == log_messages
    ids = [m["id"] for m in log_messages]
    assert len(set(ids)) == len(ids)  # no duplicate
    load_messages(log_messages)  # a valid history
    assert without_ids(log_messages) == without_ids(baseline)
    # Every model call counted once, the recorded ones from their records.
    assert (response["usage"], response["iterations"]) == (USAGE, 3)
    # So does the session's spend: the replayed calls' records were not written twice.
    assert dataclasses.asdict(spent_by(sessions).usage) == USAGE


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """The history of the turn run without interruption (run once for the whole test run)."""

    def build(place: Path) -> None:
        directory = place / "run"
        sessions = {"kind": "sqlite", "address": str(place / "s.db"), "prefix": ""}
        run_turn(directory, f"sqlite:///{place / 'dbos.db'}", sessions, "none")
        assert Counter(log(directory))["model 0"] == 1
        (place / "baseline.json").write_text(json.dumps(stored(sessions)))

    place = once_per_run(tmp_path_factory, "durable-recovery-baseline", build)
    baseline: list[dict[str, Any]] = json.loads((place / "baseline.json").read_text())
    return baseline


def lost(baseline: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The baseline with the documented "result lost" answer for the ``charge`` call."""
    text = RESULT_LOST_TEXT.format(tool="charge")
    assert text == str(ToolResultLostError(tool_name="charge", call_id="call-charge"))
    return [
        {**m, "content": text, "is_error": True} if m.get("tool_name") == "charge" else m
        for m in baseline
    ]


def check_counts(stop: str, lines: list[str], turn: str = "t-1", temporal: bool = False) -> None:
    """Finished calls ran once; the one running at the kill as the tool rules say."""
    counts = Counter(lines)
    key = f"hookloop-turn:s-1:{turn}:call-"
    expected = {
        "model 0": 1,
        "model 1": 2 if stop == "model:1" else 1,
        "model 2": 1,
        # The idempotent tool runs once more for the call in flight, with the same key.
        f"tool lookup {key}lookup": 2 if stop == "tool:lookup" else 1,
        # The other one never runs twice.
        f"tool charge {key}charge": 1,
        # Hooks inside a finished call do not fire again.
        "hook pre_tool_call lookup replaying False": 2 if stop == "tool:lookup" else 1,
        "hook pre_tool_call charge replaying False": 1,
        "hook pre_request 0 replaying False": 1,
        "hook pre_request 1 replaying False": 2 if stop == "model:1" else 1,
        "hook pre_request 2 replaying False": 1,
        "event model_call_restarted 1": 1 if stop == "model:1" else 0,
    }
    assert {k: counts[k] for k in expected} == expected
    # Hooks outside the calls fire again on the replay, and can tell.
    starts = [line for line in lines if line.startswith("hook on_chat_start")]
    if temporal:  # each call's activity replays the turn's start
        assert starts[0] == "hook on_chat_start replaying False"
        assert set(starts[1:]) == {"hook on_chat_start replaying True"}
    else:
        assert starts == ["hook on_chat_start replaying False", "hook on_chat_start replaying True"]


STOPS = ["model:1", "tool:lookup", "tool:charge"]


@pytest.mark.parametrize("stop", STOPS)
def test_sqlite_worker_killed_mid_turn_resumes_it(
    stop: str, tmp_path: Path, baseline: list[dict[str, Any]]
) -> None:
    sessions = {"kind": "sqlite", "address": str(tmp_path / "s.db"), "prefix": ""}
    directory = tmp_path / "run"
    run_turn(directory, f"sqlite:///{tmp_path / 'dbos.db'}", sessions, stop)
    check_counts(stop, log(directory))
    check_turn(directory, sessions, lost(baseline) if stop == "tool:charge" else baseline)


@pytest.mark.parametrize("stop", STOPS)
def test_postgres_worker_killed_mid_turn_resumes_it(
    stop: str,
    tmp_path: Path,
    baseline: list[dict[str, Any]],
    database_url: str,
    postgres_isolated_dsn: str,
) -> None:
    sessions = {"kind": "postgres", "address": postgres_isolated_dsn, "prefix": ""}
    directory = tmp_path / "run"
    run_turn(directory, database_url, sessions, stop)
    check_counts(stop, log(directory))
    check_turn(directory, sessions, lost(baseline) if stop == "tool:charge" else baseline)


@pytest.mark.parametrize("stop", STOPS)
def test_temporal_worker_killed_mid_turn_resumes_it_on_another_worker(
    stop: str, tmp_path: Path, baseline: list[dict[str, Any]], temporal_address: str
) -> None:
    sessions = {"kind": "sqlite", "address": str(tmp_path / "s.db"), "prefix": ""}
    directory = tmp_path / "run"
    turn = unique_name("t")  # the dev server is shared by the whole test session
    engine = f"temporal://{temporal_address}/{unique_name('recovery')}"
    run_turn(directory, engine, sessions, stop, turn)
    check_counts(stop, log(directory), turn, temporal=True)
    check_turn(directory, sessions, lost(baseline) if stop == "tool:charge" else baseline)
