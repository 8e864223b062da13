"""OpenTelemetryPlugin: spans and metrics read back from the SDK's in-memory exporter and reader.

Every test runs a real agent loop (scripted models for the loop, the official OpenAI client
against the local provider server for the adapter path) and checks the span tree, names,
kinds and attributes as whole values. Waits run on a fake clock: nothing sleeps.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from hookloop import (
    Agent,
    ChatCancelledError,
    ImagePart,
    MissingExtraError,
    ModelSettings,
    PreToolCallContext,
    RateLimitError,
    TextPart,
    ToolCall,
    ToolReturn,
    UsageError,
    UsageLimitExceeded,
    UsageLimits,
    Verdict,
)
from hookloop._messages import Usage
from hookloop.context import Compaction, SlidingWindow
from hookloop.guardrails import tool_call_guardrail
from hookloop.limits import ModelPrice
from hookloop.models._base import ProviderResponse
from hookloop.observe import OpenTelemetryPlugin
from hookloop.observe import _genai as g
from hookloop.retry import Backoff, DefaultRetryStrategy, FallbackStrategy
from hookloop.testing import FakeClock, ScriptedModel, ScriptStep, text_response, tool_call
from tests.models._provider_server import (
    ProviderServer,
    Reply,
    adapter,
    answer,
    whole_answer,
)

NO_JITTER = Backoff(kind="exponential", base=0.5, factor=2.0, max_delay=30.0, jitter="none")
CONTENT_KEYS = {
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
}


class Tracked(SpanProcessor):
    """Remembers every span started and every span ended, to prove none stays open."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.ended: list[int] = []

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.started.append(span.context.span_id)

    def on_end(self, span: ReadableSpan) -> None:
        assert span.context is not None
        self.ended.append(span.context.span_id)


