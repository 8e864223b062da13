"""Faults injected over real HTTP: each must become its typed error, and the default retry
strategy must retry exactly the transient ones (on a fake clock: no test really waits).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from hookloop import (
    AfterModelCallContext,
    Agent,
    AssistantMessage,
    AuthenticationError,
    ContextOverflowError,
    InvalidResponseError,
    ModelRetry,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    TextDelta,
    ToolMessage,
    UserMessage,
)
from hookloop.context import Compaction
from hookloop.models import ProviderRequest, is_context_overflow
from hookloop.retry import TRANSIENT_ERRORS, DefaultRetryStrategy
from hookloop.testing import FakeClock
from tests.models import _bedrock_wire as bedrock
from tests.models import _gemini_wire
from tests.models._chats import chat, weather_agent
from tests.models._provider_server import (
    APIS,
    ProviderServer,
    Reply,
    answer,
    answer_events,
    whole_answer,
)

REQUEST = ProviderRequest(model="m", system=None, messages=(UserMessage(content="Hello"),))
# Seconds: the adapters' timeout in the timeout faults, and how long the server then hangs.
# The retry's answer must arrive within the same timeout, so it is generous: at 0.3 s a
# loaded 2-core machine sometimes timed out the recovery as well (a flake).
SHORT_TIMEOUT = 1.5
HANG = 4.0
DRIP_TIMEOUT = 2.5  # seconds: the dripping faults' timeout (see TRANSIENT)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def retrying_agent(model: Any, clock: FakeClock, **options: Any) -> tuple[Agent, list[Exception]]:
    """An agent with the default retry strategy on ``clock``; the list gets every failure."""
    strategy = DefaultRetryStrategy(sleep=clock.sleep, clock=clock, rng=random.Random(0), **options)
    agent = Agent(model, retry=strategy)
    errors: list[Exception] = []

    def record(ctx: AfterModelCallContext) -> None:
        if ctx.error is not None:
            errors.append(ctx.error)

    agent.add_hook("after_model_call", record, order=-100)  # before the strategy decides
    return agent, errors


def error_body(api: str, kind: str | None, message: str, code: str | None = None) -> Any:
    """An error body shaped as ``api`` sends them."""
    if api == "bedrock.converse":
        return bedrock.error_body(BEDROCK_TYPES.get(kind or "", kind), message)
    if api == "messages":
        return {"type": "error", "error": {"type": kind, "message": message}}
    if api == "gemini":  # Google's shape: the status name where others have a type
        return {"error": {"code": 500, "message": message, "status": kind}}
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


# Bedrock's exception names for the error types the faults below use.
BEDROCK_TYPES = {"api_error": "InternalServerException", "server_error": "InternalServerException"}


def rate_limited(api: str, headers: dict[str, str]) -> Reply:
    if api == "gemini":  # Gemini says how long to wait in the body's RetryInfo, not a header
        seconds = headers.get("Retry-After") or str(int(headers["retry-after-ms"]) / 1000)
        return Reply.json(_gemini_wire.rate_limited(f"{seconds}s"), status=429)
    if api == "bedrock.converse":  # as recorded (fixtures: bedrock_error_429_throttling)
        body = bedrock.error_body("ThrottlingException", "Rate exceeded")
    elif api == "messages":
        body = error_body(
            api, "rate_limit_error", "Number of requests has exceeded your rate limit"
        )
    else:  # OpenAI's type names the limit; only the status says "rate limit"
        body = error_body(
            api,
            "requests",
            "Rate limit reached for gpt-4o on requests per min (RPM): Limit 500, Used 500",
            "rate_limit_exceeded",
        )
    return Reply.json(body, status=429, headers=headers)


def cut_mid_way(api: str) -> Reply:
    reply = answer(api, "Hello there, this answer is cut", stream=True)
    reply.cut_after = len(reply.body) // 2
    return reply


def stalled_mid_way(api: str) -> Reply:
    reply = answer(api, "Hello there, this answer stalls", stream=True)
    reply.stall_after, reply.stall = len(reply.body) // 2, HANG
    return reply


def unfinished(api: str) -> Reply:
    events = answer_events(api, "Hello there", finished=False)
    return Reply.sse(events, done=api == "chat.completions")  # a clean end, but too early


def dripping(api: str) -> Reply:
    """A whole answer sent two bytes at a time: never silent, never done in time."""
    return Reply.json(whole_answer(api, "late " * 100, usage=(1, 1)), piece=2, drip=0.05)


def dripping_stream(api: str) -> Reply:
    events = answer_events(api, "late " * 100)
    return Reply.sse(events, done=api == "chat.completions", piece=2, drip=0.05)


def overloaded_in_stream(api: str) -> Reply:
    events = answer_events(api, "Hello there")[:3]
    events.append(("error", error_body(api, "overloaded_error", "Overloaded")))
    return Reply.sse(events, done=False)


def with_broken_line(api: str) -> Reply:
    """A stream whose third event carries JSON that is cut off."""
    if api == "bedrock.converse":  # a well-framed event (its CRCs right) whose JSON is cut off
        frames = bedrock.answer_events("Hello there")
        frames.insert(
            2, bedrock.Frame("contentBlockDelta", {}, raw=b'{"contentBlockIndex": 0, "de')
        )
        return Reply.sse(frames)
    reply = answer(api, "Hello there", stream=True)
    events = reply.body.split("\n\n")
    name = {"messages": "event: content_block_delta\n", "responses": "event: x\n"}.get(api, "")
    events.insert(2, name + 'data: {"type": "content_block_delta", "index": 0, "delta": {"ty')
    reply.body = "\n\n".join(events)
    return reply


BROKEN_JSON = Reply(
    body='{"id": "x", "choices": [{"index": 0, "message": {"role": "assi',
    headers={"content-type": "application/json"},
)
MISSING_FIELDS = {
    "chat.completions": {"id": "x"},
    "messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 1},
    },
    "responses": {"id": "x"},
    "bedrock.converse": {"stopReason": "end_turn", "usage": bedrock.whole_answer()["usage"]},
    "gemini": {"usageMetadata": {"promptTokenCount": 3, "totalTokenCount": 3}},
}
UNAUTHORIZED = {
    "chat.completions": error_body(
        "chat.completions",
        "invalid_request_error",
        "Incorrect API key provided: k.",
        "invalid_api_key",
    ),
    "messages": error_body("messages", "authentication_error", "invalid x-api-key"),
    "responses": error_body(
        "responses", "invalid_request_error", "Incorrect API key provided: k.", "invalid_api_key"
    ),
    "bedrock.converse": bedrock.error_body(
        "UnrecognizedClientException", "The security token included in the request is invalid."
    ),
    "gemini": _gemini_wire.error_body(401, "Request had invalid authentication credentials."),
}
# A body nested deeper than Python's JSON decoder can follow (it raises RecursionError): a
# hostile or broken server must not crash the caller with an untyped error.
TOO_DEEP = Reply(
    body='{"id": "x", "a": ' + "[" * 100_000 + "]" * 100_000 + "}",
    headers={"content-type": "application/json"},
)
PROXY_503 = Reply(
    status=503,
    body="upstream connect error or disconnect/reset before headers. reset reason: overflow",
    headers={"content-type": "text/plain"},
)


@dataclass(frozen=True)
class Fault:
    """A reply that fails, and what it must become."""

    name: str
    reply: Callable[[str], Reply]
    error: type[ProviderError]
    status: int | None = None
    retry_after: float | None = None
    stream: bool = False
    apis: tuple[str, ...] = APIS
    timeout: float = 10.0


TRANSIENT = [
    Fault(
        "429-retry-after",
        lambda api: rate_limited(api, {"Retry-After": "2"}),
        RateLimitError,
        status=429,
        retry_after=2.0,
    ),
    Fault(
        "429-retry-after-ms",
        lambda api: rate_limited(api, {"retry-after-ms": "1500"}),
        RateLimitError,
        status=429,
        retry_after=1.5,
    ),
    Fault("503-from-a-proxy", lambda api: PROXY_503, OverloadedError, status=503),
    Fault(
        "529-overloaded",
        lambda api: Reply.json(error_body(api, "overloaded_error", "Overloaded"), status=529),
        OverloadedError,
        status=529,
        apis=("messages",),
    ),
    Fault(  # a gateway's own page: the status alone says it
        "529-plain-text",
        lambda api: Reply(status=529, body="Overloaded", headers={"content-type": "text/plain"}),
        OverloadedError,
        status=529,
        apis=("messages",),
    ),
    Fault(
        "overloaded-event-in-200-stream",
        overloaded_in_stream,
        OverloadedError,
        stream=True,
        apis=("messages",),
    ),
    Fault(
        "timeout",
        lambda api: Reply.json(whole_answer(api, "late", usage=(1, 1)), delay=HANG),
        ProviderTimeoutError,
        timeout=SHORT_TIMEOUT,
    ),
    # The retry's whole answer must come within the same timeout: at 1 s, a fresh-clone CI
    # run beside other work timed out the recovery of Anthropic's stream too (a flake).
    # The drips last over 15 s, so the first attempt still times out.
    Fault("drips-past-timeout", dripping, ProviderTimeoutError, timeout=DRIP_TIMEOUT),
    Fault(
        "stream-drips-past-timeout",
        dripping_stream,
        ProviderTimeoutError,
        stream=True,
        timeout=DRIP_TIMEOUT,
    ),
    Fault("stream-cut", cut_mid_way, ProviderConnectionError, stream=True),
    Fault(
        "stream-stalls",
        stalled_mid_way,
        ProviderTimeoutError,
        stream=True,
        timeout=SHORT_TIMEOUT,
    ),
    Fault("stream-ends-unfinished", unfinished, ProviderConnectionError, stream=True),
]
PERMANENT = [
    Fault(
        "401",
        lambda api: Reply.json(UNAUTHORIZED[api], status=401),
        AuthenticationError,
        status=401,
    ),
    Fault("broken-json-body", lambda api: BROKEN_JSON, InvalidResponseError),
    Fault("broken-sse-line", with_broken_line, InvalidResponseError, stream=True),
    Fault("missing-fields", lambda api: Reply.json(MISSING_FIELDS[api]), InvalidResponseError),
    Fault("json-nested-too-deep", lambda api: TOO_DEEP, InvalidResponseError),
]


def cases(faults: list[Fault]) -> list[Any]:
    return [
        pytest.param(
            api,
            fault,
            id=f"{fault.name}-{api}",
        )
        for fault in faults
        for api in fault.apis
    ]


@pytest.mark.parametrize(("api", "fault"), cases(TRANSIENT))
async def test_transient_fault_is_typed_and_retried(
    api: str, fault: Fault, server: ProviderServer, make_model: Callable[..., Any], clock: FakeClock
) -> None:
    server.add(fault.reply(api), answer(api, "Recovered", stream=fault.stream))
    agent, errors = retrying_agent(make_model(api, timeout=fault.timeout), clock)

    response, events = await chat(agent, "Hello", stream=fault.stream)

    assert response.text == "Recovered"
    [error] = errors
    assert type(error) is fault.error
    assert isinstance(error, TRANSIENT_ERRORS)
    assert error.status == fault.status
    assert error.retry_after == fault.retry_after
    assert error.model == "m"
    [wait] = clock.waits
    assert wait >= (fault.retry_after or 0.0)
    first, second = server.received
    assert first.body == second.body  # the same request, once more
    if fault.stream:  # the retry is announced; the answer then streams from the start
        retry = next(i for i, event in enumerate(events) if isinstance(event, ModelRetry))
        assert events[retry].error is error
        text = "".join(e.text for e in events[retry:] if isinstance(e, TextDelta))
        assert text == "Recovered"


@pytest.mark.parametrize(("api", "fault"), cases(PERMANENT))
async def test_permanent_fault_is_typed_and_not_retried(
    api: str, fault: Fault, server: ProviderServer, make_model: Callable[..., Any], clock: FakeClock
) -> None:
    server.add(fault.reply(api), answer(api, "never asked for", stream=fault.stream))
    agent, errors = retrying_agent(make_model(api), clock)

    with pytest.raises(ProviderError) as raised:
        await chat(agent, "Hello", stream=fault.stream)

    error = raised.value
    assert type(error) is fault.error
    assert not isinstance(error, TRANSIENT_ERRORS)
    assert error.status == fault.status
    assert errors == [error]
    assert error.attempts == ()
    assert clock.waits == []
    assert len(server.received) == 1


# A 200 stream that the Responses API ends with its own "error" event.
RESPONSES_STREAM_ERROR = {
    "type": "error",
    "code": "server_error",
    "message": "The server had an error while processing your request.",
    "param": None,
}


async def test_responses_error_event_in_stream_keeps_the_providers_error(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    events = answer_events("responses", "Hello there")[:3]
    events.append(("error", {**RESPONSES_STREAM_ERROR, "sequence_number": 3}))
    server.add(Reply.sse(events, done=False))
    model = make_model("responses")

    with pytest.raises(ProviderError) as raised:
        async for _ in model.stream(REQUEST):
            pass

    assert not isinstance(raised.value, ProviderConnectionError)
    assert raised.value.message == RESPONSES_STREAM_ERROR["message"]


async def test_responses_failed_event_is_typed(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    final = {
        **whole_answer("responses", usage=(1, 1)),
        "status": "failed",
        "error": {"code": "server_error", "message": "The server had an error."},
    }
    failed = ("response.failed", {"type": "response.failed", "response": final})
    server.add(Reply.sse([*answer_events("responses", "Hello")[:2], failed], done=False))
    model = make_model("responses")

    with pytest.raises(ServerError) as raised:
        async for _ in model.stream(REQUEST):
            pass

    assert raised.value.message == "The server had an error."


@pytest.mark.parametrize("api", APIS)
async def test_retries_exhausted_raise_the_last_error_with_every_attempt(
    api: str, server: ProviderServer, make_model: Callable[..., Any], clock: FakeClock
) -> None:
    kind = "api_error" if api == "messages" else "server_error"
    server.add(
        *(Reply.json(error_body(api, kind, f"failure {n}"), status=500) for n in (1, 2, 3)),
        answer(api, "too late"),
    )
    agent, errors = retrying_agent(make_model(api), clock, max_attempts=3)

    with pytest.raises(ServerError) as raised:
        await agent.chat("Hello")

    error = raised.value
    assert error.message == "failure 3"
    assert error.status == 500
    assert len(server.received) == 3
    assert [attempt.attempt for attempt in error.attempts] == [1, 2, 3]
    assert [attempt.error for attempt in error.attempts] == errors
    assert error.attempts[-1].error is error
    assert [attempt.wait for attempt in error.attempts] == [*clock.waits, 0.0]
    assert len(clock.waits) == 2
    assert any("gave up after 3 attempts" in note for note in error.__notes__)


# --- context overflow, from the bodies real servers send ---------------------------------

OPENAI_OVERFLOW = {
    "error": {
        "message": "This model's maximum context length is 128000 tokens. However, your "
        "messages resulted in 130532 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
}
ANTHROPIC_OVERFLOW = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "prompt is too long: 208310 tokens > 200000 maximum",
    },
}
LLAMA_CPP_OVERFLOW = {
    "error": {
        "code": 400,
        "message": "the request exceeds the available context size, try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 5000,
        "n_ctx": 4096,
    }
}
VLLM_OVERFLOW = {
    "object": "error",
    "message": "This model's maximum context length is 4096 tokens. However, you requested "
    "5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of "
    "the messages or completion.",
    "type": "BadRequestError",
    "param": None,
    "code": 400,
}
RESPONSES_OVERFLOW = {
    "error": {
        "message": "Your input exceeds the context window of this model. Please adjust your "
        "input and try again.",
        "type": "invalid_request_error",
        "param": "input",
        "code": "context_length_exceeded",
    }
}


def message_of(body: dict[str, Any]) -> str:
    inner = body.get("error", body)
    message: str = inner["message"]
    return message


@pytest.mark.parametrize(
    ("api", "body", "request_tokens", "limit_tokens"),
    [
        pytest.param("chat.completions", OPENAI_OVERFLOW, 130532, 128000, id="openai"),
        pytest.param("messages", ANTHROPIC_OVERFLOW, 208310, 200000, id="anthropic"),
        pytest.param("chat.completions", LLAMA_CPP_OVERFLOW, 5000, 4096, id="llama.cpp"),
        pytest.param("chat.completions", VLLM_OVERFLOW, 5000, 4096, id="vllm"),
        pytest.param("responses", RESPONSES_OVERFLOW, None, None, id="openai-responses"),
    ],
)
async def test_context_overflow_is_recognised(
    api: str,
    body: dict[str, Any],
    request_tokens: int | None,
    limit_tokens: int | None,
    server: ProviderServer,
    make_model: Callable[..., Any],
    clock: FakeClock,
) -> None:
    server.add(Reply.json(body, status=400), answer(api, "never asked for"))
    agent, _ = retrying_agent(make_model(api), clock)

    with pytest.raises(ContextOverflowError) as raised:
        await agent.chat("Hello")

    error = raised.value
    assert error.request_tokens == request_tokens
    assert error.limit_tokens == limit_tokens
    assert error.status == 400
    assert error.message == message_of(body)
    assert is_context_overflow(error)
    assert not isinstance(error, TRANSIENT_ERRORS)
    assert len(server.received) == 1  # repeating the same request cannot help
    assert clock.waits == []


async def test_compaction_recovers_from_a_real_overflow(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(Reply.json(OPENAI_OVERFLOW, status=400), answer("chat.completions", "Recovered"))
    agent = Agent(make_model("chat.completions"), retry=None, plugins=[Compaction()])
    old_turns = [
        message
        for n in range(6)
        for message in (
            UserMessage(content=f"old question {n} " + "words " * 300),
            AssistantMessage(content=f"old answer {n} " + "words " * 300),
        )
    ]
    agent.history.import_history(old_turns)

    response = await agent.chat("What now?")

    assert response.text == "Recovered"
    first, second = (received.body["messages"] for received in server.received)
    assert len(second) < len(first)
    assert second[-1] == first[-1] == {"role": "user", "content": "What now?"}


# --- a malformed tool call from the model ------------------------------------------------

MALFORMED_ARGUMENTS = '{"city": '


@pytest.mark.parametrize(
    ("api", "stream"),
    [
        pytest.param("chat.completions", False, id="chat.completions-whole"),
        pytest.param("chat.completions", True, id="chat.completions-streamed"),
        pytest.param("responses", False, id="responses-whole"),
        pytest.param("responses", True, id="responses-streamed"),
        # Anthropic sends input as an object when whole: only a stream can break it.
        pytest.param("messages", True, id="messages-streamed"),
    ],
)
async def test_malformed_tool_arguments_reach_the_model_as_a_tool_error(
    api: str, stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(
        answer(api, "", (("call_1", "get_weather", MALFORMED_ARGUMENTS),), stream=stream),
        answer(api, "Which city did you mean?", stream=stream),
    )
    agent, ran = weather_agent(make_model(api))

    response, _ = await chat(agent, "Weather?", stream=stream)

    assert response.text == "Which city did you mean?"
    assert response.iterations == 2
    assert ran == []
    [result] = [m for m in response.messages if isinstance(m, ToolMessage)]
    assert result.is_error
    assert result.tool_call_id == "call_1"
    assert "get_weather" in result.content
    second = server.received[1].body
    if api == "chat.completions":
        call, sent_result = second["messages"][-2:]
        assert call["tool_calls"][0]["function"]["arguments"] == MALFORMED_ARGUMENTS
        assert sent_result == {"role": "tool", "tool_call_id": "call_1", "content": result.content}
    elif api == "responses":
        call, sent_result = second["input"][-2:]
        assert call["arguments"] == MALFORMED_ARGUMENTS
        assert sent_result == {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": result.content,
        }
    else:  # the call goes back with an empty input object: Anthropic accepts only objects
        call, sent_result = second["messages"][-2:]
        assert call["content"] == [
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {}}
        ]
        assert sent_result["content"] == [
            {
                "type": "tool_result",
                "tool_use_id": "call_1",
                "content": result.content,
                "is_error": True,
            }
        ]
