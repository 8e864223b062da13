"""Hook events, their typed contexts, the registry that holds handlers, and plugins.

Every event is one row of :data:`EVENT_TABLE` (its context type, kind, what a handler may
return and set, what stops the chain, sync-only or not, forwarded to a parent agent or not,
how the trace prints it); registration, :func:`dispatch`, sub-agent forwarding, the trace
plugin and the table in ``docs/hooks.md`` read that row. Observers watch (their return
value is ignored); interceptors may return a new in-flight value, and ``pre_request`` /
``pre_tool_call`` may short-circuit the step after them. Handlers run one at a time in
ascending ``order`` (built-in plugins name a :class:`Phase`), then registration order. The
full contract, with the firing order drawn once, is in ``docs/hooks.md``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Literal,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    overload,
    runtime_checkable,
)

from .._approval import ApprovalDecision, Defer, PendingApproval
from .._errors import HookRegistrationError, HookReturnError, UsageError
from .._messages import Message, ToolCall, UserMessage
from ..models._base import Model, ProviderRequest, ProviderResponse

if TYPE_CHECKING:
    from .._agent import Agent
    from .._events import AgentResponse
    from .._tools import Scope, Tool
    from ..memory._base import MemoryAction, MemoryEntry, MemoryType

__all__ = [
    "EVENT_TABLE",
    "AfterModelCallContext",
    "ApprovalDecisionContext",
    "ApprovalRequestContext",
    "BackoffWaitContext",
    "ChatAbortContext",
    "ChatDoneContext",
    "ChatErrorContext",
    "ChatStartContext",
    "CompactionContext",
    "DelegationContext",
    "Disposer",
    "EventSpec",
    "FirstChunkContext",
    "HistoryReplacement",
    "HookEvent",
    "HookHost",
    "HookRegistry",
    "MemoryWriteContext",
    "MessageContext",
    "OutputReturn",
    "OutputValidationErrorContext",
    "Phase",
    "Plugin",
    "PreCompressContext",
    "PreRequestContext",
    "PreToolCallContext",
    "ResponseContext",
    "ScopeContext",
    "SessionSwitchContext",
    "SubAgentEventContext",
    "ToolErrorContext",
    "ToolResultContext",
    "ToolReturn",
    "TraceFormat",
    "TrimContext",
    "attach_once",
]

logger = logging.getLogger(__name__)

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
]
"""Every event's name; the event table below has one row for each (a test checks both)."""


# --- contexts --------------------------------------------------------------------------


@dataclass(slots=True, kw_only=True)
class ChatStartContext:
    """``on_chat_start`` (observer): a chat begins, before the user message is committed."""

    message: UserMessage


@dataclass(slots=True, kw_only=True)
class ChatDoneContext:
    """``on_chat_done`` (observer): the chat succeeded; the final answer is in history."""

    response: AgentResponse


@dataclass(slots=True, kw_only=True)
class ChatAbortContext:
    """``on_chat_abort`` (observer): the chat was cancelled; ``reason`` is why, if known."""

    reason: object


@dataclass(slots=True, kw_only=True)
class ChatErrorContext:
    """``on_chat_error`` (observer): the chat failed with ``error``, which then propagates."""

    error: Exception


@dataclass(slots=True, kw_only=True)
class MessageContext:
    """``on_message`` (observer): ``message`` was just committed to history.

    Fires exactly once per committed message, for every handler, even when the chat is
    cancelled meanwhile: the cancellation takes effect after the last handler returned.
    Raising ends the chat (the handlers after it do not run).
    """

    message: Message


@dataclass(slots=True, kw_only=True)
class PreRequestContext:
    """``pre_request`` (interceptor): before each model attempt of iteration ``iteration``.

    Return a :class:`~hookloop.ProviderRequest` to replace the request, or a
    :class:`~hookloop.ProviderResponse` to skip the model (and later handlers) and use it.
    ``model`` is the model this attempt will call; a handler may set another one (a
    fallback strategy does). ``attempt`` is 1 on the first attempt of every model call.
    A context policy that replaces the stored conversation (compaction) sets
    ``replace_history``; the loop commits it once the handlers returned. A policy that
    leaves stored messages out of the request (a sliding window) adds them to
    ``left_out``; the loop fires ``on_pre_compress`` with them once the handlers returned.
    ``stream`` says whether the attempt streams (``chat_stream()``); read it, do not set it.
    """

    iteration: int
    request: ProviderRequest
    attempt: int = 1
    model: Model
    replace_history: HistoryReplacement | None = None
    left_out: tuple[Message, ...] = ()
    stream: bool = False


@dataclass(slots=True, kw_only=True)
class ResponseContext:
    """``on_response`` (interceptor): a response arrived, before it is committed.

    Return a :class:`~hookloop.ProviderResponse` to replace it. Every handler runs.
    """

    iteration: int
    request: ProviderRequest
    response: ProviderResponse


@dataclass(slots=True, kw_only=True)
class AfterModelCallContext:
    """``after_model_call``: each model attempt ended, with a ``response`` or an ``error``.

    Set ``retry = True`` to make another attempt; ``request`` and ``model`` (which a
    handler may replace) are what the next attempt sends, and to which model. ``attempt``
    is 1 on the first attempt of every model call. Without a retry, an ``error`` ends the
    chat. A context policy that replaces the stored conversation sets ``replace_history``;
    the loop commits it once the handlers returned. One whose smaller ``request`` leaves
    stored messages out adds them to ``left_out``; the loop fires ``on_pre_compress`` with
    them once the handlers returned.
    """

    iteration: int
    attempt: int
    request: ProviderRequest
    response: ProviderResponse | None
    error: Exception | None
    model: Model
    retry: bool = False
    replace_history: HistoryReplacement | None = None
    left_out: tuple[Message, ...] = ()


