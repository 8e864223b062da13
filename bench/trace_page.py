"""How long the trace page takes to show a run, measured in headless Chromium.

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
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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


def measure(pages: dict[int, Path]) -> dict[int, dict[str, float]]:
    from playwright.sync_api import sync_playwright

    out: dict[int, dict[str, float]] = {}
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
        pages = {}
        for n in SIZES:
            path = Path(tmp) / f"trace-{n}.html"
            path.write_text(render_trace_page(read_trace(trace(n))))
            pages[n] = path
        figures = measure(pages)
    if args.json:
        print(json.dumps({str(n): f for n, f in figures.items()}, indent=2))
        return
    print(f"hookloop trace page in headless Chromium (median of {LOADS} loads)")
    for f in figures.values():
        print(
            f"  {f['events']:>6} events, {f['rows']:>5} rows: script {f['script_ms']:7.1f} ms, "
            f"load {f['load_ms']:7.1f} ms, page {f['page_kb']:8.1f} KB"
        )


if __name__ == "__main__":
    main()
