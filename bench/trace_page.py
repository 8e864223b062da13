"""How big a trace and its page get, and how long the page takes to show, in headless Chromium.

    python bench/trace_page.py            # a readable table
    python bench/trace_page.py --json     # one JSON object with the same figures

Traces of about 1,000 and 10,000 events are recorded from scripted chats (each: a
rate-limited attempt retried, three parallel tool calls, a sub-agent, an answer; the
conversation's text captured), rendered to a page, and opened from a file in the system's
Chromium (``chromium`` on the PATH, or ``HOOKLOOP_TEST_CHROMIUM``) through playwright, with
every network request refused. Each figure is the median of 5 loads, read from the page's
own ``performance.now()``:

- ``script_ms``: the page's script: reading the inlined records and building the timeline.
- ``load_ms``: from the start of navigation to the timeline built (the file read, the HTML
  and the data parsed, the script run): what a person waits for.
- ``page_kb``: the size of the HTML file.

One long chat besides (``long``): 500 tool calls, each result about 1 KB, recorded to a file
and made a page by ``hookloop trace view`` in a process of its own. Its figures:
``jsonl_mb`` and ``page_mb`` (the page's size is ``page_ratio`` times the trace's; a trace
that wrote every request whole was about 50 MB for this chat), ``view_s`` (the command's
wall time), ``view_rss_mb`` (its peak resident memory) and ``view_extra_mb`` (that peak above
the same interpreter's running ``trace view`` on a one-line trace: what the file costs),
``view_memory_ratio`` (that extra over the file's size), and the page's load in Chromium.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from hookloop import Agent, ToolCall, ToolReturn, Usage, tool
from hookloop._errors import RateLimitError
from hookloop.models._base import ProviderResponse
from hookloop.observe import JsonLinesTracePlugin, read_trace, render_trace_page
from hookloop.retry import DefaultRetryStrategy
from hookloop.testing import ScriptedModel

SIZES = (1_000, 10_000)
LOADS = 5


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


async def _no_wait(seconds: float) -> None:
    pass


def _calls(*calls: tuple[str, str, str]) -> ProviderResponse:
    return ProviderResponse(
        tool_calls=tuple(ToolCall(name=n, arguments=a, id=i) for i, n, a in calls),
        finish_reason="tool_calls",
        usage=Usage(input_tokens=150, output_tokens=30),
    )


def one_chat(lines: list[str]) -> None:
    helper = Agent(ScriptedModel(["Paris."], context_window=4096), name="researcher")
    model = ScriptedModel(
        [
            RateLimitError("slow down", status=429, retry_after=0.5),
            _calls(("c1", "add", '{"a": 17, "b": 23}'), ("c2", "divide", '{"a": 1, "b": 0}')),
            _calls(("c3", "researcher", '{"task": "Capital of France?"}')),
            ProviderResponse(
                content="40, and Paris.", usage=Usage(input_tokens=300, output_tokens=9)
            ),
        ],
        context_window=8192,
    )
    agent = Agent(
        model,
        name="assistant",
        tools=[add, divide, helper.as_tool()],
        retry=DefaultRetryStrategy(sleep=_no_wait),
    )
    agent.add_hook("pre_tool_call", lambda ctx: ToolReturn(0) if ctx.call.name == "x" else None)
    agent.use(JsonLinesTracePlugin(lines.append))
    agent.chat_sync("What is 17 + 23, and what is the capital of France?")


@tool
def fetch(page: int) -> str:
    """Fetch a page."""
    return f"page {page}: " + "lorem ipsum dolor sit amet " * 37  # about 1 KB


LONG_CALLS = 500


def long_chat(path: Path) -> None:
    """One chat of LONG_CALLS tool calls with 1 KB results, traced to ``path``."""
    script = [
        ProviderResponse(
            tool_calls=(ToolCall(name="fetch", arguments=f'{{"page": {i}}}', id=f"c{i}"),),
            finish_reason="tool_calls",
        )
        for i in range(LONG_CALLS)
    ]
    model = ScriptedModel([*script, "done"], context_window=10_000_000)
    agent = Agent(model, tools=[fetch], max_iterations=LONG_CALLS + 1, retry=None)
    with JsonLinesTracePlugin(path) as plugin:
        agent.use(plugin)
        agent.chat_sync("Fetch every page.")


def trace_view(trace: Path, page: Path) -> tuple[float, float]:
    """``hookloop trace view`` in a process of its own: wall seconds, peak RSS in MB."""
    script = (
        "import resource, sys, time\n"
        "from hookloop._cli import main\n"
        "start = time.perf_counter()\n"
        "code = main(['trace', 'view', sys.argv[1], '-o', sys.argv[2]])\n"
        "took = time.perf_counter() - start\n"
        "peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024\n"
        "print(took, peak) if code == 0 else sys.exit(code)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(trace), str(page)],
        capture_output=True,
        text=True,
        check=True,
    )
    took, peak = map(float, done.stdout.split())
    return took, peak


def long_figures(tmp: Path) -> tuple[dict[str, float], Path]:
    trace = tmp / "long.jsonl"
    long_chat(trace)
    page = tmp / "long.html"
    one = tmp / "one.jsonl"
    one.write_text(trace.read_text(encoding="utf-8").split("\n", 1)[0] + "\n", encoding="utf-8")
    baseline = min(trace_view(one, tmp / "one.html")[1] for _ in range(3))
    runs = [trace_view(trace, page) for _ in range(3)]
    took = statistics.median(t for t, _ in runs)
    peak = statistics.median(m for _, m in runs)
    size = trace.stat().st_size / 1e6
    figures = {
        "tool_calls": LONG_CALLS,
        "jsonl_mb": round(size, 2),
        "page_mb": round(page.stat().st_size / 1e6, 2),
        "page_ratio": round(page.stat().st_size / trace.stat().st_size, 3),
        "view_s": round(took, 2),
        "view_rss_mb": round(peak, 1),
        "view_extra_mb": round(max(peak - baseline, 0.0), 1),
        "view_memory_ratio": round(max(peak - baseline, 0.0) / size, 2),
    }
    return figures, page


def trace(n: int) -> list[str]:
    lines: list[str] = []
    while len(lines) < n:
        one_chat(lines)
    return lines


def chromium() -> str:
    found = os.environ.get("HOOKLOOP_TEST_CHROMIUM") or shutil.which("chromium")
    if not found:
        sys.exit("no chromium on the PATH (scripts/test-services start installs it)")
    return found


def measure(pages: dict[int | str, Path]) -> dict[int | str, dict[str, float]]:
    from playwright.sync_api import sync_playwright

    out: dict[int | str, dict[str, float]] = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium())
        context = browser.new_context(offline=True)
        context.route(
            "**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort()
        )
        for n, path in pages.items():
            scripts, loads = [], []
            for _ in range(LOADS):
                page = context.new_page()
                page.goto(path.as_uri())
                stats = page.evaluate("window.hookloopTrace")
                scripts.append(stats["scriptMs"])
                loads.append(stats["loadMs"])
                page.close()
            out[n] = {
                "events": stats["records"],
                "rows": stats["rows"],
                "script_ms": round(statistics.median(scripts), 1),
                "load_ms": round(statistics.median(loads), 1),
                "page_kb": round(path.stat().st_size / 1024, 1),
            }
        browser.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        pages: dict[int | str, Path] = {}
        for n in SIZES:
            path = Path(tmp) / f"trace-{n}.html"
            path.write_text(render_trace_page(read_trace(trace(n))), encoding="utf-8")
            pages[n] = path
        long, pages["long"] = long_figures(Path(tmp))
        figures = measure(pages)
    long.update(figures.pop("long"))
    if args.json:
        print(json.dumps({**{str(n): f for n, f in figures.items()}, "long": long}, indent=2))
        return
    print(f"hookloop trace page in headless Chromium (median of {LOADS} loads)")
    for f in [*figures.values(), long]:
        print(
            f"  {f['events']:>6} events, {f['rows']:>5} rows: script {f['script_ms']:7.1f} ms, "
            f"load {f['load_ms']:7.1f} ms, page {f['page_kb']:8.1f} KB"
        )
    print(
        f"  one chat of {long['tool_calls']} tool calls (1 KB results): trace "
        f"{long['jsonl_mb']:.2f} MB (aim <= 5), page {long['page_mb']:.2f} MB = "
        f"{long['page_ratio']:.2f}x the trace (aim <= 1.5); trace view {long['view_s']:.2f} s, "
        f"peak {long['view_rss_mb']:.1f} MB RSS, {long['view_extra_mb']:.1f} MB above a one-line "
        f"trace = {long['view_memory_ratio']:.2f}x the file"
    )


if __name__ == "__main__":
    main()