@dataclass
class Telemetry:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracked: Tracked
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def plugin(self, **kwargs: Any) -> OpenTelemetryPlugin:
        kwargs.setdefault("environ", {})
        return OpenTelemetryPlugin(
            tracer_provider=self.tracer_provider, meter_provider=self.meter_provider, **kwargs
        )

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        (span,) = self.named(name)
        return span

    def metrics(self) -> dict[str, list[tuple[dict[str, Any], Any]]]:
        """Metric name -> [(attributes, data point)] of every histogram recorded."""
        found: dict[str, list[tuple[dict[str, Any], Any]]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    for point in metric.data.data_points:
                        found.setdefault(metric.name, []).append((dict(point.attributes), point))
        return found


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracked = Tracked()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(tracked)
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    yield Telemetry(exporter, reader, tracked, tracer_provider, meter_provider)
    tracer_provider.shutdown()
    meter_provider.shutdown()


def tree(spans: list[ReadableSpan]) -> list[tuple[int, str]]:
    """(depth, name) in start order: the shape of the trace."""
    by_id = {s.context.span_id: s for s in spans if s.context is not None}

    def depth(span: ReadableSpan) -> int:
        parent = span.parent
        return (
            0 if parent is None or parent.span_id not in by_id else 1 + depth(by_id[parent.span_id])
        )

    return [(depth(s), s.name) for s in sorted(spans, key=lambda s: s.start_time or 0)]


def without_content(attributes: Any) -> dict[str, Any]:
    return {k: v for k, v in dict(attributes).items() if k not in CONTENT_KEYS}


def events(span: ReadableSpan) -> list[tuple[str, dict[str, Any]]]:
    return [(e.name, dict(e.attributes or {})) for e in span.events]


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def boom(a: int) -> int:
    """Always fails."""
    raise ValueError(f"no {a}")


ADD_CALL = tool_call("add", {"a": 1, "b": 2}, id="call_1")


# --- a plain chat ---------------------------------------------------------------------------


async def test_a_chat_with_a_tool_is_one_agent_span_over_two_model_calls_and_a_tool(
    otel: Telemetry,
) -> None:
    usage = Usage(input_tokens=20, output_tokens=5)
    model = ScriptedModel(
        [ADD_CALL, ProviderResponse(content="3", usage=usage, model="scripted-v2", id="r-2")]
    )
    agent = Agent(model, tools=[add], name="calc", session_id="s-1")
    agent.use(otel.plugin())

    assert (await agent.chat("1 + 2?")).text == "3"

    spans = otel.spans()
    assert tree(spans) == [
        (0, "invoke_agent calc"),
        (1, "chat scripted"),
        (1, "execute_tool add"),
        (1, "chat scripted"),
    ]
    agent_span = otel.one("invoke_agent calc")
    first, second = otel.named("chat scripted")
    tool_span = otel.one("execute_tool add")
    assert (agent_span.kind, first.kind, tool_span.kind) == (SpanKind.INTERNAL,) * 3
    assert dict(agent_span.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "calc",
        "gen_ai.conversation.id": "s-1",
        "gen_ai.system": "hookloop",
        "gen_ai.usage.input_tokens": 20,
        "gen_ai.usage.output_tokens": 5,
    }
    assert dict(first.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.system": "hookloop",
        "gen_ai.response.finish_reasons": ("tool_calls",),
    }
    assert dict(second.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.system": "hookloop",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.id": "r-2",
        "gen_ai.response.model": "scripted-v2",
        "gen_ai.usage.input_tokens": 20,
        "gen_ai.usage.output_tokens": 5,
    }
    assert dict(tool_span.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Add two numbers.",
        "hookloop.tool.rewritten": False,
        "hookloop.tool.outcome": "ok",
        "hookloop.tool.short_circuited": False,
    }
    assert all(s.status.status_code == StatusCode.UNSET for s in spans)
    assert all(not (set(dict(s.attributes or {})) & CONTENT_KEYS) for s in spans)
    assert sorted(otel.tracked.started) == sorted(otel.tracked.ended)

    metrics = otel.metrics()
    tokens = sorted(
        (a["gen_ai.token.type"], p.sum) for a, p in metrics["gen_ai.client.token.usage"]
    )
    assert tokens == [("input", 20), ("output", 5)]
    durations = metrics["gen_ai.client.operation.duration"]
    assert sorted(p.count for _, p in durations) == [1, 1]  # the two model calls
    assert {a["gen_ai.operation.name"] for a, _ in durations} == {"chat"}


def test_request_settings_are_attributes_of_the_chat_span(otel: Telemetry) -> None:
    settings = ModelSettings(
        temperature=0.2, max_tokens=64, extra={"top_p": 0.9, "seed": 7, "stop": ["END"]}
    )
    agent = Agent(ScriptedModel(["ok"]), settings=settings)
    agent.use(otel.plugin())

    agent.chat_sync("hi")

    attrs = dict(otel.one("chat scripted").attributes or {})
    assert {k: v for k, v in attrs.items() if k.startswith("gen_ai.request.")} == {
        "gen_ai.request.model": "scripted",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 64,
        "gen_ai.request.top_p": 0.9,
        "gen_ai.request.seed": 7,
        "gen_ai.request.stop_sequences": ("END",),
    }


async def test_the_chat_span_is_a_child_of_the_callers_current_span(otel: Telemetry) -> None:
    agent = Agent(ScriptedModel(["hi"]), name="a")
    agent.use(otel.plugin())
    tracer = otel.tracer_provider.get_tracer("test")

    with tracer.start_as_current_span("request") as outer:
        await agent.chat("hello")

    assert tree(otel.spans()) == [(0, "request"), (1, "invoke_agent a"), (2, "chat scripted")]
    assert otel.one("invoke_agent a").parent.span_id == outer.get_span_context().span_id  # type: ignore[union-attr]


def test_content_is_recorded_only_when_asked(
    otel: Telemetry, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run(plugin: OpenTelemetryPlugin) -> None:
        agent = Agent(ScriptedModel([ADD_CALL, "3"]), tools=[add], system_prompt="Be exact.")
        agent.use(plugin)
        agent.chat_sync("1 + 2?")

    run(otel.plugin())
    assert all(not (set(dict(s.attributes or {})) & CONTENT_KEYS) for s in otel.spans())

    otel.exporter.clear()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    run(OpenTelemetryPlugin(tracer_provider=otel.tracer_provider))  # reads os.environ
    first, second = otel.named("chat scripted")
    tool_span = otel.one("execute_tool add")
    attrs = dict(first.attributes or {})
    assert json.loads(attrs["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "1 + 2?"}]}
    ]
    assert json.loads(attrs["gen_ai.system_instructions"]) == [
        {"type": "text", "content": "Be exact."}
    ]
    assert [t["name"] for t in json.loads(attrs["gen_ai.tool.definitions"])] == ["add"]
    assert json.loads(attrs["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_1", "name": "add", "arguments": {"a": 1, "b": 2}}
            ],
            "finish_reason": "tool_calls",
        }
    ]
    assert json.loads(dict(second.attributes or {})["gen_ai.input.messages"])[1:] == [
        {
            "role": "assistant",
            "parts": [
                {"type": "tool_call", "id": "call_1", "name": "add", "arguments": {"a": 1, "b": 2}}
            ],
        },
        {
            "role": "tool",
            "parts": [{"type": "tool_call_response", "id": "call_1", "response": "3"}],
        },
    ]
    tool_attrs = dict(tool_span.attributes or {})
    assert (tool_attrs["gen_ai.tool.call.arguments"], tool_attrs["gen_ai.tool.call.result"]) == (
        '{"a": 1, "b": 2}',
        "3",
    )

    otel.exporter.clear()  # the argument wins over the environment
    run(OpenTelemetryPlugin(tracer_provider=otel.tracer_provider, capture_content=False))
    assert all(not (set(dict(s.attributes or {})) & CONTENT_KEYS) for s in otel.spans())


def test_captured_images_keep_their_uri_or_their_data(otel: Telemetry) -> None:
    agent = Agent(ScriptedModel(["A cat."]))
    agent.use(otel.plugin(capture_content=True))

    agent.chat_sync(
        [
            TextPart(text="What are these?"),
            ImagePart(url="https://example.com/cat.jpg"),
            ImagePart(url="https://example.com/dog", media_type="image/webp"),
            ImagePart(url="data:image/gif;base64,R0lGOD"),
            ImagePart(data="iVBORw0K", media_type="image/png"),
        ]
    )

    attrs = dict(otel.one("chat scripted").attributes or {})
    assert json.loads(attrs["gen_ai.input.messages"]) == [
        {
            "role": "user",
            "parts": [
                {"type": "text", "content": "What are these?"},
                {"type": "uri", "modality": "image", "uri": "https://example.com/cat.jpg"},
                {
                    "type": "uri",
                    "modality": "image",
                    "uri": "https://example.com/dog",
                    "mime_type": "image/webp",
                },
                {
                    "type": "blob",
                    "modality": "image",
                    "mime_type": "image/gif",
                    "content": "R0lGOD",
                },
                {
                    "type": "blob",
                    "modality": "image",
                    "mime_type": "image/png",
                    "content": "iVBORw0K",
                },
            ],
        }
    ]


@pytest.mark.parametrize(
    ("value", "provider_key"),
    [
        ("", "gen_ai.system"),
        ("http", "gen_ai.system"),
        ("http, gen_ai_latest_experimental", "gen_ai.provider.name"),
    ],
)
def test_the_stability_opt_in_switches_to_the_latest_names(
    otel: Telemetry, value: str, provider_key: str
) -> None:
    usage = Usage(input_tokens=9, output_tokens=4, cached_input_tokens=6, reasoning_tokens=3)
    agent = Agent(ScriptedModel([text_response("ok", usage=usage)]))
    agent.use(otel.plugin(environ={"OTEL_SEMCONV_STABILITY_OPT_IN": value}))

    agent.chat_sync("hi")

    attrs = dict(otel.one("chat scripted").attributes or {})
    names = {"gen_ai.system", "gen_ai.provider.name"}
    assert {k: v for k, v in attrs.items() if k in names} == {provider_key: "hookloop"}
    details = {k: v for k, v in attrs.items() if k.startswith("gen_ai.usage.") and "." in k[13:]}
    latest = provider_key == "gen_ai.provider.name"
    assert details == (
        {"gen_ai.usage.cache_read.input_tokens": 6, "gen_ai.usage.reasoning.output_tokens": 3}
        if latest
        else {}
    )


# --- a stream -------------------------------------------------------------------------------


async def test_a_stream_records_its_time_to_first_chunk(otel: Telemetry) -> None:
    reply = ProviderResponse(content="Hello there", usage=Usage(input_tokens=3, output_tokens=2))
    agent = Agent(ScriptedModel([ScriptStep(response=reply, chunk_size=3)]), name="s")
    agent.use(otel.plugin())

    async with agent.chat_stream("hi") as stream:
        parts = [event async for event in stream]
    assert parts

    chat = otel.one("chat scripted")
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.request.stream"] is True
    first_chunk = attrs["gen_ai.response.time_to_first_chunk"]
    assert isinstance(first_chunk, float)
    assert first_chunk >= 0
    (point,) = otel.metrics()["gen_ai.client.operation.time_to_first_chunk"]
    assert (point[0]["gen_ai.request.model"], point[1].count) == ("scripted", 1)
    assert tree(otel.spans()) == [(0, "invoke_agent s"), (1, "chat scripted")]


async def test_a_stream_that_fails_before_its_first_chunk_is_marked_as_a_stream(
    otel: Telemetry,
) -> None:
    agent = Agent(ScriptedModel([RateLimitError("slow", status=429)]), retry=None, name="s")
    agent.use(otel.plugin())

    with pytest.raises(RateLimitError):
        async with agent.chat_stream("hi") as stream:
            async for _ in stream:
                pass

    chat = otel.one("chat scripted")
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "scripted",
        "gen_ai.system": "hookloop",
        "gen_ai.request.stream": True,
        "error.type": "RateLimitError",
    }
    assert "gen_ai.client.operation.time_to_first_chunk" not in otel.metrics()


