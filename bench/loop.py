"""Framework overhead of the agent loop, per model iteration.

The scenario: one chat of 10 tool calls and a final answer (11 model iterations) on the
scripted model, which answers at once, so every microsecond measured is hookloop's own
(building requests, dispatching hooks, validating arguments, running the tool, committing).

    python bench/loop.py            # a readable table
    python bench/loop.py --json     # one JSON object with the same figures
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from typing import Any

from hookloop import Agent, ToolCall, tool
from hookloop.hooks import EVENTS
from hookloop.models.testing import ScriptedModel, text_response, tool_calls

TOOL_CALLS = 10
ITERATIONS = TOOL_CALLS + 1
PEERS_US = (1_100, 2_200)  # established Python frameworks, same scenario, no hooks
TARGET_US = (30, 60)  # without hooks, with 10 handlers on every event


@tool
async def lookup(key: int) -> int:
    """Return the key doubled."""
    return key * 2


SCRIPT = [
    *(
        tool_calls(ToolCall(name="lookup", arguments=f'{{"key": {i}}}', id=f"c{i}"))
        for i in range(TOOL_CALLS)
    ),
    text_response("done"),
]


def noop(ctx: Any) -> None:
    return None


async def anoop(ctx: Any) -> None:
    return None


def make_agent(
    handler: Callable[[Any], Any] | None, count: int, *, default_retry: bool = False
) -> Agent:
    # The bare loop has no hook at all, so no retry strategy and no context policy either
    # (retry=None, context=None); the "default configuration" figure measures what Agent()
    # gives you out of the box.
    agent = Agent(
        ScriptedModel(SCRIPT),
        tools=[lookup],
        system_prompt="You look things up.",
        **({} if default_retry else {"retry": None, "context": None}),
    )
    if handler is not None:
        # Scope events fire outside chats (and take only sync handlers): every chat event.
        for event in sorted(EVENTS - {"on_scope_register", "on_scope_unregister"}):
            for _ in range(count):
                agent.hooks.add(event, handler)
    return agent


async def per_iteration_us(
    handler: Callable[[Any], Any] | None,
    count: int,
    runs: int,
    *,
    stream: bool = False,
    default_retry: bool = False,
) -> float:
    """Median time of one chat divided by its 11 iterations, in microseconds."""
    samples: list[float] = []
    # One collection before the series, not one per chat: a full collection right before
    # each chat leaves the CPU caches cold and about triples every figure on this machine.
    gc.collect()
    for run in range(runs + runs // 10):  # the first tenth warms up and is dropped
        agent = make_agent(handler, count, default_retry=default_retry)
        start = time.perf_counter_ns()
        if stream:
            async for _ in agent.chat_stream("look up ten keys"):
                pass
        else:
            await agent.chat("look up ten keys")
        elapsed = time.perf_counter_ns() - start
        if run >= runs // 10:
            samples.append(elapsed / ITERATIONS / 1_000)
    return statistics.median(samples)


def empty_dispatch_ns() -> float:
    """What the loop pays for an event nobody listens to: one dict lookup and a test."""
    agent = make_agent(None, 0)
    handlers = agent.hooks.handlers
    number = 2_000_000
    env = {"handlers": handlers}
    with_check = min(
        timeit.repeat(
            "if (hs := handlers.get('pre_request')): pass", globals=env, number=number, repeat=5
        )
    )
    baseline = min(timeit.repeat("pass", globals=env, number=number, repeat=5))
    return max(with_check - baseline, 0.0) / number * 1e9


def measure(runs: int) -> dict[str, Any]:
    async def all_figures() -> dict[str, float]:
        return {
            "overhead_us_per_iteration": await per_iteration_us(None, 0, runs),
            "overhead_us_per_iteration_10_hooks": await per_iteration_us(noop, 10, runs),
            "overhead_us_per_iteration_10_async_hooks": await per_iteration_us(anoop, 10, runs),
            "overhead_us_per_iteration_stream": await per_iteration_us(None, 0, runs, stream=True),
            "overhead_us_per_iteration_default_config": await per_iteration_us(
                None, 0, runs, default_retry=True
            ),
        }

    figures: dict[str, Any] = asyncio.run(all_figures())
    figures["empty_dispatch_ns"] = empty_dispatch_ns()
    figures["scenario"] = (
        f"{TOOL_CALLS} tool calls + final answer, scripted model, median of {runs} chats"
    )
    figures["python"] = sys.version.split()[0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--runs", type=int, default=400, help="chats per figure (default 400)")
    args = parser.parse_args()
    figures = measure(args.runs)
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    base = figures["overhead_us_per_iteration"]
    hooked = figures["overhead_us_per_iteration_10_hooks"]
    print(f"hookloop loop overhead ({figures['scenario']}, Python {figures['python']})")
    rows = [
        ("per iteration, no hooks", base, "us", f"target {TARGET_US[0]} us"),
        ("per iteration, 10 sync handlers/event", hooked, "us", f"target {TARGET_US[1]} us"),
        (
            "per iteration, 10 async handlers/event",
            figures["overhead_us_per_iteration_10_async_hooks"],
            "us",
            "",
        ),
        ("per iteration, chat_stream", figures["overhead_us_per_iteration_stream"], "us", ""),
        (
            "per iteration, Agent() defaults",
            figures["overhead_us_per_iteration_default_config"],
            "us",
            "",
        ),
        ("empty dispatch", figures["empty_dispatch_ns"], "ns", ""),
    ]
    for label, value, unit, note in rows:
        print(f"  {label:<40} {value:8.1f} {unit}   {note}")
    low, high = PEERS_US[0] / base, PEERS_US[1] / base
    print(f"  peers spend {PEERS_US[0]:,}-{PEERS_US[1]:,} us per iteration: {low:.0f}-{high:.0f}x")
    print(f"  10 handlers on every event cost {hooked / base:.2f}x the bare loop")


if __name__ == "__main__":
    main()
