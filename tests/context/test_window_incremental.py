"""The sliding window kept from one request to the next equals the one trimmed from scratch.

``SlidingWindow`` keeps its window's start and token sum between requests, so that a turn
does not cost more as the history grows (``bench/loop.py``, ``overhead_us_by_history``).
Whatever happens to the history in between (chats, appends, edits, deletions, imports, a
cleared history), every request must carry exactly what trimming the whole stored history
from scratch keeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from typing import Any

from hypothesis import event, given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AssistantMessage,
    ContextOverflowError,
    Message,
    PreRequestContext,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from hookloop.context import SlidingWindow, count_overhead, count_request, repair
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, text_response, tool_calls
from tests.context.test_policies import text
from tests.context.test_strategies import valid_histories


async def fetch(size: int) -> str:
    """Return about ``size`` tokens of text."""
    return text(size)


def from_scratch(policy: SlidingWindow, agent: Agent, request: ProviderRequest) -> Any:
    """What trimming the whole stored history keeps for ``request`` (or the overflow error)."""
    full = dataclasses.replace(request, messages=tuple(repair(agent.history.messages)))
    counter = agent.history.token_counter
    budget = policy._budget(full, agent.model)
    if count_request(full, counter=counter) <= budget.total:
        return full.messages
    try:
        return policy._fit(full, budget, count_overhead(full, counter=counter))
    except ContextOverflowError:
        return ContextOverflowError


def preloaded(sizes: list[int]) -> list[Message]:
    """A valid history: a user message, then an answer or a tool call with its result."""
    out: list[Message] = []
    for i, size in enumerate(sizes):
        out.append(UserMessage(content=text(size) or "hi"))
        if i % 3 == 1:
            call = ToolCall(name="fetch", arguments=f'{{"size": {size}}}')
            out.append(AssistantMessage(tool_calls=(call,)))
            out.append(ToolMessage(tool_call_id=call.id, tool_name="fetch", content=text(size)))
        out.append(AssistantMessage(content=text(size + 3)))
    return out


sizes = st.integers(min_value=1, max_value=40)
operations = st.one_of(
    st.tuples(st.just("chat"), st.lists(sizes, max_size=3), sizes, sizes),
    st.tuples(st.just("add"), st.booleans(), sizes),
    st.tuples(st.just("edit"), st.floats(0, 1), sizes),
    st.tuples(st.just("delete"), st.floats(0, 1), st.floats(0, 1)),
    st.tuples(st.just("import"), valid_histories(system=False)),
    st.tuples(st.just("clear")),
    st.tuples(st.just("tools"), st.booleans()),
)


@settings(max_examples=150, deadline=None)
@given(
    history=st.integers(min_value=0, max_value=300),
    window=st.integers(min_value=400, max_value=3_000),
    steps=st.lists(operations, min_size=1, max_size=12),
)
def test_the_incremental_window_equals_the_window_trimmed_from_scratch(
    history: int, window: int, steps: list[tuple[Any, ...]]
) -> None:
    script: Iterator[ProviderResponse] = iter(())
    compared: list[tuple[object, object]] = []

    def answer(request: ProviderRequest) -> ProviderResponse:
        compared.append((request.messages, from_scratch(policy, agent, request)))
        return next(script)

    enabled = [True]  # the tools' schemas take part of the budget, when they are sent
    fetch_tool = tool(fetch, enabled=lambda: enabled[0])
    policy = SlidingWindow(max_tokens=window, reserve=0)
    agent = Agent(FunctionModel(answer), tools=[fetch_tool], retry=None, context=policy)
    agent.history.import_history(preloaded([i % 12 + 1 for i in range(history)]))

    async def run() -> None:
        nonlocal script
        for step in steps:
            kind = step[0]
            stored = agent.history.messages
            if kind == "chat":
                _, calls, question, final = step
                script = iter(
                    [
                        *(
                            tool_calls(ToolCall(name="fetch", arguments=f'{{"size": {s}}}'))
                            for s in calls
                        ),
                        text_response(text(final)),
                    ]
                )
                before = agent.history.messages
                try:
                    await agent.chat(text(question))
                except ContextOverflowError:
                    # Nothing was sent: trimming from scratch cannot fit the turn either.
                    definitions = (fetch_tool.definition,) if enabled[0] else ()
                    last = ProviderRequest(
                        model="function", system=None, messages=(), tools=definitions
                    )
                    assert len(agent.history.messages) > len(before)
                    assert from_scratch(policy, agent, last) is ContextOverflowError
                    event("the turn did not fit")
            elif kind == "add":
                _, user, size = step
                new = UserMessage if user else AssistantMessage
                agent.history.add_message(new(content=text(size)))
            elif kind == "edit" and stored:
                target = stored[int(step[1] * (len(stored) - 1))]
                agent.history.edit_message(target.id, text(step[2]))
            elif kind == "delete" and stored:
                first, last = sorted(int(f * (len(stored) - 1)) for f in step[1:])
                agent.history.delete_message_range(stored[first].id, stored[last].id)
            elif kind == "import":
                agent.history.import_history(step[1])
            elif kind == "clear":
                agent.history.clear_history()
            elif kind == "tools":
                enabled[0] = step[1]

    asyncio.run(run())
    for sent, expected in compared:
        assert sent == expected
    stored = len(agent.history)
    if compared and len(compared[-1][0]) < stored:  # type: ignore[arg-type]
        event("the last request left messages out")
    event(f"{len(compared)} requests compared")


async def test_a_request_is_built_with_only_the_window_not_the_whole_history() -> None:
    """Handlers before the window see what will be sent: the stored history is not copied
    into every request (a turn would cost more as the conversation grows)."""
    seen: list[int] = []
    model = FunctionModel(lambda request: "noted", context_window=600)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    agent.history.import_history(preloaded([5] * 1_000))
    stored = len(agent.history)
    agent.add_hook("pre_request", lambda ctx: seen.append(len(ctx.request.messages)), order=0)

    await agent.chat("and now?")
    await agent.chat("and then?")

    sent = [len(request.messages) for request in model.requests]
    assert seen == sent
    assert all(0 < n < 100 for n in sent)
    assert len(agent.history) == stored + 4  # and the stored history keeps everything


async def test_the_room_follows_the_system_prompt_and_the_limits_between_requests() -> None:
    """The window works its room out again when its inputs change (it keeps the last one)."""
    sizes = [40] * 30
    sent: list[tuple[Message, ...]] = []

    def answer(request: ProviderRequest) -> ProviderResponse:
        sent.append(request.messages)
        return text_response("ok")

    policy = SlidingWindow(max_tokens=4_000, reserve=0)
    agent = Agent(FunctionModel(answer), context=policy, retry=None)
    agent.history.import_history(preloaded(sizes))

    async def kept() -> int:
        await agent.chat("next")
        return len(sent[-1])

    first = await kept()
    policy.max_tokens = 1_000  # a smaller window
    smaller = await kept()
    agent.system_prompt = text(400)  # a long system prompt takes room too
    with_prompt = await kept()
    policy.reserve = 300  # room kept for the answer
    with_reserve = await kept()
    policy.max_tokens = 4_000
    again = await kept()

    assert first > smaller > with_prompt > with_reserve
    assert again > with_reserve


async def test_the_window_built_after_the_conversation_outgrows_the_room_is_the_trim() -> None:
    """Requests that fit whole hold the whole conversation (the window's short path, which
    keeps less); once the conversation outgrows the room, the window the next requests are
    built with is already what trimming from scratch keeps, before any handler finishes it."""
    policy = SlidingWindow(max_tokens=700, reserve=0)
    calls = (ToolCall(name="fetch", arguments=f'{{"size": {20 + i}}}') for i in range(100))
    agent = Agent(
        FunctionModel(
            lambda request: (
                text_response("noted")
                if isinstance(request.messages[-1], ToolMessage)
                else tool_calls(next(calls))
            )
        ),
        tools=[fetch],
        retry=None,
        context=policy,
    )
    built: list[tuple[object, object]] = []

    def before_the_window(ctx: PreRequestContext) -> None:
        built.append((ctx.request.messages, from_scratch(policy, agent, ctx.request)))

    agent.add_hook("pre_request", before_the_window)
    for _ in range(8):
        await agent.chat(text(30))

    first = agent.history.messages[0]
    whole = [sent for sent, _ in built if sent[0] is first]  # type: ignore[index]
    assert 0 < len(whole) < len(built)  # it held the whole conversation, then less
    for sent, expected in built:
        assert sent == expected


async def test_the_window_counts_the_requests_it_builds_as_count_request_does() -> None:
    """The usage limits take a request's tokens from the window that built it: the same
    count as counting the request with the history's counter, whole, short or trimmed."""
    policy = SlidingWindow(max_tokens=1_500, reserve=0)
    told: list[tuple[int | None, int]] = []

    def answer(request: ProviderRequest) -> ProviderResponse:
        counted = count_request(request, counter=agent.history.token_counter)
        told.append((policy.request_tokens(request), counted))
        if len(told) % 6 == 0:
            return text_response("done")
        return tool_calls(ToolCall(name="fetch", arguments=f'{{"size": {20 + len(told)}}}'))

    agent = Agent(FunctionModel(answer), tools=[tool(fetch)], context=policy, retry=None)
    agent.system_prompt = "You fetch."
    await agent.chat("fetch things")
    agent.history.import_history(preloaded([30] * 40))
    await agent.chat("and now?")

    known = [(tokens, counted) for tokens, counted in told if tokens is not None]
    assert all(tokens == counted for tokens, counted in known)
    assert len(known) >= len(told) // 2  # most requests: the window says
    # Any other request (a copy, say) is not the window's to count.
    other = dataclasses.replace(agent.model.requests[-1])  # type: ignore[attr-defined]
    assert policy.request_tokens(other) is None