# --- retries --------------------------------------------------------------------------------


async def test_failed_attempts_and_backoff_waits_are_events_of_one_chat_span(
    otel: Telemetry,
) -> None:
    clock = FakeClock()
    limited = RateLimitError("slow down", status=429, retry_after=3.0)
    model = ScriptedModel([limited, RateLimitError("again", status=429), "done"])
    retry = DefaultRetryStrategy(sleep=clock.sleep, clock=clock, backoff=NO_JITTER)
    agent = Agent(model, retry=retry)
    agent.use(otel.plugin())

    assert (await agent.chat("hi")).text == "done"

    assert clock.waits == [3.0, 1.0]
    chat = otel.one("chat scripted")
    assert events(chat) == [
        (
            "hookloop.attempt_failed",
            {
                "hookloop.attempt": 1,
                "error.type": "RateLimitError",
                "exception.message": str(limited),
                "hookloop.retry": True,
            },
        ),
        (
            "hookloop.backoff_wait",
            {
                "hookloop.attempt": 1,
                "hookloop.wait.seconds": 3.0,
                "hookloop.wait.reason": "RateLimitError",
                "hookloop.retry.strategy": "default-retry",
                "hookloop.wait.retry_after": 3.0,
            },
        ),
        (
            "hookloop.attempt_failed",
            {
                "hookloop.attempt": 2,
                "error.type": "RateLimitError",
                "exception.message": "again (status=429)",
                "hookloop.retry": True,
            },
        ),
        (
            "hookloop.backoff_wait",
            {
                "hookloop.attempt": 2,
                "hookloop.wait.seconds": 1.0,
                "hookloop.wait.reason": "RateLimitError",
                "hookloop.retry.strategy": "default-retry",
            },
        ),
    ]
    assert chat.status.status_code == StatusCode.UNSET


