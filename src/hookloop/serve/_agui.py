"""AG-UI on the wire: a run's hookloop events as AG-UI events, and AG-UI input as hookloop's.

:class:`EventTranslator` turns what a chat emits (``AgentEvent``) into the protocol's events,
built with ``ag-ui-protocol``'s own pydantic types, so every event sent is one the protocol
accepts. The mapping:

- ``TextDelta`` -> ``TEXT_MESSAGE_START`` (at the first), ``TEXT_MESSAGE_CONTENT``; the
  assistant message's commit -> ``TEXT_MESSAGE_END``;
- ``ToolCallDelta`` -> ``TOOL_CALL_START`` (at a call's first), ``TOOL_CALL_ARGS``; the commit
  -> ``TOOL_CALL_END`` (a call that did not stream gets all three then);
- ``ToolCallFinished`` -> ``TOOL_CALL_RESULT``;
- ``ModelRetry``, ``ModelCallRestarted``, ``PartialOutput`` (no AG-UI name) -> ``CUSTOM``
  named ``hookloop.<type>``; the run's usage -> ``CUSTOM`` ``hookloop.usage``;
- the end -> ``MESSAGES_SNAPSHOT`` (the session's messages) and ``RUN_FINISHED``, whose
  outcome is ``interrupt`` with one :class:`Interrupt` per call waiting for approval.

A resume entry answers an interrupt (its id is the call's id) with a payload
``{"action": "approve" | "deny" | "edit", "reason": ..., "arguments": {...}, "digest": ...}``;
``status: "cancelled"`` is a denial. :func:`decisions_for` makes the decisions with the pending
calls' own methods, and ``agent.resume()``'s checks then apply unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pydantic_core
from ag_ui.core import (
    AssistantMessage as AguiAssistant,
)
from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    FunctionCall,
    Interrupt,
    MessagesSnapshotEvent,
    ResumeEntry,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    TokenUsage,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.core import (
    Message as AguiMessage,
)
from ag_ui.core import (
    SystemMessage as AguiSystem,
)
from ag_ui.core import (
    ToolCall as AguiToolCall,
)
from ag_ui.core import (
    ToolMessage as AguiTool,
)
from ag_ui.core import (
    UserMessage as AguiUser,
)

from .._approval import ApprovalDecision, PendingApproval
from .._errors import UsageError
from .._limits import Spend
from .._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    Usage,
    UserMessage,
    new_id,
)
from .._stream_events import (
    AgentEvent,
    AgentResponse,
    ChatDone,
    MessageCommitted,
    ModelCallRestarted,
    ModelRetry,
    PartialOutput,
    ToolCallFinished,
)
from ..hooks._contexts import (
    BackoffWaitContext,
    CompactionContext,
    GuardrailVerdictContext,
    TrimContext,
)
from ..models._base import TextDelta, ToolCallDelta

__all__ = [
    "APPROVAL_REASON",
    "EventTranslator",
    "agui_messages",
    "backoff_value",
    "compaction_value",
    "custom",
    "decisions_for",
    "error_event",
    "interrupts",
    "new_user_message",
    "pending_json",
    "run_started",
    "spend_json",
    "trim_value",
    "usage_json",
    "verdict_value",
]

APPROVAL_REASON = "tool_approval"
"""An :class:`Interrupt`'s reason when a tool call waits for a person's decision."""

PROTOCOL_VERSION = "1.0"


def run_started(thread_id: str, run_id: str) -> RunStartedEvent:
    """The first event of every run."""
    return RunStartedEvent(thread_id=thread_id, run_id=run_id, protocol_version=PROTOCOL_VERSION)


def error_event(exc: BaseException) -> RunErrorEvent:
    """A failed run's last event: the error's type as the code, its message for a person."""
    return RunErrorEvent(message=str(exc) or type(exc).__name__, code=type(exc).__name__)


class EventTranslator:
    """One run's events in AG-UI terms; :meth:`events` is called once per hookloop event."""

    def __init__(
        self, thread_id: str, run_id: str, *, text_id: Callable[[], str] | None = None
    ) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        # A streamed text's message id: new ones by default; a run translated again from its
        # stored events (the durable mode) needs the same ones every time.
        self._new_text_id = text_id or (lambda: new_id("msg"))
        self._text_id: str | None = None  # the text message being streamed
        self._calls: dict[int, str] = {}  # streamed tool calls of this answer: index -> id
        self._started: set[str] = set()  # tool calls whose TOOL_CALL_START was sent
        self.usage = Usage()

    def events(self, event: AgentEvent) -> list[BaseEvent]:
        """The AG-UI events for one hookloop event (often one, sometimes none or several)."""
        if isinstance(event, TextDelta):
            return self._text(event.text)
        if isinstance(event, ToolCallDelta):
            return self._call_delta(event)
        if isinstance(event, MessageCommitted):
            return self._committed(event.message)
        if isinstance(event, ToolCallFinished):
            message = event.message
            return [
                ToolCallResultEvent(
                    message_id=message.id,
                    tool_call_id=message.tool_call_id,
                    content=message.content,
                    role="tool",
                )
            ]
        if isinstance(event, ModelRetry):
            closed = self._end_text()
            self._calls.clear()
            error = None if event.error is None else f"{type(event.error).__name__}: {event.error}"
            value = {"iteration": event.iteration, "attempt": event.attempt, "error": error}
            return [*closed, CustomEvent(name="hookloop.model_retry", value=value)]
        if isinstance(event, ModelCallRestarted):
            closed = self._end_text()
            self._calls.clear()
            value = {"iteration": event.iteration}
            return [*closed, CustomEvent(name="hookloop.model_call_restarted", value=value)]
        if isinstance(event, PartialOutput):
            value = {"iteration": event.iteration, "output": _jsonable(event.output)}
            return [CustomEvent(name="hookloop.partial_output", value=value)]
        if isinstance(event, ChatDone):
            return []  # the run's end is sent by finished(), with the session's messages
        return []  # ToolCallStarted: the call was announced as it streamed or was committed

    def finished(
        self, response: AgentResponse[Any], messages: Sequence[Message]
    ) -> list[BaseEvent]:
        """The last events of a run that did not fail: the snapshot, usage and the outcome."""
        usage = response.usage
        done: list[BaseEvent] = [
            *self._end_text(),
            MessagesSnapshotEvent(messages=agui_messages(messages)),
            CustomEvent(name="hookloop.usage", value=usage_json(usage)),
        ]
        token_usage = [
            TokenUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                total_tokens=usage.input_tokens + usage.output_tokens,
            )
        ]
        if response.pending_approvals:
            outcome = RunFinishedInterruptOutcome(interrupts=interrupts(response.pending_approvals))
            done.append(
                RunFinishedEvent(
                    thread_id=self.thread_id,
                    run_id=self.run_id,
                    outcome=outcome,
                    usage=token_usage,
                )
            )
        else:
            result = _jsonable(response.output) if response.output is not None else response.text
            done.append(
                RunFinishedEvent(
                    thread_id=self.thread_id, run_id=self.run_id, result=result, usage=token_usage
                )
            )
        return done

    def cancelled(self, messages: Sequence[Message]) -> list[BaseEvent]:
        """The last events of a run that was cancelled (its messages are in the log)."""
        return [
            *self._end_text(),
            MessagesSnapshotEvent(messages=agui_messages(messages)),
            RunFinishedEvent(
                thread_id=self.thread_id, run_id=self.run_id, outcome=RunFinishedCancelledOutcome()
            ),
        ]

    def failed(self, exc: BaseException) -> list[BaseEvent]:
        """The last events of a run that failed."""
        return [*self._end_text(), error_event(exc)]

    # -- the pieces ----------------------------------------------------------------------------

    def _text(self, text: str) -> list[BaseEvent]:
        if not text:
            return []
        out: list[BaseEvent] = []
        if self._text_id is None:
            self._text_id = self._new_text_id()
            out.append(TextMessageStartEvent(message_id=self._text_id, role="assistant"))
        out.append(TextMessageContentEvent(message_id=self._text_id, delta=text))
        return out

    def _end_text(self) -> list[BaseEvent]:
        if self._text_id is None:
            return []
        ended = TextMessageEndEvent(message_id=self._text_id)
        self._text_id = None
        return [ended]

    def _call_delta(self, delta: ToolCallDelta) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        call_id = self._calls.get(delta.index)
        if call_id is None:
            if delta.id is None or delta.name is None:
                return []  # a provider's stray piece before the call's first: nothing to show
            call_id = self._calls[delta.index] = delta.id
            self._started.add(call_id)
            out += self._end_text()
            out.append(ToolCallStartEvent(tool_call_id=call_id, tool_call_name=delta.name))
        if delta.arguments:
            out.append(ToolCallArgsEvent(tool_call_id=call_id, delta=delta.arguments))
        return out

    def _committed(self, message: Message) -> list[BaseEvent]:
        if not isinstance(message, AssistantMessage):
            return []
        out = self._end_text()
        if message.content and not out:
            # text that did not stream (a whole answer): sent whole
            text_id = message.id
            out += [
                TextMessageStartEvent(message_id=text_id, role="assistant"),
                TextMessageContentEvent(message_id=text_id, delta=message.content),
                TextMessageEndEvent(message_id=text_id),
            ]
        for call in message.tool_calls:
            if call.id not in self._started:
                self._started.add(call.id)
                out.append(
                    ToolCallStartEvent(
                        tool_call_id=call.id, tool_call_name=call.name, parent_message_id=message.id
                    )
                )
                if call.arguments:
                    out.append(ToolCallArgsEvent(tool_call_id=call.id, delta=call.arguments))
            out.append(ToolCallEndEvent(tool_call_id=call.id))
        self._calls.clear()
        return out


