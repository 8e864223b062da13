"""``hookloop serve`` under load: N clients at once, each running one AG-UI run over SSE.

One server process (uvicorn, one worker) answers N clients that each POST a ``RunAgentInput``
on a thread of its own and read the stream to ``RUN_FINISHED``; the model is a function
model that answers at once, in pieces (no network, no tokens), so what is measured is the
server. The same clients, in the same run, against a minimal Starlette SSE endpoint that
sends a stream of the same shape (same number of events, no agent) are the floor. Rounds
alternate between the two servers, and each figure is the median over rounds.

Figures, per N (10, 100, 1,000):

- ``runs_per_s``: N divided by the time from the first request to the last stream's end;
- ``ttfe_p50_ms`` / ``ttfe_p99_ms``: time from sending the request to the first event;
- ``stream_kb``: the server's resident memory with N streams open (each run waits in its
  model call until all N have their first event), less its memory before, over N;
- ``cpu_ms_per_run``: the server process's CPU time over the round, per run (steadier than
  times on a busy machine);
- ``ttfe_ratio`` and ``cpu_ratio``: hookloop's p50 time to first event, and CPU per run, over
  the floor's (the aim: a latency 1.5 times the floor's at most).

``hookloop`` is ``create_app``'s defaults, which record each thread's trace (its trace page);
``no-trace`` is ``create_app(trace=False)``; ``durable`` (with ``--durable URL``, or with
``DATABASE_URL`` or scripts/test-services' database in the environment) is
``create_app(..., durable=URL)`` with one ``hookloop worker`` process on that PostgreSQL
database running the turns: its ``cpu_ms_per_run`` is the server's
and the worker's together, and it runs the sizes up to ``--durable-max`` (100) only. Run it
from a checkout with the serve extra installed::

    python bench/serve.py              # a table
    python bench/serve.py --json       # the same figures as one JSON object
    python bench/serve.py --sizes 10 100
    scripts/test-services run .venv/bin/python bench/serve.py --durable-max 100   # + durable
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

ROUNDS = 3
KINDS = ("minimal", "hookloop", "no-trace")  # no-trace: hookloop with create_app(trace=False)
HOLD_FILE = "hold"  # while this file exists in the server's folder, model calls wait
HOLD_ENV = "HOOKLOOP_BENCH_HOLD"  # the durable mode's worker: the hold file's path
DURABLE_AGENT = "serve:build_durable"  # this file, imported as `serve` by worker and server


async def _held_answer(hold: Path) -> str:
    while hold.exists():  # noqa: ASYNC110, ASYNC240 (set by another process)
        await asyncio.sleep(0.05)
    return "The answer is forty-two."


def build_durable() -> Any:
    """The agent of the durable mode's turns, built in the worker."""
    from hookloop import Agent
    from hookloop.testing import FunctionModel

    hold = Path(os.environ[HOLD_ENV])

    async def answer(request: object) -> str:
        return await _held_answer(hold)

    return Agent(FunctionModel(answer, chunk_size=6), retry=None, context=None)


# --- the servers (run as `python bench/serve.py --serve KIND DIR`) ---------------------------


def _hookloop_app(folder: Path, *, trace: bool) -> Any:
    from hookloop import Agent
    from hookloop.serve import create_app
    from hookloop.testing import FunctionModel

    async def answer(request: object) -> str:
        return await _held_answer(folder / HOLD_FILE)

    def build() -> Agent:
        return Agent(FunctionModel(answer, chunk_size=6), retry=None, context=None)

    return create_app(build, max_runs=100_000, keepalive=60, trace=trace)


