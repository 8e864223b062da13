"""Every recorded provider exchange, replayed over HTTP through the adapter of its API.

Each case in ``fixtures/provider-traffic`` is served byte for byte from a local server to the
official client inside the adapter (streamed in small pieces when it was a stream), and what
the adapter makes of it must be exactly what the case's ``expect`` says.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from hookloop import (
    BadRequestError,
    ContextOverflowError,
    NotFoundError,
    ProviderError,
    RateLimitError,
    ServerError,
    TextDelta,
    UserMessage,
)
from hookloop.models import (
    ProviderRequest,
    ProviderResponse,
    ResponseAccumulator,
    StreamEnd,
    StreamPart,
)
from hookloop.retry import TRANSIENT_ERRORS, retry_after_seconds
from tests.models._provider_server import (
    APIS,
    FIXTURES,
    ProviderServer,
    Reply,
    answer_events,
    case_names,
    load_case,
    whole_answer,
)

CASES: dict[str, dict[str, Any]] = {name: load_case(name) for name in case_names()}
ERROR_CASES = sorted(
    name
    for name, case in CASES.items()
    if case["response"]["status"] >= 400 or case["expect"].get("must_raise")
)
ANSWER_CASES = sorted(set(CASES) - set(ERROR_CASES))

# What an HTTP status of a recorded error must become (exactly this class).
ERROR_CLASSES: dict[int, type[ProviderError]] = {
    400: BadRequestError,
    404: NotFoundError,
    429: RateLimitError,
    500: ServerError,
}
ANTHROPIC_STOP = {"end_turn": "stop", "tool_use": "tool_calls"}
# The endpoint of each API below the API root: the adapter must call the recorded path.
ENDPOINTS = {
    "chat.completions": "/chat/completions",
    "messages": "/v1/messages",
    "responses": "/responses",
}
BEDROCK = "bedrock.converse"  # the model id is in the path: the adapter's is "m"
RATE_LIMIT_HEADERS = ("x-ratelimit-", "anthropic-ratelimit-")

REQUEST = ProviderRequest(model="m", system=None, messages=(UserMessage(content="Hello"),))


def recorded_path(case: dict[str, Any]) -> str:
    path: str = case["request"]["path"]
    if case["api"] == BEDROCK:  # /model/ID/converse: the same operation for model "m"
        return "/model/m/" + path.rpartition("/")[2]
    return path.partition("?")[0]  # Anthropic's beta client added ?beta=true; ours does not


def streamed(case: dict[str, Any]) -> bool:
    if case["api"] == BEDROCK:
        return bool(case["request"]["path"].endswith("/converse-stream"))
    return bool(case["request"]["json"].get("stream"))


async def ask(
    model: Any, *, stream: bool, parts: list[StreamPart] | None = None
) -> ProviderResponse:
    """One request, whole or streamed (folded as the loop folds it); parts go to ``parts``."""
    if not stream:
        return await model.request(REQUEST)
    accumulator = ResponseAccumulator()
    async for part in model.stream(REQUEST):
        if parts is not None:
            parts.append(part)
        accumulator.add(part)
    return accumulator.response()


async def replay(
    server: ProviderServer,
    make_model: Callable[..., Any],
    case: dict[str, Any],
    parts: list[StreamPart],
) -> ProviderResponse:
    """Serve the recorded response to the adapter; stream parts are collected in ``parts``."""
    api = case["api"]
    prefix = "" if api == BEDROCK else recorded_path(case).removesuffix(ENDPOINTS[api])
    model = make_model(api, prefix=prefix, timeout=10)
    server.add(Reply.recorded(case))
    return await ask(model, stream=streamed(case), parts=parts)


def expected_calls(case: dict[str, Any]) -> list[tuple[str, str, object]]:
    """(id, name, arguments) of the expected tool calls; Anthropic's input as an object."""
    expect = case["expect"]
    if case["api"] in ("messages", BEDROCK):
        return [(c["id"], c["name"], c["input"]) for c in expect["tool_calls"]]
    if case["api"] == "responses":
        return [(c["call_id"], c["name"], c["arguments"]) for c in expect["function_calls"]]
    return [(c["id"], c["name"], c["arguments"]) for c in expect["tool_calls"]]