@dataclass(slots=True, kw_only=True)
class PreToolCallContext:
    """``pre_tool_call`` (interceptor): a known tool is about to run.

    Return a :class:`~hookloop.ToolCall` to change the call, a :class:`ToolReturn` to skip
    the tool with that result, an exception instance to skip it with that error, or a
    :class:`~hookloop.Defer` to make the call wait for a person's decision (the chat ends
    with it pending; see ``docs/approval.md``). On ``agent.resume()`` a decided call runs
    through the handlers again with the arguments decided on: a result or an error they
    return still answers it; a new call or a ``Defer`` is ignored.
    """

    call: ToolCall
    tool: Tool
    scope: Scope


@dataclass(slots=True, kw_only=True)
class ToolResultContext:
    """``on_tool_call_result`` (interceptor): a tool returned ``result``.

    Return a :class:`ToolReturn` to replace the result (``ToolReturn(None)`` makes it
    ``None``). Every handler runs.
    """

    call: ToolCall
    tool: Tool
    scope: Scope
    result: object


@dataclass(slots=True, kw_only=True)
class ToolErrorContext:
    """``on_tool_call_error`` (interceptor): a tool call failed with ``error``.

    ``tool`` and ``scope`` are ``None`` when the model called an unknown tool. Return an
    exception to replace the error the model will see. Every handler runs.

    When the tool's own function raised (``error`` is a ``ToolExecutionError``), a handler
    may set ``retry = True`` to run the function again with the same arguments;
    ``attempt`` counts the runs. For the other errors (unknown, disabled, invalid
    arguments) running again cannot help, and ``retry`` is ignored.
    """

    call: ToolCall
    tool: Tool | None
    scope: Scope | None
    error: Exception
    attempt: int = 1
    retry: bool = False


@dataclass(slots=True, kw_only=True)
class ApprovalRequestContext:
    """``on_approval_request`` (observer): a tool call waits for a person's decision.

    It fires once per pending call, in call order, after the calls of the batch that need
    no approval have run and before the chat ends with ``response.pending_approvals``. A
    session recorder keeps the request here (first, at :attr:`Phase.RECORD`). Raising ends
    the chat with an error.
    """

    pending: PendingApproval
    call: ToolCall
    tool: Tool
    scope: Scope


@dataclass(slots=True, kw_only=True)
class ApprovalDecisionContext:
    """``on_approval_decision`` (observer): ``agent.resume()`` took a decision on a call.

    It fires once per decision, in call order, after every decision was checked and before
    any decided call runs. A session recorder keeps the decision here (first, at
    :attr:`Phase.RECORD`). Raising ends the resumed chat with an error.
    """

    pending: PendingApproval
    decision: ApprovalDecision


@dataclass(slots=True, kw_only=True)
class OutputValidationErrorContext:
    """``on_output_validation_error`` (interceptor): the model's answer is not a valid output.

    ``raw`` is what the model sent (the output tool's arguments, or its text) and ``error``
    why it failed (a pydantic ``ValidationError``, or a ``ValueError`` about its form, e.g.
    text where the output tool was expected). ``attempt`` counts the invalid answers of
    this chat, from 1. Return a ``str`` to replace ``retry_message``, what the model is told
    before it tries again; return :class:`OutputReturn` to end the chat with that value as
    its output (validated like the model's). With no retry left, the chat raises
    :class:`~hookloop.OutputValidationError` unless a handler returned an ``OutputReturn``.
    """

    raw: str
    error: Exception
    attempt: int
    retry_message: str


@dataclass(slots=True, kw_only=True)
class PreCompressContext:
    """``on_pre_compress``: a context policy is about to leave ``messages`` out.

    It fires before any discard: compaction replacing them with a summary, its reactive tier
    dropping old turns, and a sliding window leaving them out of a request (once per message).
    A returned string is kept (facts the summariser must not lose, or a note that you saved
    the messages elsewhere): in the summary where one is written, elsewhere in a summary
    message at the front of every request that leaves the messages out. Every handler runs.
    """

    messages: tuple[Message, ...]


@dataclass(slots=True, kw_only=True)
class ScopeContext:
    """``on_scope_register`` / ``on_scope_unregister`` (observers, synchronous)."""

    scope: Scope


@dataclass(slots=True, kw_only=True)
class MemoryWriteContext:
    """``on_memory_write`` (report): a memory write succeeded.

    It fires after every successful write through the agent: ``agent.store_memory()`` and
    the model's memory tool alike; never after a write that failed or was refused. A
    handler that raises is logged at WARNING and ignored: the write has happened.

    Attributes:
        action: ``"add"``, ``"replace"`` or ``"remove"``.
        memory_type: The memory type written (the seed's ``target``).
        content: The text written; for ``"remove"``, the text of the removed entry.
        metadata: The entry's metadata after the write.
        entry: The entry as stored (for ``"remove"``, as it was before it was removed).
        source: ``"api"`` for ``store_memory()``, ``"tool"`` for the model's memory tool.
    """

    action: MemoryAction
    memory_type: MemoryType
    content: str
    metadata: Mapping[str, Any]
    entry: MemoryEntry
    source: Literal["api", "tool"] = "api"


@dataclass(slots=True, kw_only=True)
class DelegationContext:
    """``on_delegation`` (report): a sub-agent finished a task this agent delegated.

    It fires on the delegating agent, after the sub-agent's chat succeeded (a failed or
    cancelled delegation raises instead). A handler that raises is logged at WARNING and
    ignored.

    Attributes:
        task: The task the sub-agent was given.
        result: The sub-agent's final answer.
        agent_name: The sub-agent's name.
        metadata: What the caller passed to ``delegate(metadata=...)``.
        response: The sub-agent's whole response (messages, usage, iterations).
        path: Agent names from this agent to the sub-agent, both included.
    """

    task: str
    result: str
    agent_name: str
    metadata: Mapping[str, Any]
    response: AgentResponse
    path: tuple[str, ...]


