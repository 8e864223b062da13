"""Session store figures: committed appends per second and the restore time of 10k messages.

    python bench/stores.py            # a readable table
    python bench/stores.py --json     # one JSON object with the same figures

For each backend:

- ``append_per_s``: messages appended to a fresh session one by one, each awaited until it
  is committed, as an agent's ``SessionRecorder`` does from ``on_message``; ``append_p50_us``
  and ``append_p99_us`` are the latencies of single appends.
- ``restore_10k_ms``: ``store.load()`` of a 10,000-message session, median of several runs
  (a query, JSON parsing and validating every message); ``restore_10k_best_ms`` the best
  run, ``restore_10k_cpu_ms`` the CPU time this process spent (less skewed by other work
  on the machine than the wall time; ``load_average`` says how much there was).

The messages are a realistic mix: a user question, an assistant tool call, its result and
an answer, 100-600 bytes each. SQLite runs in a temporary file (also with
``synchronous="full"``, which syncs every commit to disk). PostgreSQL and Redis run when
their addresses are known: ``--postgres DSN`` / ``--redis URL``, the
``HOOKLOOP_TEST_POSTGRES_DSN`` / ``HOOKLOOP_TEST_REDIS_URL`` variables, or ``.services/env``
(``make bench`` starts the test servers); the bench uses a schema / key prefix of its own
and removes it afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from hookloop import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from hookloop.sessions import SessionStore, SQLiteSessionStore

RESTORE_SIZE = 10_000
APPEND_AIM_PER_S = 5_000
RESTORE_AIM_MS = {"sqlite": 30, "postgres": 30, "redis": 50}  # median restore_10k_ms
SERVICES_ENV = Path(__file__).resolve().parent.parent / ".services" / "env"


def conversation(count: int) -> list[Message]:
    """``count`` messages in turns of user question, tool call, tool result, answer."""
    messages: list[Message] = []
    turn = 0
    while len(messages) < count:
        call = ToolCall.create("search_docs", {"query": f"retention policy {turn}", "limit": 5})
        messages += [
            UserMessage(content=f"Question {turn}: how long do we keep the audit logs? " * 2),
            AssistantMessage(content="Let me check the documentation.", tool_calls=(call,)),
            ToolMessage(
                tool_call_id=call.id,
                tool_name="search_docs",
                content=json.dumps(
                    {
                        "results": [
                            {"title": f"Retention {i}", "score": 0.9 - i / 10} for i in range(5)
                        ]
                    }
                ),
            ),
            AssistantMessage(
                content="Audit logs are kept for 400 days, then archived to cold storage. " * 4
            ),
        ]
        turn += 1
    return messages[:count]


def address(flag: str | None, variable: str) -> str | None:
    if flag:
        return flag
    if os.environ.get(variable):
        return os.environ[variable]
    if SERVICES_ENV.is_file():
        for line in SERVICES_ENV.read_text().splitlines():
            key, _, value = line.partition("=")
            if key == variable:
                return value.strip()
    return None


@asynccontextmanager
async def sqlite_place(synchronous: str) -> AsyncIterator[Callable[[], SessionStore]]:
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.db"
        yield lambda: SQLiteSessionStore(path, synchronous=synchronous)  # type: ignore[arg-type]


@asynccontextmanager
async def postgres_place(dsn: str) -> AsyncIterator[Callable[[], SessionStore]]:
    import asyncpg

    from hookloop.sessions import PostgresSessionStore

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    conn = await asyncpg.connect(dsn)
    await conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in dsn else "?"
    place = f"{dsn}{separator}options=-c%20search_path%3D{schema}"
    try:
        yield lambda: PostgresSessionStore(place)
    finally:
        await conn.execute(f"DROP SCHEMA {schema} CASCADE")
        await conn.close()


@asynccontextmanager
async def redis_place(url: str) -> AsyncIterator[Callable[[], SessionStore]]:
    from redis.asyncio import Redis

    from hookloop.sessions import RedisSessionStore

    prefix = f"bench:{uuid.uuid4().hex[:12]}:"
    try:
        yield lambda: RedisSessionStore(url, prefix=prefix)
    finally:
        client = Redis.from_url(url)
        keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


async def appends(make: Callable[[], SessionStore], count: int) -> dict[str, float]:
    messages = conversation(count)
    async with make() as store:
        await store.append("warm-up", messages[0])  # connect, create the schema
        latencies: list[float] = []
        gc.collect()
        start = time.perf_counter()
        for message in messages:
            began = time.perf_counter_ns()
            await store.append("appends", message)
            latencies.append((time.perf_counter_ns() - began) / 1_000)
        elapsed = time.perf_counter() - start
    latencies.sort()
    return {
        "append_per_s": count / elapsed,
        "append_p50_us": latencies[len(latencies) // 2],
        "append_p99_us": latencies[int(len(latencies) * 0.99)],
    }


async def restore(make: Callable[[], SessionStore], runs: int) -> dict[str, float]:
    messages = conversation(RESTORE_SIZE)
    async with make() as store:
        for message in messages:  # a session the size of a long-running agent's
            await store.append("restore", message)
    samples: list[float] = []
    cpu: list[float] = []
    async with make() as store:  # a fresh store object: a restarted process
        await store.info("restore")  # connect first: that is not the restore
        for _ in range(runs):
            gc.collect()
            start, start_cpu = time.perf_counter(), time.process_time()
            loaded = await store.load("restore")
            samples.append((time.perf_counter() - start) * 1_000)
            cpu.append((time.process_time() - start_cpu) * 1_000)
            assert len(loaded) == RESTORE_SIZE
    return {
        "restore_10k_ms": statistics.median(samples),
        "restore_10k_best_ms": min(samples),
        "restore_10k_cpu_ms": statistics.median(cpu),
    }


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    places: list[tuple[str, Any, int]] = [
        ("sqlite", sqlite_place("normal"), args.messages),
        ("sqlite_full", sqlite_place("full"), min(args.messages, 1_000)),
    ]
    skipped: list[str] = []
    dsn = address(args.postgres, "HOOKLOOP_TEST_POSTGRES_DSN")
    if dsn:
        places.append(("postgres", postgres_place(dsn), args.messages))
    else:
        skipped.append("postgres")
    url = address(args.redis, "HOOKLOOP_TEST_REDIS_URL")
    if url:
        places.append(("redis", redis_place(url), args.messages))
    else:
        skipped.append("redis")
    figures: dict[str, Any] = {}
    for name, place, count in places:
        async with place as make:
            row = await appends(make, count)
            if name != "sqlite_full":  # the same reads as "sqlite"
                row.update(await restore(make, args.runs))
            row["appended"] = count
            figures[name] = row
    figures["skipped"] = skipped
    figures["python"] = sys.version.split()[0]
    figures["load_average"] = os.getloadavg()[0]  # other work on the machine skews every figure
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--messages", type=int, default=5_000, help="appends per backend")
    parser.add_argument("--runs", type=int, default=7, help="restores per backend (median)")
    parser.add_argument("--postgres", help="a PostgreSQL DSN (default: the test server)")
    parser.add_argument("--redis", help="a Redis URL (default: the test server)")
    args = parser.parse_args()
    figures = asyncio.run(measure(args))
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"hookloop session stores (Python {figures['python']}, "
        f"load average {figures['load_average']:.1f})"
    )
    print(
        f"  {'backend':<12} {'appends/s':>10} {'p50 us':>8} {'p99 us':>8} "
        f"{'restore 10k':>12} {'(cpu)':>9}"
    )
    for name in ("sqlite", "sqlite_full", "postgres", "redis"):
        row = figures.get(name)
        if row is None:
            continue
        restore_ms = f"{row['restore_10k_ms']:.1f} ms" if "restore_10k_ms" in row else "-"
        cpu_ms = f"{row['restore_10k_cpu_ms']:.1f} ms" if "restore_10k_cpu_ms" in row else ""
        print(
            f"  {name:<12} {row['append_per_s']:>10,.0f} {row['append_p50_us']:>8.0f} "
            f"{row['append_p99_us']:>8.0f} {restore_ms:>12} {cpu_ms:>9}"
        )
    sqlite = figures["sqlite"]
    print(
        f"  aim (SQLite): >= {APPEND_AIM_PER_S:,} appends/s "
        f"({'met' if sqlite['append_per_s'] >= APPEND_AIM_PER_S else 'MISSED'})"
    )
    for name, aim in RESTORE_AIM_MS.items():
        if name in figures:
            met = figures[name]["restore_10k_ms"] <= aim
            print(f"  aim ({name}): restore 10k <= {aim} ms ({'met' if met else 'MISSED'})")
    if figures["skipped"]:
        print(f"  skipped (no address): {', '.join(figures['skipped'])}")


if __name__ == "__main__":
    main()