def expected_finish(case: dict[str, Any]) -> str:
    expect = case["expect"]
    if case["api"] in ("messages", BEDROCK):  # Converse's stop reasons are Anthropic's
        return ANTHROPIC_STOP[expect["stop_reason"]]
    if case["api"] == "responses":
        assert expect["status"] == "completed"
        return "tool_calls" if expect["function_calls"] else "stop"
    finish: str = expect["finish_reason"]
    return finish


def expected_usage(case: dict[str, Any]) -> tuple[int, int]:
    usage = case["expect"]["usage"]
    if case["api"] == "chat.completions":
        return usage["prompt_tokens"], usage["completion_tokens"]
    if case["api"] == BEDROCK:  # tokens read from or written to the cache are input too
        cached = usage.get("cacheReadInputTokens", 0) + usage.get("cacheWriteInputTokens", 0)
        return usage["inputTokens"] + cached, usage["outputTokens"]
    return usage["input_tokens"], usage["output_tokens"]


def error_object(body: object) -> dict[str, Any]:
    """The provider's error object, whether the adapter kept the envelope or not."""
    assert isinstance(body, dict), f"the error body should be the parsed JSON, got {body!r}"
    inner = body.get("error")
    return inner if isinstance(inner, dict) else body


def test_every_recorded_case_is_replayed() -> None:
    on_disk = {path.stem for path in FIXTURES.iterdir() if path.suffix == ".json"}
    assert len(on_disk) == 36
    assert set(ANSWER_CASES) | set(ERROR_CASES) == on_disk
    assert not set(ANSWER_CASES) & set(ERROR_CASES)
    for name, case in CASES.items():
        assert case["id"] == name
        assert case["api"] in APIS
        expect = case["expect"]
        if name in ERROR_CASES:  # each error case says what it must raise
            assert "status" in expect or "stream_error" in expect, name
        else:  # and each answer what it must parse to
            assert {"text", "usage", "model"} <= expect.keys(), name
            assert "function_calls" in expect or "tool_calls" in expect, name


@pytest.mark.parametrize("name", ANSWER_CASES)
async def test_recorded_answer_parses_as_expected(
    server: ProviderServer, make_model: Callable[..., Any], name: str
) -> None:
    case = CASES[name]
    expect = case["expect"]
    parts: list[StreamPart] = []

    response = await replay(server, make_model, case, parts)

    assert response.content == (expect["text"] or "")
    calls = [
        (
            call.id,
            call.name,
            json.loads(call.arguments) if case["api"] in ("messages", BEDROCK) else call.arguments,
        )
        for call in response.tool_calls
    ]
    assert calls == expected_calls(case)
    assert response.finish_reason == expected_finish(case)
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == expected_usage(case)
    assert response.model == expect["model"]

    [sent] = server.received
    assert sent.method == "POST"
    assert sent.path == recorded_path(case)
    if case["api"] != BEDROCK:  # Converse streams by its path
        assert bool(sent.body.get("stream")) == streamed(case)
    if streamed(case):
        assert sum(isinstance(part, StreamEnd) for part in parts) == 1
        assert isinstance(parts[-1], StreamEnd)
        deltas = "".join(part.text for part in parts if isinstance(part, TextDelta))
        assert deltas == (expect.get("text_from_deltas") or expect["text"] or "")


