"""``hookloop worker --engine temporal`` and ``run_temporal_worker``: turns, stopping, bad input.

The worker processes are judged by what they print: the Temporal SDK can abort a process at
interpreter exit, which ``hookloop worker`` avoids by ending itself once stopped.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from hookloop._cli import EXIT_USAGE, main
from hookloop.durable import DurableChats, TemporalEngine, run_temporal_worker
from hookloop.sessions import SQLiteSessionStore
from tests._processes import GUARD
from tests.conftest import unique_name
from tests.durable import _agents
from tests.durable._temporal_support import QUICK
from tests.durable.test_turns import until
from tests.sessions._backends import ROOT

AGENT = "tests.durable._agents:echo_agent"


def start_worker(
    address: str, queue: str, sessions: Path, agent: str = AGENT
) -> subprocess.Popen[str]:
    """``hookloop worker --engine temporal``, returned once it says it takes turns."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookloop",
            "worker",
            "--engine",
            "temporal",
            "--address",
            address,
            "--task-queue",
            queue,
            "--agent",
            agent,
            "--sessions",
            str(sessions),
            "--grace",
            "1",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()  # blocks until it says something (or ends)
    assert "taking turns from task queue" in line, line + process.stderr.read()
    return process


async def test_the_command_runs_turns_and_stops_on_sigterm(
    temporal_address: str, tmp_path: Path
) -> None:
    queue = unique_name("cli")
    process = start_worker(temporal_address, queue, tmp_path / "s.db")
    try:
        engine = TemporalEngine(temporal_address, task_queue=queue, worker=False)
        store = SQLiteSessionStore(tmp_path / "s.db")
        chats = DurableChats(engine, AGENT, sessions=store)
        async with engine:
            response = await chats.chat(queue, "say hi", turn_id="t-1")
        await store.close()
        assert response.text == "said hi"
        os.kill(process.pid, signal.SIGTERM)
        _, errors = process.communicate(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert "hookloop worker: stopping" in errors
    assert errors.rstrip().endswith("hookloop worker: stopped"), errors
    assert process.returncode == 0


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["--agent", AGENT], "hookloop worker needs --database (or --engine temporal)"),
        (["--engine", "temporal", "--agent", AGENT], "needs --sessions URL"),
    ],
)
def test_missing_arguments_are_a_usage_error(
    arguments: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["worker", *arguments]) == EXIT_USAGE
    assert said in capsys.readouterr().err


async def test_the_python_form_runs_turns_until_stopped(
    temporal_address: str, tmp_path: Path
) -> None:
    queue = unique_name("py")
    stop, ready = asyncio.Event(), asyncio.Event()
    store = SQLiteSessionStore(tmp_path / "s.db")
    worker = asyncio.ensure_future(
        run_temporal_worker(
            temporal_address,
            AGENT,
            sessions=store,
            task_queue=queue,
            grace=QUICK["grace"],
            stop=stop,
            on_ready=lambda engine: ready.set(),
        )
    )
    await ready.wait()
    engine = TemporalEngine(temporal_address, task_queue=queue, worker=False)
    chats = DurableChats(engine, AGENT, sessions=store)
    async with engine:
        assert (await chats.chat(queue, "say hi", turn_id="t-1")).text == "said hi"
    stop.set()
    await worker  # returns once stopped
    await store.close()
    _agents.calls.clear()


async def test_a_task_queue_nobody_polls_is_logged_at_the_first_start(
    temporal_address: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A submitter whose queue name has a typo: its turn would wait for ever, silently.
    queue = unique_name("typo")
    engine = TemporalEngine(temporal_address, task_queue=queue, worker=False)
    store = SQLiteSessionStore(tmp_path / "s.db")
    chats = DurableChats(engine, AGENT, sessions=store)
    async with engine:
        with caplog.at_level(logging.WARNING, logger="hookloop.durable._temporal"):
            handle = await chats.submit("s", "say hi", turn_id="t-1")
        await handle.cancel()  # nothing runs it: it ends cancelled at once
    await store.close()
    assert [r.getMessage() for r in caplog.records] == [
        f"no worker polls the task queue {queue!r} at {temporal_address}: its turns wait "
        "until one does (is the queue's name the workers' --task-queue?)"
    ]


async def test_a_worker_stopped_during_a_call_leaves_it_to_another_worker(
    temporal_address: str, tmp_path: Path
) -> None:
    # The tool (not idempotent) outlasts the first worker's grace: that worker stops
    # without recording or cancelling it (no "cancelled" answer in the session); the second
    # worker answers the call "result lost", and the tool, left to end, runs once.
    queue = unique_name("stop")
    store = SQLiteSessionStore(tmp_path / "s.db")
    agent = "tests.durable._agents:slow_note_agent"
    first, second = (
        TemporalEngine(temporal_address, task_queue=queue, **{**QUICK, "grace": 0.1})
        for _ in range(2)
    )
    chats = DurableChats(first, agent, sessions=store)
    joining = DurableChats(second, agent, sessions=store)
    _agents.calls.clear()
    _agents.gate = asyncio.Event()
    try:
        await first.launch()
        await chats.submit(queue, "note it", turn_id="t-1")
        await until(lambda: _agents.calls == ["slow_note x"])
        await first.shutdown()  # the grace ends while the tool waits
        async with second:  # joins the turn, whose call it runs again
            response = await (await joining.submit(queue, "note it", turn_id="t-1")).result()
        _agents.gate.set()
        await until(lambda: _agents.calls == ["slow_note x", "slow_note x done"])
    finally:
        _agents.gate = None
    lost = "result lost in a crash: the worker running tool 'slow_note' stopped"
    assert response.text.startswith(f"after: {lost}")
    assert [m.content[:20] for m in response.messages] == [
        "note it",
        "",
        lost[:20],
        "after: result lost i",
    ]
    assert [r.message for r in await store.records(queue)] == list(response.messages)
    await store.close()
