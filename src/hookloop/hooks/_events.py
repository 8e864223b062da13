"""The hook events: their names and the event table, one row per event.

Every event is one row of :data:`EVENT_TABLE` (its context type, kind, what a handler may
return and set, what stops the chain, sync-only or not, forwarded to a parent agent or not,
how the trace prints it); registration, dispatch, sub-agent forwarding, the trace plugin and
the table in ``docs/hooks.md`` read that row. Adding an event is adding a row and its context
class (``_contexts.py``); ``python tests/hooks/test_event_table.py`` then writes the names,
the typed ``add_hook`` overloads and the docs table, which a test keeps in step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, Protocol, TypeAlias

from .._approval import Defer
from .._messages import Message, ToolCall
from ..models._base import ProviderRequest, ProviderResponse
from ._contexts import (
    AfterModelCallContext,
    ApprovalDecisionContext,
    ApprovalRequestContext,
    BackoffWaitContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    CompactionContext,
    DelegationContext,
    FirstChunkContext,
    GuardrailVerdictContext,
    InputGuardrailContext,
    MemoryWriteContext,
    MessageContext,
    OutputGuardrailContext,
    OutputReturn,
    OutputValidationErrorContext,
    PreCompressContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    ScopeContext,
    SessionSwitchContext,
    SubAgentEventContext,
    ToolCallGuardrailContext,
    ToolErrorContext,
    ToolResultContext,
    ToolResultGuardrailContext,
    ToolReturn,
    TrimContext,
)

__all__ = ["EVENTS", "EVENT_TABLE", "EventSpec", "HookEvent", "Kind", "TraceFormat"]


Kind: TypeAlias = Literal["observer", "interceptor", "report", "collector", "guard"]


class TraceFormat(Protocol):
    """What a row's ``trace`` function may use to describe an event in one line."""

    def cut(self, text: str) -> str:
        """``text`` on one line, quoted, shortened to the trace's width."""
        ...

    def message(self, message: Message) -> str:
        """A message in one line: role, tool calls or result, and an excerpt."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class EventSpec:
    """One hook event: everything the registry, dispatch, forwarding, trace and docs use.

    Attributes:
        name: The event's name.
        context: The type of the context object its handlers receive.
        kind: ``observer`` (the return value is ignored; a raise propagates), ``interceptor``
            (a return value replaces ``ctx.<field>``), ``report`` (after the fact; a raise is
            logged at WARNING and ignored), ``collector`` (the strings returned are gathered),
            ``guard`` (a guardrail: a returned :class:`~hookloop.Verdict` passes, changes or
            stops; a raise or any other return is a trip; see ``docs/guardrails.md``).
        returns: What a handler may return, for the docs.
        stops: What stops the chain early, for the docs.
        sync_only: The event fires inside a synchronous call: async handlers are refused.
        forwarded: A sub-agent hands the event on to the delegating agent.
        trace: How :class:`~hookloop.TracePlugin` describes the event in one line.
        field: For an interceptor, the context field a returned value replaces.
        accept: For an interceptor, the return types that replace ``field``.
        stop: For an interceptor, the return types that end the chain and are used.
    """

    name: str
    context: type
    kind: Kind
    returns: str
    stops: str
    trace: Callable[[Any, TraceFormat], str]
    sync_only: bool = False
    forwarded: bool = True
    field: str = ""
    accept: tuple[type, ...] = ()
    stop: tuple[type, ...] = ()

    @property
    def settable(self) -> tuple[str, ...]:
        """The context fields a handler may set (the only mutation allowed).

        The context class declares them (``@context(settable=...)``): it refuses the others.
        """
        settable: tuple[str, ...] = getattr(self.context, "__settable__", ())
        return settable

    @property
    def fixed(self) -> tuple[str, ...]:
        """The context fields a handler may not set (an interceptor's ``field`` included)."""
        return tuple(
            f.name for f in dataclasses.fields(self.context) if f.name not in self.settable
        )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _outcome(ctx: AfterModelCallContext) -> str:
    outcome = "ok" if ctx.error is None else f"{type(ctx.error).__name__}: {ctx.error}"
    return f"attempt {ctx.attempt}: {outcome}" + (", retrying" if ctx.retry else "")


def _answer(ctx: ResponseContext, t: TraceFormat) -> str:
    r = ctx.response
    if r.tool_calls:
        return f"{len(r.tool_calls)} tool call(s): " + ", ".join(c.name for c in r.tool_calls)
    return f"text {t.cut(r.content)}"


def _done(ctx: ChatDoneContext) -> str:
    r = ctx.response
    return (
        f"{_plural(r.iterations, 'iteration')}, {r.usage.input_tokens} tokens in, "
        f"{r.usage.output_tokens} out"
    )


def _verdict(ctx: GuardrailVerdictContext, t: TraceFormat) -> str:
    v = ctx.verdict
    return f"{ctx.position} {ctx.guardrail!r}: {v.action}" + (
        f" ({t.cut(v.reason)})" if v.reason else ""
    )


_OBSERVED = "- (ignored)"
_VERDICT = "a `Verdict` (allow, block, {}); `None`: no opinion"
_TRIPS = "a block, a raise or any other return (a trip: the chat ends)"
_RAISE_ENDS = "a raise (it ends the chat)"
_REPORTED = "nothing: a raise is logged at WARNING and ignored"

EVENT_TABLE: Final[Mapping[str, EventSpec]] = {
    spec.name: spec
    for spec in (
        EventSpec(
            name="on_chat_start",
            context=ChatStartContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: t.cut(c.message.text),
        ),
        EventSpec(
            name="on_chat_done",
            context=ChatDoneContext,
            kind="observer",
            returns=_OBSERVED,
            stops="a raise (it reaches the caller; `on_chat_error` does not fire)",
            trace=lambda c, t: _done(c),
        ),
        EventSpec(
            name="on_chat_abort",
            context=ChatAbortContext,
            kind="observer",
            returns=_OBSERVED,
            stops="nothing: a raise is logged at ERROR and ignored",
            trace=lambda c, t: f"cancelled: {c.reason!r}",
        ),
        EventSpec(
            name="on_chat_error",
            context=ChatErrorContext,
            kind="observer",
            returns=_OBSERVED,
            stops="nothing: a raise is logged at ERROR and ignored",
            trace=lambda c, t: f"{type(c.error).__name__}: {c.error}",
        ),
        EventSpec(
            name="on_message",
            context=MessageContext,
            kind="observer",
            returns=_OBSERVED,
            stops="a raise (it ends the chat); a cancellation waits for every handler",
            trace=lambda c, t: t.message(c.message),
        ),
        EventSpec(
            name="pre_request",
            context=PreRequestContext,
            kind="interceptor",
            returns="`ProviderRequest` (replace) or `ProviderResponse`",
            stops="a `ProviderResponse` skips the later handlers **and the model**",
            field="request",
            accept=(ProviderRequest,),
            stop=(ProviderResponse,),
            trace=lambda c, t: (
                f"iteration {c.iteration}: {_plural(len(c.request.messages), 'message')}, "
                f"{_plural(len(c.request.tools), 'tool')}"
            ),
        ),
        EventSpec(
            name="on_response",
            context=ResponseContext,
            kind="interceptor",
            returns="`ProviderResponse` (replace)",
            stops="never: every handler runs",
            field="response",
            accept=(ProviderResponse,),
            trace=_answer,
        ),
        EventSpec(
            name="after_model_call",
            context=AfterModelCallContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: _outcome(c),
        ),
        EventSpec(
            name="pre_tool_call",
            context=PreToolCallContext,
            kind="interceptor",
            returns=(
                "`ToolCall` (replace), `ToolReturn(value)`, an exception instance, or "
                "`Defer(reason=...)`"
            ),
            stops=(
                "a `ToolReturn` or an exception skips the later handlers **and the tool**; "
                "a `Defer` makes the call wait for approval"
            ),
            field="call",
            accept=(ToolCall,),
            stop=(ToolReturn, Exception, Defer),
            trace=lambda c, t: f"{c.call.name}({c.call.arguments}) in scope {c.scope.name!r}",
        ),
        EventSpec(
            name="on_tool_call_result",
            context=ToolResultContext,
            kind="interceptor",
            returns="`ToolReturn(value)` (replace)",
            stops="never: every handler runs",
            field="result",
            accept=(ToolReturn,),
            trace=lambda c, t: f"{c.call.name} -> {t.cut(str(c.result))}",
        ),
        EventSpec(
            name="on_tool_call_error",
            context=ToolErrorContext,
            kind="interceptor",
            returns="an exception (replace)",
            stops="never: every handler runs",
            field="error",
            accept=(Exception,),
            trace=lambda c, t: f"{c.call.name} failed: {type(c.error).__name__}: {c.error}",
        ),
        EventSpec(
            name="on_approval_request",
            context=ApprovalRequestContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: f"{c.call.name}({c.call.arguments}) waits for approval",
        ),
        EventSpec(
            name="on_approval_decision",
            context=ApprovalDecisionContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: f"{c.pending.tool_name}: {c.decision.action}",
        ),
        EventSpec(
            name="on_pre_compress",
            context=PreCompressContext,
            kind="collector",
            returns="a `str` to keep in the summary",
            stops="never: every handler runs",
            trace=lambda c, t: f"{_plural(len(c.messages), 'message')} about to be summarised",
        ),
        EventSpec(
            name="on_scope_register",
            context=ScopeContext,
            kind="observer",
            returns=_OBSERVED,
            stops="a raise (it propagates from `scopes.register()`)",
            sync_only=True,
            forwarded=False,
            trace=lambda c, t: f"scope {c.scope.name!r} with {len(c.scope.tools)} tool(s)",
        ),
        EventSpec(
            name="on_scope_unregister",
            context=ScopeContext,
            kind="observer",
            returns=_OBSERVED,
            stops="a raise (it propagates from `scopes.unregister()`)",
            sync_only=True,
            forwarded=False,
            trace=lambda c, t: f"scope {c.scope.name!r} removed",
        ),
        EventSpec(
            name="on_memory_write",
            context=MemoryWriteContext,
            kind="report",
            returns=_OBSERVED,
            stops=_REPORTED,
            trace=lambda c, t: f"{c.action} {c.memory_type} {c.entry.id}: {t.cut(c.content)}",
        ),
        EventSpec(
            name="on_delegation",
            context=DelegationContext,
            kind="report",
            returns=_OBSERVED,
            stops=_REPORTED,
            trace=lambda c, t: f"{' > '.join(c.path)}: {t.cut(c.result)}",
        ),
        EventSpec(
            name="on_session_switch",
            context=SessionSwitchContext,
            kind="report",
            returns=_OBSERVED,
            stops=_REPORTED,
            trace=lambda c, t: (
                f"{c.previous_session_id} -> {c.new_session_id}"
                + (", history reset" if c.reset else "")
            ),
        ),
        EventSpec(
            name="on_subagent_event",
            context=SubAgentEventContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            forwarded=False,
            trace=lambda c, t: f"{' > '.join(c.path)}: {c.event}",
        ),
        EventSpec(
            name="on_first_chunk",
            context=FirstChunkContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: f"iteration {c.iteration}, attempt {c.attempt}: {c.model.name}",
        ),
        EventSpec(
            name="on_backoff_wait",
            context=BackoffWaitContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: (
                f"attempt {c.attempt} failed ({c.reason}): waiting {c.seconds:.3g}s"
                + ("" if c.retry_after is None else f" (Retry-After {c.retry_after:g}s)")
            ),
        ),
        EventSpec(
            name="on_trim",
            context=TrimContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: (
                f"{c.reason}: {c.messages_before} -> {c.messages_after} messages, "
                f"{c.tokens_before} -> {c.tokens_after} tokens (budget {c.budget})"
            ),
        ),
        EventSpec(
            name="on_compaction",
            context=CompactionContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: (
                f"{c.tier}: {c.messages_before} -> {c.messages_after} messages, "
                f"{c.tokens_before} -> {c.tokens_after} tokens"
            ),
        ),
        EventSpec(
            name="on_output_validation_error",
            context=OutputValidationErrorContext,
            kind="interceptor",
            returns="`str` (a new retry message) or `OutputReturn(value=...)`",
            stops="an `OutputReturn` skips the later handlers and is the chat's output",
            field="retry_message",
            accept=(str,),
            stop=(OutputReturn,),
            trace=lambda c, t: f"attempt {c.attempt}: {t.cut(str(c.error))}",
        ),
        EventSpec(
            name="on_input_guardrail",
            context=InputGuardrailContext,
            kind="guard",
            forwarded=False,  # a parent sees the verdicts (on_guardrail_verdict)
            returns=_VERDICT.format("replace"),
            stops=_TRIPS,
            trace=lambda c, t: t.cut(c.text),
        ),
        EventSpec(
            name="on_input_guardrail_beside",
            context=InputGuardrailContext,
            kind="guard",
            forwarded=False,  # a parent sees the verdicts (on_guardrail_verdict)
            returns=_VERDICT.format("no replace"),
            stops=_TRIPS + "; the first model call is cancelled",
            trace=lambda c, t: t.cut(c.text),
        ),
        EventSpec(
            name="on_output_guardrail",
            context=OutputGuardrailContext,
            kind="guard",
            forwarded=False,  # a parent sees the verdicts (on_guardrail_verdict)
            returns=_VERDICT.format("replace for a text answer"),
            stops=_TRIPS + "; the answer is not stored",
            trace=lambda c, t: t.cut(c.text),
        ),
        EventSpec(
            name="on_tool_call_guardrail",
            context=ToolCallGuardrailContext,
            kind="guard",
            forwarded=False,  # a parent sees the verdicts (on_guardrail_verdict)
            returns=_VERDICT.format("reject"),
            stops=_TRIPS + "; a reject skips the later handlers and the tool",
            trace=lambda c, t: f"{c.call.name}({c.call.arguments}), approval {c.approval}",
        ),
        EventSpec(
            name="on_tool_result_guardrail",
            context=ToolResultGuardrailContext,
            kind="guard",
            forwarded=False,  # a parent sees the verdicts (on_guardrail_verdict)
            returns=_VERDICT.format("replace"),
            stops=_TRIPS,
            trace=lambda c, t: f"{c.call.name} -> {t.cut(c.text)}",
        ),
        EventSpec(
            name="on_guardrail_verdict",
            context=GuardrailVerdictContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=_verdict,
        ),
    )
}
"""The hook events, one row each, in the order the docs list them."""

# --- generated from EVENT_TABLE by `python tests/hooks/test_event_table.py`; do not edit ---
ON_CHAT_START: Final = "on_chat_start"
ON_CHAT_DONE: Final = "on_chat_done"
ON_CHAT_ABORT: Final = "on_chat_abort"
ON_CHAT_ERROR: Final = "on_chat_error"
ON_MESSAGE: Final = "on_message"
PRE_REQUEST: Final = "pre_request"
ON_RESPONSE: Final = "on_response"
AFTER_MODEL_CALL: Final = "after_model_call"
PRE_TOOL_CALL: Final = "pre_tool_call"
ON_TOOL_CALL_RESULT: Final = "on_tool_call_result"
ON_TOOL_CALL_ERROR: Final = "on_tool_call_error"
ON_APPROVAL_REQUEST: Final = "on_approval_request"
ON_APPROVAL_DECISION: Final = "on_approval_decision"
ON_PRE_COMPRESS: Final = "on_pre_compress"
ON_SCOPE_REGISTER: Final = "on_scope_register"
ON_SCOPE_UNREGISTER: Final = "on_scope_unregister"
ON_MEMORY_WRITE: Final = "on_memory_write"
ON_DELEGATION: Final = "on_delegation"
ON_SESSION_SWITCH: Final = "on_session_switch"
ON_SUBAGENT_EVENT: Final = "on_subagent_event"
ON_FIRST_CHUNK: Final = "on_first_chunk"
ON_BACKOFF_WAIT: Final = "on_backoff_wait"
ON_TRIM: Final = "on_trim"
ON_COMPACTION: Final = "on_compaction"
ON_OUTPUT_VALIDATION_ERROR: Final = "on_output_validation_error"
ON_INPUT_GUARDRAIL: Final = "on_input_guardrail"
ON_INPUT_GUARDRAIL_BESIDE: Final = "on_input_guardrail_beside"
ON_OUTPUT_GUARDRAIL: Final = "on_output_guardrail"
ON_TOOL_CALL_GUARDRAIL: Final = "on_tool_call_guardrail"
ON_TOOL_RESULT_GUARDRAIL: Final = "on_tool_result_guardrail"
ON_GUARDRAIL_VERDICT: Final = "on_guardrail_verdict"

HookEvent: TypeAlias = Literal[
    "on_chat_start",
    "on_chat_done",
    "on_chat_abort",
    "on_chat_error",
    "on_message",
    "pre_request",
    "on_response",
    "after_model_call",
    "pre_tool_call",
    "on_tool_call_result",
    "on_tool_call_error",
    "on_approval_request",
    "on_approval_decision",
    "on_pre_compress",
    "on_scope_register",
    "on_scope_unregister",
    "on_memory_write",
    "on_delegation",
    "on_session_switch",
    "on_subagent_event",
    "on_first_chunk",
    "on_backoff_wait",
    "on_trim",
    "on_compaction",
    "on_output_validation_error",
    "on_input_guardrail",
    "on_input_guardrail_beside",
    "on_output_guardrail",
    "on_tool_call_guardrail",
    "on_tool_result_guardrail",
    "on_guardrail_verdict",
]
"""Every event's name, one per row of :data:`EVENT_TABLE`."""

EVENTS: Final[frozenset[str]] = frozenset(EVENT_TABLE)
"""Every event's name."""
# --- end of the generated names ---
