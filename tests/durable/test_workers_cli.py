"""``hookloop worker`` and ``run_worker``: bad arguments, fencing, stopping, app and version."""

from __future__ import annotations

import asyncio
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO

import psycopg
import pytest

from hookloop import UsageError, WorkerFencedError
from hookloop._cli import EXIT_USAGE, main
from hookloop.durable._dbos import APPLICATION_VERSION
from hookloop.durable._lease import TABLE, ExecutorLease
from hookloop.durable._workers import Worker, WorkerTimings
from tests.durable._workers_support import AGENT, GUARD, ROOT, Workers, hookloop_workers, wait_for


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--database", "sqlite:///turns.db"], "is not a postgresql:// URL"),
        (["--heartbeat", "1", "--dead-after", "2"], "must be at least three heartbeats"),
        (["--heartbeat", "0"], "heartbeat must be a positive number of seconds"),
        (["--pool-size", "0"], "pool_size must be a positive int, got 0"),
        (["--sessions-pool", "0"], "max_connections must be at least 1, got 0"),
    ],
)
def test_bad_worker_arguments_are_refused_with_a_usage_error(
    arguments: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    given = ["--database", "postgresql://nowhere.invalid/app", "--agent", "support:build"]
    assert main(["worker", *given, *arguments]) == EXIT_USAGE
    assert said in capsys.readouterr().err


def test_a_worker_taken_for_dead_learns_it_at_its_next_beat_and_stops(database_url: str) -> None:
    fenced = threading.Event()
    caught: list[WorkerFencedError] = []

    def on_fenced(exc: WorkerFencedError) -> None:
        caught.append(exc)
        fenced.set()

    worker = Worker(
        database_url,
        app_name="app",
        executor_id="slow",
        timings=WorkerTimings(heartbeat=0.05, dead_after=0.15),
        on_fenced=on_fenced,
    )
    with ExecutorLease(
        database_url,
        app_name="app",
        application_version=APPLICATION_VERSION,
        executor_id="live",
        dead_after=0,
    ) as live:
        worker.start()
        try:
            live.join()
            # dead_after=0: every other executor counts as dead, as a stalled worker would.
            assert live.claim_dead() == ["slow"]
            assert fenced.wait(GUARD)
        finally:
            worker.stop()
    assert worker.fenced is caught[0]
    assert caught[0].executor_id == "slow"


def test_a_worker_process_taken_for_dead_ends_with_status_1(
    database_url: str, tmp_path: Path
) -> None:
    workers = hookloop_workers(database_url, tmp_path)
    try:
        workers.start("slow")
        with ExecutorLease(
            database_url,
            app_name="hookloop",
            application_version=APPLICATION_VERSION,
            executor_id="live",
            dead_after=0,
        ) as live:
            live.join()
            assert live.claim_dead() == ["slow"]
        proc = workers.procs["slow"]
        assert proc.wait(GUARD) == 1
        assert proc.stderr is not None
        assert "WorkerFencedError: executor 'slow' was declared dead" in proc.stderr.read()
    finally:
        workers.close()


def test_a_sessions_pool_for_a_store_passed_in_is_refused(tmp_path: Path) -> None:
    from hookloop.durable import run_worker
    from hookloop.sessions import SQLiteSessionStore

    store = SQLiteSessionStore(tmp_path / "sessions.db")
    with pytest.raises(UsageError, match="size the pool of the store passed as sessions"):
        asyncio.run(
            run_worker("postgresql://nowhere.invalid/app", AGENT, sessions=store, sessions_pool=3)
        )


def test_run_worker_taken_for_dead_raises_to_its_library_caller(
    database_url: str, tmp_path: Path
) -> None:
    workers = Workers("tests.durable._library_worker", database_url, tmp_path)
    try:
        workers.start("lib")
        with ExecutorLease(
            database_url,
            app_name="hookloop",
            application_version=APPLICATION_VERSION,
            executor_id="live",
            dead_after=0,
        ) as live:
            live.join()
            assert live.claim_dead() == ["lib"]
        proc = workers.procs["lib"]
        assert proc.wait(GUARD) == 3  # the caller caught it and chose how to end
        assert proc.stdout is not None
        assert proc.stdout.read() == "caught lib\n"
    finally:
        workers.close()


async def test_a_worker_with_its_own_app_name_and_version_takes_that_apps_turns(
    database_url: str, tmp_path: Path
) -> None:
    from hookloop.durable import DurableChats, SessionQueue
    from hookloop.sessions import PostgresSessionStore

    version = ("--app-name", "shop", "--application-version", "shop-7")
    workers = hookloop_workers(database_url, tmp_path, *version)
    store = PostgresSessionStore(database_url)
    try:
        workers.start("w1")
        queue = SessionQueue(database_url, app_name="shop", application_version="shop-7")
        async with queue:
            chats = DurableChats(queue, AGENT, sessions=store)
            handle = await chats.submit("s1", "s1 1")
            response = await asyncio.wait_for(handle.result(), GUARD)
        assert response.text == "charged 1: ok"
        with psycopg.connect(database_url, autocommit=True) as conn:
            rows = conn.execute(f"SELECT app_name, application_version FROM {TABLE}").fetchall()
        assert rows == [("shop", "shop-7")]
    finally:
        await store.close()
        workers.close()


async def test_a_second_sigterm_cuts_the_grace_short(database_url: str, tmp_path: Path) -> None:
    from hookloop.durable import DurableChats, SessionQueue
    from hookloop.sessions import PostgresSessionStore

    workers = hookloop_workers(database_url, tmp_path, "--grace", "600")  # beyond the guard
    store = PostgresSessionStore(database_url)
    try:
        workers.start("w1")
        workers.hold("tool", "s1")
        async with SessionQueue(database_url) as queue:
            await DurableChats(queue, AGENT, sessions=store).submit("s1", "s1 1")
            await asyncio.to_thread(wait_for, "the tool", lambda: workers.ran("tool", "s1", 1))
        proc = workers.procs["w1"]
        proc.send_signal(signal.SIGTERM)
        assert proc.stderr is not None
        await asyncio.to_thread(said, proc.stderr, "running turns get 600.0 s to finish")
        proc.send_signal(signal.SIGTERM)  # the first one was served: this is the second
        assert await asyncio.to_thread(proc.wait, GUARD) == 0
        assert "hookloop worker: left 1 running turns to a live worker" in proc.stderr.read()
    finally:
        await store.close()
        workers.close()


def said(stream: IO[str], text: str) -> None:
    """Read ``stream`` until a line holds ``text``; fail after the guard."""
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], deadline - time.monotonic())
        line = stream.readline() if ready else ""
        if text in line:
            return
        if ready and not line:
            break
    pytest.fail(f"never said {text!r}")


def test_an_unreachable_database_is_one_line_without_debug() -> None:
    nowhere = "postgresql://postgres@127.0.0.1:1/app"  # port 1: nothing listens
    done = subprocess.run(
        [sys.executable, "-m", "hookloop", "worker", "--database", nowhere, "--agent", AGENT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert done.returncode == 1
    assert done.stderr.startswith("hookloop: OperationalError: connection failed: ")
    assert done.stderr.count("\n") == 1
