"""Framework overhead of the agent loop, per model iteration.

The scenario: one chat of 10 tool calls and a final answer (11 model iterations) on the
scripted model, which answers at once, so every microsecond measured is hookloop's own
(building requests, dispatching hooks, validating arguments, running the tool, committing).

    python bench/loop.py            # a readable table
    python bench/loop.py --json     # one JSON object with the same figures

``overhead_us_by_history`` is the same chat on a function-backed model with the history
pre-loaded with N messages (after one warm-up chat), with the default context policy (a
``SlidingWindow`` over an 8,000-token window) and without one (``context=None``): a turn must
not cost more as the conversation grows. ``overhead_us_per_iteration_output`` is the same
chat with an output type (a pydantic model) whose final answer comes through the output tool,
the type given to ``Agent()``; ``..._output_per_chat`` names it in the ``chat()`` call
instead, on a new agent each chat, so it includes building the type's validator once (an
agent keeps it for its later chats). ``floor_us_per_iteration`` is the interpreter
floor, measured in the same process: a bare loop that builds a request, awaits a
zero-latency model, validates the arguments with pydantic, runs an async tool and appends
both messages.
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

import pydantic

from hookloop import (
    OUTPUT_TOOL_NAME,
    Agent,
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from hookloop.hooks import EVENTS
from hookloop.models.base import ProviderRequest, ProviderResponse
from hookloop.models.testing import FunctionModel, ScriptedModel, text_response, tool_calls

TOOL_CALLS = 10
ITERATIONS = TOOL_CALLS + 1
PEERS_US = (1_100, 2_200)  # established Python frameworks, same scenario, no hooks
TARGET_US = (30, 60)  # without hooks, with 10 handlers on every event
HISTORY_SIZES = (0, 100, 1_000, 10_000, 100_000)
WINDOW_TOKENS = 8_000  # the model's context window in the history curve


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


class Summary(pydantic.BaseModel):
    keys: int
    total: int


OUTPUT_SCRIPT = [
    *SCRIPT[:-1],
    tool_calls(ToolCall(name=OUTPUT_TOOL_NAME, arguments='{"keys": 10, "total": 90}', id="out")),
]


def noop(ctx: Any) -> None:
    return None


async def anoop(ctx: Any) -> None:
    return None


def make_agent(
    handler: Callable[[Any], Any] | None,
    count: int,
    *,
    default_retry: bool = False,
    output: str | None = None,
) -> Agent:
    # The bare loop has no hook at all, so no retry strategy and no context policy either
    # (retry=None, context=None); the "default configuration" figure measures what Agent()
    # gives you out of the box.
    agent = Agent(
        ScriptedModel(SCRIPT if output is None else OUTPUT_SCRIPT),
        tools=[lookup],
        system_prompt="You look things up.",
        output_type=Summary if output == "agent" else None,
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
    output: str | None = None,
) -> float:
    """Median time of one chat divided by its 11 iterations, in microseconds.

    ``output``: ``"agent"`` gives the agent an output type, ``"chat"`` names it in the call.
    """
    samples: list[float] = []
    # One collection before the series, not one per chat: a full collection right before
    # each chat leaves the CPU caches cold and about triples every figure on this machine.
    gc.collect()
    for run in range(runs + runs // 10):  # the first tenth warms up and is dropped
        agent = make_agent(handler, count, default_retry=default_retry, output=output)
        start = time.perf_counter_ns()
        if stream:
            async for _ in agent.chat_stream("look up ten keys"):
                pass
        elif output == "chat":
            await agent.chat("look up ten keys", output_type=Summary)
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


def preloaded(n: int) -> list[Message]:
    """``n`` messages of earlier conversation: questions, answers, every fifth a tool call."""
    out: list[Message] = []
    while len(out) < n:
        i = len(out)
        out.append(UserMessage(content=f"Where is order {i}? It was due on Tuesday."))
        if i % 5 == 0:
            call = ToolCall(name="lookup", arguments=f'{{"key": {i}}}')
            out.append(AssistantMessage(tool_calls=(call,)))
            out.append(ToolMessage(tool_call_id=call.id, tool_name="lookup", content=str(2 * i)))
        out.append(AssistantMessage(content=f"Order {i} left the warehouse and ships Friday."))
    out = out[:n]
    while out and not isinstance(out[-1], AssistantMessage | UserMessage):
        out.pop()  # no tool result cut off from its call
    if out and isinstance(out[-1], AssistantMessage) and out[-1].tool_calls:
        out.pop()
    return out


def history_agent(messages: list[Message], *, window: bool) -> Agent:
    """An agent on a function-backed model: ten tool calls, then an answer, every chat."""
    calls = 0

    def answer(request: ProviderRequest) -> ProviderResponse:
        nonlocal calls
        calls += 1
        if calls % ITERATIONS == 0:
            return text_response("done")
        return tool_calls(ToolCall(name="lookup", arguments=f'{{"key": {calls}}}'))

    agent = Agent(
        FunctionModel(answer, context_window=WINDOW_TOKENS),
        tools=[lookup],
        system_prompt="You look things up.",
        retry=None,
        **({} if window else {"context": None}),
    )
    agent.history.import_history(messages)
    return agent


async def history_us(n: int, runs: int, *, window: bool) -> float:
    """Median time per iteration of a chat on a history pre-loaded with ``n`` messages."""
    messages = preloaded(n)
    samples: list[float] = []
    for run in range(runs + max(2, runs // 10)):
        agent = history_agent(messages, window=window)  # the same N messages every time
        gc.collect()  # the agents before this one (they hold reference cycles)
        # The first request after an import checks the whole history's tool-call pairing
        # once, and a collection leaves the caches cold in proportion to the heap: a warm-up
        # chat first, so the figure is a turn's cost, not a restore's or the collector's.
        await agent.chat("warm up")
        start = time.perf_counter_ns()
        await agent.chat("look up ten keys")
        elapsed = time.perf_counter_ns() - start
        if run >= max(2, runs // 10):
            samples.append(elapsed / ITERATIONS / 1_000)
    return statistics.median(samples)


class _Arguments(pydantic.BaseModel):
    key: int


async def floor_us(runs: int) -> float:
    """The interpreter floor: the least a loop in Python does per iteration, timed alike.

    Per iteration: build a request, await a zero-latency model, validate the arguments with
    pydantic, await an async tool, append the call and the result. No hooks, no events.
    """

    async def model(request: ProviderRequest) -> ProviderResponse:
        return tool_calls(ToolCall(name="lookup", arguments='{"key": 1}'))

    async def run_tool(key: int) -> int:
        return key * 2

    samples: list[float] = []
    gc.collect()
    for run in range(runs + runs // 10):
        history: list[Message] = [UserMessage(content="look up ten keys")]
        start = time.perf_counter_ns()
        for _ in range(ITERATIONS):
            request = ProviderRequest(
                model="floor", system="You look things up.", messages=tuple(history)
            )
            response = await model(request)
            call = response.tool_calls[0]
            arguments = _Arguments.model_validate_json(call.arguments)
            result = await run_tool(arguments.key)
            history.append(response.to_message())
            history.append(
                ToolMessage(tool_call_id=call.id, tool_name=call.name, content=str(result))
            )
        elapsed = time.perf_counter_ns() - start
        if run >= runs // 10:
            samples.append(elapsed / ITERATIONS / 1_000)
    return statistics.median(samples)


def measure(runs: int, history_runs: int) -> dict[str, Any]:
    async def curve(window: bool) -> dict[str, float]:
        return {
            str(n): await history_us(n, history_runs if n >= 10_000 else runs // 4, window=window)
            for n in HISTORY_SIZES
        }

    async def all_figures() -> dict[str, Any]:
        return {
            "floor_us_per_iteration": await floor_us(runs),
            "overhead_us_per_iteration": await per_iteration_us(None, 0, runs),
            "overhead_us_per_iteration_10_hooks": await per_iteration_us(noop, 10, runs),
            "overhead_us_per_iteration_10_async_hooks": await per_iteration_us(anoop, 10, runs),
            "overhead_us_per_iteration_stream": await per_iteration_us(None, 0, runs, stream=True),
            "overhead_us_per_iteration_default_config": await per_iteration_us(
                None, 0, runs, default_retry=True
            ),
            "overhead_us_per_iteration_output": await per_iteration_us(
                None, 0, runs, output="agent"
            ),
            "overhead_us_per_iteration_output_per_chat": await per_iteration_us(
                None, 0, runs, output="chat"
            ),
            "overhead_us_by_history": {
                "window": await curve(True),
                "no_window": await curve(False),
            },
        }

    figures: dict[str, Any] = asyncio.run(all_figures())
    figures["empty_dispatch_ns"] = empty_dispatch_ns()
    base = figures["overhead_us_per_iteration"]
    window = figures["overhead_us_by_history"]["window"]
    figures["floor_ratio"] = base / figures["floor_us_per_iteration"]
    figures["stream_ratio"] = figures["overhead_us_per_iteration_stream"] / base
    figures["output_ratio"] = figures["overhead_us_per_iteration_output"] / base
    figures["window_ratio_100k_to_100"] = window["100000"] / window["100"]
    figures["scenario"] = (
        f"{TOOL_CALLS} tool calls + final answer, scripted model, median of {runs} chats"
    )
    figures["python"] = sys.version.split()[0]
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--runs", type=int, default=400, help="chats per figure (default 400)")
    parser.add_argument(
        "--history-runs", type=int, default=40, help="chats per large-history figure (default 40)"
    )
    args = parser.parse_args()
    figures = measure(args.runs, args.history_runs)
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
        (
            "per iteration, output_type on Agent()",
            figures["overhead_us_per_iteration_output"],
            "us",
            "",
        ),
        (
            "per iteration, output_type per chat",
            figures["overhead_us_per_iteration_output_per_chat"],
            "us",
            "",
        ),
        ("empty dispatch", figures["empty_dispatch_ns"], "ns", ""),
    ]
    for label, value, unit, note in rows:
        print(f"  {label:<40} {value:8.1f} {unit}   {note}")
    print(
        f"  interpreter floor {figures['floor_us_per_iteration']:.1f} us: "
        f"the loop costs {figures['floor_ratio']:.2f}x it (aim <= 2x)"
    )
    print(f"  chat_stream costs {figures['stream_ratio']:.2f}x chat (aim <= 2x)")
    print(f"  an output type costs {figures['output_ratio']:.2f}x plain chat")
    print("  per iteration by stored history (us):  N  window  no window")
    curves = figures["overhead_us_by_history"]
    for n in HISTORY_SIZES:
        key = str(n)
        print(f"  {n:>40,} {curves['window'][key]:7.1f} {curves['no_window'][key]:10.1f}")
    print(
        f"  with the window, 100k costs {figures['window_ratio_100k_to_100']:.2f}x 100"
        " (aim <= 1.2x)"
    )
    low, high = PEERS_US[0] / base, PEERS_US[1] / base
    print(f"  peers spend {PEERS_US[0]:,}-{PEERS_US[1]:,} us per iteration: {low:.0f}-{high:.0f}x")
    print(f"  10 handlers on every event cost {hooked / base:.2f}x the bare loop")


if __name__ == "__main__":
    main()
