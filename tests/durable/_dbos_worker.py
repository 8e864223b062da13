"""A worker process for the takeover tests: python -m tests.durable._dbos_worker URL ID [VERSION].

A plain DBOS workflow (not a chat turn: the worker machinery is generic) with two steps,
``model`` and ``tool``, each appending a line ``STEP SESSION TURN PID TIME`` to ``DIR/runs``
when it starts and ``STEP-done ...`` when it ends. A step waits while the file
``DIR/hold-STEP-SESSION`` (or ``DIR/hold-STEP-all``) exists, so a test can catch a worker
inside a step and kill it. VERSION is the application version (by default ``VERSION``).
The worker prints ``ready`` once it beats and listens on the session queue, and exits
gracefully on SIGTERM.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from dbos import DBOS

from hookloop.durable._queue import register_session_queue
from hookloop.durable._workers import Worker, WorkerTimings

APP = "hookloop_workers_test"
VERSION = "workers-test-1"
HEARTBEAT, DEAD_AFTER = 0.2, 1.5
HERE = Path(os.environ.get("HOOKLOOP_TEST_RUNS", "."))


def note(*words: object) -> None:
    line = " ".join(str(word) for word in words) + f" {os.getpid()} {time.time():.3f}\n"
    with (HERE / "runs").open("a") as runs:  # one short append: whole lines, never torn
        runs.write(line)


def step_body(step: str, session_id: str, turn: int) -> str:
    note(step, session_id, turn)
    hold, hold_all = HERE / f"hold-{step}-{session_id}", HERE / f"hold-{step}-all"
    while (
        hold.exists() or hold_all.exists()
    ):  # the test removes it (after killing this process, usually)
        time.sleep(0.01)
    note(f"{step}-done", session_id, turn)
    return f"{step} {session_id} {turn}"


@DBOS.step()
def model(session_id: str, turn: int) -> str:
    return step_body("model", session_id, turn)


@DBOS.step()
def tool(session_id: str, turn: int) -> str:
    return step_body("tool", session_id, turn)


@DBOS.workflow()
def turn(session_id: str, turn: int) -> list[str]:
    return [model(session_id, turn), tool(session_id, turn)]


def main() -> None:
    url, executor_id, version = [*sys.argv[1:4], VERSION][:3]
    DBOS(
        config={
            "name": APP,
            "system_database_url": url,
            "executor_id": executor_id,
            "application_version": version,
            "log_level": "WARNING",
            "sys_db_pool_size": 5,
        }
    )
    DBOS.launch()
    register_session_queue()
    worker = Worker(
        url,
        app_name=APP,
        executor_id=executor_id,
        application_version=version,
        timings=WorkerTimings(heartbeat=HEARTBEAT, dead_after=DEAD_AFTER),
    )
    worker.start()
    print("ready", flush=True)
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    signal.sigwait({signal.SIGTERM})
    DBOS.destroy(workflow_completion_timeout_sec=1)
    worker.stop(leave=True)
    os._exit(0)  # a step still running after the grace period is abandoned, as a kill would


if __name__ == "__main__":
    main()
