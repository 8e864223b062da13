"""What each adapter sends: the JSON the local server received for hookloop conversations.

Then whole agent loops over real HTTP: a tool call answered, its result sent back in the
provider's format, and the final text, for every adapter, quick_client_tls, whole and streamed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hookloop import (
    AssistantMessage,
    ImagePart,
    Message,
    ModelRetry,
    ModelSettings,
    SystemMessage,
    TextDelta,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from hookloop.models import ProviderRequest, ToolDefinition
from tests.models._chats import chat, weather_agent
from tests.models._provider_server import (
    APIS,
    ProviderServer,
    Received,
    answer,
)

WEATHER = ToolDefinition(
    name="get_weather",
    description="Tell the weather in a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
CALL = ToolCall(name="get_weather", arguments='{"city": "Paris"}', id="call_1")
CALL_2 = ToolCall(name="get_weather", arguments='{"city": "Oslo"}', id="call_2")
CONVERSATION: tuple[Message, ...] = (
    UserMessage(content="Weather in Paris?"),
    AssistantMessage(content="", tool_calls=(CALL,)),
    ToolMessage(tool_call_id="call_1", tool_name="get_weather", content="Sunny"),
    AssistantMessage(content="It is sunny."),
    UserMessage(content="Thanks"),
)
IMAGE_MESSAGE = UserMessage(
    content=(
        TextPart(text="What is this?"),
        ImagePart(url="https://example.com/cat.png"),
        ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
    )
)
DATA_URL = "data:image/png;base64,iVBORw0KGgo="
# The APIs whose body the shape tests below compare; Gemini's (contents, generationConfig,
# the model in the path) is compared in test_gemini.py.
BODY_APIS = tuple(api for api in APIS if api != "gemini")


def headers_of(received: Received) -> dict[str, str]:
    return {key.lower(): value for key, value in received.headers.items()}


@pytest.fixture
def sent(server: ProviderServer, make_model: Callable[..., Any]) -> Callable[..., Any]:
    """Sends one request through an adapter; returns the JSON body the server received."""

    async def send(
        api: str,
        messages: tuple[Message, ...],
        *,
        system: str | None = None,
        tools: tuple[ToolDefinition, ...] = (),
        settings: ModelSettings | None = None,
        stream: bool = False,
        **model_kwargs: Any,
    ) -> dict[str, Any]:
        server.add(answer(api, "ok", stream=stream))
        model = make_model(api, **model_kwargs)
        request = ProviderRequest(
            model="m",
            system=system,
            messages=messages,
            tools=tools,
            settings=settings or ModelSettings(),
        )
        if stream:
            async for _ in model.stream(request):
                pass
        else:
            assert (await model.request(request)).content == "ok"
        body: dict[str, Any] = server.received[-1].body
        return body

    return send


# --- the conversation, per adapter ------------------------------------------------------

EXPECTED_CONVERSATION: dict[str, dict[str, Any]] = {
    "chat.completions": {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_1", "content": "Sunny"},
            {"role": "assistant", "content": "It is sunny."},
            {"role": "user", "content": "Thanks"},
        ],
    },
    "messages": {
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": [
                    {
                        "type": "tool_use",
                        "id": "call_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                ],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"}],
            },
            {"role": "assistant", "content": [{"type": "text", "text": "It is sunny."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks"}]},
        ],
    },
    "responses": {
        "instructions": "Be brief.",
        "store": False,
        "input": [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "get_weather",
                "arguments": '{"city": "Paris"}',
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"},
            {"role": "assistant", "content": "It is sunny."},
            {"role": "user", "content": "Thanks"},
        ],
    },
}
EXPECTED_CONVERSATION["bedrock.converse"] = {
    "system": [{"text": "Be brief."}],
    "messages": [
        {"role": "user", "content": [{"text": "Weather in Paris?"}]},
        {
            "role": "assistant",
            "content": [
                {
                    "toolUse": {
                        "toolUseId": "call_1",
                        "name": "get_weather",
                        "input": {"city": "Paris"},
                    }
                }
            ],
        },
        {
            "role": "user",
            "content": [{"toolResult": {"toolUseId": "call_1", "content": [{"text": "Sunny"}]}}],
        },
        {"role": "assistant", "content": [{"text": "It is sunny."}]},
        {"role": "user", "content": [{"text": "Thanks"}]},
    ],
}
# Where the conversation must not be: the other APIs' places for it.
ABSENT = {
    "chat.completions": ("system", "input", "instructions"),
    "messages": ("input", "instructions"),
    "responses": ("messages", "system"),
    "bedrock.converse": ("input", "instructions", "toolConfig"),  # the model is in the path
}


@pytest.mark.parametrize("api", BODY_APIS)
async def test_conversation_with_tool_call_and_result(api: str, sent: Callable[..., Any]) -> None:
    body = await sent(api, CONVERSATION, system="Be brief.")

    expected = EXPECTED_CONVERSATION[api]
    assert {key: body.get(key) for key in expected} == expected
    assert body.get("model") == (None if api == "bedrock.converse" else "m")
    for key in ABSENT[api]:
        assert key not in body
    assert "tools" not in body
    assert "tool_choice" not in body


EXPECTED_IMAGE_CONTENT = {
    "chat.completions": [
        {"type": "text", "text": "What is this?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
        {"type": "image_url", "image_url": {"url": DATA_URL}},
    ],
    "messages": [
        {"type": "text", "text": "What is this?"},
        {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="},
        },
    ],
    "responses": [
        {"type": "input_text", "text": "What is this?"},
        {"type": "input_image", "image_url": "https://example.com/cat.png"},
        {"type": "input_image", "image_url": DATA_URL},
    ],
}


# Bedrock takes an image's bytes (base64 in JSON) or an s3:// location, never a web URL.
BEDROCK_IMAGE_MESSAGE = UserMessage(content=(IMAGE_MESSAGE.content[0], IMAGE_MESSAGE.content[2]))
EXPECTED_IMAGE_CONTENT["bedrock.converse"] = [
    {"text": "What is this?"},
    {"image": {"format": "png", "source": {"bytes": "iVBORw0KGgo="}}},
]


@pytest.mark.parametrize("api", BODY_APIS)
async def test_user_text_and_image_parts(api: str, sent: Callable[..., Any]) -> None:
    body = await sent(api, (BEDROCK_IMAGE_MESSAGE if api == "bedrock.converse" else IMAGE_MESSAGE,))

    [message] = body["input" if api == "responses" else "messages"]
    assert message == {"role": "user", "content": EXPECTED_IMAGE_CONTENT[api]}


EXPECTED_TOOLS = {
    "chat.completions": {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Tell the weather in a city.",
            "parameters": dict(WEATHER.parameters),
        },
    },
    "messages": {
        "name": "get_weather",
        "description": "Tell the weather in a city.",
        "input_schema": dict(WEATHER.parameters),
    },
    "responses": {
        "type": "function",
        "name": "get_weather",
        "description": "Tell the weather in a city.",
        "parameters": dict(WEATHER.parameters),
        "strict": False,
    },
}
TOOL_CHOICES = {
    "chat.completions": {
        "auto": "auto",
        "none": "none",
        "required": "required",
        "get_weather": {"type": "function", "function": {"name": "get_weather"}},
    },
    "messages": {
        "auto": {"type": "auto"},
        "none": {"type": "none"},
        "required": {"type": "any"},
        "get_weather": {"type": "tool", "name": "get_weather"},
    },
    "responses": {
        "auto": "auto",
        "none": "none",
        "required": "required",
        "get_weather": {"type": "function", "name": "get_weather"},
    },
}


EXPECTED_TOOLS["bedrock.converse"] = {
    "toolSpec": {
        "name": "get_weather",
        "description": "Tell the weather in a city.",
        "inputSchema": {"json": dict(WEATHER.parameters)},
    }
}
# Converse's toolConfig.toolChoice; "auto" is its default (no toolChoice), and it has no
# "none": the tools are left out of a conversation without tool blocks.
TOOL_CHOICES["bedrock.converse"] = {
    "auto": None,
    "none": None,
    "required": {"any": {}},
    "get_weather": {"tool": {"name": "get_weather"}},
}


def tools_of(api: str, body: dict[str, Any]) -> tuple[Any, Any]:
    """The tools and the tool choice of a request body."""
    if api == "bedrock.converse":
        config = body.get("toolConfig", {})
        return config.get("tools"), config.get("toolChoice")
    return body["tools"], body["tool_choice"]


@pytest.mark.parametrize("choice", ["auto", "none", "required", "get_weather"])
@pytest.mark.parametrize("api", BODY_APIS)
async def test_tools_and_tool_choice(api: str, choice: str, sent: Callable[..., Any]) -> None:
    settings = ModelSettings(tool_choice=choice)
    body = await sent(api, CONVERSATION[:1], tools=(WEATHER,), settings=settings)

    tools, tool_choice = tools_of(api, body)
    if api == "bedrock.converse" and choice == "none":
        assert tools is None
    else:
        assert tools == [EXPECTED_TOOLS[api]]
    assert tool_choice == TOOL_CHOICES[api][choice]


# The field each API limits the answer's length with (a compatible server for OpenAI).
MAX_TOKENS_FIELD = {
    "chat.completions": "max_tokens",
    "messages": "max_tokens",
    "responses": "max_output_tokens",
}


def settings_of(api: str, body: dict[str, Any]) -> dict[str, Any]:
    """Where a request body carries the sampling settings (Converse: inferenceConfig)."""
    if api == "bedrock.converse":
        inference: dict[str, Any] = body.get("inferenceConfig", {})
        extra = body.get("additionalModelRequestFields", {})
        return {
            "max_tokens": inference.get("maxTokens"),
            "temperature": inference.get("temperature"),
            **extra,
        }
    return body


@pytest.mark.parametrize("api", BODY_APIS)
async def test_max_tokens_and_extra_settings(api: str, sent: Callable[..., Any]) -> None:
    settings = ModelSettings(max_tokens=321, extra={"top_k": 7})
    body = settings_of(api, await sent(api, CONVERSATION[:1], settings=settings))

    assert body[MAX_TOKENS_FIELD.get(api, "max_tokens")] == 321
    assert "max_completion_tokens" not in body  # only api.openai.com wants that name
    # extra settings reach the top level of the body (Bedrock: a model's own fields)
    assert body["top_k"] == 7
    assert "extra_body" not in body


@pytest.mark.parametrize("api", BODY_APIS)
async def test_temperature_is_sent(api: str, sent: Callable[..., Any]) -> None:
    body = await sent(api, CONVERSATION[:1], settings=ModelSettings(temperature=0.25))

    assert settings_of(api, body)["temperature"] == 0.25


@pytest.mark.parametrize("api", BODY_APIS)
async def test_unset_settings_are_not_sent(api: str, sent: Callable[..., Any]) -> None:
    body = await sent(api, CONVERSATION[:1])

    assert "temperature" not in body
    assert "max_completion_tokens" not in body
    if api == "bedrock.converse":
        assert "inferenceConfig" not in body
    elif api == "messages":
        assert body["max_tokens"] == 4096  # Anthropic requires one: the adapter's default
    else:
        assert MAX_TOKENS_FIELD[api] not in body


@pytest.mark.parametrize("api", BODY_APIS)
async def test_streaming_requests(
    api: str, sent: Callable[..., Any], server: ProviderServer
) -> None:
    body = await sent(api, CONVERSATION[:1], stream=True)

    if api == "bedrock.converse":  # another operation, not a flag
        assert server.received[-1].path == "/model/m/converse-stream"
        assert "stream" not in body
        return
    assert body["stream"] is True
    if api == "chat.completions":
        assert body["stream_options"] == {"include_usage": True}
    else:
        assert "stream_options" not in body


@pytest.mark.parametrize("api", BODY_APIS)
async def test_whole_requests_do_not_ask_for_a_stream(
    api: str, sent: Callable[..., Any], server: ProviderServer
) -> None:
    body = await sent(api, CONVERSATION[:1])

    assert server.received[-1].path != "/model/m/converse-stream"
    assert not body.get("stream")
    assert "stream_options" not in body


# --- OpenAI Chat Completions ------------------------------------------------------------


async def test_openai_assistant_content_is_empty_string_beside_tool_calls(
    sent: Callable[..., Any],
) -> None:
    # llama.cpp's server rejects "content": null; a message without calls has no
    # "tool_calls" key at all (some servers reject an empty list).
    messages = (*CONVERSATION[:3], AssistantMessage(content=""), UserMessage(content="Go on"))
    body = await sent("chat.completions", messages)

    with_calls, without_calls = body["messages"][1], body["messages"][3]
    assert with_calls["content"] == ""
    assert len(with_calls["tool_calls"]) == 1
    assert without_calls == {"role": "assistant", "content": ""}


async def test_openai_stream_usage_can_be_turned_off(sent: Callable[..., Any]) -> None:
    body = await sent("chat.completions", CONVERSATION[:1], stream=True, stream_usage=False)

    assert body["stream"] is True
    assert "stream_options" not in body


async def test_openai_system_messages_inside_the_conversation_stay_in_place(
    sent: Callable[..., Any],
) -> None:
    messages = (UserMessage(content="a"), SystemMessage(content="Now be formal."))
    body = await sent("chat.completions", messages, system="Be brief.")

    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "a"},
        {"role": "system", "content": "Now be formal."},
    ]


async def test_openai_calls_the_endpoint_under_the_compatible_servers_root(
    server: ProviderServer, sent: Callable[..., Any]
) -> None:
    await sent("chat.completions", CONVERSATION[:1], prefix="/openai/v1")

    received = server.received[-1]
    assert received.path == "/openai/v1/chat/completions"
    assert headers_of(received)["authorization"] == "Bearer k"


@pytest.mark.parametrize("api", ["chat.completions", "responses"])
async def test_a_compatible_server_needs_no_key(
    api: str, server: ProviderServer, sent: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    await sent(api, CONVERSATION[:1], api_key=None)

    assert headers_of(server.received[-1])["authorization"] == "Bearer not-needed"


# --- Anthropic Messages -----------------------------------------------------------------


async def test_anthropic_merges_consecutive_user_messages(sent: Callable[..., Any]) -> None:
    # A compaction summary followed by a new question are two user messages in a row.
    messages = (UserMessage(content="Summary of earlier turns."), UserMessage(content="Next?"))
    body = await sent("messages", messages)

    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Summary of earlier turns."},
                {"type": "text", "text": "Next?"},
            ],
        }
    ]


async def test_anthropic_puts_tool_results_first_in_their_turn(sent: Callable[..., Any]) -> None:
    messages = (
        UserMessage(content="Paris and Oslo?"),
        AssistantMessage(content="Checking.", tool_calls=(CALL, CALL_2)),
        ToolMessage(tool_call_id="call_1", tool_name="get_weather", content="Sunny"),
        UserMessage(content="Hurry up."),  # arrived while the tools ran
        ToolMessage(tool_call_id="call_2", tool_name="get_weather", content="boom", is_error=True),
    )
    body = await sent("messages", messages)

    assert body["messages"][1] == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "call_2", "name": "get_weather", "input": {"city": "Oslo"}},
        ],
    }
    assert body["messages"][2:] == [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": "boom",
                    "is_error": True,
                },
                {"type": "text", "text": "Hurry up."},
            ],
        }
    ]


async def test_anthropic_leaves_out_an_empty_assistant_message(sent: Callable[..., Any]) -> None:
    messages = (UserMessage(content="a"), AssistantMessage(content=""), UserMessage(content="b"))
    body = await sent("messages", messages)

    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    ]


async def test_anthropic_system_messages_join_the_system_prompt(sent: Callable[..., Any]) -> None:
    messages = (UserMessage(content="a"), SystemMessage(content="Now be formal."))
    body = await sent("messages", messages, system="Be brief.")

    assert body["system"] == "Be brief.\n\nNow be formal."
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "a"}]}]


async def test_anthropic_request_path_and_auth(
    server: ProviderServer, sent: Callable[..., Any]
) -> None:
    await sent("messages", CONVERSATION[:1])

    received = server.received[-1]
    assert received.path == "/v1/messages"
    headers = headers_of(received)
    # anthropic 2.x sends the key as a bearer token; older clients as x-api-key
    assert "k" in (
        headers.get("x-api-key"),
        headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert "anthropic-version" in headers_of(received)


# --- OpenAI Responses -------------------------------------------------------------------


async def test_responses_system_messages_inside_the_conversation_are_developer_items(
    sent: Callable[..., Any],
) -> None:
    messages = (UserMessage(content="a"), SystemMessage(content="Now be formal."))
    body = await sent("responses", messages, system="Be brief.")

    assert body["instructions"] == "Be brief."
    assert body["input"] == [
        {"role": "user", "content": "a"},
        {"role": "developer", "content": "Now be formal."},
    ]


async def test_responses_assistant_text_and_calls_are_separate_items(
    sent: Callable[..., Any],
) -> None:
    messages = (UserMessage(content="q"), AssistantMessage(content="Checking.", tool_calls=(CALL,)))
    body = await sent("responses", messages)

    assert body["input"][1:] == [
        {"role": "assistant", "content": "Checking."},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
    ]


async def test_responses_can_let_openai_store_the_response(sent: Callable[..., Any]) -> None:
    body = await sent("responses", CONVERSATION[:1], store=True)

    assert body["store"] is True


# --- whole agent loops ------------------------------------------------------------------

# How the second request must carry the call and its result.
EXPECTED_EXCHANGE = {
    "chat.completions": [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "Sunny in Paris"},
    ],
    "messages": [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "get_weather",
                    "input": {"city": "Paris"},
                }
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "Sunny in Paris"}
            ],
        },
    ],
    "responses": [
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "Sunny in Paris"},
    ],
    "gemini": [
        {
            "parts": [
                {
                    "functionCall": {
                        "id": "call_1",
                        "name": "get_weather",
                        "args": {"city": "Paris"},
                    },
                    # the signature Google documents for a call whose own is not known
                    "thoughtSignature": "c2tpcF90aG91Z2h0X3NpZ25hdHVyZV92YWxpZGF0b3I=",
                }
            ],
            "role": "model",
        },
        {
            "parts": [
                {
                    "functionResponse": {
                        "id": "call_1",
                        "name": "get_weather",
                        "response": {"output": "Sunny in Paris"},
                    }
                }
            ],
            "role": "user",
        },
    ],
}


EXPECTED_EXCHANGE["bedrock.converse"] = [
    {
        "role": "assistant",
        "content": [
            {"toolUse": {"toolUseId": "call_1", "name": "get_weather", "input": {"city": "Paris"}}}
        ],
    },
    {
        "role": "user",
        "content": [
            {"toolResult": {"toolUseId": "call_1", "content": [{"text": "Sunny in Paris"}]}}
        ],
    },
]


def conversation_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The conversation items of a request body, whatever the API."""
    items: list[dict[str, Any]] = body.get("input") or body.get("contents") or body["messages"]
    return items


