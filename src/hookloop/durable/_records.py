"""The recorded outputs of a durable turn's steps and of the turn itself, as JSON text.

Messages use the session codec (the form the session stores keep), so a replay commits the
very messages, ids and timestamps included, that the first run committed.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from .._errors import DurableRecordError, InvalidMessageError
from .._messages import AssistantMessage, Message, ToolMessage, Usage, UserMessage, load_messages
from .._stream_events import AgentResponse
from ..models._base import ProviderResponse
from ..sessions._codec import encode_message, json_text

_M = TypeVar("_M", bound=Message)

__all__ = [
    "decode_model_call",
    "decode_response",
    "decode_tool_call",
    "decode_turn",
    "encode_model_call",
    "encode_response",
    "encode_tool_call",
    "encode_turn",
]


def encode_model_call(response: ProviderResponse, message: AssistantMessage) -> str:
    """A model call's record: the message it commits and what else the response says."""
    usage = response.usage
    return json_text(
        {
            "message": json.loads(encode_message(message)),
            "finish_reason": response.finish_reason,
            "usage": None if usage is None else _usage(usage),
            "model": response.model,
            "id": response.id,
        }
    )


def decode_model_call(
    text: str, workflow_id: str, step: str
) -> tuple[ProviderResponse, AssistantMessage]:
    """The response and message of a model call's record.

    Raises:
        DurableRecordError: The record cannot be read.
    """
    try:
        data = json.loads(text)
        message = _one(data["message"], AssistantMessage)
        usage = data["usage"]
        response = ProviderResponse(
            content=message.content,
            tool_calls=message.tool_calls,
            finish_reason=data["finish_reason"],
            usage=None if usage is None else Usage(**usage),
            model=data["model"],
            id=data["id"],
        )
        return response, message
    except _UNREADABLE as exc:
        raise _unreadable(workflow_id, step, exc) from exc


def encode_tool_call(message: ToolMessage, usage: Usage | None = None) -> str:
    """A tool call's record: its tool message, and the tokens it used (a sub-agent's)."""
    return json_text(
        {
            "message": json.loads(encode_message(message)),
            "usage": None if usage is None else _usage(usage),
        }
    )


def decode_tool_call(text: str, workflow_id: str, step: str) -> tuple[ToolMessage, Usage | None]:
    """The tool message of a tool call's record, and the tokens the call used.

    Raises:
        DurableRecordError: The record cannot be read.
    """
    try:
        data = json.loads(text)
        usage = data["usage"]
        return _one(data["message"], ToolMessage), None if usage is None else Usage(**usage)
    except _UNREADABLE as exc:
        raise _unreadable(workflow_id, step, exc) from exc


def encode_turn(session_id: str, message: UserMessage) -> str:
    """A turn's input: the session and the user message (its id and timestamp fixed)."""
    return json_text({"session_id": session_id, "message": json.loads(encode_message(message))})


def decode_turn(text: str, workflow_id: str) -> tuple[str, UserMessage]:
    """The session and user message of a turn's input.

    Raises:
        DurableRecordError: The input cannot be read.
    """
    try:
        data = json.loads(text)
        session_id = data["session_id"]
        if not isinstance(session_id, str):
            raise TypeError("the session id is not a str")
        return session_id, _one(data["message"], UserMessage)
    except _UNREADABLE as exc:
        raise _unreadable(workflow_id, "input", exc) from exc


def encode_response(response: AgentResponse[Any]) -> str:
    """A turn's output: the messages it committed and the response's figures."""
    return json_text(
        {
            "messages": [json.loads(encode_message(m)) for m in response.messages],
            "message_id": response.message.id,
            "usage": _usage(response.usage),
            "iterations": response.iterations,
            "finish_reason": response.finish_reason,
        }
    )


def decode_response(text: str, workflow_id: str) -> AgentResponse[Any]:
    """The response of a turn's output.

    Raises:
        DurableRecordError: The output cannot be read.
    """
    try:
        data = json.loads(text)
        messages = tuple(load_messages(data["messages"]))
        final = next(m for m in messages if m.id == data["message_id"])
        if not isinstance(final, AssistantMessage):
            raise TypeError("the final message is not an assistant message")
        return AgentResponse(
            message=final,
            messages=messages,
            usage=Usage(**data["usage"]),
            iterations=data["iterations"],
            finish_reason=data["finish_reason"],
            output=final.content,
        )
    except _UNREADABLE as exc:
        raise _unreadable(workflow_id, "output", exc) from exc


def _usage(usage: Usage) -> dict[str, int]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
    }


def _one(item: object, kind: type[_M]) -> _M:
    (message,) = load_messages([item])
    if not isinstance(message, kind):
        raise TypeError(f"a {message.role} message, not a {kind.__name__}")
    return message


_UNREADABLE = (ValueError, KeyError, TypeError, StopIteration, InvalidMessageError)


def _unreadable(workflow_id: str, step: str, exc: Exception) -> DurableRecordError:
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return DurableRecordError(workflow_id=workflow_id, step=step, reason=reason)
