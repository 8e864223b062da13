"""The cost of durable turns on DBOS (SQLite), and how long a killed worker's turn takes to end.

    python bench/durable.py            # a readable table
    python bench/durable.py --json     # one JSON object with the same figures

Everything runs on SQLite files in a temporary directory (DBOS's system database and the
session store), with the scripted function model, which answers at once:

- ``dbos_empty_step_ms``: DBOS's own cost of one step whose body does nothing: a workflow
  of as many such steps as the turn below has (``dbos_steps_workflow_ms``), minus an empty
  workflow (``dbos_empty_workflow_ms``), per step; measured in this run.
- ``durable_step_ms``: what durability adds per step of a hookloop turn: a durable turn of
  ``TOOLS`` idempotent tool calls and a final answer (one step per model call, one per tool
  call, one at the start) minus the same turn without durability, minus an empty DBOS
  workflow, per step. ``step_ratio`` is it over ``dbos_empty_step_ms`` (the aim: <= 1.2);
  ``durability_over_dbos_workflow`` compares the whole: what durability adds to the turn
  over the DBOS workflow of as many empty steps.
- ``turn_ms`` / ``durable_turn_ms``: that turn without and with durability (both record the
  session in the same kind of store), median of ``--turns``; ``turn_ratio`` their ratio.
- ``recovery_s``: a worker process killed (SIGKILL) while a tool runs, started again with
  the same ``executor_id``: seconds from the kill until the restarted worker has the turn's
  answer, which includes starting Python, importing hookloop and DBOS, and DBOS's wait of
  about a second before it recovers. ``recovery_restart_s`` is the same restart for a
  turn that was not interrupted (the restart alone), so the difference is the recovery.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from hookloop import Agent, tool
from hookloop.durable import DBOSEngine, DurableChats
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import FunctionModel, tool_call

TOOLS = 10
STEPS_PER_TURN = 1 + (TOOLS + 1) + TOOLS  # the start, the model calls, the tool calls


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
    await engine.launch()
    try:

        async def workflow(count: int, wid: str) -> float:
            start = time.perf_counter()
            with SetWorkflowID(wid):
                handle = await DBOS.start_workflow_async(steps_workflow, count)
            await handle.get_result()
            return time.perf_counter() - start

        async def durable_turn(i: int) -> float:
            start = time.perf_counter()
            response = await chats.chat(f"durable-{i}", "count")
            assert response.iterations == TOOLS + 1
            return time.perf_counter() - start

        async def plain_turn(i: int) -> float:
            agent = build()
            agent.use(sessions.session(f"plain-{i}"))
            start = time.perf_counter()
            await agent.chat("count")
            return time.perf_counter() - start

        await workflow(1, "warm-up")
        await durable_turn(-1)
        empty, full, durable, plain = [], [], [], []
        for i in range(turns):  # interleaved, so a change in the machine's load hits all
            empty.append(await workflow(0, f"empty-{i}"))
            full.append(await workflow(STEPS_PER_TURN, f"steps-{i}"))
            durable.append(await durable_turn(i))
            plain.append(await plain_turn(i))
    finally:
        await engine.shutdown()
        await sessions.close()
    empty_ms, full_ms = statistics.median(empty) * 1e3, statistics.median(full) * 1e3
    turn, durable_turn = statistics.median(plain) * 1e3, statistics.median(durable) * 1e3
    empty_step = (full_ms - empty_ms) / STEPS_PER_TURN
    durable_step = (durable_turn - turn - empty_ms) / STEPS_PER_TURN
    return {
        "dbos_empty_workflow_ms": empty_ms,
        "dbos_steps_workflow_ms": full_ms,
        "dbos_empty_step_ms": empty_step,
        "durable_step_ms": durable_step,
        "step_ratio": durable_step / empty_step,
        "turn_ms": turn,
        "durable_turn_ms": durable_turn,
        "turn_ratio": durable_turn / turn,
        "durability_over_dbos_workflow": (durable_turn - turn) / full_ms,
    }


async def _worker(directory: Path) -> None:
    """A worker process: run (or resume) the turn ``t`` of session ``r``, print the answer."""
    sessions = SQLiteSessionStore(directory / "sessions.db")
    engine = DBOSEngine(f"sqlite:///{directory / 'dbos.db'}", executor_id="bench-worker")
    chats = DurableChats(engine, "bench.durable:build", sessions=sessions)
    async with engine:
        response = await chats.chat("r", "count", turn_id="t")
    await sessions.close()
    print(response.text, flush=True)


def _spawn(directory: Path, stop: str) -> subprocess.Popen[str]:
    env = {**os.environ, "BENCH_DURABLE_DIR": str(directory), "BENCH_DURABLE_STOP": stop}
    root = Path(__file__).resolve().parents[1]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        [sys.executable, "-m", "bench.durable", "--worker", str(directory)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> None:
    out, _ = process.communicate(timeout=120)
    if process.returncode != 0 or not out.startswith("done"):
        raise RuntimeError(f"the worker did not finish the turn: {out!r}")


def _recovery(directory: Path) -> dict[str, float]:
    killed_dir, plain_dir = directory / "killed", directory / "plain"
    killed_dir.mkdir()
    plain_dir.mkdir()
    first = _spawn(killed_dir, "tool")
    deadline = time.monotonic() + 120
    while not (killed_dir / "reached").exists():
        if first.poll() is not None or time.monotonic() > deadline:
            first.kill()
            raise RuntimeError("the worker never reached the tool")
        time.sleep(0.01)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    start = time.monotonic()
    _finish(_spawn(killed_dir, "none"))
    recovery = time.monotonic() - start
    _finish(_spawn(plain_dir, "none"))  # the turn, done once
    start = time.monotonic()
    _finish(_spawn(plain_dir, "none"))  # a restart that finds it done
    return {"recovery_s": recovery, "recovery_restart_s": time.monotonic() - start}


def measure(turns: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        figures: dict[str, Any] = asyncio.run(_timed_dbos(Path(tmp), turns))
        figures.update(_recovery(Path(tmp)))
    figures["scenario"] = (
        f"SQLite; a turn of {TOOLS} idempotent tool calls and an answer "
        f"({STEPS_PER_TURN} steps) and a DBOS workflow of as many empty steps, "
        f"median of {turns} of each"
    )
    figures["load_average"] = os.getloadavg()[0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--turns", type=int, default=7, help="runs per figure (median)")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker is not None:
        asyncio.run(_worker(args.worker))
        return
    figures = measure(args.turns)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(figures["scenario"])
    print(f"  DBOS empty step          {figures['dbos_empty_step_ms']:8.2f} ms")
    print(
        f"  durability per step      {figures['durable_step_ms']:8.2f} ms"
        f"   ({figures['step_ratio']:.2f}x DBOS's empty step; aim <= 1.2x)"
    )
    print(f"  DBOS empty workflow      {figures['dbos_empty_workflow_ms']:8.2f} ms")
    print(
        f"  DBOS {STEPS_PER_TURN} empty steps      {figures['dbos_steps_workflow_ms']:8.2f} ms"
        f"   (the turn's durability: {figures['durability_over_dbos_workflow']:.2f}x that)"
    )
    print(f"  turn without durability  {figures['turn_ms']:8.2f} ms")
    print(
        f"  turn with durability     {figures['durable_turn_ms']:8.2f} ms"
        f"   ({figures['turn_ratio']:.1f}x)"
    )
    print(
        f"  recovery (kill -> done)  {figures['recovery_s']:8.2f} s"
        f"   (a restart alone: {figures['recovery_restart_s']:.2f} s)"
    )


if __name__ == "__main__":
    main()
