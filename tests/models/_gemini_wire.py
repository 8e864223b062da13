"""Gemini's wire format (``generateContent`` / ``streamGenerateContent?alt=sse``) for the tests.

Minimal, well-formed answers and errors of the Gemini API, shaped as Google documents them
(https://ai.google.dev/api/generate-content, https://ai.google.dev/gemini-api/docs/troubleshooting)
and as the recorded cases in ``fixtures/provider-traffic/gemini/`` show them. A tool call is
``(id, name, arguments JSON text)``; Gemini sends the arguments as an object.
"""

from __future__ import annotations

import json
from typing import Any

ToolCallSpec = tuple[str, str, str]

MODEL_VERSION = "m-served"
RESPONSE_ID = "resp-1"


def usage_metadata(tokens_in: int, tokens_out: int, **extra: int) -> dict[str, int]:
    """``usageMetadata`` as Gemini sends it (``extra``: cachedContentTokenCount, ...)."""
    total = tokens_in + tokens_out + extra.get("thoughtsTokenCount", 0)
    return {
        "promptTokenCount": tokens_in,
        "candidatesTokenCount": tokens_out,
        "totalTokenCount": total,
        **extra,
    }


def call_part(call: ToolCallSpec) -> dict[str, Any]:
    call_id, name, arguments = call
    return {"functionCall": {"id": call_id, "name": name, "args": json.loads(arguments)}}


def whole_answer(
    text: str = "", calls: tuple[ToolCallSpec, ...] = (), *, usage: tuple[int, int]
) -> dict[str, Any]:
    """The JSON body of a ``generateContent`` answer."""
    parts: list[dict[str, Any]] = [{"text": text}] if text else []
    parts += [call_part(call) for call in calls]
    return {
        "candidates": [
            {
                "content": {"parts": parts, "role": "model"},
                "finishReason": "STOP",
                "index": 0,
            }
        ],
        "usageMetadata": usage_metadata(*usage),
        "modelVersion": MODEL_VERSION,
        "responseId": RESPONSE_ID,
    }


def answer_events(
    text: str = "",
    calls: tuple[ToolCallSpec, ...] = (),
    *,
    usage: tuple[int, int] = (11, 7),
    finished: bool = True,
) -> list[Any]:
    """The chunks of a streamed answer: text in pieces of 4 characters, then the calls.

    The last chunk carries ``finishReason`` and the whole usage; ``finished=False`` leaves
    the reason out (a stream that ends cleanly but too early).
    """
    tokens_in, tokens_out = usage

    def chunk(parts: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        candidate = {"content": {"parts": parts, "role": "model"}, "index": 0, **fields}
        return {
            "candidates": [candidate],
            "usageMetadata": {"promptTokenCount": tokens_in, "totalTokenCount": tokens_in},
            "modelVersion": MODEL_VERSION,
            "responseId": RESPONSE_ID,
        }

    pieces = [[{"text": text[start : start + 4]}] for start in range(0, len(text), 4)]
    if calls:
        pieces.append([call_part(call) for call in calls])
    if not pieces:
        pieces.append([{"text": ""}])
    events = [chunk(parts) for parts in pieces]
    if finished:
        events[-1]["candidates"][0]["finishReason"] = "STOP"
        events[-1]["usageMetadata"] = usage_metadata(tokens_in, tokens_out)
    return events


STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def error_body(
    status: int, message: str, *, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """A Google API error body: ``{"error": {"code", "message", "status", "details"}}``."""
    error: dict[str, Any] = {
        "code": status,
        "message": message,
        "status": STATUS_NAMES.get(status, "UNKNOWN"),
    }
    if details is not None:
        error["details"] = details
    return {"error": error}


def retry_info(seconds: str) -> dict[str, str]:
    """A ``google.rpc.RetryInfo`` detail, e.g. ``retry_info("38s")``."""
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": seconds}


def rate_limited(delay: str | None) -> dict[str, Any]:
    """Gemini's 429: quota exceeded, with the delay (``"2s"``) in a RetryInfo detail."""
    details: list[dict[str, Any]] = [
        {
            "@type": "type.googleapis.com/google.rpc.QuotaFailure",
            "violations": [
                {
                    "quotaMetric": "generativelanguage.googleapis.com/"
                    "generate_content_free_tier_requests",
                    "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                }
            ],
        }
    ]
    if delay is not None:
        details.append(retry_info(delay))
    return error_body(
        429,
        "You exceeded your current quota, please check your plan and billing details.",
        details=details,
    )


INVALID_KEY = error_body(
    400,
    "API key not valid. Please pass a valid API key.",
    details=[
        {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "API_KEY_INVALID",
            "domain": "googleapis.com",
            "metadata": {"service": "generativelanguage.googleapis.com"},
        }
    ],
)
"""What Gemini answers to a key it does not know: 400, with ``API_KEY_INVALID``."""
