"""Framework overhead of the agent loop, per model iteration.

The scenario: one chat of 10 tool calls and a final answer (11 model iterations) on the
scripted model, which answers at once, so every microsecond measured is hookloop's own
(building requests, dispatching hooks, validating arguments, running the tool, committing).

    python bench/loop.py            # a readable table
    python bench/loop.py --json     # one JSON object with the same figures

``overhead_us_by_history`` is the same chat on a function-backed model with the history
pre-loaded with N messages (after one warm-up chat), with the default context policy (a
``SlidingWindow`` over an 8,000-token window) and without one (``context=None``): a turn must
not cost more as the conversation grows. ``overhead_us_per_iteration_run_context`` is the
bare chat with a tool that takes a ``RunContext[int]`` (the chat passes ``deps``), and
``run_context_ratio`` its cost over the plain tool's. ``overhead_us_per_iteration_output`` is the
same chat with an output type (a pydantic model) whose final answer comes through the output
tool, the type given to ``Agent()``; ``..._output_per_chat`` names it in the ``chat()`` call
instead, on a new agent each chat, so it includes building the type's validator once (an
agent keeps it for its later chats). ``floor_us_per_iteration`` is the interpreter
floor, measured in the same process: a bare loop that builds a request, awaits a
zero-latency model, validates the arguments with pydantic, runs an async tool and appends
both messages.

``overhead_us_per_iteration_otel`` is the same chat with ``OpenTelemetryPlugin`` on, exporting
to the SDK (a ``TracerProvider`` with the in-memory exporter, a ``MeterProvider`` with the
in-memory reader); ``otel_sdk_us_per_span`` is what the SDK alone takes to start, fill and end
one such span, timed in the same process, so the plugin's own share is what remains;
``overhead_us_per_iteration_otel_noop`` is the plugin on the API's no-op providers (no SDK):
its handlers and nothing else.
``overhead_us_per_iteration_otel_disposed`` is the chat after the plugin was used and
disposed: without the plugin no handler is registered and nothing is paid.

``overhead_us_per_iteration_guardrails`` is the ``Agent()``-defaults chat with one guardrail
of each kind (input, output, tool call, tool result: cheap functions that allow), and
``guardrails_ratio`` its cost over the same agent without them (aim <= 1.3x). The "handlers
on every event" figures leave the guard rows out: a guard row's handler is a guardrail,
measured here.

``overhead_us_per_iteration_limits`` is an ``Agent()``-defaults agent (retries and the
window on) whose model reports usage on every answer and has a price of the user's
(``prices=``), with every usage limit set (requests, tool calls, input / output / total
tokens, tokens per request, cost, seconds) and none crossed; ``..._limits_off`` is the same
agent without limits (its calls still priced), and ``limits_ratio`` the one over the other:
what checking the limits before and after each model call and each tool batch costs.
``overhead_us_per_iteration_limits_guardrails`` is that agent with every limit and one
guardrail of each kind, and ``limits_guardrails_ratio`` its cost over ``..._limits_off``
(issue 24's aim: <= 1.3x). These three take turns chat by chat, in rounds, and their ratios
are medians of the rounds' ratios (see ``limits_figures``).
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
    RunContext,
    ToolCall,
    ToolMessage,
    Usage,
    UsageLimits,
    UserMessage,
    Verdict,
    tool,
)
from hookloop.guardrails import (
    input_guardrail,
    output_guardrail,
    tool_call_guardrail,
    tool_result_guardrail,
)
from hookloop.hooks import EVENT_TABLE
from hookloop.limits import ModelPrice
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.observe import OpenTelemetryPlugin
from hookloop.testing import FunctionModel, ScriptedModel, text_response, tool_calls

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


@tool(name="lookup")
async def lookup_with_context(ctx: RunContext[int], key: int) -> int:
    """Return the key times the chat's factor."""
    return key * ctx.deps


SCRIPT = [
    *(
        tool_calls(ToolCall(name="lookup", arguments=f'{{"key": {i}}}', id=f"c{i}"))
        for i in range(TOOL_CALLS)
    ),
    text_response("done"),
]


