"""One real run of the local model (llama.cpp serving SmolLM2-135M), traced end to end.

A model of the test's own, not the session's ``local_model``: its first request starts it, as
a user's does. The model is made to call the calculator (``tool_choice``), reads the result
back, then answers once more in a stream; the spans and metrics say so. The test asserts
what is forced (the call, the grammar-valid arguments, the shapes), not the words the small
model picks.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from hookloop import Agent, ModelSettings
from hookloop._builtin_tools import calculator
from hookloop.models._local import LocalModel
from hookloop.observe import OpenTelemetryPlugin


@pytest.fixture
async def unstarted_model() -> AsyncIterator[LocalModel]:
    """A local model of the test's own, started by its first request, as users meet it."""
    model = LocalModel(context_window=1024)
    yield model
    await model.aclose()


async def test_a_streamed_local_chat_with_a_tool_is_traced_end_to_end(
    unstarted_model: LocalModel,
) -> None:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    agent = Agent(
        unstarted_model,
        tools=[calculator],
        name="calc",
        settings=ModelSettings(tool_choice="calculator", max_tokens=60),
    )
    plugin = OpenTelemetryPlugin(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        capture_content=True,
        environ={"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental"},
    )
    agent.use(plugin)

    await agent.chat("What is 17 * 23? Use the calculator.")
    async with agent.chat_stream("Thanks!") as stream:
        async for _ in stream:
            pass

    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time or 0)
    assert [s.name for s in spans[:5]] == [
        "invoke_agent calc",
        "chat local",
        "execute_tool calculator",
        "chat local",
        "invoke_agent calc",
    ]
    assert all(s.status.status_code == StatusCode.UNSET for s in spans[:5])
    first, tool_span, second = spans[1:4]
    for root, children in ((spans[0], spans[1:4]), (spans[4], spans[5:])):
        assert root.parent is None
        assert root.context is not None
        assert all(
            s.parent is not None and s.parent.span_id == root.context.span_id for s in children
        )
    streamed = [dict(s.attributes or {}) for s in spans[5:] if s.name == "chat local"]
    assert streamed  # the forced call again, then words: two calls
    for attributes in streamed:
        assert attributes["gen_ai.request.stream"] is True
        assert attributes["gen_ai.response.time_to_first_chunk"] > 0
    port = int(unstarted_model.base_url.rsplit(":", 1)[1].split("/")[0])  # type: ignore[union-attr]
    # The first call started the server: a CLIENT with its server all the same, and so is
    # the chat that made it.
    for chat in (first, second, spans[0]):
        attributes = dict(chat.attributes or {})
        assert (
            attributes["gen_ai.provider.name"],
            attributes["server.address"],
            attributes["server.port"],
        ) == ("llama.cpp", "127.0.0.1", port)
        assert attributes["gen_ai.usage.input_tokens"] > 0
        assert attributes["gen_ai.usage.output_tokens"] > 0
    for chat in (first, second):
        attributes = dict(chat.attributes or {})
        assert chat.kind == SpanKind.CLIENT
        assert attributes["gen_ai.response.id"].startswith("chatcmpl-")
    # The answer in words was written from a prompt without the tool guide; the tokens in
    # are still those of what was sent: the first request and a call and its result more.
    tokens = [dict(c.attributes or {})["gen_ai.usage.input_tokens"] for c in (first, second)]
    assert tokens[1] >= tokens[0] - 16, tokens
    assert dict(first.attributes or {})["gen_ai.response.finish_reasons"] == ("tool_calls",)
    tool_attributes = dict(tool_span.attributes or {})
    arguments = json.loads(tool_attributes["gen_ai.tool.call.arguments"])  # grammar-valid
    expected = calculator.function(expression=arguments["expression"])
    assert float(tool_attributes["gen_ai.tool.call.result"]) == pytest.approx(expected)
    (answer,) = json.loads(dict(second.attributes or {})["gen_ai.output.messages"])
    assert (answer["role"], answer["finish_reason"]) == ("assistant", "stop")
    assert [part["type"] for part in answer["parts"]] == ["text"]  # words, after one tool round

    data = reader.get_metrics_data()
    assert data is not None
    names = {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert names == {
        "gen_ai.client.token.usage",
        "gen_ai.client.operation.duration",
        "gen_ai.client.operation.time_to_first_chunk",
    }
    tracer_provider.shutdown()
    meter_provider.shutdown()