# -- hook events with no AG-UI name, sent as CUSTOM events named hookloop.<event> ------------


def backoff_value(ctx: BackoffWaitContext) -> dict[str, Any]:
    """``on_backoff_wait``: a failed model call is tried again after ``seconds``."""
    return {
        "iteration": ctx.iteration,
        "attempt": ctx.attempt,
        "seconds": ctx.seconds,
        "reason": ctx.reason,
        "error": f"{type(ctx.error).__name__}: {ctx.error}",
    }


def trim_value(ctx: TrimContext) -> dict[str, Any]:
    """``on_trim``: the context policy left older messages out of a request."""
    return {
        "iteration": ctx.iteration,
        "reason": ctx.reason,
        "messagesBefore": ctx.messages_before,
        "messagesAfter": ctx.messages_after,
        "tokensBefore": ctx.tokens_before,
        "tokensAfter": ctx.tokens_after,
    }


def compaction_value(ctx: CompactionContext) -> dict[str, Any]:
    """``on_compaction``: the history was compacted."""
    return {
        "iteration": ctx.iteration,
        "tier": ctx.tier,
        "messagesBefore": ctx.messages_before,
        "messagesAfter": ctx.messages_after,
        "tokensBefore": ctx.tokens_before,
        "tokensAfter": ctx.tokens_after,
    }


