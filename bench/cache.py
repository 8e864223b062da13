"""How much of a long conversation's input a provider's prompt cache could serve.

    python bench/cache.py            # a readable table
    python bench/cache.py --json     # one JSON object with the same figures

A 200-turn agent conversation is replayed through hookloop's request builder: a real
``Agent`` and its context policy, on a function-backed model that answers from a script (no
model runs). Each turn is a question, up to three rounds of tool calls (one or two calls a
round, results of a few hundred to a few thousand tokens) and an answer, sizes drawn from a
seeded generator; the model's window is 128k tokens, so the conversation (about 700k tokens)
outgrows it after a few dozen turns.

A provider's cache serves the longest prefix a request shares with the one before it (the
tools, the system prompt, then messages while they are the same): ``cacheable_pct`` is those
tokens over all input tokens of the conversation's requests. ``fits`` says whether every
request stayed inside the window (less the room for the answer); ``window_used_pct`` is the
mean request size over that budget (how much history the model saw); ``moves`` counts the
requests whose first message differed from the request before.

``input_cost_pct`` prices it at Anthropic's rates for the five-minute cache (a read 0.1x
the input price, a write 1.25x; the uncached rest is written): the conversation's input cost
against the same requests without a cache.

Policies: ``SlidingWindow()`` (hookloop's default, moving in steps of a quarter of the
budget), the same with other steps, ``SlidingWindow(headroom=0)`` (the most that fits: it
drops the oldest whole turn as soon as the conversation outgrows the window), a peer's
trim that drops the oldest message, one at a time, until the request fits (``context=None``
and a ``pre_request`` hook; a tool result whose call went goes with it), and
``Compaction()`` with a summariser that writes 600 tokens (its own requests, which summarise
the old turns, are counted apart: ``summariser_input_tokens``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import sys
from collections.abc import Iterator
from typing import Any

from hookloop import Agent, Message, PreRequestContext, ToolCall, ToolMessage, tool
from hookloop.context import Compaction, SlidingWindow, count_request
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, text_response, tool_calls

TURNS = 200
WINDOW = 128_000
BUDGET = WINDOW - 1024  # less the window's default room for the answer
SEED = 27
SYSTEM_PROMPT_TOKENS = 800
SUMMARY_TOKENS = 600

_PROSE = (
    "the order shipped from the warehouse on tuesday and the customer asked when the refund "
    "for the damaged parcel would arrive so the agent looked up the invoice the carrier and "
    "the tracking history before it answered with the dates the amounts and the next steps"
)
_WORDS = _PROSE.split()


def text(tokens: int, rng: random.Random) -> str:
    """About ``tokens`` tokens of prose (the estimate counts about four characters a token)."""
    words: list[str] = []
    length = 0
    while length < tokens * 4:
        word = rng.choice(_WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)


async def lookup_order(order_id: int, size: int) -> str:
    """Look up an order: its invoice, its parcels and their tracking history.

    Args:
        order_id: The order's number.
        size: How much history to return (the script decides).
    """
    return _RESULTS[size]


async def search_docs(query: str, size: int) -> str:
    """Search the support knowledge base and return the matching passages.

    Args:
        query: What to look for.
        size: How much to return (the script decides).
    """
    return _RESULTS[size]


_RESULTS: dict[int, str] = {}  # tool results by size, made with the conversation


def conversation(turns: int, seed: int) -> list[tuple[str, list[ProviderResponse]]]:
    """Each turn's question and the model's scripted answers (tool-call rounds, then text)."""
    rng = random.Random(seed)
    script: list[tuple[str, list[ProviderResponse]]] = []
    for turn in range(turns):
        question = text(rng.randint(40, 300), rng)
        answers: list[ProviderResponse] = []
        for _ in range(rng.choice((0, 1, 1, 2, 3))):
            calls = []
            for _ in range(rng.choice((1, 1, 2))):
                size = rng.randint(200, 3_000)
                _RESULTS.setdefault(size, text(size, rng))
                name = rng.choice(("lookup_order", "search_docs"))
                argument = (
                    f'"order_id": {rng.randint(1000, 9999)}'
                    if name == "lookup_order"
                    else f'"query": "{text(8, rng)}"'
                )
                calls.append(ToolCall(name=name, arguments=f'{{{argument}, "size": {size}}}'))
            answers.append(tool_calls(*calls))
        answers.append(text_response(f"({turn}) {text(rng.randint(80, 500), rng)}"))
        script.append((question, answers))
    return script


class OldestMessageFirst:
    """A peer's window: drop the oldest message until the request fits (no policy plugin)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget

    def attach(self, agent: Agent) -> None:
        counter = agent.history.token_counter

        def trim(ctx: PreRequestContext) -> ProviderRequest | None:
            request = ctx.request
            size = count_request(request, counter=counter)
            messages = list(request.messages)
            start = 0
            while size > self.budget and start < len(messages) - 1:
                size -= counter.count_message(messages[start])
                start += 1
                while start < len(messages) - 1 and isinstance(messages[start], ToolMessage):
                    size -= counter.count_message(messages[start])  # its call went
                    start += 1
            if not start:
                return None
            return dataclasses.replace(request, messages=tuple(messages[start:]))

        agent.add_hook("pre_request", trim)