async def test_a_model_call_that_fails_for_good_sets_the_error_on_every_span(
    otel: Telemetry,
) -> None:
    model = ScriptedModel([RateLimitError("no", status=429)])
    agent = Agent(model, retry=None, name="a")
    agent.use(otel.plugin())

    with pytest.raises(RateLimitError):
        await agent.chat("hi")

    chat, invoke = otel.one("chat scripted"), otel.one("invoke_agent a")
    for span in (chat, invoke):
        assert span.status.status_code == StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == "RateLimitError"
    assert events(chat)[0][1]["hookloop.retry"] is False
    assert [e.name for e in invoke.events] == ["exception"]
    ((attributes, point),) = otel.metrics()["gen_ai.client.operation.duration"]
    assert (attributes["error.type"], point.count) == ("RateLimitError", 1)
    assert sorted(otel.tracked.started) == sorted(otel.tracked.ended)


async def test_a_fallback_model_gets_its_own_chat_span_and_metrics(
    otel: Telemetry, server: ProviderServer
) -> None:
    primary = ScriptedModel([RateLimitError("slow", status=429)], name="primary")
    server.add(Reply.json(whole_answer("chat.completions", "Hi!", usage=(7, 3))))
    backup = adapter("chat.completions", server)
    agent = Agent(primary, retry=FallbackStrategy([backup]), name="a")
    agent.use(otel.plugin())
    port = int(server.url.rsplit(":", 1)[1])

    try:
        assert (await agent.chat("go")).text == "Hi!"
    finally:
        await backup.aclose()

    assert tree(otel.spans()) == [(0, "invoke_agent a"), (1, "chat primary"), (1, "chat m")]
    failed, answered = otel.one("chat primary"), otel.one("chat m")
    assert (failed.kind, failed.status.status_code, failed.status.description) == (
        SpanKind.INTERNAL,
        StatusCode.ERROR,
        "RateLimitError: slow (status=429)",
    )
    assert dict(failed.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "primary",
        "gen_ai.system": "hookloop",
        "error.type": "RateLimitError",
    }
    assert [name for name, _ in events(failed)][:1] == ["hookloop.attempt_failed"]
    assert (answered.kind, answered.status.status_code) == (SpanKind.CLIENT, StatusCode.UNSET)
    assert dict(answered.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "server.address": "127.0.0.1",
        "server.port": port,
        "gen_ai.system": "openai",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.model": "m-served",
        "gen_ai.usage.input_tokens": 7,
        "gen_ai.usage.output_tokens": 3,
    }
    metrics = otel.metrics()
    durations = sorted(
        (a["gen_ai.request.model"], a.get("gen_ai.system"), a.get("error.type"), p.count)
        for a, p in metrics["gen_ai.client.operation.duration"]
    )
    assert durations == [("m", "openai", None, 1), ("primary", "hookloop", "RateLimitError", 1)]
    tokens = sorted(
        (a["gen_ai.request.model"], a["gen_ai.system"], a["gen_ai.token.type"], p.sum)
        for a, p in metrics["gen_ai.client.token.usage"]
    )
    assert tokens == [("m", "openai", "input", 7), ("m", "openai", "output", 3)]
    assert sorted(otel.tracked.started) == sorted(otel.tracked.ended)


async def test_an_answer_a_pre_request_hook_supplied_is_no_model_usage(
    otel: Telemetry, server: ProviderServer
) -> None:
    model = adapter("chat.completions", server)  # never called: the cache answers
    agent = Agent(model, name="c")
    cached = ProviderResponse(content="from cache", usage=Usage(input_tokens=500, output_tokens=50))
    agent.add_hook("pre_request", lambda ctx: cached)
    agent.use(otel.plugin())

    try:
        assert (await agent.chat("hi")).text == "from cache"
    finally:
        await model.aclose()

    chat = otel.one("chat m")
    assert chat.kind == SpanKind.INTERNAL  # no server was called
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "gen_ai.system": "openai",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.usage.input_tokens": 500,
        "gen_ai.usage.output_tokens": 50,
        "hookloop.response.supplied": True,
    }
    assert otel.metrics() == {}


# --- tools ----------------------------------------------------------------------------------