@pytest.mark.parametrize("name", ERROR_CASES)
async def test_recorded_error_raises_its_class(
    server: ProviderServer, make_model: Callable[..., Any], name: str
) -> None:
    case = CASES[name]
    expect = case["expect"]
    parts: list[StreamPart] = []

    with pytest.raises(ProviderError) as raised:
        await replay(server, make_model, case, parts)

    error = raised.value
    if expect.get("must_raise"):  # an error event inside a stream that began with 200
        described = expect["stream_error"]
        status = described["status_code"]
        kind, code = described["error_type"], described["error_code"]
        retryable = issubclass(ERROR_CLASSES[status], TRANSIENT_ERRORS)
        assert error.message, "the error keeps the provider's message"
        assert not any(isinstance(part, StreamEnd) for part in parts)
        assert not any(isinstance(part, TextDelta) for part in parts)
    else:
        status, kind, code = expect["status"], expect["error_type"], expect["error_code"]
        retryable = expect["retryable"]
        assert error.message == expect["message"]
    assert type(error) is ERROR_CLASSES[status]
    assert not isinstance(error, ContextOverflowError)
    assert error.status == status
    assert isinstance(error, TRANSIENT_ERRORS) == retryable
    assert error.model == "m"
    provider_error = error_object(error.body)
    if kind is not None:
        assert provider_error["type"] == kind
    if code is not None:
        assert provider_error["code"] == code
    headers = case["response"]["headers"]
    assert error.retry_after == retry_after_seconds(headers)
    for key, value in headers.items():
        if key.lower().startswith(RATE_LIMIT_HEADERS):
            assert error.headers[key.lower()] == value
    assert len(server.received) == 1


# --- what the recordings do not show ------------------------------------------------------


def finishing(api: str, reason: str, *, stream: bool) -> Reply:
    """A short answer that stops for ``reason``, as ``api`` says it."""
    if not stream:
        body = whole_answer(api, "Partial", usage=(3, 2))
        if api == "chat.completions":
            body["choices"][0]["finish_reason"] = reason
        elif api == "messages":
            body["stop_reason"] = reason
        else:
            body.update(status="incomplete", incomplete_details={"reason": reason})
        return Reply.json(body)
    events = answer_events(api, "Partial", usage=(3, 2))
    if api == "chat.completions":
        events[-2]["choices"][0]["finish_reason"] = reason  # before the usage chunk
    elif api == "messages":
        events[-2][1]["delta"]["stop_reason"] = reason  # message_delta, before message_stop
    else:
        data = events[-1][1]
        final = {
            **data["response"],
            "status": "incomplete",
            "incomplete_details": {"reason": reason},
        }
        events[-1] = (
            "response.incomplete",
            {**data, "type": "response.incomplete", "response": final},
        )
    return Reply.sse(events, done=api == "chat.completions")


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize(
    ("api", "reason", "expected"),
    [
        ("chat.completions", "length", "length"),
        ("chat.completions", "content_filter", "content_filter"),
        ("messages", "max_tokens", "length"),
        ("messages", "stop_sequence", "stop"),
        ("messages", "refusal", "content_filter"),
        ("responses", "max_output_tokens", "length"),
        ("responses", "content_filter", "content_filter"),
    ],
)
async def test_finish_reasons(
    api: str,
    reason: str,
    expected: str,
    stream: bool,
    server: ProviderServer,
    make_model: Callable[..., Any],
) -> None:
    server.add(finishing(api, reason, stream=stream))
    model = make_model(api)

    response = await ask(model, stream=stream)

    assert response.finish_reason == expected
    assert response.content == "Partial"


ANTHROPIC_CACHED_USAGE = {
    "input_tokens": 5,
    "cache_creation_input_tokens": 100,
    "cache_read_input_tokens": 1000,
    "output_tokens": 7,
}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_anthropic_cached_prompt_tokens_count_as_input(
    stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    if stream:
        events = answer_events("messages", "Hi")
        events[0][1]["message"]["usage"] = {**ANTHROPIC_CACHED_USAGE, "output_tokens": 1}
        server.add(Reply.sse(events, done=False))
    else:
        body = {**whole_answer("messages", "Hi", usage=(0, 0)), "usage": ANTHROPIC_CACHED_USAGE}
        server.add(Reply.json(body))
    model = make_model("messages")

    response = await ask(model, stream=stream)

    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (1105, 7)
