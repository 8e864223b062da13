"""Provider edge cases over real HTTP: a body that is not UTF-8, text that UTF-8 cannot
carry, a server that drips or falls silent, and which key goes to which host.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AssistantMessage,
    InvalidResponseError,
    ProviderTimeoutError,
    TextDelta,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
)
from hookloop.models import (
    AnthropicModel,
    OpenAIModel,
    OpenAIResponsesModel,
    ProviderRequest,
    model_from_spec,
)
from hookloop.models._client import SplitPairs, encodable, is_host
from hookloop.models._spec import ModelSpecError
from tests.models._chats import weather_agent
from tests.models._provider_server import (
    APIS,
    ProviderServer,
    Received,
    Reply,
    answer,
    answer_events,
    whole_answer,
)

REQUEST = ProviderRequest(model="m", system=None, messages=(UserMessage(content="Hello"),))
KEY_VARIABLES = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "HOOKLOOP_API_KEY",
)


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for variable in KEY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    return monkeypatch


def headers_of(received: Received) -> dict[str, str]:
    return {key.lower(): value for key, value in received.headers.items()}


# --- a 200 body that is not UTF-8 --------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_a_body_that_is_not_utf8_is_an_invalid_response(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    body = json.dumps(whole_answer(api, "MARK", usage=(1, 1))).encode()
    server.add(Reply(body=body.replace(b"MARK", b"caf\xe9 \xff"), headers=JSON))

    with pytest.raises(InvalidResponseError, match="not valid UTF-8") as caught:
        await make_model(api).request(REQUEST)

    assert caught.value.model == "m"
    assert isinstance(caught.value.__cause__, UnicodeDecodeError)


JSON = {"content-type": "application/json"}


# --- text that UTF-8 cannot carry --------------------------------------------------------

# An emoji whose UTF-16 halves arrive in two stream chunks ("\ud83d" then "\ude00" as JSON
# escapes: answer_events splits the text every 4 characters), as a server that slices UTF-16
# strings sends it.
SPLIT_EMOJI = "abc\ud83d\ude00d"


@pytest.mark.parametrize("api", APIS)
async def test_a_split_emoji_streams_whole(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    events = answer_events(api, SPLIT_EMOJI + " and half \ud83d")
    server.add(Reply.sse(events, done=api == "chat.completions"))
    agent = Agent(make_model(api))
    async with agent.chat_stream("Smile") as stream:
        texts = [event.text async for event in stream if isinstance(event, TextDelta)]
    assert stream.response is not None

    assert stream.response.text == "abc\U0001f600d and half \ufffd"
    assert "".join(texts) == stream.response.text
    for text in texts:
        text.encode("utf-8")  # each piece can be printed as it comes


@pytest.mark.parametrize("api", APIS)
async def test_an_emoji_split_in_streamed_tool_arguments_reaches_the_tool_whole(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    # The arguments stream in pieces of 4 characters (Gemini's whole): the pair's halves,
    # at 11 and 12, land in two pieces.
    arguments = '{"city":  "\ud83d\ude00"}'
    server.add(
        Reply.sse(
            answer_events(api, "", (("call_1", "get_weather", arguments),)),
            done=api == "chat.completions",
        ),
        answer(api, "Sunny.", stream=True),
    )
    agent, ran = weather_agent(make_model(api))
    async with agent.chat_stream("Weather?") as stream:
        async for _ in stream:
            pass
    assert ran == ["\U0001f600"]
    stored = agent.messages[1].tool_calls[0].arguments  # (Gemini writes its object anew)
    assert json.loads(stored.encode("utf-8")) == {"city": "\U0001f600"}


@pytest.mark.parametrize("api", APIS)
async def test_a_lone_surrogate_in_the_history_does_not_break_the_next_chat(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(answer(api, "half \ud83d"), answer(api, "fine"))
    agent = Agent(make_model(api))
    assert (await agent.chat("Smile")).text == "half \ud83d"  # a whole answer, as it came

    assert (await agent.chat("Again")).text == "fine"

    assert "half \ufffd" in json.dumps(server.received[-1].body, ensure_ascii=False)


SURROGATE_ESCAPED = "report-\udcff.txt"  # os.listdir() of a name that is not UTF-8


@pytest.mark.parametrize("api", APIS)
async def test_surrogate_escapes_are_sent_as_replacement_characters(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    call = ToolCall(name="ls", arguments=f'{{"dir": "{SURROGATE_ESCAPED}"}}', id="call_1")
    messages = (
        UserMessage(content="List the files"),
        AssistantMessage(content="", tool_calls=(call,)),
        ToolMessage(tool_call_id="call_1", tool_name="ls", content=SURROGATE_ESCAPED),
    )
    server.add(answer(api, "ok"))

    response = await make_model(api).request(
        ProviderRequest(model="m", system="Files: \ud800", messages=messages)
    )

    assert response.content == "ok"
    sent = json.dumps(server.received[-1].body, ensure_ascii=False)
    assert sent.count("report-\ufffd.txt") == 2  # the call's arguments and the result
    assert "Files: \ufffd" in sent
    assert "\\ud" not in sent


def split_pairs(text: str) -> str:
    """``text`` with every character beyond the BMP written as its two surrogate halves."""
    return "".join(
        chr(0xD800 + ((ord(c) - 0x10000) >> 10)) + chr(0xDC00 + ((ord(c) - 0x10000) & 0x3FF))
        if ord(c) > 0xFFFF
        else c
        for c in text
    )


@given(st.text())
def test_encodable_text_is_utf8_and_unchanged_when_it_already_was(text: str) -> None:
    fixed = encodable(text)
    fixed.encode("utf-8")  # never raises
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        assert len(fixed) <= len(text)
    else:
        assert fixed is text


@given(st.text(st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF), min_size=1))
def test_encodable_joins_split_surrogate_pairs(text: str) -> None:
    split = split_pairs(text)
    assert split != text
    assert encodable({"k": [split, (split,)]}) == {"k": [text, [text]]}


@given(st.text(), st.lists(st.integers(min_value=0), max_size=8))
def test_a_stream_split_anywhere_in_utf16_comes_out_whole(text: str, cuts: list[int]) -> None:
    units = split_pairs(text)
    bounds = sorted({0, len(units), *(cut % (len(units) + 1) for cut in cuts)})
    pairs = SplitPairs()
    out = [pairs.text(units[a:b]) for a, b in itertools.pairwise(bounds)]
    out.append(pairs.rest())

    assert "".join(out) == encodable(text)
    for piece in out:
        piece.encode("utf-8")


# --- timeout bounds the whole call; stream_idle_timeout each silence ----------------------

# A server that sends a byte every 0.05 s: about 40 s for a whole answer, and never silent
# for long enough to trip a per-read timeout.
DRIP = {"piece": 2, "drip": 0.05}
LONG_TEXT = "dripping " * 80


@pytest.mark.parametrize("api", APIS)
async def test_timeout_bounds_a_whole_answer_that_drips(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(Reply.json(whole_answer(api, LONG_TEXT, usage=(1, 1)), **DRIP))

    with pytest.raises(ProviderTimeoutError, match=r"within 0.5s \(timeout\)"):
        await make_model(api, timeout=0.5).request(REQUEST)

    assert server.finished == []  # it ended long before the server would have


@pytest.mark.parametrize("api", APIS)
async def test_timeout_bounds_a_whole_stream_that_drips(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    events = answer_events(api, LONG_TEXT)
    server.add(Reply.sse(events, done=api == "chat.completions", **DRIP))
    parts = []

    with pytest.raises(ProviderTimeoutError, match=r"within 0.5s \(timeout\)"):
        async for part in make_model(api, timeout=0.5).stream(REQUEST):
            parts.append(part)

    assert server.finished == []


@pytest.mark.parametrize("api", APIS)
async def test_stream_idle_timeout_bounds_a_silence(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    reply = Reply.sse(answer_events(api, "a long answer " * 20), done=api == "chat.completions")
    reply.piece, reply.stall_after, reply.stall = 40, len(reply.body) // 2, 30.0
    server.add(reply)
    texts = []

    with pytest.raises(ProviderTimeoutError, match=r"sent nothing for 3s"):
        async for part in make_model(api, timeout=60, stream_idle_timeout=3).stream(REQUEST):
            texts.append(getattr(part, "text", ""))

    assert "".join(texts).startswith("a long")  # what came before the silence was passed on
    assert server.finished == []


@pytest.mark.parametrize("api", APIS)
async def test_a_stream_that_keeps_coming_is_not_idle(
    api: str, server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(answer(api, "steady", stream=True, drip=0.01))
    parts = [part async for part in make_model(api, stream_idle_timeout=30).stream(REQUEST)]

    assert "".join(getattr(part, "text", "") for part in parts) == "steady"


@pytest.mark.parametrize("cls", [OpenAIModel, OpenAIResponsesModel, AnthropicModel])
@pytest.mark.parametrize("options", [{"timeout": 0}, {"stream_idle_timeout": -1.0}])
def test_a_timeout_that_is_not_positive_is_a_usage_error(
    cls: type[Any], options: dict[str, float]
) -> None:
    with pytest.raises(UsageError, match="must be a positive number of seconds"):
        cls("m", base_url="http://127.0.0.1:9/v1", api_key="k", **options)


# --- which key goes where ----------------------------------------------------------------


@pytest.mark.parametrize("api", ["chat.completions", "responses"])
async def test_openai_key_never_goes_to_another_server(
    api: str, server: ProviderServer, make_model: Callable[..., Any], no_keys: pytest.MonkeyPatch
) -> None:
    no_keys.setenv("OPENAI_API_KEY", "sk-openai-secret")
    no_keys.setenv("OPENAI_ORG_ID", "org-mine")
    no_keys.setenv("OPENAI_PROJECT_ID", "proj_mine")
    server.add(answer(api, "ok"))
    await make_model(api, api_key=None).request(REQUEST)

    headers = headers_of(server.received[-1])
    assert headers["authorization"] == "Bearer not-needed"
    assert "mine" not in str(headers)  # nor OpenAI's account ids


async def test_openai_key_never_goes_to_a_server_named_by_openai_base_url(
    server: ProviderServer, no_keys: pytest.MonkeyPatch
) -> None:
    no_keys.setenv("OPENAI_API_KEY", "sk-openai-secret")
    no_keys.setenv("OPENAI_BASE_URL", server.url + "/v1")
    server.add(answer("chat.completions", "ok"))
    model = OpenAIModel("m")
    await model.request(REQUEST)
    await model.aclose()

    assert headers_of(server.received[-1])["authorization"] == "Bearer not-needed"


@pytest.mark.parametrize("api", ["chat.completions", "responses"])
async def test_a_compatible_server_gets_hookloop_api_key_or_the_key_given(
    api: str, server: ProviderServer, make_model: Callable[..., Any], no_keys: pytest.MonkeyPatch
) -> None:
    no_keys.setenv("OPENAI_API_KEY", "sk-openai-secret")
    no_keys.setenv("HOOKLOOP_API_KEY", "gsk-for-this-server")
    server.add(answer(api, "ok"), answer(api, "ok"))
    await make_model(api, api_key=None).request(REQUEST)
    await make_model(api, api_key="given").request(REQUEST)

    assert [headers_of(r)["authorization"] for r in server.received] == [
        "Bearer gsk-for-this-server",
        "Bearer given",
    ]


async def test_anthropic_credentials_never_go_to_another_server(
    server: ProviderServer, make_model: Callable[..., Any], no_keys: pytest.MonkeyPatch
) -> None:
    no_keys.setenv("ANTHROPIC_API_KEY", "sk-ant-secret")
    no_keys.setenv("ANTHROPIC_AUTH_TOKEN", "sk-ant-token")
    server.add(answer("messages", "ok"), answer("messages", "ok"))
    await make_model("messages", api_key=None).request(REQUEST)
    no_keys.setenv("HOOKLOOP_API_KEY", "gateway-key")
    await make_model("messages", api_key=None).request(REQUEST)

    sent = [
        (headers_of(r).get("authorization"), headers_of(r).get("x-api-key"))
        for r in server.received
    ]
    # anthropic 2.x sends the key as a bearer token
    assert sent == [("Bearer not-needed", None), ("Bearer gateway-key", None)]


def test_the_providers_own_hosts_get_their_own_keys(no_keys: pytest.MonkeyPatch) -> None:
    no_keys.setenv("OPENAI_API_KEY", "sk-openai")
    no_keys.setenv("ANTHROPIC_API_KEY", "sk-ant")
    no_keys.setenv("HOOKLOOP_API_KEY", "not-for-them")
    # The official clients' own attribute: what they put in the auth header.
    no_keys.setenv("OPENAI_ORG_ID", "org-mine")
    openai_own = OpenAIModel("gpt-4o")._clients.first
    assert (openai_own.api_key, openai_own.organization) == ("sk-openai", "org-mine")
    assert openai_own.default_headers["OpenAI-Organization"] == "org-mine"
    assert OpenAIResponsesModel("gpt-5")._clients.first.api_key == "sk-openai"
    explicit = OpenAIModel("gpt-4o", base_url="https://api.openai.com/v1")
    assert explicit._clients.first.api_key == "sk-openai"
    assert AnthropicModel("claude-sonnet-4-5")._clients.first.api_key == "sk-ant"
    # Plain HTTP, or another port, is not OpenAI's API even under its name.
    spoof = OpenAIModel("gpt-4o", base_url="http://api.openai.com/v1")
    assert spoof._clients.first.api_key == "not-for-them"


@pytest.mark.parametrize(
    ("url", "own"),
    [
        ("https://api.openai.com/v1", True),
        ("https://API.OpenAI.com:443/v1", True),
        ("http://api.openai.com/v1", False),  # the key would travel in clear text
        ("https://api.openai.com:8443/v1", False),
        ("https://api.openai.com.example.net/v1", False),
        ("https://example.net/api.openai.com/v1", False),
        ("https://api.openai.com:port/v1", False),
    ],
)
def test_only_https_on_the_providers_own_host_is_the_provider(url: str, own: bool) -> None:
    assert is_host(url, "api.openai.com") is own


def test_model_spec_urls_take_a_key_only_when_named(no_keys: pytest.MonkeyPatch) -> None:
    no_keys.setenv("OPENAI_API_KEY", "sk-openai-secret")
    no_keys.setenv("GROQ_API_KEY", "gsk-groq")
    url = "https://api.groq.com/openai/v1#llama-3.3-70b"

    assert model_from_spec(url)._clients.first.api_key == "not-needed"  # type: ignore[attr-defined]
    named = model_from_spec(url, api_key_env="GROQ_API_KEY")
    assert named._clients.first.api_key == "gsk-groq"  # type: ignore[attr-defined]
    given_key = model_from_spec(url, api_key="k2")
    assert given_key._clients.first.api_key == "k2"  # type: ignore[attr-defined]
    with pytest.raises(ModelSpecError, match="MISSING_KEY is not set"):
        model_from_spec(url, api_key_env="MISSING_KEY")
    with pytest.raises(ModelSpecError, match="either"):
        model_from_spec(url, api_key="k2", api_key_env="GROQ_API_KEY")