USAGE = Usage(input_tokens=400, output_tokens=20)
USAGE_SCRIPT = [
    ProviderResponse(
        content=step.content,
        tool_calls=step.tool_calls,
        finish_reason=step.finish_reason,
        usage=USAGE,
    )
    for step in SCRIPT
]
PRICES = {
    "scripted": ModelPrice(input_per_mtok=2.5, output_per_mtok=10, cached_input_per_mtok=1.25)
}
LIMITS = UsageLimits(
    requests=100,
    tool_calls=100,
    input_tokens=10**7,
    output_tokens=10**6,
    total_tokens=10**7,
    tokens_per_request=100_000,
    cost=10,
    seconds=3_600,
)


def limits_agent(limited: bool, setup: Callable[[Agent], object] | None = None) -> Agent:
    """``Agent()`` defaults, a priced model that reports usage; with every limit, or none."""
    agent = Agent(
        ScriptedModel(USAGE_SCRIPT),
        tools=[lookup],
        system_prompt="You look things up.",
        prices=PRICES,
        limits=LIMITS if limited else None,
    )
    if setup is not None:
        setup(agent)
    return agent


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


def allow(ctx: Any) -> Verdict:
    return Verdict.allow()


def use_guardrails(agent: Agent) -> None:
    """One guardrail of each kind, each a cheap function that lets everything pass."""
    agent.use(input_guardrail(allow))
    agent.use(output_guardrail(allow))
    agent.use(tool_call_guardrail(allow))
    agent.use(tool_result_guardrail(allow))


def make_agent(
    handler: Callable[[Any], Any] | None,
    count: int,
    *,
    default_retry: bool = False,
    setup: Callable[[Agent], object] | None = None,
    run_context: bool = False,
    output: str | None = None,
) -> Agent:
    # The bare loop has no hook at all, so no retry strategy and no context policy either
    # (retry=None, context=None); the "default configuration" figure measures what Agent()
    # gives you out of the box.
    agent = Agent(
        ScriptedModel(SCRIPT if output is None else OUTPUT_SCRIPT),
        tools=[lookup_with_context if run_context else lookup],
        system_prompt="You look things up.",
        output_type=Summary if output == "agent" else None,
        **({"deps": 2} if run_context else {}),
        **({} if default_retry else {"retry": None, "context": None}),
    )
    if handler is not None:
        # Scope events fire outside chats (and take only sync handlers): every chat event but
        # the guard rows (a handler there is a guardrail: see use_guardrails).
        guards = {name for name, spec in EVENT_TABLE.items() if spec.kind == "guard"}
        for event in sorted(
            set(EVENT_TABLE) - {"on_scope_register", "on_scope_unregister"} - guards
        ):
            for _ in range(count):
                agent.hooks.add(event, handler)
    if setup is not None:
        setup(agent)
    return agent


