"""The events that carry a run's figures: first chunk, backoff wait, trim, compaction.

Each is a row of the event table fired by the part that knows the figures (the stream loop,
the retry strategies, ``SlidingWindow``, ``Compaction``); the tests read the contexts whole.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hookloop import Agent, ContextOverflowError, RateLimitError, TracePlugin, tool
from hookloop.context import Compaction, SlidingWindow
from hookloop.hooks import BackoffWaitContext, CompactionContext, FirstChunkContext, TrimContext
from hookloop.retry import Backoff, DefaultRetryStrategy
from hookloop.testing import FakeClock, ScriptedModel, ScriptStep, text_response, tool_call

NO_JITTER = Backoff(kind="exponential", base=0.5, factor=2.0, max_delay=30.0, jitter="none")


def record(agent: Agent, event: Any) -> list[Any]:
    seen: list[Any] = []
    agent.add_hook(event, seen.append)
    return seen


def fields(ctx: object) -> dict[str, Any]:
    return {f.name: getattr(ctx, f.name) for f in dataclasses.fields(ctx)}  # type: ignore[arg-type]


async def test_a_backoff_wait_says_how_long_why_and_what_the_provider_asked() -> None:
    clock = FakeClock()
    limited = RateLimitError("slow down", status=429, headers={"retry-after": "4"})
    timeout = TimeoutError("read timed out")
    model = ScriptedModel([limited, timeout, "ok"])
    agent = Agent(
        model, retry=DefaultRetryStrategy(sleep=clock.sleep, clock=clock, backoff=NO_JITTER)
    )
    seen: list[BackoffWaitContext] = record(agent, "on_backoff_wait")

    await agent.chat("hi")

    assert [fields(c) for c in seen] == [
        {
            "iteration": 0,
            "attempt": 1,
            "seconds": 4.0,
            "reason": "RateLimitError",
            "error": limited,
            "retry_after": 4.0,
            "strategy": "default-retry",
        },
        {
            "iteration": 0,
            "attempt": 2,
            "seconds": 1.0,
            "reason": "TimeoutError",
            "error": timeout,
            "retry_after": None,
            "strategy": "default-retry",
        },
    ]
    assert clock.now == 5.0  # the event fires before the wait, which then happens


async def test_the_first_chunk_fires_once_per_streamed_attempt_and_never_for_chat() -> None:
    reply = text_response("Hello there")
    model = ScriptedModel([ScriptStep(response=reply, chunk_size=2), "whole"], name="m")
    agent = Agent(model)
    seen: list[FirstChunkContext] = record(agent, "on_first_chunk")

    async with agent.chat_stream("hi") as stream:
        async for _ in stream:
            pass
    await agent.chat("again")

    assert [(c.iteration, c.attempt, c.model) for c in seen] == [(0, 1, model)]


async def test_a_window_trim_reports_messages_and_tokens_before_and_after() -> None:
    long = "word " * 100
    agent = Agent(ScriptedModel(["a", "b", "c"]), context=SlidingWindow(max_tokens=400, reserve=50))
    seen: list[TrimContext] = record(agent, "on_trim")
    counter = agent.history.token_counter

    for _ in range(3):
        await agent.chat(long)

    (trim,) = seen  # the first two requests fit
    stored = agent.messages[:-1]  # what the third request was built from
    kept = stored[len(stored) - trim.messages_after :]
    assert fields(trim) == {
        "iteration": 0,
        "attempt": 1,
        "reason": "window",
        "messages_before": 5,
        "messages_after": len(kept),
        "tokens_before": sum(map(counter.count_message, stored)),
        "tokens_after": sum(map(counter.count_message, kept)),
        "budget": trim.budget,
        "window": 400,
    }
    assert trim.tokens_after <= trim.budget < trim.tokens_before


async def test_an_overflow_trim_is_reported_with_its_reason() -> None:
    overflow = ContextOverflowError("prompt is too long", status=400)
    model = ScriptedModel(["a", overflow, "fits now"])
    agent = Agent(model, retry=None, context=SlidingWindow())
    seen: list[TrimContext] = record(agent, "on_trim")

    await agent.chat("first " * 50)
    assert (await agent.chat("second")).text == "fits now"

    # The refused request is shrunk, then the retry is built to the budget it taught.
    assert [(t.reason, t.attempt, t.messages_before) for t in seen] == [
        ("overflow", 1, 3),
        ("window", 2, 3),
    ]
    assert seen[0].messages_after == seen[1].messages_after < 3


async def test_a_proactive_summary_and_a_reactive_tier_are_reported_as_compactions() -> None:
    @tool
    async def dump() -> str:
        """Return a huge log."""
        return "log line " * 300

    overflow = ContextOverflowError("prompt is too long", status=400)
    script = [tool_call("dump", {}), tool_call("dump", {}), overflow, "done"]
    agent = Agent(
        ScriptedModel(script), tools=[dump], retry=None, context=Compaction(tool_result_chars=100)
    )
    seen: list[CompactionContext] = record(agent, "on_compaction")

    await agent.chat("look")

    (reactive,) = seen
    assert (reactive.iteration, reactive.attempt, reactive.tier) == (2, 1, "tool_results")
    assert reactive.messages_before == reactive.messages_after == 5
    assert reactive.tokens_after < reactive.tokens_before
    assert reactive.window is None

    summarizer = ScriptedModel(["the summary"], name="summarizer")
    model = ScriptedModel(["one", "two"], context_window=600)
    agent = Agent(
        model, context=Compaction(compact_threshold=0.5, keep_recent=0.2, summarizer=summarizer)
    )
    seen = record(agent, "on_compaction")
    await agent.chat("word " * 200)
    await agent.chat("word " * 200)

    (proactive,) = seen
    assert (proactive.iteration, proactive.attempt, proactive.tier, proactive.window) == (
        0,
        1,
        "summary",
        600,
    )
    assert proactive.tokens_after < proactive.tokens_before


async def test_the_trace_prints_the_figures() -> None:
    clock = FakeClock()
    lines: list[str] = []
    model = ScriptedModel([RateLimitError("no", status=429, retry_after=2.0), "ok"])
    agent = Agent(
        model, retry=DefaultRetryStrategy(sleep=clock.sleep, clock=clock, backoff=NO_JITTER)
    )
    agent.use(TracePlugin(write=lines.append, clock=lambda: 0.0))

    await agent.chat("hi")

    waits = [line for line in lines if "on_backoff_wait" in line]
    assert waits == [
        "    0.0 ms  on_backoff_wait      attempt 1 failed (RateLimitError): waiting 2s"
        " (Retry-After 2s)"
    ]


async def test_a_window_that_left_messages_out_is_reported_when_a_compaction_rewrote_it() -> None:
    # The window builds the request from the newest messages; a compaction attached to the
    # same agent then summarises. The window's trim is still reported (issue 21 item 14).
    answers = [f"Reply {i}. " + "words " * 30 for i in range(10)]
    agent = Agent(ScriptedModel(answers, context_window=1000), retry=None)  # the window
    for i in range(9):
        await agent.chat(f"Fruit question {i}: {'apples and pears ' * 20}")
    summarizer = ScriptedModel(["The user asked about fruit."], name="summarizer")
    agent.use(Compaction(compact_threshold=0.5, keep_recent=0.2, summarizer=summarizer))
    trims: list[TrimContext] = record(agent, "on_trim")
    compactions: list[CompactionContext] = record(agent, "on_compaction")
    summarised: list[int] = []
    agent.add_hook("on_pre_compress", lambda ctx: summarised.append(len(ctx.messages)))

    await agent.chat(f"Fruit question 9: {'apples and pears ' * 20}")

    (trim,) = trims
    (compaction,) = compactions
    assert (trim.reason, trim.attempt, trim.messages_before) == ("window", 1, 19)
    assert trim.messages_after == compaction.messages_before < 19
    assert trim.tokens_after <= trim.budget < trim.tokens_before
    assert compaction.tier == "summary"
    assert summarised == [17]
