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
``no-trace`` is ``create_app(trace=False)``.

The durable mode of the issue is not built, so it is not measured here. Run it from a
checkout with the serve extra installed::

    python bench/serve.py              # a table
    python bench/serve.py --json       # the same figures as one JSON object
    python bench/serve.py --sizes 10 100
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


# --- the servers (run as `python bench/serve.py --serve KIND DIR`) ---------------------------


def _hookloop_app(folder: Path, *, trace: bool) -> Any:
    from hookloop import Agent
    from hookloop.serve import create_app
    from hookloop.testing import FunctionModel

    async def answer(request: object) -> str:
        while (folder / HOLD_FILE).exists():  # noqa: ASYNC110 (set by another process)
            await asyncio.sleep(0.05)
        return "The answer is forty-two."

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


async def _round(url: str, folder: Path, pid: int, size: int) -> dict[str, float]:
    limits = httpx2.Limits(max_connections=size + 10, max_keepalive_connections=size + 10)
    timeout = httpx2.Timeout(120.0)
    async with httpx2.AsyncClient(base_url=url, limits=limits, timeout=timeout) as client:
        # latency and throughput: answers at once
        firsts: list[float] = []
        started = asyncio.Event()
        cpu = _cpu_s(pid)
        begin = time.perf_counter()
        await asyncio.gather(*(_one(client, n, firsts, started, size) for n in range(size)))
        wall = time.perf_counter() - begin
        cpu = _cpu_s(pid) - cpu
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
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", kind, str(folder)],
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        )
        port_file = folder / "port"
        deadline = time.monotonic() + 60
        while not port_file.exists():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise RuntimeError(f"the {kind} server did not start")
            time.sleep(0.05)
        self.url = f"http://127.0.0.1:{port_file.read_text()}"

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


async def _measure(sizes: list[int], base: Path) -> dict[str, Any]:
    servers = {kind: _Server(kind, base / kind) for kind in KINDS}
    try:
        for server in servers.values():  # warm up: imports, first agent, first connections
            await _round(server.url, server.folder, server.process.pid, 10)
        results: dict[str, Any] = {}
        for size in sizes:
            rounds: dict[str, list[dict[str, float]]] = {kind: [] for kind in servers}
            for _ in range(ROUNDS):
                for kind, server in servers.items():
                    figures = await _round(server.url, server.folder, server.process.pid, size)
                    rounds[kind].append(figures)
            row: dict[str, Any] = {}
            for kind, figures in rounds.items():
                row[kind] = {
                    key: round(statistics.median(f[key] for f in figures), 2) for key in figures[0]
                }
            for kind in ("hookloop", "no-trace"):
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
    parser.add_argument("--serve", nargs=2, metavar=("KIND", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve[0], Path(args.serve[1]))
        return
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        results = asyncio.run(_measure(args.sizes, Path(folder)))
    if args.json:
        print(json.dumps(results))
        return
    print(
        f"{'N':>5} {'server':<9} {'runs/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'KB/stream':>10} "
        f"{'CPU ms/run':>10} {'p50 x':>6} {'CPU x':>6}"
    )
    for size, row in results.items():
        for kind in KINDS:
            f = row[kind]
            print(
                f"{size:>5} {kind:<9} {f['runs_per_s']:>8.1f} {f['ttfe_p50_ms']:>8.2f} "
                f"{f['ttfe_p99_ms']:>8.2f} {f['stream_kb']:>10.1f} {f['cpu_ms_per_run']:>10.2f} "
                f"{f.get('ttfe_ratio', ''):>6} {f.get('cpu_ratio', ''):>6}"
            )


if __name__ == "__main__":
    main()
