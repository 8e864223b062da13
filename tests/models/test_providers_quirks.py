"""Provider behaviour a review found over real HTTP: refusals, errors in 200 answers, Ollama's
parallel calls, streams left early, one model across event loops, missing keys."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import pytest

from hookloop import (
    Agent,
    ProviderConnectionError,
    RateLimitError,
    ServerError,
    TextDelta,
    UsageError,
    UserMessage,
)
from hookloop.models import (
    AnthropicModel,
    OpenAIModel,
    ProviderRequest,
    ProviderResponse,
    ResponseAccumulator,
)
from hookloop.retry import DefaultRetryStrategy
from tests.models._provider_server import (
    _CHUNK,
    ProviderServer,
    Reply,
    adapter,
    answer,
    answer_events,
    whole_answer,
)

REQUEST = ProviderRequest(model="m", system=None, messages=(UserMessage(content="hi"),))


def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {**_CHUNK, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


async def streamed(model: Any) -> ProviderResponse:
    accumulator = ResponseAccumulator()
    async for part in model.stream(REQUEST):
        accumulator.add(part)
    await model.aclose()
    return accumulator.response()


async def whole(model: Any) -> ProviderResponse:
    try:
        return await model.request(REQUEST)  # type: ignore[no-any-return]
    finally:
        await model.aclose()


async def test_ollama_parallel_calls_sharing_index_0_stay_apart(server: ProviderServer) -> None:
    def call(call_id: str, path: str) -> dict[str, Any]:
        arguments = f'{{"path": "{path}"}}'
        function = {"name": "write", "arguments": arguments}
        return {"id": call_id, "index": 0, "type": "function", "function": function}

    server.add(
        Reply.sse(
            [
                chunk({"role": "assistant", "content": "", "tool_calls": [call("a", "x.py")]}),
                chunk({"role": "assistant", "content": "", "tool_calls": [call("b", "y.py")]}),
                chunk({}, "tool_calls"),
            ]
        )
    )
    response = await streamed(adapter("chat.completions", server))
    assert [(c.id, c.arguments) for c in response.tool_calls] == [
        ("a", '{"path": "x.py"}'),
        ("b", '{"path": "y.py"}'),
    ]


async def test_argument_pieces_without_ids_still_join_their_call(server: ProviderServer) -> None:
    first = {"id": "a", "index": 0, "type": "function", "function": {"name": "f", "arguments": ""}}
    piece = {"index": 0, "function": {"arguments": '{"q": 1}'}}
    server.add(
        Reply.sse(
            [
                chunk({"tool_calls": [first]}),
                chunk({"tool_calls": [piece]}),
                chunk({}, "tool_calls"),
            ]
        )
    )
    response = await streamed(adapter("chat.completions", server))
    assert [(c.id, c.arguments) for c in response.tool_calls] == [("a", '{"q": 1}')]


async def test_a_chat_completions_refusal_is_the_text_and_a_content_filter(
    server: ProviderServer,
) -> None:
    body = whole_answer("chat.completions", usage=(5, 5))
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": "No."}
    server.add(Reply.json(body))
    response = await whole(adapter("chat.completions", server))
    assert (response.content, response.finish_reason) == ("No.", "content_filter")

    server.add(
        Reply.sse(
            [
                chunk({"role": "assistant", "refusal": ""}),
                chunk({"refusal": "No."}),
                chunk({}, "stop"),
            ]
        )
    )
    response = await streamed(adapter("chat.completions", server))
    assert (response.content, response.finish_reason) == ("No.", "content_filter")


async def test_a_responses_refusal_is_the_text_and_a_content_filter(server: ProviderServer) -> None:
    body = whole_answer("responses", "x", usage=(5, 5))
    body["output"][0]["content"] = [{"type": "refusal", "refusal": "No."}]
    server.add(Reply.json(body))
    response = await whole(adapter("responses", server))
    assert (response.content, response.finish_reason) == ("No.", "content_filter")


@pytest.mark.parametrize(
    ("code", "expected"), [(429, RateLimitError), (502, ServerError)], ids=["429", "502"]
)
async def test_an_openrouter_error_inside_a_200_stream_is_classified_by_its_code(
    server: ProviderServer, code: int, expected: type[Exception]
) -> None:
    error = {"error": {"code": code, "message": "upstream failed"}}
    server.add(Reply.sse([chunk({"content": "Hel"}), error], done=False))
    with pytest.raises(expected) as raised:
        await streamed(adapter("chat.completions", server))
    assert raised.value.status == code  # type: ignore[attr-defined]


async def test_an_error_in_a_200_body_keeps_the_providers_message(server: ProviderServer) -> None:
    server.add(Reply.json({"error": {"code": 429, "message": "slow down"}, "id": "x"}))
    with pytest.raises(RateLimitError, match="slow down"):
        await whole(adapter("chat.completions", server))


async def test_finish_reason_error_is_not_a_complete_answer(server: ProviderServer) -> None:
    server.add(Reply.sse([chunk({"content": "Half an ans"}), chunk({}, "error")]))
    with pytest.raises(ProviderConnectionError, match="finish_reason 'error'"):
        await streamed(adapter("chat.completions", server))


async def test_an_openrouter_error_mid_stream_is_retried(server: ProviderServer) -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    error = {"error": {"code": 502, "message": "upstream failed"}}
    server.add(
        Reply.sse([chunk({"content": "Hel"}), error], done=False),
        answer("chat.completions", "Hello", stream=True),
    )
    strategy = DefaultRetryStrategy(sleep=sleep, rng=random.Random(0))
    agent = Agent(adapter("chat.completions", server), retry=strategy)
    seen: list[Exception | None] = []
    agent.add_hook("after_model_call", lambda ctx: seen.append(ctx.error))
    async with agent.chat_stream("hi") as stream:
        async for _ in stream:
            pass
    await agent.model.aclose()
    assert isinstance(seen[0], ServerError)
    assert seen[1] is None
    assert len(waits) == 1
    assert agent.history.messages[-1].content == "Hello"


def established(port: int) -> int:
    """Open TCP connections to or from ``port`` on this machine (Linux /proc)."""
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = (int(fields[i].split(":")[1], 16) for i in (1, 2))
        if fields[3] == "01" and port in (local, remote):
            count += 1
    return count


@pytest.mark.parametrize("api", ["chat.completions", "responses", "messages", "gemini"])
async def test_leaving_a_stream_early_closes_the_connection(api: str) -> None:
    events = answer_events(api, "a long answer " * 20)
    done = api == "chat.completions"
    # A server of its own: no other test's connection to count. The first words come before
    # the stall (1,000 bytes: a few events), the end long after it.
    with ProviderServer() as server:
        port = int(server.url.rsplit(":", 1)[1])
        server.add(Reply.sse(events, done=done, piece=40, stall_after=1000, stall=5.0))
        model = adapter(api, server)
        agent = Agent(model)
        async with agent.chat_stream("hi") as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    break
        for _ in range(40):
            if not established(port):
                break
            await asyncio.sleep(0.05)
        assert established(port) == 0  # closed at once, not after the 5 s stall
        await model.aclose()


def test_one_model_serves_chat_sync_twice(server: ProviderServer) -> None:
    for api in ("chat.completions", "messages", "responses", "gemini"):
        server.add(answer(api, "one"), answer(api, "two"))
        agent = Agent(adapter(api, server))
        assert agent.chat_sync("hi").text == "one"
        assert agent.chat_sync("again").text == "two"
    assert len(server.received) == 8  # nothing sent twice


def test_a_missing_key_is_a_usage_error_at_construction(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(UsageError, match="OPENAI_API_KEY"):
        OpenAIModel("gpt-4o")
    with pytest.raises(UsageError, match="ANTHROPIC_API_KEY"):
        AnthropicModel("claude-sonnet-4-5")
    assert OpenAIModel("qwen3", base_url="http://localhost:11434/v1").name == "qwen3"
