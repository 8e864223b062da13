"""What only Bedrock has: errors inside the AWS event stream, Converse's own error names,
cache points and cache tokens, AWS credentials and regions, several toolUse blocks per
answer, and cancellation of a call in flight. Through aiobotocore against the local server.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pytest

from hookloop import (
    Agent,
    AssistantMessage,
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    ImagePart,
    InvalidResponseError,
    ModelSettings,
    NotFoundError,
    OverloadedError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    TextDelta,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
)
from hookloop._pricing import _WARNED, price_for
from hookloop.models import BedrockModel, OutputFormat, ProviderRequest, model_from_spec
from hookloop.models._spec import ModelSpecError
from hookloop.retry import TRANSIENT_ERRORS
from hookloop.testing import FakeClock
from tests.models import _bedrock_wire as wire
from tests.models._chats import weather_agent
from tests.models._provider_server import ProviderServer, Reply, answer
from tests.models.test_providers_faults import retrying_agent

API = "bedrock.converse"
REQUEST = ProviderRequest(model="m", system=None, messages=(UserMessage(content="Hello"),))


async def collect(model: BedrockModel, request: ProviderRequest = REQUEST) -> list[Any]:
    return [part async for part in model.stream(request)]


# --- errors inside the stream -------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "payload", "error"),
    [
        ("throttlingException", {"message": "Too many requests, please wait."}, RateLimitError),
        (
            "modelStreamErrorException",
            {
                "message": "Model stream error",
                "originalStatusCode": 424,
                "originalMessage": "The model failed mid-answer",
            },
            ServerError,
        ),
        ("serviceUnavailableException", {"message": "Service unavailable"}, OverloadedError),
        ("internalServerException", {"message": "Internal error"}, ServerError),
        ("validationException", {"message": "Input is too long for requested model."}, None),
    ],
)
async def test_an_exception_event_in_the_stream_is_typed(
    name: str,
    payload: dict[str, Any],
    error: type[ProviderError] | None,
    server: ProviderServer,
    make_model: Callable[..., Any],
) -> None:
    # The format of these events: the ConverseStream reference (its exception members).
    frames = wire.answer_events("Hello there")[:3]
    frames.append(wire.Frame(name, payload, kind="exception"))
    server.add(Reply.sse(frames))
    parts: list[Any] = []

    with pytest.raises(ProviderError) as raised:
        async for part in make_model(API).stream(REQUEST):
            parts.append(part)

    if error is None:  # an overflow the service noticed only after it began to answer
        assert type(raised.value) is ContextOverflowError
    else:
        assert type(raised.value) is error
    assert raised.value.message == payload["message"]
    assert raised.value.status is None  # it came inside a stream that had started with 200
    assert raised.value.body["type"] == name[0].upper() + name[1:]
    assert [p.text for p in parts] == ["Hell", "o th"]  # what came before was passed on


async def test_an_exception_event_is_retried_by_the_agent(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    frames = wire.answer_events("Hello")[:2]
    frames.append(wire.Frame("throttlingException", {"message": "Slow down"}, kind="exception"))
    server.add(Reply.sse(frames), answer(API, "Recovered", stream=True))
    agent, errors = retrying_agent(make_model(API), FakeClock())

    async with agent.chat_stream("Hi") as stream:
        texts = [event.text async for event in stream if isinstance(event, TextDelta)]

    assert stream.response is not None
    assert stream.response.text == "Recovered"
    assert texts[-3:] == ["Reco", "vere", "d"]
    assert len(server.received) == 2
    assert [type(error) for error in errors] == [RateLimitError]


async def test_an_error_message_frame_is_a_provider_error(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    frames = wire.answer_events("Hello")[:2]
    frames.append(wire.Frame("InternalFailure", {"message": "We broke"}, kind="error"))
    server.add(Reply.sse(frames))

    with pytest.raises(ProviderError) as raised:
        await collect(make_model(API))

    assert raised.value.message == "We broke"


async def test_a_frame_with_a_wrong_crc_is_an_invalid_response(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    reply = answer(API, "Hello there", stream=True)
    assert isinstance(reply.body, bytes)
    body = bytearray(reply.body)
    body[len(body) // 2] ^= 0xFF  # one byte flipped in flight
    reply.body = bytes(body)
    server.add(reply)

    with pytest.raises(InvalidResponseError):
        await collect(make_model(API))


async def test_a_stream_cut_after_message_stop_keeps_the_answer(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    frames = wire.answer_events("Done")[:-1]  # no metadata frame: the usage is unknown
    server.add(Reply.sse(frames))

    parts = await collect(make_model(API))

    assert "".join(p.text for p in parts if isinstance(p, TextDelta)) == "Done"
    assert parts[-1].finish_reason == "stop"
    assert parts[-1].usage is None


# --- Converse's error answers ----------------------------------------------------------------

# Real ValidationException messages for a request that does not fit, as users reported
# them: aws-samples/assessment-generator#2 (Bedrock's own), continuedev/continue#9592 (the
# same wrapped by "The model returned the following errors"), daisuke-awaji/moca#254
# (Claude's own message, wrapped).
OVERFLOWS = [
    ("Input is too long for requested model.", None, None),
    ("The model returned the following errors: Input is too long for requested model.", None, None),
    (
        "The model returned the following errors: prompt is too long: 200049 tokens > "
        "200000 maximum",
        200049,
        200000,
    ),
]


@pytest.mark.parametrize(("message", "request_tokens", "limit_tokens"), OVERFLOWS)
async def test_a_validation_exception_about_length_is_a_context_overflow(
    message: str,
    request_tokens: int | None,
    limit_tokens: int | None,
    server: ProviderServer,
    make_model: Callable[..., Any],
) -> None:
    server.add(Reply.json(wire.error_body("ValidationException", message), status=400))

    with pytest.raises(ContextOverflowError) as raised:
        await make_model(API).request(REQUEST)

    assert raised.value.message == message
    assert (raised.value.request_tokens, raised.value.limit_tokens) == (
        request_tokens,
        limit_tokens,
    )
    assert not isinstance(raised.value, TRANSIENT_ERRORS)


@pytest.mark.parametrize(
    ("status", "code", "message", "error"),
    [
        (400, "ValidationException", "Malformed input request: #: extraneous key", None),
        (403, "AccessDeniedException", "You don't have access to the model", None),
        (424, "ModelErrorException", "The model failed", None),
        (429, "ModelNotReadyException", "Model is not ready", OverloadedError),
        (503, "ServiceUnavailableException", "Service unavailable", OverloadedError),
        (408, "ModelTimeoutException", "Model timed out", ProviderTimeoutError),
        (404, "ResourceNotFoundException", "Model not found", NotFoundError),
        (400, "ServiceQuotaExceededException", "Quota exceeded", RateLimitError),
        (403, "ExpiredTokenException", "The security token included has expired", None),
    ],
)
async def test_converse_errors_are_typed(
    status: int,
    code: str,
    message: str,
    error: type[ProviderError] | None,
    server: ProviderServer,
    make_model: Callable[..., Any],
) -> None:
    expected = (
        error or {400: BadRequestError, 403: AuthenticationError, 424: BadRequestError}[status]
    )
    # Bedrock names the exception in a header, not only in __type.
    headers = {"x-amzn-ErrorType": f"{code}:http://internal.amazon.com/coral/com.amazon.bedrock/"}
    server.add(Reply.json({"message": message}, status=status, headers=headers))

    with pytest.raises(ProviderError) as raised:
        await make_model(API).request(REQUEST)

    assert type(raised.value) is expected
    assert (raised.value.status, raised.value.message) == (status, message)
    assert raised.value.body == {"type": code, "message": message}


async def test_no_credentials_is_an_authentication_error(
    server: ProviderServer, make_model: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")

    with pytest.raises(AuthenticationError, match="no usable AWS credentials"):
        await make_model(API).request(REQUEST)

    assert server.received == []


async def test_requests_are_signed_with_the_chains_credentials(
    server: ProviderServer, make_model: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_REGION", "eu-central-1")
    server.add(answer(API, "ok"))

    await make_model(API).request(REQUEST)

    [sent] = server.received
    authorization = {k.lower(): v for k, v in sent.headers.items()}["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-central-1/bedrock/aws4_request" in authorization
    assert sent.path == "/model/m/converse"


def test_the_region_comes_from_the_argument_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "ap-south-1")
    assert BedrockModel("m").base_url == "https://bedrock-runtime.ap-south-1.amazonaws.com"
    assert BedrockModel("m", region="us-west-2").region == "us-west-2"
    monkeypatch.setenv("AWS_REGION", "eu-west-3")
    assert BedrockModel("m").region == "eu-west-3"
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(UsageError, match="AWS region"):
        BedrockModel("m")
    with pytest.raises(ModelSpecError, match="AWS region"):
        model_from_spec("bedrock:amazon.nova-micro-v1:0")


def test_the_model_spec_names_a_bedrock_model() -> None:
    model = model_from_spec("bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0")
    assert isinstance(model, BedrockModel)
    assert model.name == "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
    assert model.region == "us-east-1"
    with pytest.raises(ModelSpecError, match="not an API key"):
        model_from_spec("bedrock:amazon.nova-micro-v1:0", api_key="k")


@pytest.mark.parametrize("options", [{"cache": "10m"}, {"timeout": 0}])
def test_bad_options_are_usage_errors(options: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        BedrockModel("m", **options)


# --- tools, images, typed output ---------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_several_tool_uses_in_one_answer_are_run_and_answered_together(
    stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    calls = (
        ("tooluse_1", "get_weather", '{"city": "Paris"}'),
        ("tooluse_2", "get_weather", '{"city": "Oslo"}'),
        ("tooluse_3", "get_weather", "{}"),  # a call without input: an empty object
    )
    server.add(
        answer(API, "Let me look.", calls, stream=stream),
        answer(API, "Both sunny.", stream=stream),
    )
    agent, ran = weather_agent(make_model(API))

    if stream:
        async with agent.chat_stream("Weather?") as events:
            async for _ in events:
                pass
        response = events.response
    else:
        response = await agent.chat("Weather?")

    assert response is not None
    assert response.text == "Both sunny."
    assert sorted(ran) == ["Oslo", "Paris"]
    second = server.received[1].body
    assistant, results = second["messages"][-2:]
    assert assistant["content"][0] == {"text": "Let me look."}
    assert [block["toolUse"]["toolUseId"] for block in assistant["content"][1:]] == [
        "tooluse_1",
        "tooluse_2",
        "tooluse_3",
    ]
    assert [block["toolResult"]["toolUseId"] for block in results["content"]] == [
        "tooluse_1",
        "tooluse_2",
        "tooluse_3",
    ]
    assert results["content"][2]["toolResult"]["status"] == "error"  # city was missing
    assert "toolConfig" in second


async def test_tool_choice_none_keeps_the_tools_when_the_conversation_has_tool_blocks(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    # Converse requires toolConfig beside toolUse/toolResult blocks, and has no "none".
    from tests.models.test_providers_requests import CONVERSATION, WEATHER

    server.add(answer(API, "ok"))
    request = ProviderRequest(
        model="m",
        system=None,
        messages=CONVERSATION,
        tools=(WEATHER,),
        settings=ModelSettings(tool_choice="none"),
    )

    await make_model(API).request(request)

    config = server.received[-1].body["toolConfig"]
    assert [t["toolSpec"]["name"] for t in config["tools"]] == ["get_weather"]
    assert "toolChoice" not in config


@pytest.mark.parametrize(
    "part",
    [
        ImagePart(url="https://example.com/cat.png"),
        ImagePart(data="iVBORw0KGgo=", media_type="image/bmp"),
        ImagePart(data="not base64!", media_type="image/png"),
    ],
)
async def test_images_bedrock_cannot_take_are_usage_errors(
    part: ImagePart, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    request = ProviderRequest(model="m", system=None, messages=(UserMessage(content=(part,)),))

    with pytest.raises(UsageError):
        await make_model(API).request(request)

    assert server.received == []


async def test_data_urls_and_s3_locations_are_images(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    parts = (
        ImagePart(url="data:image/jpeg;base64,/9j/4AAQ"),
        ImagePart(url="s3://bucket/photos/cat.webp"),
    )
    server.add(answer(API, "ok"))

    await make_model(API).request(
        ProviderRequest(model="m", system=None, messages=(UserMessage(content=parts),))
    )

    [message] = server.received[-1].body["messages"]
    assert message["content"] == [
        {"image": {"format": "jpeg", "source": {"bytes": "/9j/4AAQ"}}},
        {
            "image": {
                "format": "webp",
                "source": {"s3Location": {"uri": "s3://bucket/photos/cat.webp"}},
            }
        },
    ]


async def test_native_output_sends_converse_structured_output(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    schema = {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
        "additionalProperties": False,
    }
    server.add(answer(API, '{"city": "Paris"}'))
    request = ProviderRequest(
        model="m",
        system=None,
        messages=(UserMessage(content="Where?"),),
        output_format=OutputFormat(name="Place", schema=schema),
    )

    response = await make_model(API).request(request)

    assert response.content == '{"city": "Paris"}'
    structure = server.received[-1].body["outputConfig"]["textFormat"]
    assert structure["type"] == "json_schema"
    assert structure["structure"]["jsonSchema"]["name"] == "Place"
    assert structure["structure"]["jsonSchema"]["schema"] == (
        '{"type": "object", "properties": {"city": {"type": "string"}}, '
        '"required": ["city"], "additionalProperties": false}'
    )


async def test_converse_members_in_extra_go_to_the_top_level(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    guardrail = {"guardrailIdentifier": "g1", "guardrailVersion": "1"}
    settings = ModelSettings(extra={"guardrailConfig": guardrail, "top_k": 5})
    server.add(answer(API, "ok"))

    await make_model(API).request(
        ProviderRequest(model="m", system=None, messages=REQUEST.messages, settings=settings)
    )

    body = server.received[-1].body
    assert body["guardrailConfig"] == guardrail
    assert body["additionalModelRequestFields"] == {"top_k": 5}


# --- cache tokens and cache points -------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_cache_tokens_are_reported_as_input(
    stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    if stream:
        server.add(Reply.sse(wire.answer_events("Hi", usage=(5, 7), cache=(1000, 100))))
    else:
        server.add(Reply.json(wire.whole_answer("Hi", usage=(5, 7), cache=(1000, 100))))
    model = make_model(API)

    usage = (await collect(model))[-1].usage if stream else (await model.request(REQUEST)).usage

    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (1105, 7)
    assert (usage.cached_input_tokens, usage.cache_write_tokens) == (1000, 100)


CLAUDE = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def test_genai_prices_knows_bedrock_ids_and_prices_the_cache() -> None:
    from hookloop import Usage

    price = price_for(BedrockModel(CLAUDE, endpoint_url="http://127.0.0.1:9"))
    assert price is not None
    usage = Usage(
        input_tokens=1_000_000 + 1_000_000 + 1_000_000,
        cached_input_tokens=1_000_000,
        cache_write_tokens=1_000_000,
        output_tokens=1_000_000,
    )
    # Regional Claude Sonnet 4.5: $3.30 input, $0.33 cache read, $4.125 cache write, $16.50
    # output per million tokens.
    assert price.cost(usage) == Decimal("3.3") + Decimal("0.33") + Decimal("4.125") + Decimal(
        "16.5"
    )


def test_a_model_genai_prices_does_not_know_is_unpriced_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    name = "acme.unknown-model-v9:0"
    _WARNED.discard(name)
    with caplog.at_level(logging.WARNING, logger="hookloop._pricing"):
        assert price_for(BedrockModel(name, endpoint_url="http://127.0.0.1:9")) is None
        assert price_for(BedrockModel(name, endpoint_url="http://127.0.0.1:8")) is None
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert name in caplog.records[0].getMessage()


TOOLS_CONVERSATION = (
    UserMessage(content="Weather in Paris?"),
    AssistantMessage(
        content="", tool_calls=(ToolCall(name="get_weather", arguments="{}", id="call_1"),)
    ),
    ToolMessage(tool_call_id="call_1", tool_name="get_weather", content="Sunny"),
)


async def sent_body(server: ProviderServer, model: BedrockModel) -> dict[str, Any]:
    from tests.models.test_providers_requests import WEATHER

    server.add(answer(API, "ok"))
    await model.request(
        ProviderRequest(
            model=model.name, system="Be brief.", messages=TOOLS_CONVERSATION, tools=(WEATHER,)
        )
    )
    body: dict[str, Any] = server.received[-1].body
    return body


POINT = {"cachePoint": {"type": "default"}}


async def test_claude_gets_cache_points_on_its_stable_prefix(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    model = BedrockModel(CLAUDE, endpoint_url=server.url)  # cache="auto"
    try:
        body = await sent_body(server, model)
    finally:
        await model.aclose()

    assert body["toolConfig"]["tools"][-1] == POINT
    assert body["system"] == [{"text": "Be brief."}, POINT]
    first, _, last = body["messages"]
    assert first["content"][-1] == POINT  # where the previous call ended
    assert last["content"][-1] == POINT  # the whole request, which the next call extends
    assert sum(str(turn).count("cachePoint") for turn in body["messages"]) == 2


@pytest.mark.parametrize(
    ("model_id", "cache", "expected"),
    [
        ("amazon.nova-micro-v1:0", "auto", {"tools": 0, "system": 1, "messages": 2}),
        ("meta.llama3-70b-instruct-v1:0", "auto", {"tools": 0, "system": 0, "messages": 0}),
        ("meta.llama3-70b-instruct-v1:0", "5m", {"tools": 1, "system": 1, "messages": 2}),
        (CLAUDE, None, {"tools": 0, "system": 0, "messages": 0}),
    ],
)
async def test_which_models_get_cache_points(
    model_id: str, cache: Any, expected: dict[str, int], server: ProviderServer
) -> None:
    model = BedrockModel(model_id, endpoint_url=server.url, cache=cache)
    try:
        body = await sent_body(server, model)
    finally:
        await model.aclose()

    counts = {
        "tools": str(body["toolConfig"]["tools"]).count("cachePoint"),
        "system": str(body["system"]).count("cachePoint"),
        "messages": str(body["messages"]).count("cachePoint"),
    }
    assert counts == expected


async def test_a_one_hour_cache_sends_its_ttl(server: ProviderServer) -> None:
    model = BedrockModel(CLAUDE, endpoint_url=server.url, cache="1h")
    try:
        body = await sent_body(server, model)
    finally:
        await model.aclose()

    assert body["system"][-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}


# --- cancellation ----------------------------------------------------------------------------


async def test_a_cancelled_stream_stops_at_once_and_the_model_goes_on(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    reply = Reply.sse(wire.answer_events("a long answer " * 20))
    reply.piece, reply.stall_after, reply.stall = 40, len(reply.body) // 2, 30.0  # then silent
    server.add(reply, answer(API, "next"))
    model = make_model(API)
    first = asyncio.Event()

    async def consume() -> None:
        async for part in model.stream(REQUEST):
            if isinstance(part, TextDelta):
                first.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(10):  # a bound for a broken test, not a measurement
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    assert server.finished == []  # the server was still stalling when the call ended
    assert (await model.request(REQUEST)).content == "next"


def test_an_unknown_profile_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_REGION")
    with pytest.raises(UsageError, match="no-such-profile"):
        BedrockModel("m", profile="no-such-profile")


def test_an_unknown_profile_is_a_usage_error_when_the_region_is_known(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # AWS_REGION is set (tests/conftest.py): the profile must be checked all the same, or
    # botocore's ProfileNotFound escapes untyped from the first call.
    with pytest.raises(UsageError, match="no-such-profile"):
        BedrockModel("m", profile="no-such-profile")
    with pytest.raises(UsageError, match="no-such-profile"):
        BedrockModel("m", region="eu-west-1", profile="no-such-profile")
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    with pytest.raises(UsageError, match="no-such-profile"):
        BedrockModel("m")


@pytest.mark.parametrize(
    "options",
    [{"region": "us east 1"}, {"region": "../x"}, {"endpoint_url": "not a url"}],
    ids=["region-with-spaces", "region-a-path", "endpoint-not-a-url"],
)
def test_a_region_or_endpoint_botocore_refuses_is_a_usage_error(options: dict[str, str]) -> None:
    # botocore refuses them only when the first call makes its client, untyped.
    with pytest.raises(UsageError, match="Bedrock"):
        BedrockModel("m", **options)


def test_chat_sync_calls_run_each_in_their_own_loop(server: ProviderServer) -> None:
    server.add(answer(API, "one"), answer(API, "two"))
    agent = Agent(BedrockModel("m", endpoint_url=server.url, cache=None))

    assert agent.chat_sync("First").text == "one"
    assert agent.chat_sync("Second").text == "two"
    assert len(server.received) == 2


@pytest.mark.parametrize(
    "body",
    [
        {**wire.whole_answer("Hi"), "usage": {"inputTokens": "many", "outputTokens": 1}},
        [wire.whole_answer("Hi")],
        {**wire.whole_answer("Hi"), "output": "Hi"},
    ],
    ids=["usage-not-a-number", "body-a-list", "output-a-string"],
)
async def test_a_body_of_the_wrong_shape_is_an_invalid_response(
    body: Any, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    # botocore's parser trips on these (int() of a string, .get() of a list) inside the call.
    server.add(Reply.json(body))

    with pytest.raises(InvalidResponseError, match="malformed response"):
        await make_model(API).request(REQUEST)


async def test_an_emoji_split_between_two_input_pieces_reaches_the_tool_whole(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    # A service slicing UTF-16 strings cuts a toolUse input between the halves of a pair.
    start = {"toolUse": {"toolUseId": "t1", "name": "get_weather"}}
    pieces = ['{"city": "Par\ud83d', '\ude00is"}']
    frames = [
        wire.Frame("messageStart", {"role": "assistant"}),
        wire.Frame("contentBlockStart", {"contentBlockIndex": 0, "start": start}),
        *(
            wire.Frame(
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"toolUse": {"input": piece}}},
            )
            for piece in pieces
        ),
        wire.Frame("contentBlockStop", {"contentBlockIndex": 0}),
        wire.Frame("messageStop", {"stopReason": "tool_use"}),
    ]
    server.add(Reply.sse(frames), answer(API, "Sunny.", stream=True))
    agent, ran = weather_agent(make_model(API))

    async with agent.chat_stream("Weather in Paris?") as stream:
        async for _ in stream:
            pass

    assert ran == ["Par\U0001f600is"]
    assert agent.messages[1].tool_calls[0].arguments == '{"city": "Par\U0001f600is"}'