@dataclass(slots=True, kw_only=True)
class SessionSwitchContext:
    """``on_session_switch`` (report): ``agent.switch_session()`` changed the session.

    It fires after ``agent.session_id`` is the new id (and, with ``reset``, after the history
    was cleared). A handler that raises is logged at WARNING and ignored.

    Attributes:
        new_session_id: The session the agent is in now.
        parent_session_id: The session the new one continues from: the caller's, else (no
            ``reset``) the session the agent was in; ``None`` for a fresh start.
        reset: Whether the conversation history was cleared.
        previous_session_id: The session the agent was in before.
    """

    new_session_id: str
    parent_session_id: str | None
    reset: bool
    previous_session_id: str | None


@dataclass(slots=True, kw_only=True)
class SubAgentEventContext:
    """``on_subagent_event`` (observer): an event fired on a sub-agent this agent delegated to.

    Every hook event of the sub-agent (and, in turn, of its own sub-agents) arrives here
    once its own handlers ran, tagged with the agent path. Handlers are registered only
    while a delegation runs and only when someone listens, so without a listener a
    delegation costs nothing extra. A throw ends the sub-agent's chat like any hook throw.

    Attributes:
        path: Agent names from this agent down to the one that fired, both included, e.g.
            ``("orchestrator", "researcher")``.
        event: The event's name, e.g. ``"on_message"``.
        context: The event's context object, as the sub-agent's handlers left it. It is
            the sub-agent's own object: read it, do not change it.
    """

    path: tuple[str, ...]
    event: str
    context: object


@dataclass(slots=True, kw_only=True)
class FirstChunkContext:
    """``on_first_chunk`` (observer): the first chunk of a streamed model attempt arrived.

    It fires once per attempt of ``chat_stream()``, before the chunk reaches the consumer
    (``chat()`` asks for whole answers and never fires it). Raising ends the chat.

    Attributes:
        iteration: The model call's iteration.
        attempt: The attempt of that model call, 1 for the first.
        model: The model that streams.
    """

    iteration: int
    attempt: int
    model: Model


@dataclass(slots=True, kw_only=True)
class BackoffWaitContext:
    """``on_backoff_wait`` (observer): a retry strategy is about to wait before retrying.

    It fires in the strategy's ``after_model_call`` handler, once it decided to retry and
    before it sleeps (also for a wait of 0 seconds). Raising ends the chat.

    Attributes:
        iteration: The model call's iteration.
        attempt: The attempt that failed, 1 for the first.
        seconds: How long the strategy waits.
        reason: Why it retries: the failed attempt's error type, e.g. ``"RateLimitError"``.
        error: The failed attempt's error.
        retry_after: Seconds the provider asked to wait (``Retry-After``), if it said.
        strategy: The strategy's name, e.g. ``"default-retry"``.
    """

    iteration: int
    attempt: int
    seconds: float
    reason: str
    error: Exception
    retry_after: float | None
    strategy: str


@dataclass(slots=True, kw_only=True)
class TrimContext:
    """``on_trim`` (observer): a sliding window left messages out of a request.

    It fires in the window's ``pre_request`` handler for every attempt whose request leaves
    out stored messages (``reason="window"``), and in its ``after_model_call`` handler when
    it shrinks a request the provider refused as too long (``reason="overflow"``). The
    stored history is unchanged. Token figures count the messages only, with the history's
    token counter. Raising ends the chat.

    Attributes:
        iteration: The model call's iteration.
        attempt: The attempt whose request is trimmed (for an overflow, the one refused).
        reason: ``"window"`` or ``"overflow"``.
        messages_before: Messages the request would have without the trim.
        messages_after: Messages it has.
        tokens_before: Their tokens without the trim.
        tokens_after: Their tokens after it.
        budget: Tokens the messages may take.
        window: The model's context window, if known.
    """

    iteration: int
    attempt: int
    reason: Literal["window", "overflow"]
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    budget: int
    window: int | None


@dataclass(slots=True, kw_only=True)
class CompactionContext:
    """``on_compaction`` (observer): a compaction policy made a request smaller.

    It fires once the policy decided, before the loop commits a summary: ``tier`` says how
    (``"summary"`` replaces old turns by a summary in the stored history, proactively or
    after an overflow; ``"tool_results"`` and ``"old_turns"`` shrink only the next
    attempt's request after an overflow). Token figures are the policy's estimates of the
    whole request. Raising ends the chat.

    Attributes:
        iteration: The model call's iteration.
        attempt: The attempt it happens at (for an overflow, the one refused).
        tier: ``"summary"``, ``"tool_results"`` or ``"old_turns"``.
        messages_before: Messages of the request before.
        messages_after: Messages of the request after.
        tokens_before: Estimated tokens of the request before.
        tokens_after: Estimated tokens of the request after.
        window: The model's context window, if known.
    """

    iteration: int
    attempt: int
    tier: Literal["summary", "tool_results", "old_turns"]
    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    window: int | None


