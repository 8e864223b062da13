"""The recorded outputs of a durable turn's steps and of the turn itself, as JSON text.

Messages use the session codec (the form the session stores keep), so a replay commits the
very messages, ids and timestamps included, that the first run committed.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, TypeVar

from .._approval import ApprovalDecision, PendingApproval
from .._errors import DurableRecordError, InvalidMessageError, UsageError
from .._limits import Spend
from .._messages import (
    AssistantMessage,
    Message,
    ToolMessage,
    UserMessage,
    dump_usage,
    load_messages,
    load_usage,
)
from .._stream_events import AgentResponse
from ..models._base import ProviderResponse
from ..sessions._codec import encode_message, json_text

_M = TypeVar("_M", bound=Message)

__all__ = [
    "Decisions",
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
            "usage": None if usage is None else dump_usage(usage),
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
            usage=None if usage is None else load_usage(usage),
            model=data["model"],
            id=data["id"],
        )
        return response, message
    except _UNREADABLE as exc:
        raise _unreadable(workflow_id, step, exc) from exc


def encode_tool_call(message: ToolMessage | PendingApproval, spent: Spend | None = None) -> str:
    """A tool call's record: its message and what it spent (a sub-agent's), or its wait."""
    if isinstance(message, PendingApproval):
        return json_text({"pending": _pending_json(message), "usage": None})
    if spent is None:
        return json_text({"message": json.loads(encode_message(message)), "usage": None})
    return json_text(
        {
            "message": json.loads(encode_message(message)),
            "usage": dump_usage(spent.usage),
            "requests": spent.requests,
            "tool_calls": spent.tool_calls,
        }
    )


def decode_tool_call(
    text: str, workflow_id: str, step: str
) -> tuple[ToolMessage | PendingApproval, Spend | None]:
    """The tool message of a tool call's record (or its wait), and what the call spent.

    A record written before requests and tool calls were kept has its tokens only.

    Raises:
        DurableRecordError: The record cannot be read.
    """
    try:
        data = json.loads(text)
        if "pending" in data:
            return _pending(data["pending"]), None
        message, usage = _one(data["message"], ToolMessage), data["usage"]
        if usage is None:
            return message, None
        requests, tool_calls = data.get("requests", 0), data.get("tool_calls", 0)
        if not (type(requests) is int and type(tool_calls) is int):
            raise TypeError("requests and tool_calls must be ints")
        return message, Spend(requests=requests, tool_calls=tool_calls, usage=load_usage(usage))
    except _UNREADABLE as exc:
        raise _unreadable(workflow_id, step, exc) from exc


def _pending_json(pending: PendingApproval) -> dict[str, Any]:
    return dataclasses.asdict(pending)


def _pending(item: object) -> PendingApproval:
    if not isinstance(item, dict) or not all(isinstance(k, str) for k in item):
        raise TypeError("a pending approval is not an object")
    return PendingApproval(**item)


@dataclasses.dataclass(frozen=True, slots=True)
class Decisions:
    """The input of a turn that resumes: decisions on the calls waiting for approval.

    Attributes:
        decisions: One per waiting call.
        after: The id of the session's last message when the decisions were sent: the
            conversation before the turn ends there (its own commits come after, and a
            replay of the turn must not take them for the conversation it resumes).
    """

    decisions: tuple[ApprovalDecision, ...]
    after: str | None = None


def encode_turn(session_id: str, message: UserMessage | Decisions, *, publish: bool = False) -> str:
    """A turn's input: the session and the user message (its id and timestamp fixed).

    A turn that resumes has the decisions on the calls the session's last turn left waiting
    instead of a message. ``publish``: the turn's events are wanted outside its worker
    (``hookloop serve --durable`` follows it).
    """
    data: dict[str, Any] = {"session_id": session_id}
    if isinstance(message, UserMessage):
        data["message"] = json.loads(encode_message(message))
    else:
        data["decisions"] = [dataclasses.asdict(d) for d in message.decisions]
        data["after"] = message.after
    if publish:
        data["publish"] = True
    return json_text(data)


def decode_turn(text: str, workflow_id: str) -> tuple[str, UserMessage | Decisions, bool]:
    """The session, user message (or decisions) and ``publish`` flag of a turn's input.

    Raises:
        DurableRecordError: The input cannot be read.
    """
    try:
        data = json.loads(text)
        session_id = data["session_id"]
        if not isinstance(session_id, str):
            raise TypeError("the session id is not a str")
        publish = data.get("publish", False)
        if not isinstance(publish, bool):
            raise TypeError("the publish flag is not a bool")
        if "decisions" in data:
            after = data.get("after")
            if after is not None and not isinstance(after, str):
                raise TypeError("the message the decisions come after is not an id")
            decisions = tuple(ApprovalDecision(**d) for d in data["decisions"])
            return session_id, Decisions(decisions, after), publish
        return session_id, _one(data["message"], UserMessage), publish
    except (*_UNREADABLE, UsageError) as exc:
        raise _unreadable(workflow_id, "input", exc) from exc


def encode_response(response: AgentResponse[Any]) -> str:
    """A turn's output: the messages it committed and the response's figures."""
    return json_text(
        {
            "messages": [json.loads(encode_message(m)) for m in response.messages],
            "message_id": response.message.id,
            "usage": dump_usage(response.usage),
            "iterations": response.iterations,
            "finish_reason": response.finish_reason,
            "pending": [_pending_json(p) for p in response.pending_approvals],
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
            usage=load_usage(data["usage"]),
            iterations=data["iterations"],
            finish_reason=data["finish_reason"],
            output=None if data.get("pending") else final.content,
            pending_approvals=tuple(_pending(p) for p in data.get("pending", ())),
        )
    except _UNREADABLE as exc:
        raise _unreadable(workflow_id, "output", exc) from exc


def _one(item: object, kind: type[_M]) -> _M:
    (message,) = load_messages([item])
    if not isinstance(message, kind):
        raise TypeError(f"a {message.role} message, not a {kind.__name__}")
    return message


_UNREADABLE = (ValueError, KeyError, TypeError, StopIteration, InvalidMessageError)


def _unreadable(workflow_id: str, step: str, exc: Exception) -> DurableRecordError:
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return DurableRecordError(workflow_id=workflow_id, step=step, reason=reason)
