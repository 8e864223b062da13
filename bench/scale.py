"""Many worker processes on one PostgreSQL database: chats/s, latency, conflicts, CPU.

    python bench/scale.py                # a readable table
    python bench/scale.py --json         # one JSON object with the same figures
    python bench/scale.py --quick        # fewer chats per configuration (1-1.5 minutes)
    python bench/scale.py --lone         # one chat at a time: what durability adds (30 s)

Every configuration starts N worker processes (1, 2, 4) on a PostgreSQL database of its own
(loopback only) and gives them a fixed list of chats:

- ``cold``: 1,000 sessions, one chat each (a new session per chat);
- ``hot``: 20 sessions, many chats each (a session's log grows while the run goes on);
- model latency 0 or 200 ms per model call (a function model that waits, then asks for a tool
  once and answers: 4 messages appended per chat: question, tool call, tool result, answer).

Routing says which worker serves a chat: ``sticky`` sends all chats of a session to one
worker (which runs them one at a time), ``random`` sends each chat to any worker, so two
workers can write one session at once: their appends conflict, the chat is retried from a
fresh restore up to three times, and a chat that still conflicts is a give-up.

With ``--mode durable`` (needs ``hookloop[dbos]``) each chat is run as a durable turn: the
workers are ``hookloop worker`` processes and the turns are submitted to the session queue,
a session's turns all at once (the queue runs them one at a time).

Figures per configuration: ``chats_per_s``, ``appends_per_s`` (messages in the store at the
end / wall time), ``p50_ms``/``p99_ms`` (one chat, from its first attempt or its submission
to its answer), ``conflicts`` (none with durability: the queue never runs two turns of a
session at once), ``give_ups``, ``worker_cpu`` and ``db_cpu`` (CPU seconds per wall second,
i.e. cores busy, read from /proc: the bench must run on the database's machine), and with
durability ``submitter_cpu``, the bench process that submits the turns and waits for them.
Each worker's pools are sized to the server's ``max_connections`` divided among the workers
(durable workers: ``hookloop worker --pool-size N --sessions-pool M``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import stores
from hookloop import Agent, SessionConflictError, ToolMessage, tool
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, text_response, tool_call

BENCH = Path(__file__).resolve().parent
HOT_SESSIONS = 20
RESERVED_CONNECTIONS = 10  # left for the bench itself, psql, and the server's own
MAX_POOL = 16
ATTEMPTS = 3  # a chat that conflicts is retried from a fresh restore; then it is given up
START_TIMEOUT = 120.0  # seconds a durable worker gets to start taking turns
TURN_TIMEOUT = 300.0  # seconds a durable turn gets to be submitted, and then to answer


@dataclass(frozen=True, kw_only=True)
class Config:
    """One measured configuration."""

    mode: str  # plain (Agent + session store) / durable (hookloop worker + session queue)
    workers: int
    sessions: str  # cold / hot
    latency_ms: int
    routing: str  # sticky / random
    chats: int
    in_flight: int | None = None  # chats at once (None: 64 durable, 4 per pool connection plain)


@dataclass(frozen=True, kw_only=True)
class Plan:
    """What one worker process does: its chats, as (session id, chat number)."""

    dsn: str
    pool: int
    concurrency: int
    latency_ms: int
    chats: list[tuple[str, int]]


# --- the agent (both modes) ------------------------------------------------------------------


@tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: What to look up.
    """
    return f"{topic}: 400 days"


def agent(latency_ms: int) -> Agent:
    """The chat's agent: a model that waits ``latency_ms``, asks for ``lookup``, answers."""

    async def answer(request: ProviderRequest) -> ProviderResponse:
        if latency_ms:
            await asyncio.sleep(latency_ms / 1000)
        if isinstance(request.messages[-1], ToolMessage):
            return text_response("The audit logs are kept for 400 days.")
        return tool_call("lookup", {"topic": "retention"})

    return Agent(FunctionModel(answer), tools=[lookup])