def _minimal_app(folder: Path) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def agui(request: Request) -> StreamingResponse:
        body = json.loads(await request.body())
        thread, run = body["threadId"], body["runId"]

        async def events() -> Any:
            texts = ["The an", "swer i", "s fort", "y-two."]
            shapes: list[dict[str, Any]] = [
                {"type": "RUN_STARTED", "threadId": thread, "runId": run},
            ]
            n = 0
            for shape in shapes:
                n += 1
                yield f"id: {n}\ndata: {json.dumps(shape)}\n\n".encode()
            while (folder / HOLD_FILE).exists():  # noqa: ASYNC110 (set by another process)
                await asyncio.sleep(0.05)
            rest: list[dict[str, Any]] = [
                {"type": "TEXT_MESSAGE_START", "messageId": "m", "role": "assistant"},
                *({"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": t} for t in texts),
                {"type": "TEXT_MESSAGE_END", "messageId": "m"},
                {"type": "MESSAGES_SNAPSHOT", "messages": []},
                {"type": "CUSTOM", "name": "usage", "value": {}},
                {"type": "RUN_FINISHED", "threadId": thread, "runId": run},
            ]
            for shape in rest:
                n += 1
                yield f"id: {n}\ndata: {json.dumps(shape)}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    return Starlette(routes=[Route("/agui", agui, methods=["POST"])])


def _serve(kind: str, folder: Path) -> None:
    import uvicorn

    if kind == "minimal":
        app = _minimal_app(folder)
    elif kind == "durable":
        from hookloop.serve import create_app

        app = create_app(
            DURABLE_AGENT, durable=os.environ["DATABASE_URL"], max_runs=100_000, keepalive=60
        )
    else:
        app = _hookloop_app(folder, trace=kind == "hookloop")
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(4096)
    (folder / "port").write_text(str(listener.getsockname()[1]))
    config = uvicorn.Config(app, log_level="warning", backlog=4096, timeout_keep_alive=60)
    uvicorn.Server(config).run(sockets=[listener])


# --- the clients ------------------------------------------------------------------------------


def _cpu_s(pid: int) -> float:
    """The process's user and system CPU time so far (clock ticks: 10 ms steps)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def _one(
    client: httpx2.AsyncClient, n: int, firsts: list[float], started: asyncio.Event, total: int
) -> None:
    body = {
        "threadId": f"thread-{n}-{time.monotonic_ns()}",
        "runId": f"run-{n}-{time.monotonic_ns()}",
        "messages": [{"id": f"m{n}", "role": "user", "content": "What is the answer?"}],
    }
    sent = time.perf_counter()
    first = None
    async with client.stream("POST", "/agui", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {(await response.aread())[:200]!r}")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                if first is None:
                    first = time.perf_counter() - sent
                    firsts.append(first)
                    if len(firsts) == total:
                        started.set()
                if '"RUN_ERROR"' in line:
                    raise RuntimeError(line)
                if '"RUN_FINISHED"' in line:
                    return
    raise RuntimeError(f"the stream of run {n} ended before RUN_FINISHED")


async def _round(url: str, folder: Path, pids: list[int], size: int) -> dict[str, float]:
    pid = pids[0]  # the server; with a worker, the CPU is both's
    limits = httpx2.Limits(max_connections=size + 10, max_keepalive_connections=size + 10)
    timeout = httpx2.Timeout(120.0)
    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
        # latency and throughput: answers at once
        firsts: list[float] = []
        started = asyncio.Event()
        cpu = sum(_cpu_s(p) for p in pids)
        begin = time.perf_counter()
        await asyncio.gather(*(_one(client, n, firsts, started, size) for n in range(size)))
        wall = time.perf_counter() - begin
        cpu = sum(_cpu_s(p) for p in pids) - cpu
        # memory: N streams open, each run waiting in its model call
        idle = _rss_kb(pid)
        (folder / HOLD_FILE).touch()
        held: list[float] = []
        opened = asyncio.Event()
        tasks = [asyncio.ensure_future(_one(client, n, held, opened, size)) for n in range(size)]
        await asyncio.wait_for(opened.wait(), 120)
        await asyncio.sleep(0.3)  # the runs reach their model call
        busy = _rss_kb(pid)
        (folder / HOLD_FILE).unlink()
        await asyncio.gather(*tasks)
    ordered = sorted(firsts)
    return {
        "runs_per_s": size / wall,
        "ttfe_p50_ms": statistics.median(ordered) * 1000,
        "ttfe_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "stream_kb": max(busy - idle, 0) / size,
        "cpu_ms_per_run": cpu * 1000 / size,
    }


class _Server:
    def __init__(self, kind: str, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.folder = folder
        here = Path(__file__).resolve().parent
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(here.parent), str(here)]),
            HOLD_ENV: str(folder / HOLD_FILE),
        }
        self.worker: subprocess.Popen[str] | None = None
        if kind == "durable":
            self.worker = _start_worker(env)
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", kind, str(folder)], env=env
        )
        port_file = folder / "port"
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"the {kind} server did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port_file.read_text()}"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in (self.process, self.worker) if p is not None]

    def stop(self) -> None:
        for process in (self.process, self.worker):
            if process is not None:
                process.terminate()
                process.wait(30)
                if process.stderr is not None:
                    process.stderr.close()


def _start_worker(env: dict[str, str]) -> subprocess.Popen[str]:
    """One ``hookloop worker`` running the durable mode's turns; once it takes turns."""
    command = ["worker", "--database", env["DATABASE_URL"], "--agent", DURABLE_AGENT]
    worker = subprocess.Popen(
        [sys.executable, "-m", "hookloop", *command], env=env, stderr=subprocess.PIPE, text=True
    )
    assert worker.stderr is not None
    for line in worker.stderr:
        if "taking turns" in line:
            return worker
    raise RuntimeError(f"the worker stopped with status {worker.wait()}")