async def test_a_tool_error_and_an_unknown_tool_end_their_spans_with_the_error(
    otel: Telemetry,
) -> None:
    calls = (
        ToolCall(name="boom", arguments='{"a": 1}', id="c1"),
        ToolCall(name="nope", arguments="{}", id="c2"),
    )
    model = ScriptedModel([ProviderResponse(tool_calls=calls, finish_reason="tool_calls"), "ok"])
    agent = Agent(model, tools=[boom])
    agent.use(otel.plugin())

    await agent.chat("go")

    failed, unknown = otel.one("execute_tool boom"), otel.one("execute_tool nope")
    assert (failed.status.status_code, failed.status.description) == (
        StatusCode.ERROR,
        "ToolExecutionError: tool 'boom' failed: ValueError: no 1",
    )
    assert without_content(failed.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "boom",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": "Always fails.",
        "hookloop.tool.rewritten": False,
        "hookloop.tool.outcome": "error",
        "error.type": "ToolExecutionError",
        "hookloop.tool.short_circuited": False,
    }
    assert without_content(unknown.attributes) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "nope",
        "gen_ai.tool.call.id": "c2",
        "gen_ai.tool.type": "function",
        "hookloop.tool.outcome": "error",
        "error.type": "UnknownToolError",
        "hookloop.tool.short_circuited": False,
    }
    assert otel.one("invoke_agent agent").status.status_code == StatusCode.UNSET


async def test_a_short_circuit_and_a_rewrite_by_a_hook_are_marked(otel: Telemetry) -> None:
    calls = (
        ToolCall(name="add", arguments='{"a": 1, "b": 2}', id="c1"),
        ToolCall(name="add", arguments='{"a": 5, "b": 5}', id="c2"),
    )
    model = ScriptedModel([ProviderResponse(tool_calls=calls, finish_reason="tool_calls"), "ok"])
    agent = Agent(model, tools=[add])

    @agent.hook("pre_tool_call")
    def intercept(ctx: PreToolCallContext) -> ToolCall | ToolReturn:
        if ctx.call.id == "c1":
            return ToolReturn(42)  # cached: the tool does not run
        return ToolCall(name="add", arguments='{"a": 5, "b": 6}', id=ctx.call.id)

    agent.use(otel.plugin())
    response = await agent.chat("go")

    assert [m.content for m in response.messages[2:4]] == ["42", "11"]  # type: ignore[union-attr]
    spans = {
        dict(s.attributes or {})["gen_ai.tool.call.id"]: s for s in otel.named("execute_tool add")
    }
    flags = {
        call_id: {k: v for k, v in dict(s.attributes or {}).items() if k.startswith("hookloop.")}
        for call_id, s in spans.items()
    }
    assert flags == {
        "c1": {"hookloop.tool.outcome": "ok", "hookloop.tool.short_circuited": True},
        "c2": {
            "hookloop.tool.rewritten": True,
            "hookloop.tool.outcome": "ok",
            "hookloop.tool.short_circuited": False,
        },
    }


# --- cancellation ---------------------------------------------------------------------------


async def test_a_cancel_during_a_tool_closes_every_span_and_restores_the_context(
    otel: Telemetry,
) -> None:
    started = asyncio.Event()

    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel([tool_call("wait_forever", {}, id="w1")])
    agent = Agent(model, tools=[wait_forever], name="a")
    agent.use(otel.plugin())
    before = otel_context.get_current()

    async def cancel_when_started() -> None:
        await started.wait()
        agent.cancel("user left")

    canceller = asyncio.ensure_future(cancel_when_started())
    with pytest.raises(ChatCancelledError):
        await agent.chat("go")
    await canceller

    assert otel_context.get_current() == before  # the tool's span is no longer current
    assert sorted(otel.tracked.started) == sorted(otel.tracked.ended)
    assert tree(otel.spans()) == [
        (0, "invoke_agent a"),
        (1, "chat scripted"),
        (1, "execute_tool wait_forever"),
    ]
    for name in ("invoke_agent a", "execute_tool wait_forever"):
        span = otel.one(name)
        assert (span.status.status_code, span.status.description) == (
            StatusCode.ERROR,
            "cancelled: user left",
        )
        assert dict(span.attributes or {})["error.type"] == "cancelled"


async def test_a_cancel_during_a_backoff_wait_closes_the_model_call_span(otel: Telemetry) -> None:
    waiting = asyncio.Event()

    async def sleep(seconds: float) -> None:
        waiting.set()
        await asyncio.Event().wait()

    model = ScriptedModel([RateLimitError("slow", status=429)])
    retry = DefaultRetryStrategy(sleep=sleep, backoff=NO_JITTER)
    agent = Agent(model, retry=retry, name="a")
    agent.use(otel.plugin())

    task = asyncio.ensure_future(agent.chat("go"))
    await waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert sorted(otel.tracked.started) == sorted(otel.tracked.ended)
    chat = otel.one("chat scripted")
    assert [e.name for e in chat.events] == ["hookloop.attempt_failed", "hookloop.backoff_wait"]
    assert chat.status.status_code == StatusCode.ERROR


# --- context policies -----------------------------------------------------------------------


async def test_a_compaction_is_an_event_of_the_model_call_it_made_smaller(otel: Telemetry) -> None:
    long = "word " * 200
    model = ScriptedModel(["one", "two", "summary of it", "three"], context_window=600)
    agent = Agent(model, context=None, name="a")
    agent.use(Compaction(compact_threshold=0.5, keep_recent=0.2))
    agent.use(otel.plugin())

    await agent.chat(long)
    await agent.chat(long)
    await agent.chat("and now?")

    compacted = [s for s in otel.named("chat scripted") if s.events]
    assert len(compacted) == 1
    ((name, figures),) = events(compacted[0])
    assert name == "hookloop.compaction"
    assert figures["hookloop.compaction.tier"] == "summary"
    assert figures["hookloop.compaction.window"] == 600
    assert (
        figures["hookloop.compaction.messages_before"]
        > figures["hookloop.compaction.messages_after"]
    )
    assert (
        figures["hookloop.compaction.tokens_before"] > figures["hookloop.compaction.tokens_after"]
    )