def durable_agent() -> Agent:
    """The agent of a durable turn, built in the ``hookloop worker`` processes."""
    return agent(int(os.environ.get("SCALE_LATENCY_MS", "0")))


# --- the worker process (without durability) --------------------------------------------------


async def serve(plan: Plan) -> None:
    """Run a plan's chats (one at a time per session, ``concurrency`` at once)."""
    from hookloop.sessions import PostgresSessionStore

    store = PostgresSessionStore(plan.dsn, max_connections=plan.pool)
    await store.list_sessions(limit=1)  # connect and create the schema before the clock runs
    print("ready", flush=True)
    await asyncio.to_thread(sys.stdin.readline)  # "go"

    locks: dict[str, asyncio.Lock] = {}
    gate = asyncio.Semaphore(plan.concurrency)
    latencies: list[float] = []
    conflicts = give_ups = 0

    async def chat(session_id: str, number: int) -> None:
        nonlocal conflicts, give_ups
        async with gate, locks.setdefault(session_id, asyncio.Lock()):
            start = time.perf_counter()  # a retried chat's latency counts its failed attempts
            for _ in range(ATTEMPTS):
                bot = agent(plan.latency_ms)
                bot.use(store.session(session_id))
                try:
                    await bot.chat(f"How long are audit logs kept? ({number})")
                except SessionConflictError:
                    conflicts += 1
                    continue
                latencies.append(time.perf_counter() - start)
                return
            give_ups += 1

    cpu = time.process_time()
    await asyncio.gather(*(chat(session_id, number) for session_id, number in plan.chats))
    cpu = time.process_time() - cpu
    figures = {"latencies": latencies, "conflicts": conflicts, "give_ups": give_ups, "cpu": cpu}
    print(json.dumps(figures), flush=True)
    # The pool stays open until the parent has read the server's CPU: a backend that has
    # ended takes its CPU time with it.
    await asyncio.to_thread(sys.stdin.readline)
    await store.close()


def worker_main(plan_json: str) -> None:
    # A conflicting append is counted here; the recorder's own report of it is noise.
    logging.getLogger("hookloop").setLevel(logging.CRITICAL)
    plan = Plan(**json.loads(plan_json))
    plan = Plan(**{**asdict(plan), "chats": [tuple(chat) for chat in plan.chats]})
    asyncio.run(serve(plan))


# --- the parent: databases, workers, CPU --------------------------------------------------------


def postgres_cpu(dsn: str) -> float:
    """CPU seconds used so far by every process of the (local) PostgreSQL server."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        backend = conn.execute("SELECT pg_backend_pid()").fetchone()
        assert backend is not None
        postmaster = _stat(backend[0])[0]
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid, cpu = _stat(int(entry))
            except OSError:  # it ended meanwhile
                continue
            if ppid == postmaster or int(entry) == postmaster:
                total += cpu / ticks
    return total


def _stat(pid: int) -> tuple[int, int]:
    """(parent pid, user + system clock ticks) of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), int(fields[11]) + int(fields[12])


def with_schema(dsn: str, schema: str) -> str:
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}options=-c%20search_path%3D{schema}"


def chat_list(config: Config) -> list[tuple[str, int]]:
    """The configuration's chats as (session id, chat number)."""
    if config.sessions == "cold":
        return [(f"cold-{i}", 0) for i in range(config.chats)]
    return [(f"hot-{i % HOT_SESSIONS}", i) for i in range(config.chats)]


