"""The OpenTelemetry GenAI vocabulary hookloop emits, and content in its JSON shapes.

Attribute and metric names follow the GenAI semantic conventions
(``open-telemetry/semantic-conventions-genai``). They are written out here rather than
imported from ``opentelemetry-semantic-conventions``, which the ``otel`` extra does not need.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final
from urllib.parse import urlsplit

from .._messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
)
from ..models._base import ProviderRequest, ProviderResponse, ToolDefinition

OPERATION: Final = "gen_ai.operation.name"
PROVIDER: Final = "gen_ai.provider.name"
SYSTEM_OLD: Final = "gen_ai.system"  # the provider's name up to v1.36 of the conventions
AGENT_NAME: Final = "gen_ai.agent.name"
CONVERSATION_ID: Final = "gen_ai.conversation.id"
REQUEST_MODEL: Final = "gen_ai.request.model"
REQUEST_TEMPERATURE: Final = "gen_ai.request.temperature"
REQUEST_MAX_TOKENS: Final = "gen_ai.request.max_tokens"
REQUEST_STREAM: Final = "gen_ai.request.stream"
RESPONSE_ID: Final = "gen_ai.response.id"
RESPONSE_MODEL: Final = "gen_ai.response.model"
RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
RESPONSE_TIME_TO_FIRST_CHUNK: Final = "gen_ai.response.time_to_first_chunk"
USAGE_INPUT: Final = "gen_ai.usage.input_tokens"
USAGE_OUTPUT: Final = "gen_ai.usage.output_tokens"
USAGE_CACHE_READ: Final = "gen_ai.usage.cache_read.input_tokens"
USAGE_REASONING: Final = "gen_ai.usage.reasoning.output_tokens"
USAGE_COST: Final = "hookloop.usage.cost"  # not in the conventions: USD, left out when unknown
TOKEN_TYPE: Final = "gen_ai.token.type"
TOOL_NAME: Final = "gen_ai.tool.name"
TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
TOOL_TYPE: Final = "gen_ai.tool.type"
TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
TOOL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
TOOL_RESULT: Final = "gen_ai.tool.call.result"
INPUT_MESSAGES: Final = "gen_ai.input.messages"
OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
ERROR_TYPE: Final = "error.type"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

METRIC_TOKEN_USAGE: Final = "gen_ai.client.token.usage"
METRIC_DURATION: Final = "gen_ai.client.operation.duration"
METRIC_TIME_TO_FIRST_CHUNK: Final = "gen_ai.client.operation.time_to_first_chunk"

# The buckets the conventions advise for the two histograms.
TOKEN_BUCKETS: Final = tuple(float(4**n) for n in range(14))  # 1, 4, 16, ... 67108864
SECONDS_BUCKETS: Final = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)  # fmt: skip

STABILITY_VARIABLE: Final = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST: Final = "gen_ai_latest_experimental"
CONTENT_VARIABLE: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_CONTENT_ON: Final = frozenset({"true", "1", "yes", "span_only", "span_and_event"})


def latest_conventions(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``OTEL_SEMCONV_STABILITY_OPT_IN`` lists ``gen_ai_latest_experimental``."""
    values = environ.get(STABILITY_VARIABLE, "")
    return LATEST in {value.strip().lower() for value in values.split(",")}


