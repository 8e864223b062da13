"""Prompt caching on the wire: what each adapter sends so a provider's cache serves the prefix,
and the cache reads and writes the provider reports, whole and streamed.

Anthropic's requests carry ``cache_control`` breakpoints on their stable prefix (at most four);
OpenAI's carry a ``prompt_cache_key`` made from the agent's session id. The official clients
talk to the local provider server; the bodies it received are checked.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AssistantMessage,
    ModelSettings,
    ToolCall,
    ToolMessage,
    Usage,
    UsageError,
    UserMessage,
)
from hookloop.models import AnthropicModel, OpenAIModel, OpenAIResponsesModel, ProviderRequest
from hookloop.models._anthropic import MAX_BREAKPOINTS, anthropic_messages, cache_breakpoints
from hookloop.models._client import hashed_cache_key
from tests.models._chats import chat, weather_agent
from tests.models._provider_server import (
    ProviderServer,
    Reply,
    answer,
    answer_events,
    whole_answer,
)

FIVE = {"type": "ephemeral", "ttl": "5m"}


def marked(body: Any) -> Iterator[tuple[str, Any]]:
    """Every ``cache_control`` in a request body, with where it is (a JSON path)."""

    def walk(value: Any, path: str) -> Iterator[tuple[str, Any]]:
        if isinstance(value, dict):
            for key, item in value.items():
                if key == "cache_control":
                    yield path, item
                else:
                    yield from walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                yield from walk(item, f"{path}[{index}]")

    yield from walk(body, "")


def anthropic(server: ProviderServer, **kwargs: Any) -> AnthropicModel:
    return AnthropicModel("m", base_url=server.url, api_key="k", timeout=10, **kwargs)


# --- Anthropic: breakpoints -------------------------------------------------------------------


async def test_an_agents_requests_mark_tools_system_and_the_last_two_ends_by_default(
    server: ProviderServer,
) -> None:
    """The default (``"5m"``) marks the last tool, the system prompt, where the previous call
    ended and the whole request: four breakpoints, on the second call of a tool loop."""
    server.add(
        answer("messages", calls=(("toolu_1", "get_weather", '{"city": "Paris"}'),)),
        answer("messages", "Sunny."),
    )
    model = anthropic(server)
    agent, _ = weather_agent(model)
    try:
        await agent.chat("Weather in Paris?")
    finally:
        await model.aclose()

    first, second = (r.body for r in server.received)
    assert dict(marked(first)) == {
        ".tools[0]": FIVE,
        ".system[0]": FIVE,
        ".messages[0].content[0]": FIVE,
    }
    assert first["system"] == [{"type": "text", "text": "Be brief.", "cache_control": FIVE}]
    # user question, assistant tool call, user tool result: the question ended the first call.
    assert [turn["role"] for turn in second["messages"]] == ["user", "assistant", "user"]
    assert dict(marked(second)) == {
        ".tools[0]": FIVE,
        ".system[0]": FIVE,
        ".messages[0].content[0]": FIVE,
        ".messages[2].content[0]": FIVE,
    }
    assert second["messages"][2]["content"][0]["type"] == "tool_result"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_one_hour_cache_says_so_on_every_breakpoint(
    server: ProviderServer, stream: bool
) -> None:
    server.add(answer("messages", "Hi.", stream=stream))
    model = anthropic(server, cache="1h")
    agent, _ = weather_agent(model)
    try:
        await chat(agent, "Hello", stream=stream)
    finally:
        await model.aclose()

    controls = [control for _, control in marked(server.received[0].body)]
    assert controls == [{"type": "ephemeral", "ttl": "1h"}] * 3


async def test_without_caching_nothing_is_marked_and_the_system_prompt_is_text(
    server: ProviderServer,
) -> None:
    server.add(answer("messages", "Hi."))
    model = anthropic(server, cache=None)
    agent, _ = weather_agent(model)
    try:
        await agent.chat("Hello")
    finally:
        await model.aclose()

    body = server.received[0].body
    assert list(marked(body)) == []
    assert body["system"] == "Be brief."


def test_the_cache_setting_is_checked() -> None:
    with pytest.raises(UsageError, match="cache must be '5m', '1h' or None"):
        AnthropicModel("m", base_url="http://127.0.0.1:9", api_key="k", cache="10m")  # type: ignore[arg-type]


def conversations() -> st.SearchStrategy[list[Any]]:
    """Valid conversations: questions, answers, and tool calls (up to 12 at once) with results."""

    def turn(kind: int, calls: int, size: int) -> list[Any]:
        if kind == 0:
            return [UserMessage(content="q" * size)]
        if kind == 1:
            return [AssistantMessage(content="a" * size)]
        made = [ToolCall(name="f", arguments="{}", id=f"c{i}") for i in range(calls)]
        results = [ToolMessage(tool_call_id=c.id, tool_name="f", content="r" * size) for c in made]
        return [AssistantMessage(content="", tool_calls=tuple(made)), *results]

    one = st.builds(turn, st.integers(0, 2), st.integers(1, 12), st.integers(1, 5))
    return st.lists(one, min_size=1, max_size=20).map(
        lambda turns: [UserMessage(content="start")] + [m for t in turns for m in t]
    )


@given(
    conversation=conversations(),
    tools=st.booleans(),
    system=st.booleans(),
    ttl=st.sampled_from(["5m", "1h"]),
)
def test_at_most_four_breakpoints_and_the_whole_request_is_always_one(
    conversation: list[Any], tools: bool, system: bool, ttl: Any
) -> None:
    body: dict[str, Any] = {"messages": anthropic_messages(tuple(conversation))}
    if tools:
        body["tools"] = [{"name": "f", "description": "", "input_schema": {}}]
    if system:
        body["system"] = "Be brief."

    placed = cache_breakpoints(body, ttl)

    found = list(marked(body))
    assert placed == len(found) <= MAX_BREAKPOINTS
    last = body["messages"][-1]["content"][-1]
    assert last["cache_control"] == {"type": "ephemeral", "ttl": ttl}
    if len(body["messages"]) >= 3:  # where the call before the newest answer ended
        assert "cache_control" in body["messages"][-3]["content"][-1]
    assert (".tools[0]" in dict(found)) == tools
    assert (".system[0]" in dict(found)) == system


# --- Anthropic: cache reads and writes in Usage -----------------------------------------------


async def test_anthropic_cache_writes_and_reads_land_in_usage(server: ProviderServer) -> None:
    body = whole_answer("messages", "ok", usage=(12, 5))
    body["usage"]["cache_creation_input_tokens"] = 2_000
    body["usage"]["cache_read_input_tokens"] = 30_000
    server.add(Reply.json(body))
    model = anthropic(server)
    try:
        response = await model.request(
            ProviderRequest(model="m", system="s", messages=(UserMessage(content="hi"),))
        )
    finally:
        await model.aclose()

    assert response.usage == Usage(
        input_tokens=32_012, output_tokens=5, cached_input_tokens=30_000, cache_write_tokens=2_000
    )


async def test_anthropic_streamed_usage_keeps_cache_writes_and_reads(
    server: ProviderServer,
) -> None:
    events = answer_events("messages", "ok", usage=(12, 5))
    start = events[0][1]["message"]["usage"]
    start.update(cache_creation_input_tokens=2_000, cache_read_input_tokens=30_000)
    server.add(Reply.sse(events, done=False))
    model = anthropic(server)
    agent = Agent(model, retry=None)
    try:
        response, _ = await chat(agent, "hi", stream=True)
    finally:
        await model.aclose()

    assert response.usage == Usage(
        input_tokens=32_012, output_tokens=5, cached_input_tokens=30_000, cache_write_tokens=2_000
    )


# --- OpenAI: prompt_cache_key from the session ----------------------------------------------


OPENAI_APIS: dict[str, Callable[..., Any]] = {
    "chat.completions": lambda server, **kw: OpenAIModel(
        "m", base_url=server.url + "/v1", api_key="k", timeout=10, **kw
    ),
    "responses": lambda server, **kw: OpenAIResponsesModel(
        "m", base_url=server.url + "/v1", api_key="k", timeout=10, **kw
    ),
}


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("api", list(OPENAI_APIS))
async def test_openai_requests_carry_the_sessions_cache_key(
    server: ProviderServer, api: str, stream: bool
) -> None:
    """Every request of a session carries one key, the session id hashed; another session
    gets another key."""
    server.add(
        answer(api, calls=(("call_1", "get_weather", '{"city": "Paris"}'),), stream=stream),
        answer(api, "Sunny.", stream=stream),
        answer(api, "Hi again.", stream=stream),
    )
    model = OPENAI_APIS[api](server, prompt_cache_key=True)
    agent, _ = weather_agent(model)
    try:
        await chat(agent, "Weather in Paris?", stream=stream)
        first_session = agent.session_id
        await agent.switch_session("another")
        await chat(agent, "Hello", stream=stream)
    finally:
        await model.aclose()

    keys = [r.body["prompt_cache_key"] for r in server.received]
    expected = hashed_cache_key(first_session)
    assert keys == [expected, expected, hashed_cache_key("another")]
    assert expected != hashed_cache_key("another")
    assert first_session not in json.dumps(server.received[0].body)  # only its digest is sent


@pytest.mark.parametrize("api", list(OPENAI_APIS))
async def test_a_compatible_server_gets_no_cache_key_unless_asked(
    server: ProviderServer, api: str
) -> None:
    server.add(answer(api, "Hi."))
    model = OPENAI_APIS[api](server)
    agent = Agent(model, retry=None)
    try:
        await agent.chat("Hello")
    finally:
        await model.aclose()

    assert model.prompt_cache_key is False
    assert "prompt_cache_key" not in server.received[0].body


@pytest.mark.parametrize("api", list(OPENAI_APIS))
async def test_a_key_named_in_the_settings_is_shared_by_every_session(
    server: ProviderServer, api: str
) -> None:
    server.add(answer(api, "Hi."), answer(api, "Hi again."))
    model = OPENAI_APIS[api](server, prompt_cache_key=True)
    agent = Agent(model, retry=None, settings=ModelSettings(cache_key="tenant-7"))
    try:
        await agent.chat("Hello")
        await agent.switch_session("another")
        await agent.chat("Hello")
    finally:
        await model.aclose()

    keys = [r.body["prompt_cache_key"] for r in server.received]
    assert keys == [hashed_cache_key("tenant-7")] * 2
    assert agent.settings == ModelSettings(cache_key="tenant-7")  # the agent's, untouched


@pytest.mark.parametrize("api", list(OPENAI_APIS))
async def test_a_prompt_cache_key_in_the_extra_settings_wins(
    server: ProviderServer, api: str
) -> None:
    server.add(answer(api, "Hi."))
    model = OPENAI_APIS[api](server, prompt_cache_key=True)
    settings = ModelSettings(extra={"prompt_cache_key": "tenant-7"})
    agent = Agent(model, retry=None, settings=settings)
    try:
        await agent.chat("Hello")
    finally:
        await model.aclose()

    assert server.received[0].body["prompt_cache_key"] == "tenant-7"


def test_openais_own_api_gets_the_cache_key_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIModel("gpt-4o", api_key="k").prompt_cache_key is True
    assert OpenAIResponsesModel("gpt-4o", api_key="k").prompt_cache_key is True
    assert OpenAIModel("gpt-4o", api_key="k", prompt_cache_key=False).prompt_cache_key is False


@pytest.mark.parametrize("api", list(OPENAI_APIS))
async def test_openai_streamed_usage_keeps_cached_tokens(server: ProviderServer, api: str) -> None:
    events = answer_events(api, "ok", usage=(1_000, 5))
    if api == "chat.completions":
        events[-1]["usage"]["prompt_tokens_details"] = {"cached_tokens": 768}
    else:
        events[-1][1]["response"]["usage"]["input_tokens_details"] = {"cached_tokens": 768}
    server.add(Reply.sse(events, done=api == "chat.completions"))
    model = OPENAI_APIS[api](server)
    agent = Agent(model, retry=None)
    try:
        response, _ = await chat(agent, "hi", stream=True)
    finally:
        await model.aclose()

    assert response.usage == Usage(input_tokens=1_000, output_tokens=5, cached_input_tokens=768)