async def test_a_trim_is_an_event_with_the_tokens_before_and_after(otel: Telemetry) -> None:
    long = "word " * 100
    model = ScriptedModel(["one", "two", "three"])
    agent = Agent(model, context=SlidingWindow(max_tokens=400, reserve=50), name="a")
    agent.use(otel.plugin())

    for _ in range(3):
        await agent.chat(long)

    last = otel.named("chat scripted")[-1]
    ((name, figures),) = events(last)
    assert name == "hookloop.trim"
    assert figures["hookloop.trim.reason"] == "window"
    assert figures["hookloop.trim.window"] == 400
    assert figures["hookloop.trim.messages_after"] < figures["hookloop.trim.messages_before"] == 5
    assert figures["hookloop.trim.tokens_after"] <= figures["hookloop.trim.budget"]
    assert figures["hookloop.trim.tokens_before"] > figures["hookloop.trim.budget"]
    assert not otel.named("chat scripted")[0].events


# --- delegation -----------------------------------------------------------------------------


async def test_a_sub_agent_is_traced_under_the_tool_call_that_delegated_to_it(
    otel: Telemetry,
) -> None:
    researcher = Agent(ScriptedModel([ADD_CALL, "3"], name="small"), tools=[add], name="researcher")
    lead = Agent(
        ScriptedModel([tool_call("researcher", {"task": "add 1 and 2"}, id="d1"), "it is 3"]),
        tools=[researcher.as_tool()],
        name="lead",
    )
    lead.use(otel.plugin())

    assert (await lead.chat("what is 1 + 2?")).text == "it is 3"

    assert tree(otel.spans()) == [
        (0, "invoke_agent lead"),
        (1, "chat scripted"),
        (1, "execute_tool researcher"),
        (2, "invoke_agent researcher"),
        (3, "chat small"),
        (3, "execute_tool add"),
        (3, "chat small"),
        (1, "chat scripted"),
    ]
    sub = dict(otel.one("invoke_agent researcher").attributes or {})
    assert sub == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "researcher",
        "gen_ai.system": "hookloop",
        "gen_ai.usage.input_tokens": 0,
        "gen_ai.usage.output_tokens": 0,
        "hookloop.usage.cost": 0.0,  # no call reported usage: the chat's total is a known 0
    }
    assert len({s.context.trace_id for s in otel.spans() if s.context}) == 1
    assert sorted(otel.tracked.started) == sorted(otel.tracked.ended)


# --- a provider through its official client -------------------------------------------------