@dataclass(frozen=True, slots=True)
class ToolReturn:
    """A tool result supplied by a hook; a wrapper so that ``None`` stays a result."""

    value: object


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputReturn:
    """A chat's output supplied by a hook; a wrapper so that ``None`` stays an output."""

    value: object


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryReplacement:
    """A new stored conversation that a context policy hands the loop to commit.

    A ``pre_request`` or ``after_model_call`` handler sets it as ``ctx.replace_history``.
    Once that event's handlers returned, the loop fires ``on_pre_compress`` with
    ``removed``, appends the texts its handlers return to ``summary`` (each as a paragraph
    of its own), and commits ``summary`` followed by ``kept`` as the whole history. The
    request about to be sent gets the amended summary too (matched by message id).

    Attributes:
        removed: The stored messages that go (``on_pre_compress`` sees them).
        summary: The message that stands for them, first in the new history.
        kept: The stored messages that stay, after the summary.
    """

    removed: tuple[Message, ...]
    summary: UserMessage
    kept: tuple[Message, ...]


# --- the event table ---------------------------------------------------------------------

Kind: TypeAlias = Literal["observer", "interceptor", "report", "collector"]


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
            logged at WARNING and ignored), ``collector`` (the strings returned are gathered).
        returns: What a handler may return, for the docs.
        stops: What stops the chain early, for the docs.
        settable: The context fields a handler may set (the only mutation allowed).
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
    settable: tuple[str, ...] = ()
    sync_only: bool = False
    forwarded: bool = True
    field: str = ""
    accept: tuple[type, ...] = ()
    stop: tuple[type, ...] = ()

    @property
    def fixed(self) -> tuple[str, ...]:
        """The context fields a handler may not set (an interceptor's ``field`` included)."""
        return _fixed_fields(self.context, self.settable)


@functools.cache
def _fixed_fields(context: type, settable: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(context) if f.name not in settable)


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


_OBSERVED = "- (ignored)"
_RAISE_ENDS = "a raise (it ends the chat)"
_REPORTED = "nothing: a raise is logged at WARNING and ignored"

EVENT_TABLE: Final[Mapping[str, EventSpec]] = {
    spec.name: spec
    for spec in (
        EventSpec(
            name=ON_CHAT_START,
            context=ChatStartContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: t.cut(c.message.text),
        ),
        EventSpec(
            name=ON_CHAT_DONE,
            context=ChatDoneContext,
            kind="observer",
            returns=_OBSERVED,
            stops="a raise (it reaches the caller; `on_chat_error` does not fire)",
            trace=lambda c, t: _done(c),
        ),
        EventSpec(
            name=ON_CHAT_ABORT,
            context=ChatAbortContext,
            kind="observer",
            returns=_OBSERVED,
            stops="nothing: a raise is logged at ERROR and ignored",
            trace=lambda c, t: f"cancelled: {c.reason!r}",
        ),
        EventSpec(
            name=ON_CHAT_ERROR,
            context=ChatErrorContext,
            kind="observer",
            returns=_OBSERVED,
            stops="nothing: a raise is logged at ERROR and ignored",
            trace=lambda c, t: f"{type(c.error).__name__}: {c.error}",
        ),
        EventSpec(
            name=ON_MESSAGE,
            context=MessageContext,
            kind="observer",
            returns=_OBSERVED,
            stops="a raise (it ends the chat); a cancellation waits for every handler",
            trace=lambda c, t: t.message(c.message),
        ),
        EventSpec(
            name=PRE_REQUEST,
            context=PreRequestContext,
            kind="interceptor",
            returns="`ProviderRequest` (replace) or `ProviderResponse`",
            stops="a `ProviderResponse` skips the later handlers **and the model**",
            settable=("model", "replace_history", "left_out"),
            field="request",
            accept=(ProviderRequest,),
            stop=(ProviderResponse,),
            trace=lambda c, t: (
                f"iteration {c.iteration}: {_plural(len(c.request.messages), 'message')}, "
                f"{_plural(len(c.request.tools), 'tool')}"
            ),
        ),
        EventSpec(
            name=ON_RESPONSE,
            context=ResponseContext,
            kind="interceptor",
            returns="`ProviderResponse` (replace)",
            stops="never: every handler runs",
            field="response",
            accept=(ProviderResponse,),
            trace=_answer,
        ),
        EventSpec(
            name=AFTER_MODEL_CALL,
            context=AfterModelCallContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            settable=("retry", "request", "model", "replace_history", "left_out"),
            trace=lambda c, t: _outcome(c),
        ),
        EventSpec(
            name=PRE_TOOL_CALL,
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
            name=ON_TOOL_CALL_RESULT,
            context=ToolResultContext,
            kind="interceptor",
            returns="`ToolReturn(value)` (replace)",
            stops="never: every handler runs",
            field="result",
            accept=(ToolReturn,),
            trace=lambda c, t: f"{c.call.name} -> {t.cut(str(c.result))}",
        ),
        EventSpec(
            name=ON_TOOL_CALL_ERROR,
            context=ToolErrorContext,
            kind="interceptor",
            returns="an exception (replace)",
            stops="never: every handler runs",
            settable=("retry",),
            field="error",
            accept=(Exception,),
            trace=lambda c, t: f"{c.call.name} failed: {type(c.error).__name__}: {c.error}",
        ),
        EventSpec(
            name=ON_APPROVAL_REQUEST,
            context=ApprovalRequestContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: f"{c.call.name}({c.call.arguments}) waits for approval",
        ),
        EventSpec(
            name=ON_APPROVAL_DECISION,
            context=ApprovalDecisionContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: f"{c.pending.tool_name}: {c.decision.action}",
        ),
        EventSpec(
            name=ON_PRE_COMPRESS,
            context=PreCompressContext,
            kind="collector",
            returns="a `str` to keep in the summary",
            stops="never: every handler runs",
            trace=lambda c, t: f"{_plural(len(c.messages), 'message')} about to be summarised",
        ),
        EventSpec(
            name=ON_SCOPE_REGISTER,
            context=ScopeContext,
            kind="observer",
            returns=_OBSERVED,
            stops="a raise (it propagates from `scopes.register()`)",
            sync_only=True,
            forwarded=False,
            trace=lambda c, t: f"scope {c.scope.name!r} with {len(c.scope.tools)} tool(s)",
        ),
        EventSpec(
            name=ON_SCOPE_UNREGISTER,
            context=ScopeContext,
            kind="observer",
            returns=_OBSERVED,
            stops="a raise (it propagates from `scopes.unregister()`)",
            sync_only=True,
            forwarded=False,
            trace=lambda c, t: f"scope {c.scope.name!r} removed",
        ),
        EventSpec(
            name=ON_MEMORY_WRITE,
            context=MemoryWriteContext,
            kind="report",
            returns=_OBSERVED,
            stops=_REPORTED,
            trace=lambda c, t: f"{c.action} {c.memory_type} {c.entry.id}: {t.cut(c.content)}",
        ),
        EventSpec(
            name=ON_DELEGATION,
            context=DelegationContext,
            kind="report",
            returns=_OBSERVED,
            stops=_REPORTED,
            trace=lambda c, t: f"{' > '.join(c.path)}: {t.cut(c.result)}",
        ),
        EventSpec(
            name=ON_SESSION_SWITCH,
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
            name=ON_SUBAGENT_EVENT,
            context=SubAgentEventContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            forwarded=False,
            trace=lambda c, t: f"{' > '.join(c.path)}: {c.event}",
        ),
        EventSpec(
            name=ON_FIRST_CHUNK,
            context=FirstChunkContext,
            kind="observer",
            returns=_OBSERVED,
            stops=_RAISE_ENDS,
            trace=lambda c, t: f"iteration {c.iteration}, attempt {c.attempt}: {c.model.name}",
        ),
        EventSpec(
            name=ON_BACKOFF_WAIT,
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
            name=ON_TRIM,
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
            name=ON_COMPACTION,
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
            name=ON_OUTPUT_VALIDATION_ERROR,
            context=OutputValidationErrorContext,
            kind="interceptor",
            returns="`str` (a new retry message) or `OutputReturn(value=...)`",
            stops="an `OutputReturn` skips the later handlers and is the chat's output",
            field="retry_message",
            accept=(str,),
            stop=(OutputReturn,),
            trace=lambda c, t: f"attempt {c.attempt}: {t.cut(str(c.error))}",
        ),
    )
}
"""The hook events, one row each, in the order the docs list them."""