def verdict_value(ctx: GuardrailVerdictContext) -> dict[str, Any]:
    """``on_guardrail_verdict``: a guardrail judged something."""
    return {
        "position": ctx.position,
        "guardrail": ctx.guardrail,
        "action": ctx.verdict.action,
        "reason": ctx.verdict.reason,
        "messageId": ctx.message_id,
        "callId": ctx.call_id,
    }


def custom(event: str, value: dict[str, Any]) -> CustomEvent:
    """The CUSTOM event of a hook event: ``on_trim`` is named ``hookloop.trim``."""
    return CustomEvent(name="hookloop." + event.removeprefix("on_"), value=value)


def interrupts(pending: Iterable[PendingApproval]) -> list[Interrupt]:
    """One interrupt per call waiting for approval; its id is the call's id."""
    return [
        Interrupt(
            id=p.call_id,
            reason=APPROVAL_REASON,
            message=p.reason or f"{p.tool_name} needs approval",
            tool_call_id=p.call_id,
            response_schema=_DECISION_SCHEMA,
            metadata=pending_json(p),
        )
        for p in pending
    ]


def pending_json(pending: PendingApproval) -> dict[str, Any]:
    """A pending call as JSON: what a person is shown, and the digest a decision names."""
    return {
        "callId": pending.call_id,
        "toolName": pending.tool_name,
        "arguments": pending.arguments,
        "modelArguments": pending.model_arguments,
        "reason": pending.reason,
        "digest": pending.digest,
        "changed": pending.changed,
    }


_DECISION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"enum": ["approve", "deny", "edit"]},
        "reason": {"type": "string"},
        "arguments": {"type": "object"},
        "digest": {"type": "string"},
    },
    "required": ["action"],
}