def content_from_environment(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`` turns capture on."""
    return environ.get(CONTENT_VARIABLE, "").strip().lower() in _CONTENT_ON


def server_attributes(base_url: str | None) -> dict[str, Any]:
    """``server.address`` and ``server.port`` of an API root (the scheme's port if none)."""
    if not base_url:
        return {}
    parts = urlsplit(base_url)
    if not parts.hostname:
        return {}
    attributes: dict[str, Any] = {SERVER_ADDRESS: parts.hostname}
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: say nothing about it
        port = None
    if port is None:
        port = {"https": 443, "http": 80}.get(parts.scheme)
    if port is not None:
        attributes[SERVER_PORT] = port
    return attributes


def request_attributes(request: ProviderRequest) -> dict[str, Any]:
    """The request settings a ``chat`` span carries."""
    settings = request.settings
    attributes: dict[str, Any] = {}
    if settings.temperature is not None:
        attributes[REQUEST_TEMPERATURE] = settings.temperature
    if settings.max_tokens is not None:
        attributes[REQUEST_MAX_TOKENS] = settings.max_tokens
    for key, value in settings.extra.items():
        name = _EXTRA_SETTINGS.get(key)
        if name is not None and isinstance(value, int | float | str | list | tuple):
            attributes[name] = tuple(value) if isinstance(value, list) else value
    return attributes


# Provider settings passed through ModelSettings.extra that the conventions name.
_EXTRA_SETTINGS: Final = {
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
    "stop": "gen_ai.request.stop_sequences",
    "stop_sequences": "gen_ai.request.stop_sequences",
}


def response_attributes(response: ProviderResponse, *, latest: bool) -> dict[str, Any]:
    """What a ``chat`` span says about the answer: id, model, finish reason, usage."""
    attributes: dict[str, Any] = {RESPONSE_FINISH_REASONS: (response.finish_reason,)}
    if response.id:
        attributes[RESPONSE_ID] = response.id
    if response.model:
        attributes[RESPONSE_MODEL] = response.model
    usage = response.usage
    if usage is not None:
        attributes[USAGE_INPUT] = usage.input_tokens
        attributes[USAGE_OUTPUT] = usage.output_tokens
        if latest and usage.cached_input_tokens:
            attributes[USAGE_CACHE_READ] = usage.cached_input_tokens
        if latest and usage.reasoning_tokens:
            attributes[USAGE_REASONING] = usage.reasoning_tokens
        attributes.update(cost_attributes(usage))
    return attributes


def cost_attributes(usage: Usage) -> dict[str, Any]:
    """``hookloop.usage.cost`` (USD, a float) when the cost is known; nothing when it is not.

    An unknown cost is left out, never written as 0.
    """
    cost = usage.cost
    return {} if cost is None else {USAGE_COST: float(cost)}


# --- content, in the JSON shapes of gen_ai.input.messages and friends ---------------------


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def _arguments(call: ToolCall) -> object:
    try:
        return json.loads(call.arguments)
    except ValueError:
        return call.arguments  # not JSON: the text as the model wrote it


def _parts(message: Message) -> list[dict[str, Any]]:
    if isinstance(message, ToolMessage):
        return [
            {"type": "tool_call_response", "id": message.tool_call_id, "response": message.content}
        ]
    parts: list[dict[str, Any]] = []
    content = message.content
    if isinstance(content, str):
        if content:
            parts.append({"type": "text", "content": content})
    else:
        for part in content:
            if isinstance(part, TextPart):
                parts.append({"type": "text", "content": part.text})
            elif isinstance(part, ImagePart):
                parts.append(_image(part))
    if isinstance(message, AssistantMessage):
        parts.extend(
            {"type": "tool_call", "id": c.id, "name": c.name, "arguments": _arguments(c)}
            for c in message.tool_calls
        )
    return parts


def _image(part: ImagePart) -> dict[str, Any]:
    """An image as a ``blob`` part (base64 ``content``) or a ``uri`` part."""
    url = part.url
    if url is not None and url.startswith("data:"):
        header, _, data = url.partition(",")
        mime_type, _, encoding = header[len("data:") :].partition(";")
        if encoding == "base64":  # what providers accept; anything else stays a uri
            mime = mime_type or part.media_type
            return {"type": "blob", "modality": "image", "mime_type": mime, "content": data}
    if url is not None:
        found: dict[str, Any] = {"type": "uri", "modality": "image", "uri": url}
        if part.media_type:
            found["mime_type"] = part.media_type
        return found
    return {"type": "blob", "modality": "image", "mime_type": part.media_type, "content": part.data}


def input_messages(messages: Iterable[Message]) -> str:
    """``gen_ai.input.messages``: the request's messages as JSON."""
    return _dumps([{"role": m.role, "parts": _parts(m)} for m in messages])


def output_messages(response: ProviderResponse) -> str:
    """``gen_ai.output.messages``: the answer as JSON."""
    message = {
        "role": "assistant",
        "parts": _parts(response.to_message()),
        "finish_reason": response.finish_reason,
    }
    return _dumps([message])


def system_instructions(system: str) -> str:
    """``gen_ai.system_instructions``: the system prompt as JSON."""
    return _dumps([{"type": "text", "content": system}])


def tool_definitions(tools: Sequence[ToolDefinition]) -> str:
    """``gen_ai.tool.definitions``: the tools offered, as JSON."""
    return _dumps(
        [
            {
                "type": "function",
                "name": t.name,
                "description": t.description,
                "parameters": dict(t.parameters),
            }
            for t in tools
        ]
    )