EVENTS: Final[frozenset[str]] = frozenset(EVENT_TABLE)
"""Every event's name."""


class Phase(IntEnum):
    """Where a built-in plugin's handler sits among the handlers of the same event.

    The phases are ``order`` values: user handlers run at ``order=0`` (:attr:`USER`), and a
    user's own ``order`` is read on the same scale, so ``order=-10`` runs just before the
    other user handlers and still after the policies. Drawn in ``docs/hooks.md``.
    """

    RECORD = -1_000_000_000
    """``on_message``, ``on_approval_request``, ``on_approval_decision``: the session
    recorder stores a message or an approval record before anyone else sees it."""
    COMPACT = -1_500_000
    """``pre_request``: compaction replaces old turns by a summary before anything else."""
    ROUTE = -1_000_000
    """``pre_request``: a fallback strategy picks the model of this attempt."""
    COMPACT_RECOVER = -2_000
    """``after_model_call``: compaction makes an overflowing request smaller, first."""
    CONTEXT_RECOVER = -1_000
    """``after_model_call``: ``ContextHooks.on_error`` decides about an overflow."""
    WINDOW_RECOVER = -500
    """``after_model_call``: the sliding window shrinks an overflowing request."""
    USER = 0
    """User handlers and retry strategies (``order`` defaults to it)."""
    OBSERVE = 1_000_000
    """Observers that see what the handlers before them decided: the trace, fallback's
    success record."""
    TRIM = 1_500_000
    """``pre_request``: the sliding window trims the request the handlers before built."""
    LAST = 2_000_000
    """``pre_request``: ``ContextHooks.before_request``, right before the model."""
    TELEMETRY = 2**61
    """``OpenTelemetryPlugin``: after every handler, so its spans show the final values."""
    FORWARD = 2**62
    """Sub-agent forwarding: after every handler, so the parent sees the final values."""


def attach_once(
    plugin: object, current: Agent | None, agent: Agent, why: str, *, owner: object = None
) -> Agent:
    """The "one plugin instance, one agent" guard; returns ``agent`` to keep.

    Call it first in ``init_agent`` as ``self._agent = attach_once(..., owner=self)``.
    With ``owner``, the guard also releases the plugin when it leaves the agent: the
    disposer :meth:`Agent.use <hookloop.Agent.use>` returned (or a failed ``init_agent``)
    sets ``owner._agent`` back to ``None``, so the plugin can then serve another agent.

    Args:
        plugin: How the error names the plugin, e.g. ``"retry strategy 'default'"``.
        current: The agent the plugin serves already, if any.
        agent: The agent it is being attached to.
        why: Why it cannot serve two, e.g. ``"it keeps per-call state"``.
        owner: The plugin object, whose ``_agent`` attribute holds the agent it serves.

    Raises:
        UsageError: The plugin is attached to another agent already.
    """
    if current is not None and current is not agent:
        raise UsageError(
            f"{plugin} is already attached to agent {current.name!r}; {why}, "
            "so give each agent its own"
        )
    if owner is not None and current is None:
        agent.hooks.adopt(Disposer(lambda: _release(owner, agent)))
    return agent


def _release(owner: object, agent: Agent) -> None:
    if getattr(owner, "_agent", None) is agent:
        owner._agent = None  # type: ignore[attr-defined]  # the attribute attach_once fills


# --- registry --------------------------------------------------------------------------


