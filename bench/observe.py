"""What watching a run costs: the OpenTelemetry plugin and the JSON-lines trace, per iteration.

    python bench/observe.py                  # a readable table
    python bench/observe.py --json           # one JSON object with the same figures
    python bench/observe.py --instructions   # instructions per iteration, under valgrind

Times on a shared machine move with its load; ``--instructions`` counts the instructions of
each configuration instead (valgrind's callgrind, per iteration), the same from one run to
the next: cold, 21 chats less none, as a process that runs them and ends pays them (what a
configuration does once per process, such as the trace's encoder making its writers, is
in it); warm (``_warm``), 20 chats less the first, as a process that has run one already
pays them (the timed figures drop their first tenth alike).

The chat is bench/loop.py's (10 tool calls and an answer on the scripted model, the bare
loop: ``context=None, retry=None``), each configuration on a new agent, all of them
interleaved chat by chat in one process so that a busy machine slows them alike; each figure
is the median over the chats, per model iteration:

- ``bare_us``: the loop alone.
- ``otel_sdk_us``: with ``OpenTelemetryPlugin`` exporting to the SDK (a ``TracerProvider``
  with the in-memory exporter, a ``MeterProvider`` with the in-memory reader).
- ``otel_api_us``: the plugin on the API's no-op providers: its handlers and nothing else.
- ``jsonl_us``: with ``JsonLinesTracePlugin`` handing each line to a function that keeps
  nothing (the plugin's own work: building and encoding the records).
- ``jsonl_file_us``: the same writing to a file.
- ``noop_handlers_us``: handlers that do nothing, on the events and in the phases the
  JSON-lines plugin uses (two per event whose handlers may change something, one per other
  event): what the hook dispatch itself costs for them, whatever they do.
- ``tiny_lines_us``: the same handlers each writing a three-key JSON line (``json.dumps``):
  the least one line per hook call costs.

and what follows from them: ``otel_plugin_share_us`` = ``otel_api_us - bare_us`` (the
plugin's own handlers), ``otel_sdk_share_us`` = ``otel_sdk_us - otel_api_us`` (what the SDK
does with the spans, events and metrics the plugin hands it; aim: the plugin's share at most
this), ``jsonl_share_us`` = ``jsonl_us - bare_us`` (aim: at most 1.5 times ``bare_us``),
``jsonl_dispatch_us`` = ``noop_handlers_us - bare_us`` (the part of it the dispatch takes),
and ``records_per_iteration``. For continuity with bench/loop.py, ``otel_sdk_us_per_span``
times ``otel_spans_per_iteration`` is what the SDK takes for bare spans (a name and three
attributes), and ``otel_plugin_share_loop_us`` what bench/loop.py calls the plugin's share:
``otel_sdk_us - bare_us`` minus that, which counts the SDK's work on the spans' other
attributes, their events and the metrics as the plugin's.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import itertools
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hookloop import Agent
from hookloop.hooks import EVENT_TABLE, Phase
from hookloop.observe import JsonLinesTracePlugin
from loop import ITERATIONS, _OTel, make_agent  # the SDK as bench/loop.py sets it up

Setup = Callable[[Agent], object] | None


def _jsonl(agent: Agent) -> None:
    agent.use(JsonLinesTracePlugin(_discard))


def _noop_handlers(agent: Agent) -> None:
    """No-op handlers where the JSON-lines plugin puts its own (see its init_agent)."""
    for event, spec in EVENT_TABLE.items():
        if (spec.kind == "interceptor" or spec.settable) and not spec.sync_only:
            agent.hooks.add(event, _nothing, order=-Phase.FORWARD)
        agent.hooks.add(event, _nothing, order=Phase.OBSERVE)


def _nothing(ctx: object) -> None:
    return None


def _tiny_lines(agent: Agent) -> None:
    """Handlers where the JSON-lines plugin puts its own, each writing a tiny JSON line."""
    seq = itertools.count()

    def handler(event: str) -> Callable[[object], None]:
        return lambda ctx: _discard(json.dumps({"v": 2, "seq": next(seq), "event": event}))

    for event, spec in EVENT_TABLE.items():
        if (spec.kind == "interceptor" or spec.settable) and not spec.sync_only:
            agent.hooks.add(event, handler(event), order=-Phase.FORWARD)
        agent.hooks.add(event, handler(event), order=Phase.OBSERVE)


def _discard(line: str) -> None:
    pass


def measure(runs: int) -> dict[str, Any]:
    sdk = _OTel()
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "trace.jsonl"
        files: list[JsonLinesTracePlugin] = []

        def to_file(agent: Agent) -> None:
            plugin = JsonLinesTracePlugin(target)
            files.append(plugin)
            agent.use(plugin)

        setups = {**_setups(target), "otel_sdk_us": sdk.use, "jsonl_file_us": to_file}
        samples: dict[str, list[float]] = {name: [] for name in setups}

        async def series() -> None:
            gc.collect()
            names = list(setups)
            for run in range(runs + runs // 10):  # the first tenth warms up and is dropped
                # Each round starts at another configuration: a collection of the garbage
                # cycles falls in whichever chat comes next, so none is always the one.
                at = run % len(names)
                for name in names[at:] + names[:at]:
                    setup = setups[name]
                    agent = make_agent(None, 0, setup=setup)
                    start = time.perf_counter_ns()
                    await agent.chat("look up ten keys")
                    elapsed = time.perf_counter_ns() - start
                    for plugin in files:  # closed after the clock: the flush is the OS's
                        plugin.close()
                    files.clear()
                    if run >= runs // 10:
                        samples[name].append(elapsed / ITERATIONS / 1_000)

        asyncio.run(series())
    figures: dict[str, Any] = {name: statistics.median(v) for name, v in samples.items()}
    bare = figures["bare_us"]
    figures["otel_plugin_share_us"] = figures["otel_api_us"] - bare
    figures["otel_sdk_share_us"] = figures["otel_sdk_us"] - figures["otel_api_us"]
    figures["jsonl_share_us"] = figures["jsonl_us"] - bare
    figures["jsonl_share_ratio"] = figures["jsonl_share_us"] / bare
    figures["jsonl_dispatch_us"] = figures["noop_handlers_us"] - bare
    figures["tiny_lines_share_us"] = figures["tiny_lines_us"] - bare
    figures["records_per_iteration"] = _records() / ITERATIONS
    figures["otel_sdk_us_per_span"] = sdk.sdk_us_per_span()
    figures["otel_spans_per_iteration"] = sdk.spans_per_chat() / ITERATIONS
    figures["otel_plugin_share_loop_us"] = (
        figures["otel_sdk_us"]
        - bare
        - figures["otel_spans_per_iteration"] * figures["otel_sdk_us_per_span"]
    )
    figures["scenario"] = f"bench/loop.py's chat (bare loop), median of {runs} chats each"
    figures["python"] = sys.version.split()[0]
    return figures


def _setups(target: Path) -> dict[str, Setup]:
    return {
        "bare_us": None,
        "otel_sdk_us": _OTel().use,
        "otel_api_us": _OTel().use_noop,
        "jsonl_us": _jsonl,
        "jsonl_file_us": lambda agent: agent.use(JsonLinesTracePlugin(target)),
        "noop_handlers_us": _noop_handlers,
        "tiny_lines_us": _tiny_lines,
    }


def _chats(name: str, chats: int) -> None:
    """``chats`` chats of one configuration, untimed (what --instructions counts)."""
    with tempfile.TemporaryDirectory() as tmp:
        setup = _setups(Path(tmp) / "trace.jsonl")[name]

        async def run() -> None:
            for _ in range(chats):
                await make_agent(None, 0, setup=setup).chat("look up ten keys")

        asyncio.run(run())


def instructions(chats: int = 20) -> dict[str, int]:
    """Instructions per iteration of each configuration, cold and warm, counted by callgrind.

    Cold: ``chats + 1`` chats less none; warm (``<name>_warm``): ``chats`` chats less the
    first one, after which nothing is done for the first time in the process.
    """

    def count(name: str, n: int) -> int:
        done = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
             __file__, "--only", name, "--chats", str(n)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        found = re.search(r"Collected : (\d+)", done.stderr)
        if found is None:
            raise RuntimeError(f"callgrind said: {done.stderr[-500:]}")
        return int(found[1])

    counts: dict[str, int] = {}
    for name in _setups(Path("unused")):
        none, first, all_ = count(name, 0), count(name, 1), count(name, chats + 1)
        key = name.removesuffix("_us")
        counts[key] = (all_ - none) // ((chats + 1) * ITERATIONS)
        counts[f"{key}_warm"] = (all_ - first) // (chats * ITERATIONS)
    return counts


def _records() -> int:
    lines: list[str] = []
    agent = make_agent(None, 0, setup=lambda a: a.use(JsonLinesTracePlugin(lines.append)))
    asyncio.run(agent.chat("look up ten keys"))
    return len(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--runs", type=int, default=300, help="chats per figure (default 300)")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions with valgrind instead"
    )
    parser.add_argument("--only", help=argparse.SUPPRESS)  # one configuration, untimed
    parser.add_argument("--chats", type=int, default=20, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.only:
        _chats(args.only, args.chats)
        return
    if args.instructions:
        counts = instructions(args.chats)
        if args.json:
            print(json.dumps(counts, indent=2))
            return
        print("hookloop observability cost per iteration, in instructions (callgrind)")
        print(f"  {'':<16} {'cold':>10}   {'':<19} {'warm':>10}")
        names = [name for name in counts if not name.endswith("_warm")]
        for name in names:
            cold, warm = counts[name], counts[f"{name}_warm"]
            print(
                f"  {name:<16} {cold:>10,}   {cold / counts['bare']:5.2f}x the bare loop "
                f"{warm:>10,}   {warm / counts['bare_warm']:5.2f}x"
            )
        for suffix in ("", "_warm"):
            bare = counts[f"bare{suffix}"]
            share = (counts[f"jsonl{suffix}"] - bare) / bare
            print(
                f"  {'cold' if not suffix else 'warm'}: OpenTelemetry: the plugin's own share "
                f"{counts[f'otel_api{suffix}'] - bare:,}, the SDK's "
                f"{counts[f'otel_sdk{suffix}'] - counts[f'otel_api{suffix}']:,}; JSON lines: "
                f"{share:.2f}x the bare loop (aim <= 1.5x: {'met' if share <= 1.5 else 'MISSED'})"
                f", the dispatch to its handlers alone "
                f"{(counts[f'noop_handlers{suffix}'] - bare) / bare:.2f}x, a tiny line per call "
                f"{(counts[f'tiny_lines{suffix}'] - bare) / bare:.2f}x"
            )
        return
    f = measure(args.runs)
    if args.json:
        print(json.dumps(f, indent=2))
        return
    bare = f["bare_us"]
    print(f"hookloop observability cost per iteration ({f['scenario']}, Python {f['python']})")
    rows = [
        ("the bare loop", bare, ""),
        ("OpenTelemetryPlugin, SDK", f["otel_sdk_us"], ""),
        ("OpenTelemetryPlugin, no-op API", f["otel_api_us"], "its handlers alone"),
        ("JsonLinesTracePlugin, a function", f["jsonl_us"], ""),
        ("JsonLinesTracePlugin, a file", f["jsonl_file_us"], ""),
    ]
    for label, value, note in rows:
        print(f"  {label:<36} {value:8.1f} us   {note}")
    plugin, spans = f["otel_plugin_share_us"], f["otel_sdk_share_us"]
    verdict = "met" if plugin <= spans else "MISSED"
    print(
        f"  OpenTelemetry: the plugin's own share {plugin:.1f} us per iteration, the SDK's "
        f"{spans:.1f} us (aim: the plugin's at most the SDK's: {verdict})"
    )
    bare_spans = f["otel_spans_per_iteration"] * f["otel_sdk_us_per_span"]
    print(
        f"    as bench/loop.py counts it: {f['otel_spans_per_iteration']:.1f} bare spans at "
        f"{f['otel_sdk_us_per_span']:.1f} us = {bare_spans:.1f} us for the SDK, "
        f"{f['otel_plugin_share_loop_us']:.1f} us for the plugin (the SDK's work on attributes, "
        "events and metrics counted as the plugin's)"
    )
    share, ratio = f["jsonl_share_us"], f["jsonl_share_ratio"]
    verdict = "met" if ratio <= 1.5 else "MISSED"
    print(
        f"  JSON lines: {f['records_per_iteration']:.1f} records per iteration cost "
        f"{share:.1f} us = {ratio:.2f}x the bare loop (aim <= 1.5x: {verdict}); the hook "
        f"dispatch to its handlers alone {f['jsonl_dispatch_us']:.1f} us = "
        f"{f['jsonl_dispatch_us'] / bare:.2f}x, a tiny line per call "
        f"{f['tiny_lines_share_us']:.1f} us = {f['tiny_lines_share_us'] / bare:.2f}x"
    )


if __name__ == "__main__":
    main()
