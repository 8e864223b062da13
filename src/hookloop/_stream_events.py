"""What ``agent.chat_stream()`` yields, and what a finished chat returns.

The stream is the loop seen from outside, in the order things happen::

    MessageCommitted(user)
    per iteration:
        [TextDelta | ToolCallDelta]...      the model's answer as it arrives
        [PartialOutput]...                  with an output type: the answer so far,
                                            each time it validates to a new value
        ModelRetry                          an attempt failed and is retried: drop the
                                            deltas of this iteration received so far
        MessageCommitted(assistant)
        per tool call, in call order:
            ToolCallStarted                 (all calls of the iteration start first)
            ToolCallFinished                the tool message, ``is_error`` set on failure
            MessageCommitted(tool)
    ChatDone(response)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeAlias

from typing_extensions import TypeVar

from ._approval import PendingApproval
from ._messages import AssistantMessage, Message, ToolCall, ToolMessage, Usage
from ._slots import new, slot_init, slot_setter
from .models._base import FinishReason, TextDelta, ToolCallDelta

__all__ = [
    "AgentEvent",
    "AgentResponse",
    "ChatDone",
    "MessageCommitted",
    "ModelCallRestarted",
    "ModelRetry",
    "PartialOutput",
    "TextDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
]


# The default keeps a bare ``AgentResponse`` annotation meaning "any output".
OutputT = TypeVar("OutputT", covariant=True, default=Any)


@slot_init  # one per chat: its fields written through their slots
@dataclass(frozen=True, slots=True, kw_only=True)
class AgentResponse(Generic[OutputT]):
    """The outcome of one chat.

    Attributes:
        message: The final assistant message.
        messages: Every message this chat committed, the user message first (a chat that
            :meth:`~hookloop.Agent.resume` continued has none).
        usage: Tokens used by every model call of the chat.
        iterations: How many model calls (iterations) the chat took.
        finish_reason: Why the model stopped the last time.
        pending_approvals: The tool calls that wait for a person's decision, in call order;
            then ``message`` is the assistant message that made them, and
            ``agent.resume(decisions)`` goes on (see ``docs/approval.md``). Empty when the
            chat finished.
        output: The answer validated as the chat's output type; without one, the final
            answer's text. ``None`` while ``pending_approvals`` wait (the chat has no
            answer yet), whatever the type says. See ``docs/output.md``.
    """

    message: AssistantMessage
    messages: tuple[Message, ...]
    usage: Usage
    iterations: int
    finish_reason: FinishReason
    pending_approvals: tuple[PendingApproval, ...] = ()
    output: OutputT = None  # type: ignore[assignment]  # the loop always sets it

    @property
    def text(self) -> str:
        """The final answer's text."""
        return self.message.content


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCommitted:
    """A message was appended to the history."""

    message: Message
    type: Literal["message"] = "message"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallStarted:
    """A tool call of the current iteration is about to run."""

    call: ToolCall
    iteration: int
    type: Literal["tool_call_started"] = "tool_call_started"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallFinished:
    """A tool call finished; ``message`` is what the model will see."""

    call: ToolCall
    message: ToolMessage
    iteration: int
    type: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelRetry:
    """A model call failed and will be tried again.

    Discard the text and tool-call deltas received since the iteration started: the next
    attempt streams its answer from the beginning.
    """

    iteration: int
    attempt: int
    error: Exception | None
    type: Literal["model_retry"] = "model_retry"


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelCallRestarted:
    """A durable turn resumed after its worker died, and this model call runs again.

    Discard the deltas received since the iteration started, in an earlier process or
    this one: the call streams its answer from the beginning. See ``docs/durable.md``.
    """

    iteration: int
    type: Literal["model_call_restarted"] = "model_call_restarted"


@dataclass(frozen=True, slots=True, kw_only=True)
class PartialOutput:
    """With an output type: the answer streamed so far validates to ``output``.

    It comes after the delta that made it valid, each time the value changes; fields still
    missing are absent (a ``TypedDict``) or make the value invalid until they arrive (a model
    with required fields). The final value is the response's ``output``.
    """

    output: Any
    iteration: int
    type: Literal["partial_output"] = "partial_output"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatDone:
    """The chat finished; the last event of a stream."""

    response: AgentResponse[Any]
    type: Literal["chat_done"] = "chat_done"


AgentEvent: TypeAlias = (
    TextDelta
    | ToolCallDelta
    | MessageCommitted
    | ToolCallStarted
    | ToolCallFinished
    | ModelRetry
    | ModelCallRestarted
    | PartialOutput
    | ChatDone
)
"""What ``agent.chat_stream()`` yields; ``event.type`` tells which it is."""


# The loop's own events of every iteration, made through their slots (see _slots.py): a
# stream hands several over per iteration (bench/loop.py, stream_ratio).
_committed_message, _committed_type = (
    slot_setter(MessageCommitted, "message"),
    slot_setter(MessageCommitted, "type"),
)
_started_call, _started_iteration, _started_type = (
    slot_setter(ToolCallStarted, "call"),
    slot_setter(ToolCallStarted, "iteration"),
    slot_setter(ToolCallStarted, "type"),
)
_finished_call, _finished_message = (
    slot_setter(ToolCallFinished, "call"),
    slot_setter(ToolCallFinished, "message"),
)
_finished_iteration, _finished_type = (
    slot_setter(ToolCallFinished, "iteration"),
    slot_setter(ToolCallFinished, "type"),
)


def message_committed(message: Message) -> MessageCommitted:
    """``MessageCommitted(message=message)``, made faster."""
    event = new(MessageCommitted)
    _committed_message(event, message)
    _committed_type(event, "message")
    return event


def tool_call_started(call: ToolCall, iteration: int) -> ToolCallStarted:
    """``ToolCallStarted(call=call, iteration=iteration)``, made faster."""
    event = new(ToolCallStarted)
    _started_call(event, call)
    _started_iteration(event, iteration)
    _started_type(event, "tool_call_started")
    return event


def tool_call_finished(call: ToolCall, message: ToolMessage, iteration: int) -> ToolCallFinished:
    """``ToolCallFinished(call=call, message=message, iteration=iteration)``, made faster."""
    event = new(ToolCallFinished)
    _finished_call(event, call)
    _finished_message(event, message)
    _finished_iteration(event, iteration)
    _finished_type(event, "tool_call_finished")
    return event
