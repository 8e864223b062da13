"""Runs whose traces are pinned byte for byte in ``golden_traces.json`` (see test_jsonl.py).

The expected lines were written once by the code before the trace's per-record path was
made cheaper (issue 22 item 4), so any change to that path that changes a byte fails. To
write them again (only for a deliberate change of the format, which then has a new
``TRACE_FORMAT``)::

    .venv/bin/python -m tests.observe._golden

Message and session ids are random per process: the runs draw them from a fixed block.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from hookloop import Agent, ToolMessage, UserMessage, hooks, tool
from hookloop import _messages as messages_module
from hookloop.context import Compaction
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.observe import JsonLinesTracePlugin
from hookloop.testing import FakeClock, FunctionModel, ScriptedModel, text_response, tool_call
from tests.observe._trace_runs import ANSWER, EPOCH, PROMPT, busy_agent

FIXTURE = Path(__file__).with_name("golden_traces.json")


@contextmanager
def fixed_ids() -> Iterator[None]:
    """Message and session ids from a fixed block, as the same run makes them every time."""
    saved = messages_module._block
    messages_module._block = ("golden-id", itertools.count())
    try:
        yield
    finally:
        messages_module._block = saved


# The busy run's tools (tests/observe/_trace_runs.py), async: a plain function runs in a
# thread, and three of them in parallel finish in any order, so their records would too.
@tool
async def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


@tool
async def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@tool
async def shell(command: str) -> str:
    """Run a shell command."""
    raise AssertionError("a hook refuses every shell call")


def busy_run(*, content: bool = True, error_text: bool = True) -> list[str]:
    """The busy run (a retry, three parallel calls, a short-circuit, a sub-agent), traced."""
    clock = FakeClock()
    agent = busy_agent(clock, tools=(add, divide, shell))
    lines: list[str] = []
    wall = lambda: EPOCH + clock()  # noqa: E731
    plugin = JsonLinesTracePlugin(
        lines.append, content=content, error_text=error_text, clock=clock, wall=wall
    )
    agent.use(plugin)
    assert agent.chat_sync(PROMPT).text == ANSWER
    return lines


def compacted_run(*, content: bool = True) -> list[str]:
    """Five chats; before the fifth, a compaction summarises the first three."""
    clock = FakeClock()
    lines: list[str] = []
    summarizer = ScriptedModel(["The user asked about fruit."], name="summarizer")
    policy = Compaction(compact_threshold=0.6, keep_recent=0.3, summarizer=summarizer)
    model = ScriptedModel([f"Reply {i}." for i in range(5)], context_window=1000)
    agent = Agent(model, name="long", retry=None, context=policy)
    wall = lambda: EPOCH + clock()  # noqa: E731
    agent.use(JsonLinesTracePlugin(lines.append, content=content, clock=clock, wall=wall))
    for i in range(5):
        agent.chat_sync(f"Fruit question {i}: {'apples and pears ' * 30}")
    return lines


@tool
def look(page: int) -> str:
    """Look a page up."""
    if page == 2:
        return "page 2: " + "long text, written once " * 12  # over LONG_TEXT: an "s" text
    return f"page {page}: caf\u00e9 \u2028 \U0001f600 \ud83d"  # non-ASCII, separator, surrogate


def _looking_agent(calls: int, *, reshape: bool) -> Agent:
    """``calls`` tool calls then an answer, on ``Agent()`` defaults (window and retries)."""

    def answer(request: ProviderRequest) -> ProviderResponse:
        done = sum(isinstance(m, ToolMessage) for m in request.messages) % (calls + 1)
        if done == calls:
            return text_response("done \u00e9")
        return tool_call("look", {"page": done}, id=f"c{done}")

    agent = Agent(FunctionModel(answer, context_window=100_000), tools=[look], name="looker")
    if reshape:

        def reshaped(ctx: hooks.PreRequestContext) -> ProviderRequest | None:
            # Requests that drop their first messages or carry one no record wrote before.
            kept = ctx.request.messages
            if ctx.iteration % 3 == 1:
                kept = kept[2:]
            elif ctx.iteration % 3 == 2:
                kept = (UserMessage(content=f"note {ctx.iteration}"), *kept)
            else:
                return None
            return dataclasses.replace(ctx.request, messages=kept)

        agent.add_hook("pre_request", reshaped)
    return agent


def _looking_run(*, reshape: bool, content: bool = True, to_file: Path | None = None) -> list[str]:
    """Two chats of one agent (four tool calls each), its records in order."""
    clock = FakeClock()
    lines: list[str] = []
    target: Path | Callable[[str], object] = lines.append if to_file is None else to_file
    wall = lambda: EPOCH + clock()  # noqa: E731
    with JsonLinesTracePlugin(target, content=content, clock=clock, wall=wall) as plugin:
        agent = _looking_agent(4, reshape=reshape)
        agent.use(plugin)
        agent.chat_sync("look up four pages \u00e9")
        agent.chat_sync("and again")
    if to_file is not None:
        return to_file.read_text(encoding="utf-8").split("\n")
    return lines


def golden_runs(tmp: Path) -> dict[str, list[str]]:
    """Each pinned run's trace lines, by name (``tmp``: a folder for the file target)."""
    with fixed_ids():
        return {
            "busy_private": busy_run(content=False, error_text=False),
            "busy": busy_run(),
            "compacted": compacted_run(),
            "compacted_private": compacted_run(content=False),
            "looking_file": _looking_run(reshape=False, to_file=tmp / "trace.jsonl"),
            "reshaped": _looking_run(reshape=True),
        }


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        runs = golden_runs(Path(folder))
    FIXTURE.write_text(json.dumps(runs, indent=0, ensure_ascii=True) + "\n", encoding="utf-8")
    print(f"{FIXTURE}: {sum(map(len, runs.values()))} lines")
