"""The test doubles (ScriptedModel, FunctionModel, FakeClock), ResponseAccumulator, Model.stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AssistantMessage,
    ChatDone,
    InvalidResponseError,
    ModelSettings,
    RateLimitError,
    ScriptExhaustedError,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    UsageError,
    UserMessage,
)
from hookloop.models import (
    Model,
    ProviderRequest,
    ProviderResponse,
    ResponseAccumulator,
    StreamEnd,
    StreamPart,
)
from hookloop.testing import (
    FakeClock,
    FunctionModel,
    ScriptedModel,
    ScriptStep,
    text_response,
    tool_call,
    tool_calls,
)

# --- helpers ------------------------------------------------------------------------------


def _request(text: str = "hi", **kwargs: Any) -> ProviderRequest:
    return ProviderRequest(model="m", system=None, messages=(UserMessage(content=text),), **kwargs)


async def _collect(stream: AsyncIterator[StreamPart]) -> list[StreamPart]:
    return [part async for part in stream]


def _fold(parts: list[StreamPart]) -> ProviderResponse:
    acc = ResponseAccumulator()
    for part in parts:
        acc.add(part)
    return acc.response()


_RICH = ProviderResponse(
    content="Let me look that up for you.",
    tool_calls=(
        ToolCall(name="search", arguments='{"query": "weather in Oslo"}', id="c1"),
        ToolCall(name="clock", arguments="", id="c2"),
        ToolCall(name="convert", arguments='{"from": "C", "to": "F", "value": 21}', id="c3"),
    ),
    finish_reason="tool_calls",
    usage=Usage(input_tokens=12, output_tokens=34),
    model="scripted-v2",
)


# --- response helpers ---------------------------------------------------------------------


def test_response_helpers() -> None:
    assert text_response("hi") == ProviderResponse(content="hi", finish_reason="stop")
    usage = Usage(input_tokens=1, output_tokens=2)
    assert text_response("hi", usage=usage).usage == usage
    assert tool_call("f", {"a": 1}, id="c1") == ProviderResponse(
        tool_calls=(ToolCall(name="f", arguments='{"a": 1}', id="c1"),),
        finish_reason="tool_calls",
    )
    raw = tool_call("f", '{"a": 1', id="c2", content="thinking")
    assert raw.tool_calls == (ToolCall(name="f", arguments='{"a": 1', id="c2"),)
    assert raw.content == "thinking"
    generated = tool_call("f")
    assert generated.tool_calls[0].arguments == "{}"
    assert generated.tool_calls[0].id.startswith("call_")
    assert tool_call("f", "x").tool_calls[0].id != tool_call("f", "x").tool_calls[0].id
    a, b = ToolCall.create("a", id="1"), ToolCall.create("b", id="2")
    assert tool_calls(a, b, content="both") == ProviderResponse(
        content="both", tool_calls=(a, b), finish_reason="tool_calls"
    )


def test_provider_response_to_message() -> None:
    message = _RICH.to_message()
    assert isinstance(message, AssistantMessage)
    assert (message.content, message.tool_calls) == (_RICH.content, _RICH.tool_calls)


# --- ScriptedModel ------------------------------------------------------------------------


async def test_scripted_model_answers_in_order_and_records_requests() -> None:
    response = ProviderResponse(content="given", finish_reason="length")
    model = ScriptedModel(["first", response, _RICH], name="fake", context_window=1000)
    assert (model.name, model.context_window) == ("fake", 1000)
    assert model.remaining == 3
    requests = [_request("a"), _request("b"), _request("c")]

    assert await model.request(requests[0]) == text_response("first")
    assert model.remaining == 2
    assert await model.request(requests[1]) is response
    assert await model.request(requests[2]) is _RICH
    assert model.remaining == 0
    assert model.requests == requests


async def test_scripted_model_raises_scripted_exceptions() -> None:
    error = RateLimitError("slow down", status=429, retry_after=2)
    model = ScriptedModel([error, ScriptStep(error=ValueError("bad")), "after"])
    with pytest.raises(RateLimitError) as info:
        await model.request(_request())
    assert info.value is error
    with pytest.raises(ValueError, match="bad"):
        await model.request(_request())
    assert await model.request(_request()) == text_response("after")
    assert len(model.requests) == 3


async def test_scripted_model_exhausted_raises_a_clear_error() -> None:
    model = ScriptedModel(["only"], name="mine")
    await model.request(_request())
    with pytest.raises(ScriptExhaustedError) as info:
        await model.request(_request("extra"))
    assert str(info.value) == (
        "ScriptedModel 'mine' was called 2 times but its script has only 1 step"
    )
    assert isinstance(info.value, UsageError)
    assert model.remaining == 0
    assert len(model.requests) == 2  # the failing call is recorded too
    with pytest.raises(ScriptExhaustedError):
        await _collect(model.stream(_request()))


async def test_exhausted_script_ends_the_chat() -> None:
    model = ScriptedModel([tool_call("missing", {})])
    agent = Agent(model)
    with pytest.raises(ScriptExhaustedError, match="called 2 times"):
        await agent.chat("go")


def test_scripted_model_rejects_unknown_items() -> None:
    with pytest.raises(TypeError, match="cannot script 42"):
        ScriptedModel([42])  # type: ignore[list-item]


def test_script_step_validation() -> None:
    with pytest.raises(UsageError, match="needs a response=, an error=, or both"):
        ScriptStep()
    with pytest.raises(UsageError, match="fail_after"):
        ScriptStep(response=text_response("x"), fail_after=1)
    with pytest.raises(UsageError, match="fail_after"):
        ScriptStep(error=RuntimeError("x"), fail_after=1)
    step = ScriptStep(response=text_response("x"), error=RuntimeError("x"), fail_after=0)
    assert step.fail_after == 0


async def test_unchunked_stream_is_one_part_per_piece() -> None:
    model = ScriptedModel([_RICH])
    parts = await _collect(model.stream(_request()))
    assert parts == [
        TextDelta(text=_RICH.content),
        ToolCallDelta(index=0, id="c1", name="search", arguments='{"query": "weather in Oslo"}'),
        ToolCallDelta(index=1, id="c2", name="clock", arguments=""),
        ToolCallDelta(
            index=2, id="c3", name="convert", arguments='{"from": "C", "to": "F", "value": 21}'
        ),
        StreamEnd(finish_reason="tool_calls", usage=_RICH.usage, model="scripted-v2"),
    ]
    assert _fold(parts) == _RICH


@pytest.mark.parametrize("chunk_size", [1, 3, 7, 1000])
async def test_chunked_stream_folds_back_into_the_original(chunk_size: int) -> None:
    model = ScriptedModel([_RICH], chunk_size=chunk_size)
    parts = await _collect(model.stream(_request()))

    assert _fold(parts) == _RICH
    assert isinstance(parts[-1], StreamEnd)
    assert sum(isinstance(p, StreamEnd) for p in parts) == 1
    texts = [p for p in parts if isinstance(p, TextDelta)]
    assert all(0 < len(p.text) <= chunk_size for p in texts)
    assert len(texts) == -(-len(_RICH.content) // chunk_size)
    for index, call in enumerate(_RICH.tool_calls):
        deltas = [p for p in parts if isinstance(p, ToolCallDelta) and p.index == index]
        assert (deltas[0].id, deltas[0].name) == (call.id, call.name)
        assert all(d.id is None and d.name is None for d in deltas[1:])
        assert all(len(d.arguments) <= chunk_size for d in deltas)
        assert len(deltas) == max(1, -(-len(call.arguments) // chunk_size))


async def test_step_chunk_size_overrides_the_model_default() -> None:
    model = ScriptedModel(
        [ScriptStep(response=text_response("abcdef"), chunk_size=2), "ghij"], chunk_size=3
    )
    first = await _collect(model.stream(_request()))
    second = await _collect(model.stream(_request()))
    assert [p.text for p in first if isinstance(p, TextDelta)] == ["ab", "cd", "ef"]
    assert [p.text for p in second if isinstance(p, TextDelta)] == ["ghi", "j"]
    assert len(model.requests) == 2


@pytest.mark.parametrize("fail_after", [0, 1, 4])
async def test_fail_after_raises_mid_stream(fail_after: int) -> None:
    error = ConnectionResetError("dropped")
    model = ScriptedModel(
        [ScriptStep(response=text_response("abcdefghij"), error=error, fail_after=fail_after)],
        chunk_size=2,
    )
    received: list[StreamPart] = []
    with pytest.raises(ConnectionResetError) as info:
        async for part in model.stream(_request()):
            received.append(part)
    assert info.value is error
    assert received == [TextDelta(text=t) for t in ["ab", "cd", "ef", "gh", "ij"][:fail_after]]


async def test_fail_after_is_ignored_by_request() -> None:
    # Without streaming there is no "middle": the step fails as a whole.
    model = ScriptedModel(
        [ScriptStep(response=text_response("x"), error=RuntimeError("boom"), fail_after=1)]
    )
    with pytest.raises(RuntimeError, match="boom"):
        await model.request(_request())


async def test_streaming_chat_sees_several_deltas_and_the_whole_answer() -> None:
    model = ScriptedModel(["Hello there, world"], chunk_size=5)
    agent = Agent(model)
    events = []
    async with agent.chat_stream("hi") as stream:
        async for event in stream:
            events.append(event)

    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert deltas == ["Hello", " ther", "e, wo", "rld"]
    assert isinstance(events[-1], ChatDone)
    assert events[-1].response.text == "Hello there, world"
    assert stream.response is not None
    assert stream.response.text == "Hello there, world"


# --- FunctionModel ------------------------------------------------------------------------


async def test_function_model_sync_function_returning_str() -> None:
    def answer(request: ProviderRequest) -> str:
        return f"echo: {request.messages[-1].content}"  # type: ignore[union-attr]

    model = FunctionModel(answer, name="fn", context_window=99)
    assert (model.name, model.context_window) == ("fn", 99)
    req = _request("ping")
    assert await model.request(req) == text_response("echo: ping")
    assert model.requests == [req]


async def test_function_model_async_function_returning_response() -> None:
    async def answer(request: ProviderRequest) -> ProviderResponse:
        return _RICH

    model = FunctionModel(answer)
    assert await model.request(_request()) is _RICH
    assert len(model.requests) == 1


async def test_function_model_sync_function_returning_response() -> None:
    model = FunctionModel(lambda request: _RICH)
    assert await model.request(_request()) is _RICH


@pytest.mark.parametrize("is_async", [False, True])
async def test_function_model_propagates_errors_and_records_requests(is_async: bool) -> None:
    error = RateLimitError("busy", status=429)

    def sync_fn(request: ProviderRequest) -> str:
        raise error

    async def async_fn(request: ProviderRequest) -> str:
        raise error

    model = FunctionModel(async_fn if is_async else sync_fn)
    req = _request()
    with pytest.raises(RateLimitError) as info:
        await model.request(req)
    assert info.value is error
    assert model.requests == [req]


async def test_function_model_streams_in_chunks() -> None:
    model = FunctionModel(lambda request: _RICH, chunk_size=4)
    parts = await _collect(model.stream(_request()))
    assert _fold(parts) == _RICH
    assert sum(isinstance(p, TextDelta) for p in parts) > 1
    assert len(model.requests) == 1


async def test_function_model_drives_an_agent_and_sees_the_history() -> None:
    def answer(request: ProviderRequest) -> ProviderResponse | str:
        if len(request.messages) == 1:
            return tool_call("double", {"n": 21}, id="c1")
        return f"result was {request.messages[-1].content}"  # type: ignore[union-attr]

    def double(n: int) -> int:
        """Double n."""
        return n * 2

    model = FunctionModel(answer)
    settings = ModelSettings(temperature=0.2)
    agent = Agent(model, tools=[double], settings=settings, system_prompt="S")
    response = await agent.chat("go")

    assert response.text == "result was 42"
    assert len(model.requests) == 2
    assert all(r.model == "function" for r in model.requests)
    assert all(r.settings is settings for r in model.requests)
    assert all(r.system == "S" for r in model.requests)


# --- ResponseAccumulator ------------------------------------------------------------------


def test_accumulator_parallel_tool_call_deltas_by_index() -> None:
    parts: list[StreamPart] = [
        TextDelta(text="Checking "),
        ToolCallDelta(index=1, id="b", name="beta", arguments='{"y"'),
        ToolCallDelta(index=0, id="a", name="alpha", arguments='{"x":'),
        TextDelta(text="both."),
        ToolCallDelta(index=1, arguments=": 2}"),
        ToolCallDelta(index=0, arguments=" 1}"),
        StreamEnd(finish_reason="tool_calls", usage=Usage(input_tokens=3, output_tokens=4)),
    ]
    assert _fold(parts) == ProviderResponse(
        content="Checking both.",
        tool_calls=(
            ToolCall(name="alpha", arguments='{"x": 1}', id="a"),
            ToolCall(name="beta", arguments='{"y": 2}', id="b"),
        ),
        finish_reason="tool_calls",
        usage=Usage(input_tokens=3, output_tokens=4),
        model=None,
    )


def test_accumulator_takes_id_and_name_from_a_later_delta_too() -> None:
    # Some providers send the id first and the name in a later delta.
    parts: list[StreamPart] = [
        ToolCallDelta(index=0, id="c1"),
        ToolCallDelta(index=0, name="late", arguments="{}"),
        ToolCallDelta(index=0, id="ignored", name="ignored"),
    ]
    assert _fold(parts).tool_calls == (ToolCall(name="late", arguments="{}", id="c1"),)


def test_accumulator_generates_an_id_when_none_arrives() -> None:
    response = _fold([ToolCallDelta(index=0, name="f", arguments='{"a":1}')])
    (call,) = response.tool_calls
    assert (call.name, call.arguments) == ("f", '{"a":1}')
    assert call.id.startswith("call_")


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([TextDelta(text="hi")], "stop"),
        ([], "stop"),
        ([ToolCallDelta(index=0, id="c", name="f")], "tool_calls"),
        ([TextDelta(text="hi"), StreamEnd()], "stop"),
        ([ToolCallDelta(index=0, id="c", name="f"), StreamEnd()], "tool_calls"),
        ([TextDelta(text="hi"), StreamEnd(finish_reason="length")], "length"),
        ([ToolCallDelta(index=0, id="c", name="f"), StreamEnd(finish_reason="stop")], "stop"),
    ],
)
def test_accumulator_finish_reason(parts: list[StreamPart], expected: str) -> None:
    assert _fold(parts).finish_reason == expected


def test_accumulator_usage_and_model_from_stream_end() -> None:
    usage = Usage(input_tokens=7, output_tokens=8)
    response = _fold([TextDelta(text="x"), StreamEnd(usage=usage, model="gpt-x")])
    assert response == ProviderResponse(
        content="x", finish_reason="stop", usage=usage, model="gpt-x"
    )
    assert _fold([TextDelta(text="x")]) == ProviderResponse(content="x")


def test_accumulator_tool_call_without_a_name_is_invalid() -> None:
    acc = ResponseAccumulator()
    acc.add(ToolCallDelta(index=0, id="c1", name="ok", arguments="{}"))
    acc.add(ToolCallDelta(index=3, id="c2", arguments='{"a": 1}'))
    acc.add(ToolCallDelta(index=3, arguments="}"))
    with pytest.raises(InvalidResponseError, match="#3 has no name"):
        acc.response()


def test_accumulator_empty_stream_is_an_empty_answer() -> None:
    assert _fold([]) == ProviderResponse()


# --- the Model ABC ------------------------------------------------------------------------


class _OneShot(Model):
    name = "one-shot"

    def __init__(self, response: ProviderResponse) -> None:
        self.response = response
        self.seen: list[ProviderRequest] = []

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        self.seen.append(request)
        return self.response


async def test_default_stream_yields_the_whole_response_ending_with_stream_end() -> None:
    model = _OneShot(_RICH)
    req = _request()
    parts = await _collect(model.stream(req))
    assert parts == [
        TextDelta(text=_RICH.content),
        ToolCallDelta(index=0, id="c1", name="search", arguments='{"query": "weather in Oslo"}'),
        ToolCallDelta(index=1, id="c2", name="clock", arguments=""),
        ToolCallDelta(
            index=2, id="c3", name="convert", arguments='{"from": "C", "to": "F", "value": 21}'
        ),
        StreamEnd(finish_reason="tool_calls", usage=_RICH.usage, model="scripted-v2"),
    ]
    assert _fold(parts) == _RICH
    assert model.seen == [req]


async def test_default_stream_of_a_text_only_answer() -> None:
    response = ProviderResponse(content="hi", finish_reason="length", model="m1")
    parts = await _collect(_OneShot(response).stream(_request()))
    assert parts == [
        TextDelta(text="hi"),
        StreamEnd(finish_reason="length", usage=None, model="m1"),
    ]
    # An empty answer is just the end marker.
    assert await _collect(_OneShot(ProviderResponse()).stream(_request())) == [
        StreamEnd(finish_reason="stop")
    ]


def test_model_is_abstract_and_has_defaults() -> None:
    with pytest.raises(TypeError):
        Model()  # type: ignore[abstract]
    assert Model.name == "model"
    assert Model.context_window is None


@given(
    start=st.floats(min_value=0, max_value=2e9),
    steps=st.lists(st.tuples(st.booleans(), st.floats(min_value=0, max_value=1e4)), max_size=20),
)
def test_fake_clock_moves_only_by_its_sleeps_and_advances(
    start: float, steps: list[tuple[bool, float]]
) -> None:
    clock = FakeClock(start)
    expected = start

    async def run() -> None:
        nonlocal expected
        for sleeps, seconds in steps:
            if sleeps:
                await clock.sleep(seconds)
            else:
                clock.advance(seconds)
            expected += seconds
            assert clock() == expected

    asyncio.run(run())
    assert clock.waits == [seconds for sleeps, seconds in steps if sleeps]
    assert clock.now == clock() == expected


def test_a_script_step_refuses_a_str_response_when_it_is_made() -> None:
    with pytest.raises(UsageError, match=r"takes a ProviderResponse, got str \(for a text"):
        ScriptStep(response="text")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="takes an exception"):
        ScriptStep(error="boom")  # type: ignore[arg-type]


@pytest.mark.parametrize("script", ["hello", b"hello"])
def test_a_scripted_model_refuses_a_str_for_its_list_of_steps(script: str) -> None:
    with pytest.raises(UsageError, match=r"got a (str|bytes): write ScriptedModel\(\["):
        ScriptedModel(script)