async def test_an_openai_call_is_a_client_span_with_the_server_and_the_response_id(
    otel: Telemetry, server: ProviderServer
) -> None:
    body = whole_answer("chat.completions", "Hi!", usage=(30, 8))
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 24}
    server.add(Reply.json(body))
    model = adapter("chat.completions", server)
    agent = Agent(model, name="a")
    agent.use(otel.plugin(environ={"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}))
    port = int(server.url.rsplit(":", 1)[1])

    try:
        assert (await agent.chat("hello")).text == "Hi!"
    finally:
        await model.aclose()

    chat = otel.one("chat m")
    assert chat.kind == SpanKind.CLIENT
    assert dict(chat.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "m",
        "server.address": "127.0.0.1",
        "server.port": port,
        "gen_ai.provider.name": "openai",
        "gen_ai.response.finish_reasons": ("stop",),
        "gen_ai.response.id": "chatcmpl-1",
        "gen_ai.response.model": "m-served",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 8,
        "gen_ai.usage.cache_read.input_tokens": 24,
    }
    tokens = {
        a["gen_ai.token.type"]: (a["server.port"], a["gen_ai.response.model"], p.sum)
        for a, p in otel.metrics()["gen_ai.client.token.usage"]
    }
    assert tokens == {"input": (port, "m-served", 30), "output": (port, "m-served", 8)}


async def test_a_streamed_openai_call_reports_its_response_id(
    otel: Telemetry, server: ProviderServer
) -> None:
    server.add(answer("chat.completions", "Streamed.", stream=True))
    model = adapter("chat.completions", server)
    agent = Agent(model, name="a")
    agent.use(otel.plugin())

    try:
        async with agent.chat_stream("hello") as stream:
            async for _ in stream:
                pass
    finally:
        await model.aclose()

    attrs = dict(otel.one("chat m").attributes or {})
    assert (attrs["gen_ai.response.id"], attrs["gen_ai.request.stream"]) == ("chatcmpl-1", True)


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(
    ("api", "provider", "response_id", "prefix"),
    [
        ("chat.completions", "openai", "chatcmpl-1", "/v1"),
        ("messages", "anthropic", "msg_1", ""),
        ("responses", "openai", "resp_1", "/v1"),
    ],
)
async def test_every_adapter_names_its_provider_server_and_response(
    otel: Telemetry,
    server: ProviderServer,
    api: str,
    provider: str,
    response_id: str,
    prefix: str,
    stream: bool,
) -> None:
    server.add(answer(api, "Hi!", stream=stream, usage=(12, 3)))
    model = adapter(api, server)
    agent = Agent(model, name="a")
    agent.use(otel.plugin(environ={"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}))

    try:
        if stream:
            async with agent.chat_stream("hello") as events:
                async for _ in events:
                    pass
        else:
            await agent.chat("hello")
    finally:
        await model.aclose()

    chat = otel.one("chat m")
    attrs = dict(chat.attributes or {})
    port = int(server.url.rsplit(":", 1)[1])
    assert (chat.kind, model.base_url.rstrip("/")) == (SpanKind.CLIENT, server.url + prefix)
    assert {k: attrs[k] for k in ("gen_ai.provider.name", "server.address", "server.port")} == {
        "gen_ai.provider.name": provider,
        "server.address": "127.0.0.1",
        "server.port": port,
    }
    assert (
        attrs["gen_ai.response.id"],
        attrs["gen_ai.response.model"],
        attrs["gen_ai.usage.input_tokens"],
        attrs["gen_ai.usage.output_tokens"],
    ) == (response_id, "m-served", 12, 3)


# --- attaching, and the cost of not attaching -----------------------------------------------


def test_without_the_plugin_no_handler_is_registered_and_disposing_removes_all() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    before = dict(agent.hooks.handlers)

    dispose = agent.use(OpenTelemetryPlugin(environ={}))
    assert set(agent.hooks.handlers) - set(before) >= {"on_chat_start", "pre_tool_call"}
    dispose()

    assert agent.hooks.handlers == before


def test_one_plugin_traces_one_agent(otel: Telemetry) -> None:
    plugin = otel.plugin()
    Agent(ScriptedModel([])).use(plugin)

    with pytest.raises(UsageError, match="already attached"):
        Agent(ScriptedModel([])).use(plugin)


def test_without_opentelemetry_installed_the_plugin_names_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)

    with pytest.raises(MissingExtraError) as caught:
        OpenTelemetryPlugin()

    assert str(caught.value) == (
        "OpenTelemetryPlugin needs the 'otel' extra: pip install 'hookloop[otel]'"
    )


def test_importing_hookloop_and_the_observe_package_imports_no_opentelemetry() -> None:
    code = (
        "import sys, hookloop, hookloop.observe;"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert done.stdout == "[]\n"


def test_the_current_span_is_untouched_outside_tools(otel: Telemetry) -> None:
    agent = Agent(ScriptedModel([ADD_CALL, "3"]), tools=[add])
    agent.use(otel.plugin())
    seen: list[str] = []

    @agent.hook("on_message")
    def current(ctx: object) -> None:
        span = trace.get_current_span()
        seen.append(getattr(span, "name", "-"))

    agent.chat_sync("1 + 2?")

    assert seen == ["-", "-", "-", "-"]  # user, assistant, tool result, answer


class LazyServer(ScriptedModel):
    """A model behind an HTTP API that starts on its first request (as ``LocalModel`` does):
    before that it has no address."""

    provider_name = "llama.cpp"

    def __init__(self, answers: list[str]) -> None:
        super().__init__(answers, name="local")
        self.started = False

    @property
    def base_url(self) -> str | None:  # type: ignore[override]
        return "http://127.0.0.1:8089/v1" if self.started else None

    async def request(self, request: Any) -> ProviderResponse:
        self.started = True
        return await super().request(request)


async def test_a_model_that_starts_on_its_first_call_is_a_client_with_its_server(
    otel: Telemetry,
) -> None:
    agent = Agent(LazyServer(["Hi!", "Again."]), name="a")
    agent.use(otel.plugin(environ={"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"}))
    await agent.chat("Hello")
    await agent.chat("Hello again")
    server = {"server.address": "127.0.0.1", "server.port": 8089}
    calls = otel.named("chat local")
    assert [s.kind for s in calls] == [SpanKind.CLIENT, SpanKind.CLIENT]
    for span in [*calls, *otel.named("invoke_agent a")]:
        assert {k: dict(span.attributes or {}).get(k) for k in server} == server
        assert dict(span.attributes or {})["gen_ai.provider.name"] == "llama.cpp"
    durations = otel.metrics()["gen_ai.client.operation.duration"]
    assert [{k: a.get(k) for k in server} for a, _ in durations] == [server]


async def test_capture_error_text_false_leaves_errors_texts_out_of_every_span(
    otel: Telemetry,
) -> None:
    secret = "account 4711 of Mrs Smith"
    calls = (ToolCall(name="boom", arguments=json.dumps({"a": secret}), id="c1"),)
    model = ScriptedModel(
        [
            RateLimitError(f"slow down for {secret}", status=429),
            ProviderResponse(tool_calls=calls, finish_reason="tool_calls"),
            RuntimeError(f"the provider quoted {secret}"),
        ]
    )
    clock = FakeClock()
    agent = Agent(
        model,
        tools=[boom],
        name="a",
        retry=DefaultRetryStrategy(sleep=clock.sleep, clock=clock, backoff=NO_JITTER),
    )
    agent.use(otel.plugin(capture_error_text=False))

    with pytest.raises(RuntimeError):
        await agent.chat("go")

    shown = repr(
        [(s.name, s.attributes, s.status.description, [e.attributes for e in s.events])
         for s in otel.spans()]
    )  # fmt: skip
    assert secret not in shown
    failed = otel.one("execute_tool boom")  # its arguments were not valid: the error quotes them
    assert (failed.status.description, dict(failed.attributes or {})["error.type"]) == (
        "ToolValidationError",
        "ToolValidationError",
    )
    invoke = otel.one("invoke_agent a")
    assert invoke.status.description == "RuntimeError"
    assert [(e.name, dict(e.attributes or {})) for e in invoke.events] == [
        ("exception", {"exception.type": "RuntimeError"})
    ]
    first = otel.named("chat scripted")[0]
    assert events(first)[0] == (
        "hookloop.attempt_failed",
        {"hookloop.attempt": 1, "error.type": "RateLimitError", "hookloop.retry": True},
    )


# --- cost --------------------------------------------------------------------------------------

PRICE = ModelPrice(input_per_mtok=1, output_per_mtok=2)


def costly_script() -> list[object]:
    call = dataclasses.replace(
        tool_call("add", {"a": 1, "b": 2}), usage=Usage(input_tokens=100, output_tokens=10)
    )
    return [call, text_response("3", usage=Usage(input_tokens=120, output_tokens=5))]


async def test_each_call_s_span_has_its_cost_and_the_chat_s_span_the_total(
    otel: Telemetry,
) -> None:
    agent = Agent(ScriptedModel(costly_script()), tools=[add], prices={"scripted": PRICE})
    agent.use(otel.plugin())
    await agent.chat("1 + 2?")
    # $1 and $2 per million: 100 in, 10 out is $0.00012; 120 in, 5 out is $0.00013.
    calls = [dict(s.attributes or {}) for s in otel.named("chat scripted")]
    assert [(c[g.USAGE_INPUT], c["hookloop.usage.cost"]) for c in calls] == [
        (100, 0.00012),
        (120, 0.00013),
    ]
    chat = dict(otel.one("invoke_agent agent").attributes or {})
    assert (chat[g.USAGE_INPUT], chat[g.USAGE_OUTPUT], chat["hookloop.usage.cost"]) == (
        220,
        15,
        0.00025,
    )


async def test_an_unknown_cost_is_left_out_never_zero(otel: Telemetry) -> None:
    agent = Agent(ScriptedModel(costly_script()), tools=[add])  # no price for "scripted"
    agent.use(otel.plugin())
    await agent.chat("1 + 2?")
    for span in otel.spans():
        attributes = dict(span.attributes or {})
        assert "hookloop.usage.cost" not in attributes
    assert dict(otel.one("invoke_agent agent").attributes or {})[g.USAGE_INPUT] == 220


async def test_a_chat_ended_by_a_limit_says_which_and_what_it_spent(otel: Telemetry) -> None:
    limits = UsageLimits(requests=1)
    agent = Agent(
        ScriptedModel(costly_script()), tools=[add], prices={"scripted": PRICE}, limits=limits
    )
    agent.use(otel.plugin())
    with pytest.raises(UsageLimitExceeded):
        await agent.chat("1 + 2?")
    span = otel.one("invoke_agent agent")
    attributes = dict(span.attributes or {})
    assert attributes["hookloop.usage.limit"] == "requests"
    assert (attributes[g.USAGE_INPUT], attributes["hookloop.usage.cost"]) == (100, 0.00012)
    assert attributes["error.type"] == "UsageLimitExceeded"
    assert span.status.status_code is StatusCode.ERROR


async def test_a_guardrail_verdict_is_an_event_of_the_chat_span(otel: Telemetry) -> None:
    def no_secrets(ctx: Any) -> Verdict:
        return Verdict.reject("the secret tool is not for this chat")

    def event_of(telemetry: Telemetry) -> dict[str, Any]:
        span = telemetry.one("invoke_agent agent")
        (event,) = [e for e in span.events if e.name == "hookloop.guardrail"]
        return dict(event.attributes or {})

    script = [tool_call("add", {"a": 1, "b": 2}, id="c1"), "no"]
    agent = Agent(ScriptedModel(script), tools=[add])
    agent.use(tool_call_guardrail(no_secrets))
    agent.use(otel.plugin())
    await agent.chat("1 + 2?")
    assert event_of(otel) == {
        "hookloop.guardrail.name": "no_secrets",
        "hookloop.guardrail.position": "tool_call",
        "hookloop.guardrail.action": "reject",
        g.TOOL_CALL_ID: "c1",
    }  # the reason may quote what was checked: only with content capture

    agent = Agent(ScriptedModel(script), tools=[add])
    agent.use(tool_call_guardrail(no_secrets))
    otel.exporter.clear()
    agent.use(otel.plugin(capture_content=True))
    await agent.chat("1 + 2?")
    assert event_of(otel)["hookloop.guardrail.reason"] == "the secret tool is not for this chat"
