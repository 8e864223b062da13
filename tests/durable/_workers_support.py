"""Worker processes and the runs file they write; a PostgreSQL server a test may stop.

The fixtures built on these are in ``tests/durable/conftest.py``.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from hookloop.durable._queue import SESSION_QUEUE

ROOT = Path(__file__).resolve().parents[2]
GUARD = 60.0  # seconds: only a failure guard, never a timing the test relies on
AGENT = "tests.durable._workers_turn:build"  # the agent of the `hookloop worker` tests
HEARTBEAT, DEAD_AFTER = 0.2, 1.5  # the process tests' worker timings, in seconds
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], *, guard: float = GUARD) -> T:
    """Poll ``probe`` until it returns something true; fail after ``guard`` seconds."""
    deadline = time.monotonic() + guard
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} after {guard} s")
        time.sleep(0.02)


def submit(client: Any, session_id: str, turn: int) -> Any:
    """Submit one turn of a session from this (non-worker) process."""
    options = {
        "workflow_name": "turn",
        "queue_name": SESSION_QUEUE,
        "queue_partition_key": session_id,
        "workflow_id": f"{session_id}-{turn}",
    }
    return client.enqueue(options, session_id, turn)


def result(handle: Any) -> Any:
    """Wait for a submitted turn to succeed; its result."""
    wait_for(f"workflow {handle.workflow_id}", lambda: handle.get_status().status == "SUCCESS")
    return handle.get_result()


def worker_argv(database_url: str, executor_id: str, *options: str) -> list[str]:
    """``hookloop worker``'s arguments: AGENT on ``database_url``, the tests' timings, then
    ``options`` (a later option wins)."""
    timings = ("--heartbeat", str(HEARTBEAT), "--dead-after", str(DEAD_AFTER))
    return [
        *("worker", "--database", database_url, "--agent", AGENT),
        *("--executor-id", executor_id, *timings, *options),
    ]


def hookloop_workers(database_url: str, runs_dir: Path, *options: str) -> Workers:
    """``hookloop worker`` processes (``worker_argv``), ready once they say they take turns."""
    return Workers(
        "hookloop",
        database_url,
        runs_dir,
        command=lambda executor_id: worker_argv(database_url, executor_id, *options),
        ready="taking turns",
    )


@dataclass(frozen=True, kw_only=True)
class Run:
    """One line of the runs file."""

    step: str
    session_id: str
    turn: int
    pid: int
    at: float


class Workers:
    """Worker processes of one test, all killed at its end."""

    def __init__(
        self,
        module: str,
        database_url: str,
        runs_dir: Path,
        *,
        command: Callable[[str], list[str]] | None = None,
        ready: str = "ready",
    ) -> None:
        """``python -m module`` with ``command(executor_id)`` as its arguments (by default
        the database URL and the id); it is ready when its standard output (with a
        ``command``: its standard error) says ``ready``."""
        self.module = module
        self.database_url = database_url
        self.dir = runs_dir
        self.command = command or (lambda executor_id: [database_url, executor_id])
        self.on_stderr = command is not None
        self.ready = ready
        self.procs: dict[str, subprocess.Popen[str]] = {}

    def start(self, *executor_ids: str) -> None:
        """Start one worker per id and wait until each is ready."""
        env = {**os.environ, "HOOKLOOP_TEST_RUNS": str(self.dir), "PYTHONUNBUFFERED": "1"}
        pipe = {"stderr" if self.on_stderr else "stdout": subprocess.PIPE}
        for executor_id in executor_ids:
            self.procs[executor_id] = subprocess.Popen(
                [sys.executable, "-m", self.module, *self.command(executor_id)],
                cwd=ROOT,
                env=env,
                text=True,
                **pipe,  # type: ignore[call-overload]
            )
        for executor_id in executor_ids:
            self._expect(executor_id)

    def _expect(self, executor_id: str) -> None:
        proc = self.procs[executor_id]
        stream = proc.stderr if self.on_stderr else proc.stdout
        assert stream is not None
        deadline = time.monotonic() + GUARD
        said = []
        while time.monotonic() < deadline:
            ready, _, _ = select.select([stream], [], [], deadline - time.monotonic())
            line = stream.readline() if ready else ""
            if self.ready in line:
                return
            said.append(line)
            if not line:
                break
        pytest.fail(f"worker {executor_id} did not get ready (exit {proc.poll()}): {said}")

    def pid(self, executor_id: str) -> int:
        return self.procs[executor_id].pid

    def by_pid(self, pid: int) -> str:
        return next(eid for eid, proc in self.procs.items() if proc.pid == pid)

    def kill(self, executor_id: str) -> None:
        """SIGKILL one worker and reap it."""
        proc = self.procs[executor_id]
        proc.send_signal(signal.SIGKILL)
        proc.wait(GUARD)

    def terminate(self, executor_id: str) -> int:
        """SIGTERM one worker (a graceful stop); its exit status."""
        proc = self.procs[executor_id]
        proc.send_signal(signal.SIGTERM)
        return proc.wait(GUARD)

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(GUARD)
            for stream in (proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()

    def runs(self) -> list[Run]:
        path = self.dir / "runs"
        if not path.exists():
            return []
        found = []
        for line in path.read_text().splitlines():
            step, session_id, turn, pid, at = line.split()
            found.append(
                Run(step=step, session_id=session_id, turn=int(turn), pid=int(pid), at=float(at))
            )
        return found

    def ran(self, step: str, session_id: str, turn: int) -> list[Run]:
        return [
            run
            for run in self.runs()
            if (run.step, run.session_id, run.turn) == (step, session_id, turn)
        ]

    def hold(self, step: str, session_id: str) -> Path:
        path = self.dir / f"hold-{step}-{session_id}"
        path.touch()
        return path


class OwnPostgres:
    """A PostgreSQL server of one test's own (a throwaway cluster), to stop and start at will.

    Only for tests that take the database away: the shared server of ``scripts/test-services``
    stays up for every other test. Runs as the ``postgres`` user when the tests run as root.
    """

    def __init__(self) -> None:
        import shutil
        import socket
        import tempfile

        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
        if not found and shutil.which("initdb") is None:
            pytest.skip("no PostgreSQL binaries (scripts/test-services installs them)")
        self.bin = found[-1].parent if found else Path(shutil.which("initdb") or "").parent
        self.dir = Path(tempfile.mkdtemp(prefix="hookloop-own-pg-"))
        self.data = self.dir / "data"
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._as = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        if self._as:
            shutil.chown(self.dir, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync")
        self.start()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run(
            [*self._as, str(self.bin / tool), *args],
            check=True,
            capture_output=True,
            timeout=GUARD,
        )

    def start(self) -> None:
        """Start the server (again) on its port; returns once it takes connections."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' "
            "-c fsync=off -c max_connections=60"
        )
        log = str(self.dir / "log")
        self._run("pg_ctl", "-D", str(self.data), "-w", "-l", log, "-o", options, "start")

    def stop(self) -> None:
        """Stop the server at once (its clients' connections die)."""
        self._run("pg_ctl", "-D", str(self.data), "-w", "-m", "immediate", "stop")

    def close(self) -> None:
        import shutil

        subprocess.run(
            [*self._as, str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
            capture_output=True,
            timeout=GUARD,
        )
        shutil.rmtree(self.dir, ignore_errors=True)