def replay(policy: Any, turns: int, seed: int) -> tuple[list[ProviderRequest], Agent, int]:
    """The requests an agent with ``policy`` sends over the conversation, and its summariser's
    input tokens."""
    script = conversation(turns, seed)
    pending: Iterator[ProviderResponse] = iter(())
    model = FunctionModel(lambda request: next(pending), context_window=WINDOW)
    system_prompt = text(SYSTEM_PROMPT_TOKENS, random.Random(seed + 1))
    agent = Agent(
        model,
        system_prompt=system_prompt,
        tools=[tool(lookup_order), tool(search_docs)],
        retry=None,
        context=None if isinstance(policy, OldestMessageFirst) else policy,
    )
    if isinstance(policy, OldestMessageFirst):
        policy.attach(agent)
    summarised = 0
    if isinstance(policy, Compaction):
        summary = text(SUMMARY_TOKENS, random.Random(seed + 2))

        def summarise(request: ProviderRequest) -> str:
            nonlocal summarised
            summarised += count_request(request, counter=agent.history.token_counter)
            return summary

        policy.summarizer = FunctionModel(summarise)

    async def run() -> None:
        nonlocal pending
        for question, answers in script:
            pending = iter(answers)
            await agent.chat(question)

    asyncio.run(run())
    return model.requests, agent, summarised


def shared_prefix(request: ProviderRequest, before: ProviderRequest | None, counter: Any) -> int:
    """Tokens at the start of ``request`` that ``before`` had too, in the order a provider
    reads them: tools, system prompt, messages (a message counts only when it is the same)."""
    if before is None or request.tools != before.tools:
        return 0
    tokens = counter.count_tools(request.tools) if request.tools else 0
    if request.system != before.system:
        return tokens
    tokens += counter.count_system(request.system) if request.system else 0
    for message, previous in zip(request.messages, before.messages, strict=False):
        if message != previous:
            break
        tokens += counter.count_message(message)
    return tokens


def measure(policy: Any, turns: int, seed: int) -> dict[str, Any]:
    requests, agent, summarised = replay(policy, turns, seed)
    counter = agent.history.token_counter
    sizes = [count_request(r, counter=counter) for r in requests]
    total = sum(sizes)
    cached = 0
    moves = 0
    before: ProviderRequest | None = None
    for request in requests:
        cached += shared_prefix(request, before, counter)
        first: Message | None = request.messages[0] if request.messages else None
        if before is not None and before.messages and first != before.messages[0]:
            moves += 1
        before = request
    return {
        "requests": len(requests),
        "input_tokens": total,
        "cacheable_tokens": cached,
        "cacheable_pct": round(100 * cached / total, 1),
        "input_cost_pct": round(
            100 * (0.1 * cached + 1.25 * (sum(sizes) - cached)) / sum(sizes), 1
        ),
        "fits": max(sizes) <= BUDGET,
        "largest_request_tokens": max(sizes),
        "window_used_pct": round(100 * sum(sizes) / len(sizes) / BUDGET, 1),
        "moves": moves,
        "summariser_input_tokens": summarised,
        "conversation_tokens": agent.history.conversation_tokens,
    }


POLICIES: dict[str, Any] = {
    "SlidingWindow() (steps of 25%)": lambda: SlidingWindow(),
    "SlidingWindow(headroom=0.1)": lambda: SlidingWindow(headroom=0.1),
    "SlidingWindow(headroom=0.5)": lambda: SlidingWindow(headroom=0.5),
    "SlidingWindow(headroom=0) (one turn at a time)": lambda: SlidingWindow(headroom=0),
    "a peer's trim: the oldest message, one at a time": lambda: OldestMessageFirst(BUDGET),
    "Compaction()": lambda: Compaction(),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--turns", type=int, default=TURNS, help=f"turns (default {TURNS})")
    parser.add_argument("--seed", type=int, default=SEED, help=f"the script's seed ({SEED})")
    args = parser.parse_args()
    figures = {name: measure(make(), args.turns, args.seed) for name, make in POLICIES.items()}
    if args.json:
        print(json.dumps({"window": WINDOW, "turns": args.turns, "policies": figures}, indent=2))
        return
    first = next(iter(figures.values()))
    print(
        f"prompt-cache share of {args.turns} turns, {first['requests']} requests, "
        f"{first['conversation_tokens']:,} tokens of conversation, a {WINDOW:,}-token window "
        f"(Python {sys.version.split()[0]})"
    )
    print(
        f"  {'policy':<50} {'cacheable':>9} {'input cost':>10} {'fits':>5} {'window used':>11}"
        f" {'moves':>6}"
    )
    for name, row in figures.items():
        extra = (
            f"  (+{row['summariser_input_tokens']:,} summariser input tokens)"
            if row["summariser_input_tokens"]
            else ""
        )
        print(
            f"  {name:<50} {row['cacheable_pct']:>8.1f}% {row['input_cost_pct']:>9.1f}% "
            f"{'yes' if row['fits'] else 'NO':>5} {row['window_used_pct']:>10.1f}% "
            f"{row['moves']:>6}{extra}"
        )


if __name__ == "__main__":
    main()