def decisions_for(
    pending: Sequence[PendingApproval], entries: Sequence[ResumeEntry]
) -> list[ApprovalDecision]:
    """The decisions that resume entries make, each made with its pending call's own method.

    An entry for no pending call becomes a decision for that id, which ``agent.resume()``
    refuses as it refuses any (:class:`~hookloop.UnknownApprovalError`); a ``digest`` in the
    payload is the one the decision carries, so a decision made for other arguments is
    refused (:class:`~hookloop.ApprovalMismatchError`).

    Raises:
        UsageError: A payload is not an object with a known action.
    """
    by_id = {p.call_id: p for p in pending}
    decisions = []
    for entry in entries:
        payload: object = entry.payload if entry.payload is not None else {}
        if not isinstance(payload, dict):
            raise UsageError(f"the resume entry for {entry.interrupt_id!r} needs an object payload")
        action = "deny" if entry.status == "cancelled" else payload.get("action")
        reason = payload.get("reason")
        call = by_id.get(entry.interrupt_id)
        if call is None:
            digest = payload.get("digest", "")
            decisions.append(
                ApprovalDecision(
                    call_id=entry.interrupt_id,
                    action="deny",
                    digest=digest if isinstance(digest, str) else "",
                    reason="unknown",
                )
            )
            continue
        if action == "approve":
            decision = call.approve()
        elif action == "deny":
            default = "the user cancelled it" if entry.status == "cancelled" else ""
            decision = call.deny(reason if isinstance(reason, str) and reason else default)
        elif action == "edit":
            arguments = payload.get("arguments")
            if not isinstance(arguments, (dict, str)):
                raise UsageError(f"the edit of {call.call_id!r} needs its arguments as an object")
            decision = call.edit(arguments)
        else:
            raise UsageError(
                f"the resume entry for {call.call_id!r} needs an action: approve, deny or edit "
                f"(got {action!r:.40})"
            )
        digest = payload.get("digest")
        if digest is not None:
            if not isinstance(digest, str):
                raise UsageError(f"the digest of the decision on {call.call_id!r} must be a str")
            decision = ApprovalDecision(
                call_id=decision.call_id,
                action=decision.action,
                digest=digest,
                reason=decision.reason,
                arguments=decision.arguments,
            )
        decisions.append(decision)
    return decisions


def new_user_message(run_input: RunAgentInput) -> UserMessage:
    """The user message a run adds: the input's last message, which must be the user's.

    AG-UI clients send the whole conversation; the session log is the truth, so only the
    last message is new. Its id is kept.

    Raises:
        UsageError: The input has no messages, or its last one is not a user's text.
    """
    if not run_input.messages:
        raise UsageError("the run has no messages and resumes nothing: send a user message")
    last = run_input.messages[-1]
    if not isinstance(last, AguiUser):
        raise UsageError(f"the run's last message must be the user's, not a {last.role!r} one")
    content = last.content
    if not isinstance(content, str):
        texts = [getattr(part, "text", None) for part in content]
        if not all(isinstance(t, str) for t in texts):
            raise UsageError("only text parts are accepted in a user message")
        content = "".join(t for t in texts if isinstance(t, str))
    if not content.strip():
        raise UsageError("the user message is empty")
    return UserMessage(content=content, id=last.id)


def agui_messages(messages: Sequence[Message]) -> list[AguiMessage]:
    """A conversation's messages as AG-UI messages, ids kept."""
    out: list[AguiMessage] = []
    for m in messages:
        if isinstance(m, SystemMessage):
            out.append(AguiSystem(id=m.id, content=m.content))
        elif isinstance(m, UserMessage):
            out.append(AguiUser(id=m.id, content=_text_of(m)))
        elif isinstance(m, AssistantMessage):
            calls = [
                AguiToolCall(id=c.id, function=FunctionCall(name=c.name, arguments=c.arguments))
                for c in m.tool_calls
            ]
            out.append(AguiAssistant(id=m.id, content=m.content or None, tool_calls=calls or None))
        elif isinstance(m, ToolMessage):
            error = m.content if m.is_error else None
            out.append(
                AguiTool(id=m.id, content=m.content, tool_call_id=m.tool_call_id, error=error)
            )
    return out


def _text_of(message: UserMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    return "".join(getattr(part, "text", "") for part in message.content)


def usage_json(usage: Usage) -> dict[str, Any]:
    """A run's usage for the page: tokens, and the cost in dollars as a string (or null)."""
    return {
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cost": None if usage.cost is None else f"{usage.cost.normalize():f}",
    }


def spend_json(spent: Spend) -> dict[str, Any]:
    """What a session spent, for the page: requests, tokens and cost."""
    return {"requests": spent.requests, **usage_json(spent.usage)}


def _jsonable(value: object) -> Any:
    """A typed output as JSON values (models, dataclasses and the rest; else its text)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:
        return pydantic_core.to_jsonable_python(value)
    except pydantic_core.PydanticSerializationError:
        return str(value)