class Disposer:
    """Removes what created it when called; calling it again does nothing."""

    __slots__ = ("_action",)

    def __init__(self, action: Callable[[], None]) -> None:
        self._action: Callable[[], None] | None = action

    def __call__(self) -> None:
        """Remove the registration; later calls do nothing."""
        action, self._action = self._action, None
        if action is not None:
            action()

    @property
    def disposed(self) -> bool:
        """Whether it was called already."""
        return self._action is None


@dataclass(slots=True, eq=False)
class Handler:
    """One registration of a handler; registering a function twice makes two."""

    event: str
    fn: Callable[[Any], Any]
    is_async: bool
    order: int
    seq: int
    spec: EventSpec

    @property
    def label(self) -> str:
        """The handler's qualified name, for messages."""
        return getattr(self.fn, "__qualname__", None) or repr(self.fn)


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine (async functions, async ``__call__``)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 - async __call__ on callable objects
    )


class HookRegistry:
    """Handlers by event.

    Dispatch reads an immutable snapshot, so a handler added or removed during a dispatch
    takes effect from the next dispatch on.

    ``handlers`` maps an event to its handlers in firing order and holds no key for an event
    without handlers, so the loop's check costs one dictionary lookup.
    """

    __slots__ = ("_collectors", "_seq", "handlers")  # one per agent: an idle agent is smaller

    def __init__(self) -> None:
        self.handlers: dict[str, tuple[Handler, ...]] = {}
        self._seq = 0  # the registrations so far (an int: an idle agent is smaller)
        self._collectors: list[list[Disposer]] | None = None  # made by the first collect()

    def add(self, event: str, fn: Callable[[Any], Any], *, order: int = 0) -> Disposer:
        """Register ``fn`` for ``event``; returns its disposer.

        Raises:
            HookRegistrationError: Unknown event, a handler that is not callable, an order
                that is not an int, or an async handler for a sync-only event.
        """
        spec = EVENT_TABLE.get(event)
        if spec is None:
            raise HookRegistrationError(f"unknown hook event {event!r}; known: {sorted(EVENTS)}")
        if not callable(fn):
            raise HookRegistrationError(f"handler for {event!r} must be callable, got {fn!r}")
        if not isinstance(order, int) or isinstance(order, bool):
            raise HookRegistrationError(f"order must be an int, got {order!r}")
        is_async = is_async_callable(fn)
        if is_async and spec.sync_only:
            raise HookRegistrationError(
                f"{event!r} fires inside a synchronous call (scopes.register()/unregister()), "
                "so its handlers must be plain functions"
            )
        handler = Handler(event, fn, is_async, int(order), self._seq, spec)
        self._seq += 1
        current = self.handlers.get(event, ())
        self.handlers[event] = tuple(sorted((*current, handler), key=_firing_key))
        return self.adopt(Disposer(lambda: self._remove(handler)))

    def adopt(self, disposer: Disposer) -> Disposer:
        """Hand ``disposer`` to every :meth:`collect` block open now; returns it."""
        for collected in self._collectors or ():
            collected.append(disposer)
        return disposer

    def _remove(self, handler: Handler) -> None:
        remaining = tuple(h for h in self.handlers.get(handler.event, ()) if h is not handler)
        if remaining:
            self.handlers[handler.event] = remaining
        else:
            self.handlers.pop(handler.event, None)

    @contextmanager
    def collect(self) -> Iterator[list[Disposer]]:
        """Collect the disposers of every registration made inside the ``with`` block."""
        collected: list[Disposer] = []
        if self._collectors is None:
            self._collectors = []
        collectors = self._collectors
        collectors.append(collected)
        try:
            yield collected
        finally:
            # By identity: list.remove compares by value, and an outer collection that is
            # still empty equals this one (a plugin that uses another before its own hooks).
            index = next(i for i, c in enumerate(collectors) if c is collected)
            del collectors[index]
            if not collectors and self._collectors is collectors:
                self._collectors = None

    def fire_sync(self, event: str, scope: Scope) -> None:
        """Fire a sync-only scope event; the first handler that raises stops the rest."""
        handlers = self.handlers.get(event)
        if handlers:
            ctx = ScopeContext(scope=scope)
            handler = None
            try:
                for handler in handlers:
                    # The one call outside dispatch(): registration refused async handlers
                    # for sync-only events (the row's sync_only), and this runs inside a
                    # synchronous call, so there is nothing to await.
                    handler.fn(ctx)
            except Exception as exc:
                _annotate(exc, handler)
                raise


def _firing_key(handler: Handler) -> tuple[int, int]:
    return handler.order, handler.seq


def _annotate(exc: BaseException, handler: Handler | None) -> None:
    if handler is not None:
        exc.add_note(f"raised by the {handler.event!r} hook handler {handler.label}")


# --- dispatch (used by the loop) -------------------------------------------------------
#
# dispatch() is the one function that calls handlers, for every kind; the kinds (modes)
# differ only in what they do with a handler's return value and its exception. The
# wrappers below are plain functions returning dispatch()'s coroutine, so a dispatch costs
# one coroutine however many handlers run: awaiting a helper coroutine per handler instead
# cost 31% of an iteration with 10 sync handlers per event (bench/loop.py, back to back:
# 23.0 vs 17.6 us). An event nobody listens to costs the caller one dictionary lookup
# (``handlers.get(event)``, ``empty_dispatch_ns`` in bench/loop.py, about 20 ns): the loop
# then builds no context and does not call in here.

_Mode: TypeAlias = Literal["observe", "each", "each_quietly", "report", "collect", "chain"]
_EVERY: Final = frozenset({"each", "each_quietly"})


