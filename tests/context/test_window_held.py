"""Between two steps, the window in steps is held: the last window and the messages since.

Every iteration of a long chat appends a tool call and its result; ``SlidingWindow`` then
sends the last window with them, without walking its start over the history again, while
the window in steps cannot have moved (``SlidingWindow._held``). Every such request must be
exactly what the general path builds (and what trimming the whole stored history keeps):
the same messages, cut the same way, counted the same way for the usage limits.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from hookloop import Agent, ContextOverflowError, Message, ToolCall, tool
from hookloop.context import SlidingWindow
from hookloop.models import Model, ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, text_response, tool_calls
from tests.context.test_policies import text
from tests.context.test_window_incremental import from_scratch, preloaded


class Counted(SlidingWindow):
    """The sliding window, counting the requests its held path built."""

    held = 0

    def _held(self, *args: Any) -> tuple[Message, ...] | None:
        sent = super()._held(*args)
        self.held += sent is not None
        return sent


class General(SlidingWindow):
    """The sliding window without its held path: every request takes the general path."""

    def _held(self, *args: Any) -> tuple[Message, ...] | None:
        return None


# A chat: its tool calls, the question and the answer (in tokens). A call is the size of its
# result and, for some, a change the tool makes before the next request: a system prompt of
# so many tokens (0 removes it), which changes the room by a few tokens or many, or another
# headroom, which changes the step.
Change = tuple[str, float] | None
Chat = tuple[list[tuple[int, Change]], int, int]


def requests_of(
    policy: SlidingWindow, history: list[Message], chats: list[Chat]
) -> list[tuple[Any, ...]]:
    """What each request of the chats held: the stored position of each message it sent,
    whether the message was sent as stored, and the tokens the window says it counted."""
    script: Iterator[ProviderResponse] = iter(())
    seen: list[tuple[Any, ...]] = []

    async def fetch(size: int, prompt: int = -1, headroom: float = -1) -> str:
        """Return about ``size`` tokens of text; set a system prompt of ``prompt`` tokens or
        the window's ``headroom``, when given."""
        if prompt >= 0:
            agent.system_prompt = text(prompt)
        if headroom >= 0:
            policy.headroom = headroom
        return text(size)

    def answer(request: ProviderRequest) -> ProviderResponse:
        stored = agent.history.messages
        position = {m.id: i for i, m in enumerate(stored)}
        sent = tuple((position[m.id], m == stored[position[m.id]]) for m in request.messages)
        assert request.messages == from_scratch(policy, agent, request)
        seen.append((sent, policy.request_tokens(request)))
        return next(script)

    model: Model = FunctionModel(answer)
    agent = Agent(model, tools=[tool(fetch)], retry=None, context=policy)
    agent.history.import_history(history)

    async def run() -> None:
        nonlocal script
        for calls, question, final in chats:
            made = [
                ToolCall(
                    name="fetch",
                    arguments=json.dumps({"size": s, **dict([change] if change else [])}),
                )
                for s, change in calls
            ]
            script = iter([*(tool_calls(c) for c in made), text_response(text(final))])
            try:
                await agent.chat(text(question))
            except ContextOverflowError:
                seen.append(("the turn did not fit",))

    asyncio.run(run())
    return seen


# Small results and large ones: small ones let a room that grew (a shorter system prompt)
# reach back past the unit before the window in steps, which only a small step can show.
changes = (
    st.none()
    | st.tuples(st.just("prompt"), st.integers(0, 80))
    | st.tuples(st.just("headroom"), st.sampled_from([0.0, 0.01, 0.1, 0.25]))
)
calls = st.lists(st.tuples(st.integers(1, 4) | st.integers(1, 120), changes), max_size=14)
chats = st.lists(st.tuples(calls, st.integers(1, 80), st.integers(1, 80)), min_size=1, max_size=8)


@settings(max_examples=150, deadline=None)
@given(
    history=st.integers(min_value=0, max_value=200),
    window=st.integers(min_value=500, max_value=6_000),
    headroom=st.sampled_from([0.0, 0.01, 0.1, 0.25, 0.5]),
    chats=chats,
)
# Found by the search, slowly; fixed here so that every run has them. A system prompt of 30
# tokens, then none: the room grows by less than a step of 1%, and the largest window
# reaches back past where the window in steps was held.
@example(
    history=80,
    window=2686,
    headroom=0.01,
    chats=[([(1, None), (1, None), (1, None), (1, ("prompt", 30)), (1, ("prompt", 0))], 1, 1)],
)
# A turn whose results fill the window holds it back at its user message; the next chat's
# user message lets it move on.
@example(
    history=25,
    window=933,
    headroom=0.1,
    chats=[
        (
            [
                *[(size, None) for size in (3, 4, 4, 4, 2, 1, 1, 4, 7)],
                (100, ("headroom", 0.0)),
                (43, ("headroom", 0.0)),
                (6, ("headroom", 0.1)),
                (84, ("prompt", 0)),
                (1, ("prompt", 12)),
            ],
            8,
            1,
        ),
        ([], 34, 80),
    ],
)
def test_a_held_window_is_what_the_general_path_builds(
    history: int, window: int, headroom: float, chats: list[Chat]
) -> None:
    stored = preloaded([i % 12 + 1 for i in range(history)])
    held = Counted(max_tokens=window, reserve=0, headroom=headroom)
    general = General(max_tokens=window, reserve=0, headroom=headroom)

    assert requests_of(held, stored, chats) == requests_of(general, stored, chats)
    event(f"held {'none' if not held.held else 'some'} of the requests")


def test_most_iterations_of_a_long_windowed_chat_are_held() -> None:
    """The held path is the common one: a long conversation's windowed iterations take it,
    and the general path runs once a step (and not at every chat's first iteration)."""
    stored = preloaded([10] * 300)
    chats_: list[Chat] = [([(20, None)] * 10, 15, 15)] * 20
    policy = Counted(max_tokens=3_000, reserve=0)

    requests = requests_of(policy, stored, chats_)

    assert len(requests) == 220
    assert policy.held >= 200