async def per_iteration_us(
    handler: Callable[[Any], Any] | None,
    count: int,
    runs: int,
    *,
    stream: bool = False,
    default_retry: bool = False,
    setup: Callable[[Agent], object] | None = None,
    run_context: bool = False,
    output: str | None = None,
    limits: bool | None = None,
) -> float:
    """Median time of one chat divided by its 11 iterations, in microseconds.

    ``output``: ``"agent"`` gives the agent an output type, ``"chat"`` names it in the call.
    ``limits``: not ``None`` for :func:`limits_agent`'s agent, with limits or without.
    """
    samples: list[float] = []
    # One collection before the series, not one per chat: a full collection right before
    # each chat leaves the CPU caches cold and about triples every figure on this machine.
    gc.collect()
    for run in range(runs + runs // 10):  # the first tenth warms up and is dropped
        agent = (
            limits_agent(limits, setup)
            if limits is not None
            else make_agent(
                handler,
                count,
                default_retry=default_retry,
                setup=setup,
                run_context=run_context,
                output=output,
            )
        )
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


LIMITS_ROUNDS = 7


async def limits_figures(runs: int, rounds: int = LIMITS_ROUNDS) -> dict[str, float]:
    """The priced agent without limits, with every limit, and with limits and guardrails.

    Measured in ``rounds`` rounds of ``runs`` // 2 chats of each agent, the three taking
    turns chat by chat (a new agent each chat, as :func:`per_iteration_us` makes them), so
    that a ratio compares chats run a moment apart: a series of each, one after the other,
    moved with the machine's load and its caches by more than the limits cost (rounds of
    1.18-1.45x where interleaved chats gave 1.26-1.30x). A round's figure is the median of
    its chats; the ratios are the medians of the rounds' ratios, the figures the medians of
    the rounds' figures.
    """
    chats = max(runs // 2, 20)
    makers: list[Callable[[], Agent]] = [
        lambda: limits_agent(False),
        lambda: limits_agent(True),
        lambda: limits_agent(True, use_guardrails),
    ]
    for make in makers:  # warm-up chats, not timed
        for _ in range(10):
            await make().chat("look up ten keys")
    figures: list[list[float]] = [[], [], []]
    for _ in range(rounds):
        samples: list[list[float]] = [[], [], []]
        gc.collect()
        for _ in range(chats):
            for make, taken in zip(makers, samples, strict=True):
                agent = make()
                start = time.perf_counter_ns()
                await agent.chat("look up ten keys")
                taken.append((time.perf_counter_ns() - start) / ITERATIONS / 1_000)
        for taken, figure in zip(samples, figures, strict=True):
            figure.append(statistics.median(taken))
    off, limited, guarded = figures
    median = statistics.median
    return {
        "overhead_us_per_iteration_limits_off": median(off),
        "overhead_us_per_iteration_limits": median(limited),
        "overhead_us_per_iteration_limits_guardrails": median(guarded),
        "limits_ratio": median(b / a for a, b in zip(off, limited, strict=True)),
        "limits_guardrails_ratio": median(b / a for a, b in zip(off, guarded, strict=True)),
        "limits_guardrails_ratio_worst_round": max(
            b / a for a, b in zip(off, guarded, strict=True)
        ),
    }


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


class _OTel:
    """The OpenTelemetry SDK with in-memory export, and the plugin wired to it."""

    def __init__(self) -> None:
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.meter_provider = MeterProvider(metric_readers=[InMemoryMetricReader()])

    def plugin(self) -> OpenTelemetryPlugin:
        return OpenTelemetryPlugin(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, environ={}
        )

    def use(self, agent: Agent) -> None:
        self.exporter.clear()  # keep the exporter's list short: one chat's spans
        agent.use(self.plugin())

    def use_noop(self, agent: Agent) -> None:
        from opentelemetry.metrics import NoOpMeterProvider
        from opentelemetry.trace import NoOpTracerProvider

        plugin = OpenTelemetryPlugin(
            tracer_provider=NoOpTracerProvider(), meter_provider=NoOpMeterProvider(), environ={}
        )
        agent.use(plugin)

    def use_and_dispose(self, agent: Agent) -> None:
        agent.use(self.plugin())()

    def spans_per_chat(self) -> int:
        self.exporter.clear()
        agent = make_agent(None, 0, setup=self.use)
        asyncio.run(agent.chat("look up ten keys"))
        return len(self.exporter.get_finished_spans())

    def sdk_us_per_span(self, number: int = 2_000) -> float:
        """The SDK alone: start a span with a chat span's attributes, add one, end it."""
        tracer = self.tracer_provider.get_tracer("bench")
        attributes = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "scripted",
            "gen_ai.system": "hookloop",
        }

        def one() -> None:
            span = tracer.start_span("chat scripted", attributes=attributes)
            span.set_attributes({"gen_ai.response.finish_reasons": ("stop",)})
            span.end()

        # The exporter emptied before each series, as the chats see it (one chat's spans).
        best = min(timeit.repeat(one, setup=self.exporter.clear, number=number, repeat=20))
        self.exporter.clear()
        return best / number * 1e6


def measure(runs: int, history_runs: int) -> dict[str, Any]:
    otel = _OTel()

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
            "overhead_us_per_iteration_otel": await per_iteration_us(None, 0, runs, setup=otel.use),
            "overhead_us_per_iteration_otel_noop": await per_iteration_us(
                None, 0, runs, setup=otel.use_noop
            ),
            "overhead_us_per_iteration_otel_disposed": await per_iteration_us(
                None, 0, runs, setup=otel.use_and_dispose
            ),
            "overhead_us_per_iteration_run_context": await per_iteration_us(
                None, 0, runs, run_context=True
            ),
            "overhead_us_per_iteration_output": await per_iteration_us(
                None, 0, runs, output="agent"
            ),
            "overhead_us_per_iteration_guardrails": await per_iteration_us(
                None, 0, runs, default_retry=True, setup=use_guardrails
            ),
            "overhead_us_per_iteration_output_per_chat": await per_iteration_us(
                None, 0, runs, output="chat"
            ),
            **await limits_figures(runs),
            "overhead_us_by_history": {
                "window": await curve(True),
                "no_window": await curve(False),
            },
        }

    figures: dict[str, Any] = asyncio.run(all_figures())
    figures["empty_dispatch_ns"] = empty_dispatch_ns()
    figures["otel_sdk_us_per_span"] = otel.sdk_us_per_span()
    figures["otel_spans_per_iteration"] = otel.spans_per_chat() / ITERATIONS
    figures["otel_plugin_us_per_iteration"] = (
        figures["overhead_us_per_iteration_otel"]
        - figures["overhead_us_per_iteration"]
        - figures["otel_spans_per_iteration"] * figures["otel_sdk_us_per_span"]
    )
    base = figures["overhead_us_per_iteration"]
    window = figures["overhead_us_by_history"]["window"]
    figures["floor_ratio"] = base / figures["floor_us_per_iteration"]
    figures["stream_ratio"] = figures["overhead_us_per_iteration_stream"] / base
    figures["run_context_ratio"] = figures["overhead_us_per_iteration_run_context"] / base
    figures["output_ratio"] = figures["overhead_us_per_iteration_output"] / base
    figures["guardrails_ratio"] = (
        figures["overhead_us_per_iteration_guardrails"]
        / figures["overhead_us_per_iteration_default_config"]
    )
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
            "per iteration, OpenTelemetryPlugin (SDK)",
            figures["overhead_us_per_iteration_otel"],
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
            "per iteration, the plugin, no-op API",
            figures["overhead_us_per_iteration_otel_noop"],
            "us",
            "its handlers alone",
        ),
        (
            "per iteration, the plugin disposed",
            figures["overhead_us_per_iteration_otel_disposed"],
            "us",
            "no handler left",
        ),
        (
            "per iteration, a RunContext tool",
            figures["overhead_us_per_iteration_run_context"],
            "us",
            f"{figures['run_context_ratio']:.2f}x the plain tool",
        ),
        (
            "per iteration, output_type per chat",
            figures["overhead_us_per_iteration_output_per_chat"],
            "us",
            "",
        ),
        (
            "per iteration, guardrails",
            figures["overhead_us_per_iteration_guardrails"],
            "us",
            "one of each kind, on Agent() defaults",
        ),
        (
            "per iteration, every usage limit set",
            figures["overhead_us_per_iteration_limits"],
            "us",
            f"{figures['limits_ratio']:.2f}x the same agent without",
        ),
        (
            "per iteration, limits and guardrails",
            figures["overhead_us_per_iteration_limits_guardrails"],
            "us",
            f"{figures['limits_guardrails_ratio']:.2f}x the same agent without (aim <= 1.3x; "
            f"the worst of {LIMITS_ROUNDS} rounds "
            f"{figures['limits_guardrails_ratio_worst_round']:.2f}x)",
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
    print(
        f"  one guardrail of each kind costs {figures['guardrails_ratio']:.2f}x Agent() "
        "defaults (aim <= 1.3x)"
    )
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
    print(
        f"  OpenTelemetry: {figures['otel_spans_per_iteration']:.1f} spans per iteration at "
        f"{figures['otel_sdk_us_per_span']:.1f} us each in the SDK itself; the plugin's own "
        f"share is {figures['otel_plugin_us_per_iteration']:.1f} us per iteration"
    )


if __name__ == "__main__":
    main()
