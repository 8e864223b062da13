"""Every figure of performance round 2 in one run, each against its aim.

    python bench/round2.py            # a table: figure, value, aim, met or not
    python bench/round2.py --json     # the same as one JSON object

It runs the three benches' own measurements (``loop.py``, ``context.py``, ``stores.py``) with
fewer repetitions, so the ratios it prints come from figures taken back to back in one
process: the loop against the interpreter floor, ``chat_stream()`` against ``chat()``, the
window's 100k-message turn against its 100-message turn. The idle-agent memory runs in
fresh interpreters (as ``context.py`` does); PostgreSQL and Redis are measured when their
addresses are known (``make bench`` starts the test servers).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

import context
import loop
import stores

# (figure, JSON path, aim, unit): a figure meets its aim when it is at most the aim.
AIMS: list[tuple[str, tuple[str, ...], float, str]] = [
    ("the loop against the interpreter floor", ("floor_ratio",), 2.0, "x"),
    ("chat_stream() against chat(), per iteration", ("stream_ratio",), 2.0, "x"),
    ("window turn, 100k against 100 stored messages", ("window_ratio_100k_to_100",), 1.2, "x"),
    ("idle agent with 100 messages, RSS", ("agent_kb_100_messages_rss",), 30.0, "KB"),
    ("the same, tracemalloc", ("agent_kb_100_messages_tracemalloc",), 30.0, "KB"),
    ("restore 10k messages, SQLite", ("sqlite", "restore_10k_ms"), 30.0, "ms"),
    ("restore 10k messages, PostgreSQL", ("postgres", "restore_10k_ms"), 30.0, "ms"),
    ("restore 10k messages, Redis", ("redis", "restore_10k_ms"), 50.0, "ms"),
]


async def restores(runs: int) -> dict[str, Any]:
    places: list[tuple[str, Any]] = [("sqlite", stores.sqlite_place("normal"))]
    dsn = stores.address(None, "HOOKLOOP_TEST_POSTGRES_DSN")
    if dsn:
        places.append(("postgres", stores.postgres_place(dsn)))
    url = stores.address(None, "HOOKLOOP_TEST_REDIS_URL")
    if url:
        places.append(("redis", stores.redis_place(url)))
    figures: dict[str, Any] = {}
    for name, place in places:
        async with place as make:
            figures[name] = await stores.restore(make, runs)
    return figures


def measure(runs: int, history_runs: int, restore_runs: int) -> dict[str, Any]:
    figures = loop.measure(runs, history_runs)
    figures["agent_kb_100_messages_rss"] = context.agent_kb_fresh("rss")
    figures["agent_kb_100_messages_tracemalloc"] = context.agent_kb_fresh("tracemalloc")
    figures.update(asyncio.run(restores(restore_runs)))
    figures["load_average"] = os.getloadavg()[0]  # other work on the machine skews them all
    return figures


def lookup(figures: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = figures
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--runs", type=int, default=200, help="chats per loop figure")
    parser.add_argument("--history-runs", type=int, default=20, help="chats per large history")
    parser.add_argument("--restore-runs", type=int, default=7, help="restores per backend")
    args = parser.parse_args()
    figures = measure(args.runs, args.history_runs, args.restore_runs)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(
        f"hookloop performance round 2 (Python {sys.version.split()[0]}, "
        f"load average {figures['load_average']:.1f})"
    )
    print(
        f"  per iteration: chat() {figures['overhead_us_per_iteration']:.1f} us, "
        f"chat_stream() {figures['overhead_us_per_iteration_stream']:.1f} us, "
        f"interpreter floor {figures['floor_us_per_iteration']:.1f} us"
    )
    for label, path, aim, unit in AIMS:
        value = lookup(figures, path)
        if value is None:
            print(f"  {label:<48} {'-':>8}        (no server address: skipped)")
            continue
        verdict = "met" if value <= aim else "NOT MET"
        print(f"  {label:<48} {value:8.2f} {unit:<2}  aim <= {aim:g} {unit}: {verdict}")


if __name__ == "__main__":
    main()
