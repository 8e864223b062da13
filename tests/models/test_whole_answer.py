"""A streamed answer that comes whole is handed over as its parts, not folded back.

``ScriptedModel`` and ``FunctionModel`` without chunks, and ``Model.stream``'s default,
stream an answer they have whole. The loop takes that answer as it is and hands the
consumer its parts (``chat_stream()`` cost 2.8x ``chat()`` per iteration with an async
generator and a ``ResponseAccumulator`` in between; bench/loop.py, ``stream_ratio``).
"""

from __future__ import annotations

import gc
import warnings
from typing import Any

import pytest

from hookloop import (
    Agent,
    ChatDone,
    InvalidResponseError,
    MessageCommitted,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
    UserMessage,
)
from hookloop.models import Model, ProviderRequest, ProviderResponse, StreamEnd
from hookloop.models._base import WholeAnswerStream, response_parts
from hookloop.testing import FunctionModel, ScriptedModel, ScriptStep, tool_calls

CALL = ToolCall(name="add", arguments='{"a": 1, "b": 2}', id="c1")
ANSWER = ProviderResponse(content="3", usage=Usage(input_tokens=5, output_tokens=1), id="r2")


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def request() -> ProviderRequest:
    return ProviderRequest(model="m", system=None, messages=(UserMessage(content="hi"),))


async def test_a_whole_answer_reaches_the_chat_as_the_models_own_response() -> None:
    first = tool_calls(CALL, content="Adding.")
    model = ScriptedModel([first, ANSWER])
    agent = Agent(model, tools=[add], retry=None, context=None)
    seen: list[ProviderResponse] = []
    agent.add_hook("on_response", lambda ctx: seen.append(ctx.response))
    events = [event async for event in agent.chat_stream("1 + 2?")]
    assert len(seen) == 2
    assert seen[0] is first  # not rebuilt from its parts
    assert seen[1] is ANSWER
    kinds = [type(event) for event in events]
    assert kinds == [
        MessageCommitted,  # the user's message
        TextDelta,
        ToolCallDelta,
        MessageCommitted,
        ToolCallStarted,
        ToolCallFinished,
        MessageCommitted,
        TextDelta,
        MessageCommitted,
        ChatDone,
    ]
    assert events[1] == TextDelta(text="Adding.")
    assert events[2] == ToolCallDelta(index=0, id="c1", name="add", arguments=CALL.arguments)
    assert events[7] == TextDelta(text="3")
    done = events[-1]
    assert isinstance(done, ChatDone)
    assert done.response.usage == Usage(input_tokens=5, output_tokens=1)


@pytest.mark.parametrize(
    "model",
    [
        ScriptedModel([ANSWER]),
        FunctionModel(lambda request: ANSWER),
    ],
    ids=["scripted", "function"],
)
async def test_the_stream_of_a_whole_answer_is_still_an_async_iterator_of_its_parts(
    model: Model,
) -> None:
    parts = [part async for part in model.stream(request())]
    assert parts == response_parts(ANSWER)
    assert isinstance(parts[-1], StreamEnd)


async def test_a_chunked_or_failing_step_still_streams_piece_by_piece() -> None:
    model = ScriptedModel(
        [
            ScriptStep(response=ProviderResponse(content="abcd"), chunk_size=2),
            ScriptStep(response=ANSWER, error=RuntimeError("cut"), fail_after=0),
        ]
    )
    parts = [part async for part in model.stream(request())]
    assert parts[:2] == [TextDelta(text="ab"), TextDelta(text="cd")]
    with pytest.raises(RuntimeError, match="cut"):
        [part async for part in model.stream(request())]


async def test_a_whole_answer_closed_unread_never_asks_the_model() -> None:
    asked: list[ProviderRequest] = []

    async def answer(request: ProviderRequest) -> ProviderResponse:
        asked.append(request)
        return ANSWER

    stream: Any = FunctionModel(answer).stream(request())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be one
        await stream.aclose()
        del stream
        gc.collect()
    assert asked == []


async def test_a_whole_answer_that_is_no_response_is_refused() -> None:
    model = FunctionModel(lambda request: 42)  # type: ignore[arg-type, return-value]
    agent = Agent(model, retry=None, context=None)
    with pytest.raises(InvalidResponseError, match="returned int"):
        [event async for event in agent.chat_stream("hi")]


async def test_first_chunk_fires_once_per_streamed_whole_answer() -> None:
    model = ScriptedModel([tool_calls(CALL), ANSWER])
    agent = Agent(model, tools=[add], retry=None, context=None)
    fired: list[tuple[int, int]] = []
    agent.add_hook("on_first_chunk", lambda ctx: fired.append((ctx.iteration, ctx.attempt)))
    [event async for event in agent.chat_stream("1 + 2?")]
    assert fired == [(0, 1), (1, 1)]


async def test_a_whole_answer_is_the_models_own_coroutine_taken_once() -> None:
    # No coroutine of the stream's own around the answer: one frame less on every streamed
    # answer (bench/loop.py, stream_ratio).
    answer = ScriptedModel([ANSWER]).request(request())
    stream = WholeAnswerStream(answer)
    assert stream.response() is answer
    with pytest.raises(RuntimeError, match=r"^the answer of this stream was already taken$"):
        stream.response()
    assert await answer is ANSWER
    assert [part async for part in stream] == []
