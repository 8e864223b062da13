"""Bedrock's Converse wire format for the local provider server.

A whole answer is JSON; a ConverseStream answer is the AWS event stream
(``application/vnd.amazon.eventstream``): binary frames, each a prelude (total length,
headers length, the prelude's CRC32), typed headers (``:event-type``, ``:message-type``,
``:content-type``), a JSON payload and the frame's CRC32. Frames are encoded here byte for byte
as the service sends them, so botocore's own parser reads them and checks their CRCs.

Format: https://docs.aws.amazon.com/transcribe/latest/dg/streaming-setting-up.html
("Event stream encoding") and the ConverseStream reference,
https://docs.aws.amazon.com/bedrock/latest/APIReference/API_runtime_ConverseStream.html.
"""

from __future__ import annotations

import base64
import binascii
import json
import struct
from dataclasses import dataclass
from typing import Any

EVENT_STREAM = "application/vnd.amazon.eventstream"
JSON_HEADERS = {"content-type": "application/json"}
STREAM_HEADERS = {"content-type": EVENT_STREAM}

ToolCallSpec = tuple[str, str, str]


@dataclass(frozen=True)
class Frame:
    """One event-stream message: an event, an exception or an error.

    ``kind`` is ``"event"`` (``name`` is the event type, e.g. ``"contentBlockDelta"``),
    ``"exception"`` (``name`` is the exception type, e.g. ``"throttlingException"``) or
    ``"error"`` (``name`` is the error code; ``payload["message"]`` its message).
    ``raw`` replaces the JSON payload with these bytes (a payload that does not parse).
    """

    name: str
    payload: dict[str, Any]
    kind: str = "event"
    raw: bytes | None = None

    def encode(self) -> bytes:
        if self.kind == "error":
            headers = {
                ":message-type": "error",
                ":error-code": self.name,
                ":error-message": str(self.payload.get("message", "")),
            }
            body = b""
        else:
            type_header = ":event-type" if self.kind == "event" else ":exception-type"
            headers = {
                type_header: self.name,
                ":content-type": "application/json",
                ":message-type": self.kind,
            }
            body = self.raw if self.raw is not None else json.dumps(self.payload).encode()
        return encode_frame(headers, body)


def encode_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One event-stream message with string ``headers`` and ``payload``, CRCs included."""
    encoded = b"".join(
        struct.pack("!B", len(name))
        + name.encode()
        + struct.pack("!BH", 7, len(value.encode()))
        # header type 7: a string of 2-byte length
        + value.encode()
        for name, value in headers.items()
    )
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack("!II", total, len(encoded))
    prelude += struct.pack("!I", binascii.crc32(prelude) & 0xFFFFFFFF)
    message = prelude + encoded + payload
    return message + struct.pack("!I", binascii.crc32(message) & 0xFFFFFFFF)


def encode_frames(frames: list[Frame]) -> bytes:
    """The body of a ConverseStream answer made of ``frames``."""
    return b"".join(frame.encode() for frame in frames)


def whole_answer(
    text: str = "",
    calls: tuple[ToolCallSpec, ...] = (),
    *,
    usage: tuple[int, int] = (11, 7),
    cache: tuple[int, int] = (0, 0),
) -> dict[str, Any]:
    """The JSON body of a Converse answer; ``cache`` is (read, written) input tokens."""
    blocks: list[dict[str, Any]] = [{"text": text}] if text else []
    blocks += [
        {"toolUse": {"toolUseId": i, "name": n, "input": json.loads(a)}} for i, n, a in calls
    ]
    return {
        "output": {"message": {"role": "assistant", "content": blocks}},
        "stopReason": "tool_use" if calls else "end_turn",
        "usage": _usage(usage, cache),
        "metrics": {"latencyMs": 120},
    }


def _usage(usage: tuple[int, int], cache: tuple[int, int]) -> dict[str, int]:
    tokens_in, tokens_out = usage
    read, written = cache
    counts = {
        "inputTokens": tokens_in,
        "outputTokens": tokens_out,
        "totalTokens": tokens_in + tokens_out + read + written,
    }
    if read or written:
        counts["cacheReadInputTokens"] = read
        counts["cacheWriteInputTokens"] = written
    return counts


def answer_events(
    text: str = "",
    calls: tuple[ToolCallSpec, ...] = (),
    *,
    usage: tuple[int, int] = (11, 7),
    cache: tuple[int, int] = (0, 0),
    finished: bool = True,
) -> list[Frame]:
    """The frames of a ConverseStream answer, text and arguments in pieces of 4 characters.

    ``finished=False`` leaves out ``messageStop`` and ``metadata``: a stream that ends
    cleanly but too early.
    """
    frames = [Frame("messageStart", {"role": "assistant"})]
    index = 0
    if text:
        frames += [
            Frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": piece}})
            for piece in _pieces(text)
        ]
        frames.append(Frame("contentBlockStop", {"contentBlockIndex": 0}))
        index = 1
    for i, n, a in calls:
        start = {"toolUse": {"toolUseId": i, "name": n}}
        frames.append(Frame("contentBlockStart", {"contentBlockIndex": index, "start": start}))
        frames += [
            Frame(
                "contentBlockDelta",
                {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}},
            )
            for piece in _pieces(a)
        ]
        frames.append(Frame("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if finished:
        frames.append(Frame("messageStop", {"stopReason": "tool_use" if calls else "end_turn"}))
        metadata = {"usage": _usage(usage, cache), "metrics": {"latencyMs": 120}}
        frames.append(Frame("metadata", metadata))
    return frames


def error_body(code: str | None, message: str) -> dict[str, Any]:
    """An error body as Bedrock sends it: the exception's name in ``__type``."""
    return {"__type": code, "message": message} if code else {"message": message}


def recorded_body(response: dict[str, Any]) -> str | bytes:
    """A recorded case's body as the provider sent it (event streams are stored in base64)."""
    if response.get("body_encoding") == "base64":
        return base64.b64decode(response["body"])
    body: str = response["body"]
    return body


def _pieces(text: str, size: int = 4) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]