def tool_names(body: dict[str, Any]) -> list[str]:
    """The names of the tools a request body declares, whatever the API."""
    if "tools" in body.get("toolConfig", {}):  # Bedrock (Gemini's toolConfig has none)
        return [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"]]
    if "functionDeclarations" in body["tools"][0]:  # Gemini
        return [d["name"] for t in body["tools"] for d in t["functionDeclarations"]]
    return [t.get("name") or t.get("function", {}).get("name") for t in body["tools"]]


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
@pytest.mark.parametrize("api", APIS)
async def test_agent_runs_a_tool_and_answers(
    api: str, stream: bool, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(
        answer(api, "", (("call_1", "get_weather", '{"city": "Paris"}'),), stream=stream),
        answer(api, "It is sunny in Paris.", stream=stream, usage=(40, 9)),
    )
    agent, ran = weather_agent(make_model(api))

    response, events = await chat(agent, "Weather in Paris?", stream=stream)

    assert response.text == "It is sunny in Paris."
    assert response.iterations == 2
    assert response.finish_reason == "stop"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11 + 40, 7 + 9)
    assert ran == ["Paris"]
    first, second = (received.body for received in server.received)
    assert tool_names(first) == ["get_weather"]
    assert conversation_of(second)[-2:] == EXPECTED_EXCHANGE[api]
    assert conversation_of(second)[:-2] == conversation_of(first)
    if stream:
        deltas = [event.text for event in events if isinstance(event, TextDelta)]
        assert "".join(deltas) == "It is sunny in Paris."
        assert len(deltas) > 1  # the text arrived in pieces, as it streamed
        assert not any(isinstance(event, ModelRetry) for event in events)