async def dispatch(handlers: tuple[Handler, ...], ctx: Any, mode: _Mode) -> object:
    """Call ``handlers`` in order with ``ctx``, sync or async, and apply ``mode``.

    Modes:
        observe: Returns are ignored; an exception propagates, noted with the handler.
        each / each_quietly: Like observe, but a cancellation does not skip the later
            handlers; it is returned for the caller to raise. ``each_quietly`` logs an
            exception (ERROR, with the traceback) and goes on.
        report: Returns are ignored; an exception is logged at WARNING and ignored.
        collect: Returns the list of strings returned.
        chain: An interceptor chain over the context field the event's row names: a return
            of an ``accept`` type becomes ``ctx.<field>`` (a :class:`ToolReturn` is
            unwrapped), a return of a ``stop`` type ends the chain and is returned.

    Raises:
        HookReturnError: A collector or interceptor returned a value of another type.
    """
    cancelled: asyncio.CancelledError | None = None
    texts: list[str] = []  # only collect mode fills it
    for handler in handlers:
        fixed = handler.spec.fixed
        before = [getattr(ctx, name) for name in fixed]
        try:
            result = handler.fn(ctx)
            # is_async was decided at registration; a sync function may return an awaitable.
            if handler.is_async or (result is not None and inspect.isawaitable(result)):
                result = await result
        except asyncio.CancelledError as exc:
            if mode not in _EVERY:
                raise
            cancelled = cancelled or exc
            continue
        except Exception as exc:
            if mode == "each_quietly":
                logger.exception(
                    "the %r hook handler %s raised; ignored", handler.event, handler.label
                )
                continue
            if mode == "report":
                logger.warning(
                    "the %r hook handler %s raised; ignored (the %s already happened)",
                    handler.event,
                    handler.label,
                    handler.event.removeprefix("on_").replace("_", " "),
                    exc_info=True,
                )
                continue
            _annotate(exc, handler)
            raise
        _check_unset(ctx, handler, fixed, before)
        if result is None:
            continue
        if mode == "collect":
            if not isinstance(result, str):
                raise _bad_return(handler, result, (str,), ())
            texts.append(result)
        elif mode == "chain":
            spec = handler.spec
            if spec.stop and isinstance(result, spec.stop):
                return result
            if not isinstance(result, spec.accept):
                raise _bad_return(handler, result, spec.accept, spec.stop)
            setattr(ctx, spec.field, result.value if isinstance(result, ToolReturn) else result)
    if mode == "collect":
        return texts
    return cancelled


def notify(handlers: tuple[Handler, ...], ctx: object) -> Awaitable[object]:
    """Observers: run in order; an exception propagates with a note naming the handler."""
    return dispatch(handlers, ctx, "observe")


def notify_each(
    handlers: tuple[Handler, ...], ctx: object, *, quietly: bool = False
) -> Awaitable[asyncio.CancelledError | None]:
    """Observers, every one of them, even if the task is cancelled meanwhile.

    For ``on_message``: a message in the history must reach every handler exactly once
    (the session recorder first), wherever a cancellation lands. A cancellation that ends a
    handler early does not skip the handlers after it; it is returned, and the caller
    raises it once its step is done. An exception propagates with a note naming the
    handler, or with ``quietly`` is logged (ERROR, with the traceback) and swallowed.
    """
    mode: _Mode = "each_quietly" if quietly else "each"
    return cast("Awaitable[asyncio.CancelledError | None]", dispatch(handlers, ctx, mode))


def notify_reporting(handlers: tuple[Handler, ...], ctx: object) -> Awaitable[object]:
    """Reports: run in order; a failure is logged at WARNING (the thing already happened)."""
    return dispatch(handlers, ctx, "report")


def collect_texts(handlers: tuple[Handler, ...], ctx: object) -> Awaitable[list[str]]:
    """Collectors: run every handler in order and gather the strings they return.

    The awaitable raises :class:`~hookloop.HookReturnError` when a handler returned
    something other than a str or None.
    """
    return cast("Awaitable[list[str]]", dispatch(handlers, ctx, "collect"))


def run_chain(handlers: tuple[Handler, ...], ctx: object) -> Awaitable[object]:
    """Interceptors: the chain over the context field the event's row names.

    The awaitable returns the value that short-circuited the chain, or ``None``; it raises
    :class:`~hookloop.HookReturnError` when a handler returned a value of another type.
    """
    return dispatch(handlers, ctx, "chain")


def _check_unset(
    ctx: object, handler: Handler, fixed: tuple[str, ...], before: list[object]
) -> None:
    """Refuse a handler that set a field outside its event's settable ones (and undo it)."""
    for name, value in zip(fixed, before, strict=True):
        if getattr(ctx, name) is not value:
            setattr(ctx, name, value)
            spec = handler.spec
            how = (
                "return the new value instead"
                if name == spec.field
                else f"the fields it may set are: {', '.join(spec.settable) or 'none'}"
            )
            error = HookReturnError(
                f"the {handler.event!r} handler {handler.label} set ctx.{name}; {how}"
            )
            _annotate(error, handler)
            raise error


def _bad_return(
    handler: Handler, result: object, accept: tuple[type, ...], stop: tuple[type, ...]
) -> HookReturnError:
    names = " or ".join(k.__name__ for k in (*accept, *stop))
    error = HookReturnError(
        f"the {handler.event!r} handler {handler.label} returned {type(result).__name__}; "
        f"it may return {names} or None"
    )
    _annotate(error, handler)
    return error


# --- plugins and the public registration API ---------------------------------------------


@runtime_checkable
class Plugin(Protocol):
    """Something that adds several hooks at once: ``agent.use(plugin)``.

    ``init_agent`` registers the plugin's hooks with ``agent.add_hook``; the disposer that
    ``use`` returns removes all of them.
    """

    @property
    def name(self) -> str:
        """A stable name for the plugin."""
        ...

    def init_agent(self, agent: Agent) -> None:
        """Register the plugin's hooks on ``agent``."""
        ...