async def _measure(sizes: list[int], base: Path, durable_max: int) -> dict[str, Any]:
    kinds = [*KINDS, "durable"] if durable_max else list(KINDS)
    servers = {kind: _Server(kind, base / kind) for kind in kinds}
    try:
        for server in servers.values():  # warm up: imports, first agent, first connections
            await _round(server.url, server.folder, server.pids, 10)
        results: dict[str, Any] = {}
        for size in sizes:
            now = {k: v for k, v in servers.items() if k != "durable" or size <= durable_max}
            rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in now}
            for _ in range(ROUNDS):
                for kind, server in now.items():
                    figures = await _round(server.url, server.folder, server.pids, size)
                    rounds[kind].append(figures)
            row: dict[str, Any] = {}
            for kind, taken in rounds.items():
                row[kind] = {
                    key: round(statistics.median(f[key] for f in taken), 2) for key in taken[0]
                }
            for kind in [k for k in row if k != "minimal"]:
                floor = row["minimal"]
                row[kind]["ttfe_ratio"] = round(row[kind]["ttfe_p50_ms"] / floor["ttfe_p50_ms"], 2)
                row[kind]["cpu_ratio"] = round(
                    row[kind]["cpu_ms_per_run"] / max(floor["cpu_ms_per_run"], 0.01), 2
                )
            results[str(size)] = row
        return results
    finally:
        for server in servers.values():
            server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument(
        "--durable",
        metavar="URL",
        default=os.environ.get("DATABASE_URL") or os.environ.get("HOOKLOOP_TEST_POSTGRES_DSN"),
        help="measure the durable mode on this PostgreSQL database too (default: DATABASE_URL)",
    )
    parser.add_argument(
        "--durable-max",
        type=int,
        default=100,
        metavar="N",
        help="the largest N the durable mode runs (100)",
    )
    parser.add_argument("--serve", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve[0], Path(args.serve[1]))
        return
    import tempfile

    if args.durable:
        os.environ["DATABASE_URL"] = args.durable
    with tempfile.TemporaryDirectory() as folder:
        results = asyncio.run(
            _measure(args.sizes, Path(folder), args.durable_max if args.durable else 0)
        )
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"{'N':>5} {'server':<9} {'runs/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'KB/stream':>10} "
        f"{'CPU ms/run':>10} {'p50 x':>6} {'CPU x':>6}"
    )
    for size, row in results.items():
        for kind, f in row.items():
            print(
                f"{size:>5} {kind:<9} {f['runs_per_s']:>8.1f} {f['ttfe_p50_ms']:>8.2f} "
                f"{f['ttfe_p99_ms']:>8.2f} {f['stream_kb']:>10.1f} {f['cpu_ms_per_run']:>10.2f} "
                f"{f.get('ttfe_ratio', ''):>6} {f.get('cpu_ratio', ''):>6}"
            )


if __name__ == "__main__":
    main()
