"""GeminiModel through the real ``google-genai`` client against the local wire-format server.

The recorded cases of ``fixtures/provider-traffic/gemini/`` replayed byte for byte; what the
adapter sends (contents, function declarations, generation config, signatures); usage with
cached and thinking tokens and its price; Google's errors, safety blocks and broken streams;
keys and the ``gemini:NAME`` spec. The parametrized suites (faults, edges, quirks, requests)
run Gemini as well, through ``APIS``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pydantic
import pytest

import hookloop
from hookloop import (
    Agent,
    AssistantMessage,
    AuthenticationError,
    ContentBlockedError,
    ImagePart,
    InvalidResponseError,
    ModelSettings,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    RateLimitError,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UsageError,
    UserMessage,
)
from hookloop.models import (
    GeminiModel,
    ProviderRequest,
    ProviderResponse,
    ResponseAccumulator,
    StreamEnd,
    StreamPart,
    ToolDefinition,
    model_from_spec,
)
from hookloop.models._gemini import SKIP_SIGNATURE
from hookloop.models._spec import ModelSpecError
from hookloop.retry import TRANSIENT_ERRORS
from tests.models import _gemini_wire
from tests.models._chats import chat, weather_agent
from tests.models._provider_server import FIXTURES, ProviderServer, Received, Reply, answer

CASES_DIR: Path = FIXTURES / "gemini"
CASES = {p.stem: json.loads(p.read_text()) for p in sorted(CASES_DIR.glob("*.json"))}
ANSWERS = sorted(name for name, case in CASES.items() if "error" not in case["expect"])
FAILURES = sorted(name for name, case in CASES.items() if "error" in case["expect"])
REQUEST = ProviderRequest(model="m", system=None, messages=(UserMessage(content="Hello"),))
WEATHER = ToolDefinition(
    name="get_weather",
    description="Tell the weather in a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)
KEY_VARIABLES = ("GOOGLE_API_KEY", "GEMINI_API_KEY", "HOOKLOOP_API_KEY", "GOOGLE_GEMINI_BASE_URL")


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for variable in KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


async def ask(
    model: Any,
    request: ProviderRequest = REQUEST,
    *,
    stream: bool,
    parts: list[StreamPart] | None = None,
) -> ProviderResponse:
    """One request, whole or streamed (folded as the loop folds it)."""
    if not stream:
        response: ProviderResponse = await model.request(request)
        return response
    accumulator = ResponseAccumulator()
    async for part in model.stream(request):
        if parts is not None:
            parts.append(part)
        accumulator.add(part)
    return accumulator.response()


def streamed(case: dict[str, Any]) -> bool:
    return "alt=sse" in case["request"]["path"]


def recorded_model(case: dict[str, Any]) -> str:
    return case["request"]["path"].split("/models/")[1].split(":")[0]


def body_of(received: Received) -> dict[str, Any]:
    body: dict[str, Any] = received.body
    return body


# --- the recorded cases --------------------------------------------------------------------


def test_every_recorded_case_has_a_source_and_an_expectation() -> None:
    assert len(CASES) == 13
    for name, case in CASES.items():
        assert case["id"] == name
        assert case["api"] == "gemini"
        source = case["source"]
        assert source.startswith("constructed from https://") or (
            ":tests/" in source and len(source.rsplit("@", 1)[1]) == 40
        )
        assert "x-goog-api-key" not in json.dumps(case).lower()


@pytest.mark.parametrize("name", ANSWERS)
async def test_recorded_answer_parses_as_expected(
    name: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    case = CASES[name]
    expect = case["expect"]
    server.add(Reply.recorded(case))
    request = ProviderRequest(model=recorded_model(case), system=None, messages=REQUEST.messages)
    parts: list[StreamPart] = []

    response = await ask(make_model("gemini"), request, stream=streamed(case), parts=parts)

    assert response.content == expect["text"]
    assert [(c.name, json.loads(c.arguments)) for c in response.tool_calls] == [
        (c["name"], c["args"]) for c in expect["tool_calls"]
    ]
    assert len({call.id for call in response.tool_calls}) == len(response.tool_calls)
    assert response.finish_reason == expect["finish_reason"]
    assert response.usage == Usage(**expect["usage"])
    assert (response.model, response.id) == (expect["model"], expect["id"])
    [sent] = server.received
    assert sent.path == case["request"]["path"]
    assert sent.method == "POST"
    if streamed(case):
        assert sum(isinstance(part, StreamEnd) for part in parts) == 1
        assert isinstance(parts[-1], StreamEnd)
        text = "".join(part.text for part in parts if isinstance(part, TextDelta))
        assert text == expect["text"]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("name", FAILURES)
async def test_recorded_failure_raises_its_class(
    name: str, stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    case = CASES[name]
    expect = case["expect"]
    server.add(Reply.recorded(case))
    if stream and case["response"]["status"] == 200:  # the same answer, as one stream chunk
        server.replies[0] = Reply.sse([json.loads(case["response"]["body"])], done=False)

    with pytest.raises(ProviderError) as raised:
        await ask(make_model("gemini"), stream=stream)

    error = raised.value
    assert type(error) is getattr(hookloop, expect["error"])
    assert error.model == "m"
    assert isinstance(error, TRANSIENT_ERRORS) == expect.get("retryable", False)
    if isinstance(error, ContentBlockedError):
        assert (error.reason, error.blocked) == (expect["reason"], expect["blocked"])
        assert error.categories == tuple(expect["categories"])
        assert expect["reason"] in str(error)
        return
    inner = json.loads(case["response"]["body"])["error"]
    assert error.status == expect["status"]
    assert error.message == inner["message"]
    assert error.body == {"error": inner}
    assert error.retry_after == expect.get("retry_after")
    if "request_tokens" in expect:
        assert (error.request_tokens, error.limit_tokens) == (  # type: ignore[attr-defined]
            expect["request_tokens"],
            expect["limit_tokens"],
        )


async def test_a_recorded_signature_goes_back_with_its_call(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    case = CASES["gemini_tool_calls_parallel_signed"]
    server.add(Reply.recorded(case), answer("gemini", "Golf, golf, penguins."))
    model = make_model("gemini")
    first = await model.request(REQUEST)
    results = tuple(
        ToolMessage(tool_call_id=call.id, tool_name=call.name, content=topic)
        for call, topic in zip(first.tool_calls, ("golf", "golf", "penguins"), strict=True)
    )
    history = (*REQUEST.messages, first.to_message(), *results)

    await model.request(ProviderRequest(model="m", system=None, messages=history))

    calls_turn, results_turn = body_of(server.received[1])["contents"][1:]
    signatures = [part.get("thoughtSignature") for part in calls_turn["parts"]]
    # The same bytes: the client writes them back in URL-safe base64.
    assert base64.urlsafe_b64decode(signatures[0]) == base64.b64decode(
        case["expect"]["thought_signature"]
    )
    assert signatures[1:] == [None, None]
    assert [part["functionCall"]["id"] for part in calls_turn["parts"]] == [
        call.id for call in first.tool_calls
    ]
    assert [part["functionResponse"] for part in results_turn["parts"]] == [
        {"id": call.id, "name": "generate_topic", "response": {"output": topic}}
        for call, topic in zip(first.tool_calls, ("golf", "golf", "penguins"), strict=True)
    ]


# --- what goes on the wire -----------------------------------------------------------------


@pytest.fixture
def sent(server: ProviderServer, make_model: Callable[..., Any]) -> Callable[..., Any]:
    """Sends one request through a GeminiModel; returns what the server received."""

    async def send(
        messages: tuple[Any, ...],
        *,
        system: str | None = None,
        tools: tuple[ToolDefinition, ...] = (),
        settings: ModelSettings | None = None,
        stream: bool = False,
    ) -> Received:
        server.add(answer("gemini", "ok", stream=stream))
        request = ProviderRequest(
            model="m",
            system=system,
            messages=messages,
            tools=tools,
            settings=settings or ModelSettings(),
        )
        assert (await ask(make_model("gemini"), request, stream=stream)).content == "ok"
        return server.received[-1]

    return send


CALL = ToolCall(name="get_weather", arguments='{"city": "Paris"}', id="call_1")
CALL_2 = ToolCall(name="get_weather", arguments='{"city": "Oslo"}', id="call_2")


async def test_the_conversation_as_gemini_contents(sent: Callable[..., Any]) -> None:
    messages = (
        UserMessage(content="Weather in Paris and Oslo?"),
        AssistantMessage(content="Checking.", tool_calls=(CALL, CALL_2)),
        ToolMessage(tool_call_id="call_1", tool_name="get_weather", content="Sunny"),
        ToolMessage(tool_call_id="call_2", tool_name="get_weather", content="boom", is_error=True),
        SystemMessage(content="Now be formal."),
        AssistantMessage(content=""),  # nothing in it: left out
        UserMessage(content="Thanks"),
    )
    received = await sent(messages, system="Be brief.")

    body = body_of(received)
    assert received.path == "/v1beta/models/m:generateContent"
    assert {k.lower(): v for k, v in received.headers.items()}["x-goog-api-key"] == "k"
    assert body["systemInstruction"] == {
        "parts": [{"text": "Be brief.\n\nNow be formal."}],
        "role": "user",
    }
    assert body["contents"] == [
        {"parts": [{"text": "Weather in Paris and Oslo?"}], "role": "user"},
        {
            "parts": [
                {"text": "Checking."},
                {
                    "functionCall": {
                        "id": "call_1",
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                    },
                    "thoughtSignature": base64.b64encode(SKIP_SIGNATURE).decode(),
                },
                {"functionCall": {"id": "call_2", "name": "get_weather", "args": {"city": "Oslo"}}},
            ],
            "role": "model",
        },
        {
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_1",
                        "name": "get_weather",
                        "response": {"output": "Sunny"},
                    }
                },
                {
                    "functionResponse": {
                        "id": "call_2",
                        "name": "get_weather",
                        "response": {"error": "boom"},
                    }
                },
                {"text": "Thanks"},  # neighbouring user turns merge: Gemini wants them alternating
            ],
            "role": "user",
        },
    ]
    assert set(body) == {"contents", "systemInstruction", "generationConfig"}
    assert body["generationConfig"] == {}  # nothing unasked for (the client sends it empty)


async def test_images_as_inline_data_and_file_uris(sent: Callable[..., Any]) -> None:
    message = UserMessage(
        content=(
            TextPart(text="What is this?"),
            ImagePart(url="https://example.com/cat.png"),
            ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
            ImagePart(url="data:image/jpeg;base64,/9j/4AAQ"),
        )
    )
    body = body_of(await sent((message,)))

    # As the client writes them: proto field names inside, URL-safe base64 (Google's JSON
    # parser takes either spelling and either alphabet).
    assert body["contents"] == [
        {
            "parts": [
                {"text": "What is this?"},
                {"fileData": {"file_uri": "https://example.com/cat.png", "mime_type": "image/png"}},
                {"inlineData": {"data": "iVBORw0KGgo=", "mime_type": "image/png"}},
                {"inlineData": {"data": "_9j_4AAQ", "mime_type": "image/jpeg"}},
            ],
            "role": "user",
        }
    ]


def test_image_data_that_is_not_base64_is_a_usage_error() -> None:
    model = GeminiModel("m", api_key="k", base_url="http://127.0.0.1:9")
    message = UserMessage(content=(ImagePart(data="not base64!", media_type="image/png"),))

    with pytest.raises(UsageError, match="not base64"):
        model._body(ProviderRequest(model="m", system=None, messages=(message,)))


@pytest.mark.parametrize(
    ("choice", "config"),
    [
        ("auto", {"mode": "AUTO"}),
        ("none", {"mode": "NONE"}),
        ("required", {"mode": "ANY"}),
        ("get_weather", {"mode": "ANY", "allowedFunctionNames": ["get_weather"]}),
    ],
)
async def test_tools_and_tool_choice(
    choice: str, config: dict[str, Any], sent: Callable[..., Any]
) -> None:
    settings = ModelSettings(tool_choice=choice)
    body = body_of(await sent(REQUEST.messages, tools=(WEATHER,), settings=settings))

    assert body["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "get_weather",
                    "description": "Tell the weather in a city.",
                    "parameters_json_schema": dict(WEATHER.parameters),
                }
            ]
        }
    ]
    assert body["toolConfig"] == {"functionCallingConfig": config}


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_settings_go_into_the_generation_config(
    stream: bool, sent: Callable[..., Any]
) -> None:
    settings = ModelSettings(temperature=0.25, max_tokens=321, extra={"top_k": 7})
    received = await sent(REQUEST.messages, settings=settings, stream=stream)

    assert body_of(received)["generationConfig"] == {
        "temperature": 0.25,
        "maxOutputTokens": 321,
        "topK": 7,
    }
    endpoint = "streamGenerateContent?alt=sse" if stream else "generateContent"
    assert received.path == f"/v1beta/models/m:{endpoint}"
    assert "x-hookloop-stream" not in {k.lower() for k in received.headers}  # the mark stays


def test_an_extra_setting_the_client_does_not_know_is_a_usage_error() -> None:
    model = GeminiModel("m", api_key="k", base_url="http://127.0.0.1:9")
    request = ProviderRequest(
        model="m", system=None, messages=REQUEST.messages, settings=ModelSettings(extra={"x": 1})
    )
    with pytest.raises(UsageError, match="GeminiModel cannot send this request"):
        model._body(request)


class City(pydantic.BaseModel):
    city: str
    country: str


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_native_output_sends_the_json_schema(
    stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(answer("gemini", '{"city": "Mexico City", "country": "Mexico"}', stream=stream))
    agent = Agent(make_model("gemini"), output_type=City, output_mode="native")

    response, _ = await chat(agent, "Largest city in Mexico?", stream=stream)

    assert response.output == City(city="Mexico City", country="Mexico")
    config = body_of(server.received[0])["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"]["properties"] == {
        "city": {"type": "string"},
        "country": {"type": "string"},
    }


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_the_model_s_signature_comes_back_on_the_next_call(
    stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    first = answer("gemini", "", (("call_1", "get_weather", '{"city": "Paris"}'),), stream=stream)
    payload = json.loads(first.body.removeprefix("data: ")) if stream else json.loads(first.body)
    payload["candidates"][0]["content"]["parts"][0]["thoughtSignature"] = "c2lnbmVk"  # "signed"
    first = Reply.sse([payload], done=False) if stream else Reply.json(payload)
    server.add(first, answer("gemini", "Sunny.", stream=stream))
    agent, ran = weather_agent(make_model("gemini"))

    response, _ = await chat(agent, "Weather in Paris?", stream=stream)

    assert response.text == "Sunny."
    assert ran == ["Paris"]
    [call_part] = body_of(server.received[1])["contents"][1]["parts"]
    assert call_part["thoughtSignature"] == "c2lnbmVk"


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_thought_summaries_are_not_the_answer(
    stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    payload = _gemini_wire.whole_answer("The answer.", usage=(3, 2))
    payload["candidates"][0]["content"]["parts"].insert(
        0, {"text": "Let me think", "thought": True}
    )
    server.add(Reply.sse([payload], done=False) if stream else Reply.json(payload))

    response = await ask(make_model("gemini"), stream=stream)

    assert response.content == "The answer."


# --- usage and its price -------------------------------------------------------------------

CACHED_USAGE = _gemini_wire.usage_metadata(
    1000, 40, cachedContentTokenCount=800, thoughtsTokenCount=60
)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_cached_and_thinking_tokens_are_reported(
    stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    payload = {**_gemini_wire.whole_answer("ok", usage=(0, 0)), "usageMetadata": CACHED_USAGE}
    server.add(Reply.sse([payload], done=False) if stream else Reply.json(payload))

    response = await ask(make_model("gemini"), stream=stream)

    # promptTokenCount holds the cached tokens; candidatesTokenCount leaves the thinking out.
    assert response.usage == Usage(
        input_tokens=1000, output_tokens=100, cached_input_tokens=800, reasoning_tokens=60
    )


async def test_cached_tokens_are_priced_as_cache_reads(server: ProviderServer) -> None:
    payload = {**_gemini_wire.whole_answer("ok", usage=(0, 0)), "usageMetadata": CACHED_USAGE}
    server.add(Reply.json(payload))
    model = GeminiModel("gemini-2.5-flash", api_key="k", base_url=server.url)
    try:
        response = await Agent(model).chat("hi")
    finally:
        await model.aclose()

    # genai-prices' gemini-2.5-flash: input $0.30, cache reads $0.03, output $2.50 per million.
    expected = (200 * Decimal("0.30") + 800 * Decimal("0.03") + 100 * Decimal("2.50")) / 10**6
    assert response.usage.cost == expected


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize("status", [429, 503])
async def test_an_error_inside_a_stream_is_typed(
    status: int, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    body = (
        _gemini_wire.rate_limited("7s")
        if status == 429
        else _gemini_wire.error_body(503, "The model is overloaded. Please try again later.")
    )
    events = [*_gemini_wire.answer_events("Hello there", finished=False)[:2], body]
    server.add(Reply.sse(events, done=False))
    texts: list[str] = []

    with pytest.raises(ProviderError) as raised:
        async for part in make_model("gemini").stream(REQUEST):
            texts.append(getattr(part, "text", ""))

    assert type(raised.value) is (RateLimitError if status == 429 else OverloadedError)
    assert raised.value.status == status
    assert raised.value.retry_after == (7.0 if status == 429 else None)
    assert "".join(texts) == "Hello th"  # what came before the error was passed on


@pytest.mark.parametrize("reason", ["SAFETY", "PROHIBITED_CONTENT", "RECITATION"])
async def test_a_stream_the_filter_stops_raises_after_what_it_sent(
    reason: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    events = _gemini_wire.answer_events("Once upon a time")
    events[-1]["candidates"][0]["finishReason"] = reason
    server.add(Reply.sse(events, done=False))
    texts: list[str] = []

    with pytest.raises(ContentBlockedError) as raised:
        async for part in make_model("gemini").stream(REQUEST):
            texts.append(getattr(part, "text", ""))

    assert (raised.value.reason, raised.value.blocked) == (reason, "answer")
    assert "".join(texts) == "Once upon a time"
    assert not isinstance(raised.value, TRANSIENT_ERRORS)


async def test_a_blocked_prompt_in_a_stream_is_typed(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    blocked = {
        "promptFeedback": {
            "blockReason": "SAFETY",
            "safetyRatings": [
                {
                    "category": "HARM_CATEGORY_DANGEROUS_CONTENT",
                    "probability": "HIGH",
                    "blocked": True,
                }
            ],
        },
        "usageMetadata": {"promptTokenCount": 5, "totalTokenCount": 5},
    }
    server.add(Reply.sse([blocked], done=False))

    with pytest.raises(ContentBlockedError) as raised:
        await ask(make_model("gemini"), stream=True)

    assert raised.value.blocked == "prompt"
    assert raised.value.categories == ("HARM_CATEGORY_DANGEROUS_CONTENT",)
    assert "blocked the prompt (SAFETY)" in str(raised.value)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_malformed_function_call_is_an_invalid_response(
    stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    payload = _gemini_wire.whole_answer("", usage=(3, 0))
    candidate = payload["candidates"][0]
    candidate.update(finishReason="MALFORMED_FUNCTION_CALL")
    server.add(Reply.sse([payload], done=False) if stream else Reply.json(payload))

    with pytest.raises(InvalidResponseError, match=r"could not be used \(MALFORMED_FUNCTION_CALL"):
        await ask(make_model("gemini"), stream=stream)


@pytest.mark.parametrize(
    "payload",
    [
        {"candidates": [{"content": {"parts": "not a list"}, "finishReason": "STOP"}]},
        {"candidates": [{"content": {"parts": [{"text": 5}]}, "finishReason": "STOP"}]},
        {"candidates": [{"content": {"parts": [{"functionCall": {"args": {}}}]}}]},
        {"candidates": []},
    ],
    ids=["parts-not-a-list", "text-not-a-string", "call-without-name", "no-candidate"],
)
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_malformed_body_is_an_invalid_response(
    payload: dict[str, Any],
    stream: bool,
    server: ProviderServer,
    make_model: Callable[..., Any],
) -> None:
    if stream and not payload["candidates"]:
        pytest.skip("a stream chunk without candidates is fine: the stream then ends unfinished")
    server.add(Reply.sse([payload], done=False) if stream else Reply.json(payload))

    with pytest.raises(InvalidResponseError):
        await ask(make_model("gemini"), stream=stream)


async def test_a_stream_without_a_finish_reason_ended_too_early(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(Reply.sse([{"usageMetadata": {"promptTokenCount": 1}}], done=False))

    with pytest.raises(ProviderConnectionError, match="ended before the model finished"):
        await ask(make_model("gemini"), stream=True)


async def test_a_403_is_an_authentication_error(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    body = _gemini_wire.error_body(403, "Method doesn't allow unregistered callers.")
    server.add(Reply.json(body, status=403))

    with pytest.raises(AuthenticationError):
        await ask(make_model("gemini"), stream=False)


# --- keys, URLs and the spec ---------------------------------------------------------------


async def test_the_environment_s_key_goes_to_google_only(
    server: ProviderServer, no_keys: pytest.MonkeyPatch
) -> None:
    no_keys.setenv("GEMINI_API_KEY", "google-secret")
    no_keys.setenv("HOOKLOOP_API_KEY", "proxy-key")
    server.add(answer("gemini", "ok"))
    model = GeminiModel("m", base_url=server.url)
    try:
        await model.request(REQUEST)
    finally:
        await model.aclose()

    headers = {k.lower(): v for k, v in server.received[-1].headers.items()}
    assert headers["x-goog-api-key"] == "proxy-key"


def test_google_api_key_wins_as_in_the_client(no_keys: pytest.MonkeyPatch) -> None:
    from hookloop.models._gemini import _key_for

    no_keys.setenv("GEMINI_API_KEY", "gemini")
    assert _key_for("https://generativelanguage.googleapis.com", None) == "gemini"
    no_keys.setenv("GOOGLE_API_KEY", "google")
    assert _key_for("https://generativelanguage.googleapis.com", None) == "google"
    assert _key_for("https://generativelanguage.googleapis.com", "given") == "given"
    assert _key_for("http://127.0.0.1:8080", None) is None


def test_google_s_own_api_needs_a_key(no_keys: pytest.MonkeyPatch) -> None:
    with pytest.raises(UsageError, match="GEMINI_API_KEY"):
        GeminiModel("gemini-2.5-flash")
    model = GeminiModel("gemini-2.5-flash", api_key="k")
    assert (model.base_url, model.provider_name) == (
        "https://generativelanguage.googleapis.com",
        "gcp.gemini",
    )


def test_the_gemini_spec(no_keys: pytest.MonkeyPatch) -> None:
    with pytest.raises(ModelSpecError, match="set GEMINI_API_KEY or GOOGLE_API_KEY"):
        model_from_spec("gemini:gemini-2.5-flash")
    no_keys.setenv("GOOGLE_API_KEY", "k")
    model = model_from_spec("gemini:gemini-2.5-flash")
    assert isinstance(model, GeminiModel)
    assert model.name == "gemini-2.5-flash"
    assert repr(model_from_spec("gemini:x", api_key="given")) == "GeminiModel('x')"


@pytest.mark.parametrize("options", [{"timeout": 0}, {"stream_idle_timeout": -1.0}])
def test_a_timeout_that_is_not_positive_is_a_usage_error(options: dict[str, float]) -> None:
    with pytest.raises(UsageError, match="must be a positive number of seconds"):
        GeminiModel("m", base_url="http://127.0.0.1:9", api_key="k", **options)


async def test_a_client_you_pass_is_used_and_left_open(server: ProviderServer) -> None:
    import httpx2
    from google import genai
    from google.genai import types

    # Its own httpx client: with aiohttp installed (the bedrock extra brings it), google-genai
    # would take aiohttp's path, whose session subclass aiohttp itself warns about.
    http = httpx2.AsyncClient()
    client = genai.Client(
        api_key="own-key",
        vertexai=False,
        http_options=types.HttpOptions(
            base_url=server.url, api_version="v1beta", httpx_async_client=http
        ),
    )
    server.add(answer("gemini", "one"), answer("gemini", "two", stream=True))
    model = GeminiModel("m", client=client)

    assert (await model.request(REQUEST)).content == "one"
    await model.aclose()  # not ours to close: the client still works
    assert (await ask(model, stream=True)).content == "two"
    headers = {k.lower(): v for k, v in server.received[0].headers.items()}
    assert headers["x-goog-api-key"] == "own-key"
    await client.aio.aclose()
    await http.aclose()


@pytest.mark.parametrize("name", ["", "m?alt=json", "a&b", "../../v1/files", "m#part"])
@pytest.mark.parametrize("where", ["model", "request"])
async def test_a_model_name_that_cannot_be_a_url_path_is_a_usage_error(
    name: str, where: str, server: ProviderServer
) -> None:
    # The client refuses the first four with a bare ValueError; "#" would cut the URL short
    # (the request would go to /v1beta/models/m, another endpoint).
    if where == "model":
        with pytest.raises(UsageError, match="model name"):
            GeminiModel(name, base_url=server.url, api_key="k")
        return
    if not name:
        pytest.skip("a request's empty model name means the model's own")
    model = GeminiModel("m", base_url=server.url, api_key="k")
    request = ProviderRequest(model=name, system=None, messages=REQUEST.messages)
    for stream in (False, True):
        with pytest.raises(UsageError, match="model name"):
            await ask(model, request, stream=stream)
    assert server.received == []
