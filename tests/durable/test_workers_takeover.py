"""Takeovers that outlast a heartbeat, mixed application versions, and duplicate executor ids."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest

from hookloop.durable import _workers
from hookloop.durable._dbos import APPLICATION_VERSION
from hookloop.durable._lease import TABLE, ExecutorLease
from hookloop.durable._queue import SESSION_QUEUE
from hookloop.durable._workers import Worker, WorkerTimings
from tests.durable._workers_support import (
    DEAD_AFTER,
    GUARD,
    HEARTBEAT,
    ROOT,
    Workers,
    hookloop_workers,
    result,
    submit,
    wait_for,
    worker_argv,
)

TIMINGS = WorkerTimings(heartbeat=HEARTBEAT, dead_after=DEAD_AFTER)


def lease(url: str, executor_id: str) -> ExecutorLease:
    return ExecutorLease(
        url,
        app_name="app",
        application_version=APPLICATION_VERSION,
        executor_id=executor_id,
        dead_after=TIMINGS.dead_after,
    )


def test_a_recovery_longer_than_dead_after_does_not_get_the_taker_fenced(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    recovering = threading.Event()
    finish = threading.Event()

    def slow_recovery(executor_id: str) -> tuple[str, ...]:
        recovering.set()
        finish.wait(GUARD)  # re-enqueueing a thousand turns, as long as the test wants
        return (f"{executor_id}-turn",)

    monkeypatch.setattr(_workers, "_recover", slow_recovery)
    taker = Worker(database_url, app_name="app", executor_id="taker", timings=TIMINGS)
    with lease(database_url, "dead") as dead, lease(database_url, "other") as other:
        dead.join()
        dead.leave()
        taker.start()
        try:
            assert recovering.wait(GUARD)
            other.join()
            # Four dead_after periods pass while the taker recovers: another live worker
            # looking for dead executors finds neither the taker nor the claimed executor.
            for _ in range(8):
                assert other.claim_dead() == []
                other.renew()
                threading.Event().wait(TIMINGS.dead_after / 2)
            assert taker.fenced is None
            finish.set()
            wait_for("the takeover", lambda: taker.takeovers)
        finally:
            taker.stop()
    # (Once the loop stops beating for ``other``, the taker may take it over too.)
    assert taker.takeovers[0].executor_id == "dead"
    assert taker.takeovers[0].workflow_ids == ("dead-turn",)
    assert taker.fenced is None
    with psycopg.connect(database_url, autocommit=True) as conn:
        left = conn.execute(f"SELECT executor_id FROM {TABLE} WHERE executor_id = 'dead'")
        assert left.fetchall() == []  # the dead executor's row is released


def test_a_dead_worker_holding_hundreds_of_turns_is_taken_over_by_one_worker_once(
    dbos_workers: Workers, client: Any
) -> None:
    workers = dbos_workers
    workers.start("w1")
    sessions = [f"s{i:03}" for i in range(200)]
    hold = workers.hold("model", "all")
    handles = [submit(client, session_id, 1) for session_id in sessions]
    wait_for(
        "w1 in the model step of every turn",
        lambda: len({run.session_id for run in workers.runs() if run.step == "model"}) == 200,
    )
    workers.kill("w1")
    workers.start("w2")
    hold.unlink()

    assert [result(handle) for handle in handles] == [
        [f"model {s} 1", f"tool {s} 1"] for s in sessions
    ]
    done = sorted(run.session_id for run in workers.runs() if run.step == "tool-done")
    assert done == sessions  # each turn finished exactly once
    assert {run.pid for run in workers.runs() if run.step == "tool-done"} == {workers.pid("w2")}
    assert workers.procs["w2"].poll() is None  # the taker was not fenced


def test_a_dead_workers_turn_waits_for_a_worker_of_its_own_version(
    database_url: str, tmp_path: Path, client: Any
) -> None:
    def versioned(executor_id: str) -> list[str]:
        return [database_url, executor_id, executor_id.split("-")[0]]

    workers = Workers("tests.durable._dbos_worker", database_url, tmp_path)
    workers.command = versioned  # the version is the id's prefix; ready on standard output
    try:
        workers.start("v1-a", "v2-b")
        hold = workers.hold("model", "s1")
        options = {
            "workflow_name": "turn",
            "queue_name": SESSION_QUEUE,
            "queue_partition_key": "s1",
            "workflow_id": "s1-1",
            "app_version": "v1",
        }
        handle = client.enqueue(options, "s1", 1)
        first = wait_for("the model step", lambda: workers.ran("model", "s1", 1))[0]
        assert first.pid == workers.pid("v1-a")  # only a v1 worker dequeues a v1 turn
        workers.kill("v1-a")
        hold.unlink()
        # The v2 worker cannot run it and leaves the dead v1 worker's row alone ...
        with psycopg.connect(database_url, autocommit=True) as conn:
            wait_for(
                "the v2 worker to look past the dead v1 worker",
                lambda: (
                    conn.execute(
                        f"SELECT heartbeat_at < clock_timestamp() - interval '3 seconds' "
                        f"FROM {TABLE} WHERE executor_id = 'v1-a'"
                    ).fetchone()
                    in (None, (True,))
                ),
            )
            rows = conn.execute(f"SELECT executor_id, claimed_by FROM {TABLE} ORDER BY 1")
            assert rows.fetchall() == [("v1-a", None), ("v2-b", None)]
        # ... for a v1 worker, which takes it over and finishes the turn.
        workers.start("v1-c")
        assert result(handle) == ["model s1 1", "tool s1 1"]
        assert [run.pid for run in workers.ran("tool-done", "s1", 1)] == [workers.pid("v1-c")]
    finally:
        workers.close()


def test_a_second_worker_with_a_live_workers_id_is_refused(
    database_url: str, tmp_path: Path
) -> None:
    workers = hookloop_workers(database_url, tmp_path)
    try:
        workers.start("x")
        second = subprocess.run(
            [sys.executable, "-m", "hookloop", *worker_argv(database_url, "x")],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=GUARD,
        )
        assert second.returncode == 2
        assert "executor id 'x' is in use by a live worker" in second.stderr
        assert workers.procs["x"].poll() is None
    finally:
        workers.close()
