"""The sliding window moves in steps, so the requests between two steps share their prefix.

A provider's prompt cache serves the longest prefix a request shares with an earlier one.
``SlidingWindow(headroom=...)`` drops a block of old turns when the conversation outgrows the
budget, then starts at the same message until it has grown by that much again; a window that
dropped the oldest turn on every request would begin each request with other messages.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    ContextOverflowError,
    Message,
    ToolCall,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.context import (
    SUMMARY_HEADER,
    Compaction,
    EstimateCounter,
    SlidingWindow,
    count_overhead,
    count_request,
    trim_to_budget,
)
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, ScriptedModel, text_response, tool_calls
from tests.context.test_policies import text
from tests.context.test_window_incremental import fetch


def run(window: int, headroom: float, chats: list[tuple[list[int], int, int]]) -> Agent:
    """An agent whose model records its requests, after the chats (sizes in tokens)."""
    script: Iterator[ProviderResponse] = iter(())
    policy = SlidingWindow(max_tokens=window, reserve=0, headroom=headroom)
    agent = Agent(
        FunctionModel(lambda request: next(script)), tools=[tool(fetch)], retry=None, context=policy
    )

    async def chats_() -> None:
        nonlocal script
        for calls, question, final in chats:
            made = [ToolCall(name="fetch", arguments=f'{{"size": {s}}}') for s in calls]
            script = iter([*(tool_calls(c) for c in made), text_response(text(final))])
            try:
                await agent.chat(text(question))
            except ContextOverflowError:
                event("a turn did not fit")

    asyncio.run(chats_())
    return agent


turns = st.lists(
    st.tuples(
        st.lists(st.integers(1, 300), max_size=3),  # tool results
        st.integers(1, 200),  # the question
        st.integers(1, 200),  # the answer
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=80, deadline=None)
@given(
    window=st.integers(min_value=800, max_value=4_000),
    headroom=st.sampled_from([0.1, 0.25, 0.5]),
    chats=turns,
)
def test_requests_between_two_steps_share_their_prefix(
    window: int, headroom: float, chats: list[tuple[list[int], int, int]]
) -> None:
    agent = run(window, headroom, chats)
    model = agent.model
    assert isinstance(model, FunctionModel)
    counter = agent.history.token_counter
    stored = agent.history.messages  # only appended to: positions do not move
    position = {m.id: i for i, m in enumerate(stored)}
    before = [0]
    for message in stored:
        before.append(before[-1] + counter.count_message(message))

    def whole(request: ProviderRequest) -> bool:
        """Sent as stored: not a turn in progress cut to fit (its copies keep their ids)."""
        return all(m == stored[position[m.id]] for m in request.messages)

    requests = [r for r in model.requests if whole(r)]
    starts: set[int] = set()
    for earlier, later in itertools.pairwise(requests):
        assert count_request(later, counter=counter) <= window  # every request fits
        if later.messages[0].id == earlier.messages[0].id:
            # Between two steps: the later request extends the earlier one, message for message.
            prefix: tuple[Message, ...] = later.messages[: len(earlier.messages)]
            assert prefix == earlier.messages
    for request in requests:
        start = position[request.messages[0].id]
        last_user = max(i for i, m in enumerate(request.messages) if m.role == "user")
        if start and last_user:  # not the turn in progress alone
            starts.add(start)
    if starts:
        # Each step starts at the next multiple of the step (tokens from the first message),
        # so there are no more steps than multiples in what the window has left behind.
        room = window - count_overhead(model.requests[0], counter=counter)
        step = int(room * headroom)
        assert len(starts) <= before[max(starts)] // step
        event(f"{len(starts)} steps")
    else:
        event("the window never moved")


def test_a_window_without_headroom_moves_on_every_request_that_outgrows_it() -> None:
    """The control: with ``headroom=0`` the window moves one turn at a time, and the prefix
    of nearly every request is new."""
    chats: list[tuple[list[int], int, int]] = [([], 20, 20)] * 60
    moved: dict[float, int] = {}
    for headroom in (0.0, 0.25):
        agent = run(1_000, headroom, chats)
        model = agent.model
        assert isinstance(model, FunctionModel)
        firsts = [r.messages[0].id for r in model.requests]
        moved[headroom] = sum(a != b for a, b in itertools.pairwise(firsts))
    assert moved[0.0] >= 40  # of the 119 requests, once the conversation outgrew the window
    assert moved[0.25] * 4 <= moved[0.0]


def test_the_window_in_steps_equals_the_trim_from_scratch_with_the_same_headroom() -> None:
    """What ``trim_to_budget(headroom=)`` keeps of the whole history is what the window sent."""
    agent = run(1_500, 0.25, [([40, 80], 50, 70)] * 25)
    model = agent.model
    assert isinstance(model, FunctionModel)
    last: Any = model.requests[-1]
    history = agent.history
    stored = history.messages[: len(history.messages) - 1]  # the last answer came after it
    room = 1_500 - count_overhead(last, counter=history.token_counter)
    kept = trim_to_budget(stored, room, counter=history.token_counter, headroom=0.25)
    assert kept == last.messages


def test_a_compactions_summary_is_the_stable_prefix_until_the_next_one() -> None:
    """Compaction moves the conversation in steps too: between two summaries every request
    extends the one before it, and after a summary every request starts with it."""
    summaries = iter(f"summary {i}: {text(40)}" for i in range(100))
    policy = Compaction(summarizer=FunctionModel(lambda request: next(summaries)))
    model = ScriptedModel([f"answer {i}: {text(60)}" for i in range(40)], context_window=2_000)
    agent = Agent(model, retry=None, context=policy)
    for i in range(40):
        asyncio.run(agent.chat(f"question {i}: {text(60)}"))

    assert policy.compactions >= 3
    moves = 0
    for earlier, later in itertools.pairwise(model.requests):
        if later.messages[0].id == earlier.messages[0].id:
            assert later.messages[: len(earlier.messages)] == earlier.messages
        else:
            moves += 1
            first = later.messages[0]
            assert isinstance(first, UserMessage)
            assert first.text.startswith(SUMMARY_HEADER)
    assert moves == policy.compactions


def test_a_headroom_outside_zero_to_one_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"headroom must be in \[0, 1\), got 1"):
        SlidingWindow(headroom=1)
    with pytest.raises(UsageError, match=r"headroom must be in \[0, 1\), got -0.1"):
        trim_to_budget([], 10, counter=EstimateCounter(), headroom=-0.1)