def plans(config: Config, dsn: str, max_connections: int) -> list[Plan]:
    chats = chat_list(config)
    owners = [[] for _ in range(config.workers)]  # type: list[list[tuple[str, int]]]
    rng = random.Random(7)
    for session_id, number in chats:
        if config.routing == "sticky":
            owner = int(session_id.rsplit("-", 1)[1]) % config.workers
        else:
            owner = rng.randrange(config.workers)
        owners[owner].append((session_id, number))
    pool = max(2, min(MAX_POOL, (max_connections - RESERVED_CONNECTIONS) // config.workers))
    return [
        Plan(
            dsn=dsn,
            pool=pool,
            concurrency=config.in_flight or 4 * pool,
            latency_ms=config.latency_ms,
            chats=own,
        )
        for own in owners
    ]


def run(config: Config, dsn: str, max_connections: int) -> dict[str, Any]:
    import psycopg

    schema = f"scale_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    place = with_schema(dsn, schema)
    procs = []
    try:
        for plan in plans(config, place, max_connections):
            procs.append(
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", json.dumps(asdict(plan))],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "ready"
        db_cpu = postgres_cpu(dsn)
        start = time.perf_counter()
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        results = []
        for proc in procs:
            assert proc.stdout is not None
            results.append(json.loads(proc.stdout.readline()))
        wall = time.perf_counter() - start
        db_cpu = postgres_cpu(dsn) - db_cpu
        with psycopg.connect(place, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM hookloop_messages").fetchone()
        appended = row[0] if row else 0
    finally:
        for proc in procs:
            if proc.stdin is not None:
                proc.stdin.close()  # the worker closes its pool and exits
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    return figures(
        config,
        wall,
        sorted(seconds for result in results for seconds in result["latencies"]),
        appended,
        sum(result["conflicts"] for result in results),
        sum(result["give_ups"] for result in results),
        sum(result["cpu"] for result in results),
        db_cpu,
    )


# The submitting process holds DBOS's client pool and a session store's pool of its own.
SUBMITTER_CONNECTIONS = 20 + 10 + 1  # + its wake-up listener
WORKER_OWN_CONNECTIONS = 3  # DBOS's notification listener, the wake-ups' and the heartbeats'


def durable_pools(workers: int, max_connections: int) -> tuple[int, int]:
    """(``--pool-size``, ``--sessions-pool``) of each worker: all of them fit the server."""
    budget = (max_connections - RESERVED_CONNECTIONS - SUBMITTER_CONNECTIONS) // workers
    budget -= WORKER_OWN_CONNECTIONS
    sessions = max(1, min(10, budget // 3))
    return max(2, min(20, budget - sessions)), sessions


def run_durable(config: Config, dsn: str, max_connections: int) -> dict[str, Any]:
    """The configuration with ``hookloop worker`` processes and turns on the session queue."""
    import psycopg

    name = f"scale_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = urlunsplit(urlsplit(dsn)._replace(path=f"/{name}"))
    env = {**os.environ, "SCALE_LATENCY_MS": str(config.latency_ms)}
    procs: list[subprocess.Popen[str]] = []
    try:
        pool, sessions_pool = durable_pools(config.workers, max_connections)
        for i in range(config.workers):
            command = ["worker", "--database", url, "--agent", "scale:durable_agent"]
            command += ["--pool-size", str(pool), "--sessions-pool", str(sessions_pool)]
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "hookloop", *command, "--executor-id", f"bench-{i}"],
                    cwd=BENCH,
                    env=env,
                    stderr=subprocess.PIPE,
                    text=True,
                )
            )
        for proc in procs:
            wait_until_taking_turns(proc)
        worker_cpu = sum(_stat(proc.pid)[1] for proc in procs)
        db_cpu = postgres_cpu(dsn)
        start, driver_cpu = time.perf_counter(), time.process_time()
        latencies, give_ups = asyncio.run(drive(config, url))
        wall = time.perf_counter() - start
        driver_cpu = time.process_time() - driver_cpu
        db_cpu = postgres_cpu(dsn) - db_cpu
        ticks = os.sysconf("SC_CLK_TCK")
        worker_cpu = (sum(_stat(proc.pid)[1] for proc in procs) - worker_cpu) / ticks
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SELECT count(*) FROM hookloop_messages").fetchone()
        appended = row[0] if row else 0
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stderr is not None:
                proc.stderr.close()
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    # The queue never runs two turns of a session at once: their appends cannot conflict
    # (one that did would fail its turn, a give-up), so there is nothing to count.
    found = figures(config, wall, sorted(latencies), appended, None, give_ups, worker_cpu, db_cpu)
    return {**found, "submitter_cpu": round(driver_cpu / wall, 2)}


def wait_until_taking_turns(proc: subprocess.Popen[str]) -> None:
    """Read a worker's standard error until it takes turns; give up after START_TIMEOUT s."""
    import select

    assert proc.stderr is not None
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], deadline - time.monotonic())
        line = proc.stderr.readline() if ready else ""
        if "taking turns" in line:
            return
        if ready and not line:
            raise SystemExit(f"a worker did not start (exit {proc.wait()})")
    raise SystemExit(f"a worker did not start within {START_TIMEOUT} s")


async def drive(config: Config, url: str) -> tuple[list[float], int]:
    """Submit the chats from this process and wait for their answers (64 at a time).

    A session's chats are submitted in order without waiting for the previous answer: several
    turns of a hot session are on the queue at once, and the queue runs them one at a time.
    A chat's latency runs from its submission (its wait in the queue included) to its answer.
    """
    from hookloop.durable import DurableChats
    from hookloop.durable._queue import SessionQueue
    from hookloop.sessions import PostgresSessionStore

    latencies: list[float] = []
    give_ups = 0
    gate = asyncio.Semaphore(config.in_flight or 64)
    store = PostgresSessionStore(url)
    async with SessionQueue(url) as queue:
        chats = DurableChats(queue, "scale:durable_agent", sessions=store)

        async def answer(handle: Any, start: float) -> None:
            nonlocal give_ups
            try:
                await asyncio.wait_for(handle.result(), TURN_TIMEOUT)
                latencies.append(time.perf_counter() - start)
            except Exception:
                give_ups += 1
            finally:
                gate.release()

        async def chain(session_id: str, numbers: list[int]) -> None:
            nonlocal give_ups
            answers = []
            for number in numbers:
                await gate.acquire()
                start = time.perf_counter()
                try:
                    text = f"How long are audit logs kept? ({number})"
                    handle = await asyncio.wait_for(chats.submit(session_id, text), TURN_TIMEOUT)
                except Exception:
                    give_ups += 1
                    gate.release()
                    continue
                answers.append(asyncio.create_task(answer(handle, start)))
            await asyncio.gather(*answers)

        sessions: dict[str, list[int]] = {}
        for session_id, number in chat_list(config):
            sessions.setdefault(session_id, []).append(number)
        await asyncio.gather(*(chain(sid, numbers) for sid, numbers in sessions.items()))
    await store.close()
    return latencies, give_ups


def figures(
    config: Config,
    wall: float,
    latencies: list[float],
    appended: int,
    conflicts: int | None,
    give_ups: int,
    worker_cpu: float,
    db_cpu: float,
) -> dict[str, Any]:
    return {
        **asdict(config),
        "chats_per_s": round(len(latencies) / wall, 1),
        "appends_per_s": round(appended / wall, 1),
        "p50_ms": round(_quantile(latencies, 0.5) * 1000, 1),
        "p99_ms": round(_quantile(latencies, 0.99) * 1000, 1),
        "conflicts": conflicts,
        "give_ups": give_ups,
        "worker_cpu": round(worker_cpu / wall, 2),
        "db_cpu": round(db_cpu / wall, 2),
        "db_cpu_ms_per_chat": round(db_cpu * 1000 / max(1, len(latencies)), 2),
        "wall_s": round(wall, 2),
    }


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


# Chats per configuration (full run, --quick): cold sessions are 1,000; a hot run at 200 ms is
# bounded by its 20 sessions' turns running one after the other; hot durable turns cost more,
# so they get fewer chats.
CHATS = {
    ("plain", "cold", 0): (1000, 300),
    ("plain", "cold", 200): (1000, 100),
    ("plain", "hot", 0): (1000, 300),
    ("plain", "hot", 200): (300, 100),
    ("durable", "cold", 0): (1000, 100),
    ("durable", "cold", 200): (1000, 100),
    ("durable", "hot", 0): (200, 60),
    ("durable", "hot", 200): (100, 40),
}


LONE_CHATS = 40


def lone_configs(modes: list[str]) -> list[Config]:
    """One chat at a time on cold sessions, 0 ms model: the latency durability adds by itself."""
    return [
        Config(
            mode=mode,
            workers=workers,
            sessions="cold",
            latency_ms=0,
            routing="sticky" if mode == "plain" else "queue",
            chats=LONE_CHATS,
            in_flight=1,
        )
        for mode in modes
        for workers in ((1,) if mode == "plain" else (1, 2))
    ]


def configs(quick: bool, modes: list[str]) -> list[Config]:
    found = []
    for mode in modes:
        routings = ["sticky"] if mode == "plain" else ["queue"]
        for workers in (1, 2, 4):
            for sessions in ("cold", "hot"):
                for latency_ms in (0, 200):
                    full, short = CHATS[mode, sessions, latency_ms]
                    found += [
                        Config(
                            mode=mode,
                            workers=workers,
                            sessions=sessions,
                            latency_ms=latency_ms,
                            routing=routing,
                            chats=short if quick else full,
                        )
                        for routing in routings
                    ]
            if mode == "plain" and workers > 1:  # what sticky routing saves
                full, short = CHATS[mode, "hot", 0]
                found.append(
                    Config(
                        mode=mode,
                        workers=workers,
                        sessions="hot",
                        latency_ms=0,
                        routing="random",
                        chats=short if quick else full,
                    )
                )
    return found


def measure(args: argparse.Namespace) -> dict[str, Any]:
    import psycopg

    dsn = stores.address(args.postgres, "HOOKLOOP_TEST_POSTGRES_DSN")
    if dsn is None:
        raise SystemExit("no PostgreSQL: pass --postgres DSN or run `scripts/test-services start`")
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SHOW max_connections").fetchone()
    max_connections = int(row[0]) if row else 100
    modes = ["plain", "durable"] if args.mode == "both" else [args.mode]
    results = []
    chosen = lone_configs(modes) if args.lone else configs(args.quick, modes)
    for config in chosen:
        if config.mode == "plain":
            results.append(run(config, dsn, max_connections))
        else:
            results.append(run_durable(config, dsn, max_connections))
        if not args.json:
            print(" ".join(f"{results[-1][column]!s:>13}" for column in COLUMNS), flush=True)
    return {
        "cores": os.cpu_count(),
        "load_average": [round(load, 2) for load in os.getloadavg()],
        "max_connections": max_connections,
        "results": results,
    }


COLUMNS = [
    "mode",
    "workers",
    "sessions",
    "latency_ms",
    "routing",
    "chats",
    "chats_per_s",
    "appends_per_s",
    "p50_ms",
    "p99_ms",
    "conflicts",
    "give_ups",
    "worker_cpu",
    "db_cpu",
    "db_cpu_ms_per_chat",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--quick", action="store_true", help="fewer chats per configuration")
    parser.add_argument(
        "--lone", action="store_true", help="one chat at a time: the latency durability adds"
    )
    parser.add_argument("--postgres", metavar="DSN", help="the PostgreSQL server (loopback)")
    parser.add_argument(
        "--mode",
        choices=["plain", "durable", "both"],
        default="both",
        help="without durability, with it (hookloop worker processes), or both (default)",
    )
    parser.add_argument("--worker", metavar="PLAN", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args.worker)
        return
    if not args.json:
        print(" ".join(f"{column:>13}" for column in COLUMNS), flush=True)
    found = measure(args)
    if args.json:
        print(json.dumps(found, indent=2))
        return
    print(f"{found['cores']} cores, load average {found['load_average']}")


if __name__ == "__main__":
    main()