_F = TypeVar("_F", bound=Callable[..., Any])
_C = TypeVar("_C")
_R = TypeVar("_R")

# A handler takes the event's context and returns its result, or an awaitable of it.
_Fn: TypeAlias = Callable[[_C], _R | Awaitable[_R]]
ChatStartHandler: TypeAlias = _Fn[ChatStartContext, object]
ChatDoneHandler: TypeAlias = _Fn[ChatDoneContext, object]
ChatAbortHandler: TypeAlias = _Fn[ChatAbortContext, object]
ChatErrorHandler: TypeAlias = _Fn[ChatErrorContext, object]
MessageHandler: TypeAlias = _Fn[MessageContext, object]
PreRequestHandler: TypeAlias = _Fn[PreRequestContext, ProviderRequest | ProviderResponse | None]
ResponseHandler: TypeAlias = _Fn[ResponseContext, ProviderResponse | None]
AfterModelCallHandler: TypeAlias = _Fn[AfterModelCallContext, object]
PreToolCallHandler: TypeAlias = _Fn[
    PreToolCallContext, ToolCall | ToolReturn | Exception | Defer | None
]
ToolResultHandler: TypeAlias = _Fn[ToolResultContext, ToolReturn | None]
ToolErrorHandler: TypeAlias = _Fn[ToolErrorContext, Exception | None]
ApprovalRequestHandler: TypeAlias = _Fn[ApprovalRequestContext, object]
ApprovalDecisionHandler: TypeAlias = _Fn[ApprovalDecisionContext, object]
PreCompressHandler: TypeAlias = _Fn[PreCompressContext, str | None]
MemoryWriteHandler: TypeAlias = _Fn[MemoryWriteContext, object]
DelegationHandler: TypeAlias = _Fn[DelegationContext, object]
SessionSwitchHandler: TypeAlias = _Fn[SessionSwitchContext, object]
SubAgentEventHandler: TypeAlias = _Fn[SubAgentEventContext, object]
FirstChunkHandler: TypeAlias = _Fn[FirstChunkContext, object]
BackoffWaitHandler: TypeAlias = _Fn[BackoffWaitContext, object]
TrimHandler: TypeAlias = _Fn[TrimContext, object]
CompactionHandler: TypeAlias = _Fn[CompactionContext, object]
OutputValidationErrorHandler: TypeAlias = _Fn[
    OutputValidationErrorContext, str | OutputReturn | None
]
ScopeHandler: TypeAlias = Callable[[ScopeContext], object]
_ScopeEvent: TypeAlias = Literal["on_scope_register", "on_scope_unregister"]


class HookHost:
    """Gives a class ``add_hook`` and the ``@hook`` decorator over ``self.hooks``."""

    hooks: HookRegistry

    # One overload per event, so a type checker matches each handler to its context.
    @overload
    def add_hook(
        self, event: Literal["on_chat_start"], handler: ChatStartHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_chat_done"], handler: ChatDoneHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_chat_abort"], handler: ChatAbortHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_chat_error"], handler: ChatErrorHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_message"], handler: MessageHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["pre_request"], handler: PreRequestHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_response"], handler: ResponseHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["after_model_call"], handler: AfterModelCallHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["pre_tool_call"], handler: PreToolCallHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_tool_call_result"], handler: ToolResultHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_tool_call_error"], handler: ToolErrorHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_approval_request"],
        handler: ApprovalRequestHandler,
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_approval_decision"],
        handler: ApprovalDecisionHandler,
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_pre_compress"], handler: PreCompressHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_memory_write"], handler: MemoryWriteHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_delegation"], handler: DelegationHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_session_switch"], handler: SessionSwitchHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_subagent_event"], handler: SubAgentEventHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_first_chunk"], handler: FirstChunkHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_backoff_wait"], handler: BackoffWaitHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_trim"], handler: TrimHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: Literal["on_compaction"], handler: CompactionHandler, *, order: int = 0
    ) -> Disposer: ...
    @overload
    def add_hook(
        self,
        event: Literal["on_output_validation_error"],
        handler: OutputValidationErrorHandler,
        *,
        order: int = 0,
    ) -> Disposer: ...
    @overload
    def add_hook(
        self, event: _ScopeEvent, handler: ScopeHandler, *, order: int = 0
    ) -> Disposer: ...
    def add_hook(self, event: str, handler: Callable[[Any], Any], *, order: int = 0) -> Disposer:
        """Register ``handler`` for ``event`` and return a disposer that removes it.

        Args:
            event: The event's name, e.g. ``"pre_request"``; see ``docs/hooks.md``.
            handler: A sync or async function taking the event's context.
            order: Lower runs first; equal orders run in registration order. ``0`` is the
                user phase; the built-in plugins sit in named phases around it
                (:class:`Phase`).

        Raises:
            HookRegistrationError: The event is unknown or the handler cannot be used.
        """
        return self.hooks.add(event, handler, order=order)

    def hook(self, event: HookEvent, *, order: int = 0) -> Callable[[_F], _F]:
        """Decorator form of :meth:`add_hook`; returns the function unchanged.

        Example:
            >>> from hookloop import Agent
            >>> from hookloop.testing import ScriptedModel
            >>> agent = Agent(ScriptedModel(["Hi there."]))
            >>> @agent.hook("on_message")
            ... def log(ctx):
            ...     print(ctx.message.role)
            >>> _ = agent.chat_sync("Hello")
            user
            assistant
        """

        def register(fn: _F) -> _F:
            self.hooks.add(event, fn, order=order)
            return fn

        return register
