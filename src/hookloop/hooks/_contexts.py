"""The context object of every hook event, and the values handlers hand back.

Each event's handlers receive one of these slotted, keyword-only dataclasses; its docstring
states the event's contract (when it fires, what returning does, what raising does). Which
context each event gets, and what a handler may return, is the event's row in
``_events.py``.

A handler changes things by returning a value, or by setting one of the few fields its
context lists as ``settable``; every other field refuses the assignment itself (a read-only
property over a private slot), with a :class:`~hookloop.HookReturnError` that names the
field. So the rule holds at no cost to dispatch, which does no bookkeeping per handler.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast, dataclass_transform

from .._approval import ApprovalDecision, PendingApproval
from .._errors import HookReturnError
from .._messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from .._verdict import GuardrailPosition, Verdict
from ..models._base import Model, ProviderRequest, ProviderResponse

if TYPE_CHECKING:
    from .._stream_events import AgentResponse
    from .._tools import Scope, Tool
    from ..memory._base import MemoryAction, MemoryEntry, MemoryType

__all__ = [
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
    "FirstChunkContext",
    "GuardrailVerdictContext",
    "HistoryReplacement",
    "InputGuardrailContext",
    "MemoryWriteContext",
    "MessageContext",
    "OutputGuardrailContext",
    "OutputReturn",
    "OutputValidationErrorContext",
    "PreCompressContext",
    "PreRequestContext",
    "PreToolCallContext",
    "ResponseContext",
    "ScopeContext",
    "SessionSwitchContext",
    "SubAgentEventContext",
    "ToolCallGuardrailContext",
    "ToolErrorContext",
    "ToolResultContext",
    "ToolResultGuardrailContext",
    "ToolReturn",
    "TrimContext",
]

_T = TypeVar("_T")


class FixedFieldError(HookReturnError):
    """A handler set a context field that its event does not let handlers set.

    Raised by the assignment itself; the dispatch then names the event and the handler, and
    what the handler may do instead, in the message.

    Attributes:
        context: The context's type.
        field: The field that was set.
    """

    def __init__(self, context: object, name: str) -> None:
        kind = type(context)
        settable = ", ".join(getattr(kind, "__settable__", ())) or "none"
        super().__init__(
            f"ctx.{name} of a {kind.__name__} cannot be set; the fields a handler may set "
            f"are: {settable}"
        )
        self.context = kind
        self.field = name


@dataclass_transform(kw_only_default=True)
def context(*, settable: tuple[str, ...] = ()) -> Callable[[type[_T]], type[_T]]:
    """Make a class a hook context: a slotted, keyword-only dataclass whose fields are fixed.

    The fields named in ``settable`` are plain attributes a handler may set; every other
    field is a read-only property over a private slot, and setting it raises
    :class:`FixedFieldError`. The dispatch writes an interceptor's returned value into the
    private slot. Reading a fixed field costs a property call; writing nothing costs nothing.
    :func:`maker` gives the loop a cheaper way to make one where it makes one per iteration.
    """

    def build(cls: type[_T]) -> type[_T]:
        return cast("type[_T]", _guarded(dataclass(kw_only=True)(cls), settable))

    return build


def _guarded(cls: type, settable: tuple[str, ...]) -> type:
    """``cls`` (a dataclass) rebuilt with slots: settable fields plain, the rest read-only."""
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    if unknown := set(settable) - set(names):
        raise TypeError(f"{cls.__name__} has no field {sorted(unknown)}")
    fixed = [name for name in names if name not in settable]
    namespace = {
        key: value
        for key, value in vars(cls).items()
        if key not in names and key not in ("__dict__", "__weakref__")
    }
    namespace["__slots__"] = (*(f"_{name}" for name in fixed), *settable)
    namespace["__settable__"] = settable
    code: list[str] = []
    scope: dict[str, Any] = {"FixedFieldError": FixedFieldError}
    parameters = []
    for f in fields:
        if f.default_factory is not dataclasses.MISSING:
            raise TypeError(f"{cls.__name__}.{f.name}: a context field takes no default_factory")
        if f.default is dataclasses.MISSING:
            parameters.append(f.name)
        else:
            scope[f"default_{f.name}"] = f.default
            parameters.append(f"{f.name}=default_{f.name}")
        code.append(f"    self.{f.name if f.name in settable else '_' + f.name} = {f.name}")
    code.insert(0, f"def __init__(self, *, {', '.join(parameters)}):")
    for name in fixed:
        code += [
            f"def get_{name}(self):",
            f"    return self._{name}",
            f"def set_{name}(self, value):",
            f"    raise FixedFieldError(self, {name!r})",
        ]
    # The maker: the same fields, positional, written into a new instance (see maker()).
    code.append(f"def make({', '.join(f.name for f in fields)}):")
    code.append("    self = new(built)")
    code += code[1 : len(fields) + 1]  # the __init__'s body
    code.append("    return self")
    scope["new"] = object.__new__
    exec("\n".join(code), scope)  # as dataclasses builds __init__: one plain function each
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    namespace["__init__"] = init
    for name in fixed:
        namespace[name] = property(scope[f"get_{name}"], scope[f"set_{name}"])
    built = scope["built"] = type(cls.__name__, cls.__bases__, namespace)
    make = scope["make"]
    make.__qualname__ = f"{cls.__qualname__}.make"
    built._make = make  # type: ignore[attr-defined]
    return built


def maker(cls: type[_T]) -> Callable[..., _T]:
    """A function making a ``cls`` context from every one of its fields, in order.

    The same instance as ``cls(**fields)``, made without the keyword call: a context the
    loop makes for every tool call or model call costs about half as much (0.18 against
    0.39 us for a five-field context, measured hot; more inside the loop).
    """
    make: Callable[..., _T] = vars(cls)["_make"]
    return make


@context()
class ChatStartContext:
    """``on_chat_start`` (observer): a chat begins, before the user message is committed."""

    message: UserMessage


@context()
class ChatDoneContext:
    """``on_chat_done`` (observer): the chat succeeded; the final answer is in history."""

    response: AgentResponse


@context()
class ChatAbortContext:
    """``on_chat_abort`` (observer): the chat was cancelled; ``reason`` is why, if known."""

    reason: object


@context()
class ChatErrorContext:
    """``on_chat_error`` (observer): the chat failed with ``error``, which then propagates."""

    error: Exception


@context()
class MessageContext:
    """``on_message`` (observer): ``message`` was just committed to history.

    Fires exactly once per committed message, for every handler, even when the chat is
    cancelled meanwhile: the cancellation takes effect after the last handler returned.
    Raising ends the chat (the handlers after it do not run).
    """

    message: Message


@context(settable=("model", "replace_history", "left_out"))
class PreRequestContext:
    """``pre_request`` (interceptor): before each model attempt of iteration ``iteration``.

    Return a :class:`~hookloop.models.ProviderRequest` to replace the request, or a
    :class:`~hookloop.models.ProviderResponse` to skip the model (and later handlers) and use it.
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


@context()
class ResponseContext:
    """``on_response`` (interceptor): a response arrived, before it is committed.

    Return a :class:`~hookloop.models.ProviderResponse` to replace it. Every handler runs.
    """

    iteration: int
    request: ProviderRequest
    response: ProviderResponse


@context(settable=("retry", "request", "model", "replace_history", "left_out"))
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


@context()
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


@context()
class ToolResultContext:
    """``on_tool_call_result`` (interceptor): a tool returned ``result``.

    Return a :class:`ToolReturn` to replace the result (``ToolReturn(None)`` makes it
    ``None``). Every handler runs.
    """

    call: ToolCall
    tool: Tool
    scope: Scope
    result: object


@context(settable=("retry",))
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


@context()
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


@context()
class ApprovalDecisionContext:
    """``on_approval_decision`` (observer): ``agent.resume()`` took a decision on a call.

    It fires once per decision, in call order, after every decision was checked and before
    any decided call runs. A session recorder keeps the decision here (first, at
    :attr:`Phase.RECORD`). Raising ends the resumed chat with an error.
    """

    pending: PendingApproval
    decision: ApprovalDecision


@context()
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


@context()
class PreCompressContext:
    """``on_pre_compress``: a context policy is about to leave ``messages`` out.

    It fires before any discard: compaction replacing them with a summary, its reactive tier
    dropping old turns, and a sliding window leaving them out of a request (once per message).
    A returned string is kept (facts the summariser must not lose, or a note that you saved
    the messages elsewhere): in the summary where one is written, elsewhere in a summary
    message at the front of every request that leaves the messages out. Every handler runs.
    """

    messages: tuple[Message, ...]


@context()
class ScopeContext:
    """``on_scope_register`` / ``on_scope_unregister`` (observers, synchronous)."""

    scope: Scope


@context()
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


@context()
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


@context()
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


@context()
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


@context()
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


@context()
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


@context()
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


@context()
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


@context()
class InputGuardrailContext:
    """``on_input_guardrail`` / ``on_input_guardrail_beside`` (guard): check the user's message.

    ``on_input_guardrail`` fires before the message is committed: the model is not called
    until every handler passed it. ``on_input_guardrail_beside`` fires once it is committed,
    in a task of its own beside the chat's first model call, which is cancelled when a
    handler trips. Return a :class:`~hookloop.Verdict`: ``allow``, ``block`` (the chat ends
    with :class:`~hookloop.GuardrailTripped`; before the model, the message is not stored),
    or ``replace`` (before the model only: the message goes on with the new text, and the
    later handlers see it). ``None`` is no opinion; a raise, any other return and an action
    the row does not take are trips. ``text`` is the message's text.
    """

    message: UserMessage

    @property
    def text(self) -> str:
        """The text checked: the message's text parts, joined by newlines."""
        return self.message.text


@context()
class OutputGuardrailContext:
    """``on_output_guardrail`` (guard): check the final answer before it is committed.

    ``message`` is the model's final answer, ``output`` what ``response.output`` will be
    (the validated value of a typed chat; the text otherwise), and ``text`` the answer as
    the model sent it (its text, or the output tool's arguments). Return a
    :class:`~hookloop.Verdict`: ``allow``, ``block`` (the answer is never stored: the chat
    ends with :class:`~hookloop.GuardrailTripped`; the turn's tool pairs stay) or, for a
    text answer, ``replace`` (the answer committed says the new text). ``None`` is no
    opinion; a raise, any other return and an action the row does not take are trips.
    """

    message: AssistantMessage
    output: object
    text: str


@context()
class ToolCallGuardrailContext:
    """``on_tool_call_guardrail`` (guard): check a tool call before it runs.

    It fires once the arguments are valid (``arguments`` as the tool will get them). For a
    call that needs a person's approval it fires twice: with ``approval="pending"`` before
    the person is asked, and with ``approval="approved"`` when the approved call is about to
    run (a guardrail acts at the one it chose); ``"none"`` when no approval is involved.
    Return a :class:`~hookloop.Verdict`: ``allow``; ``reject`` (the tool does not run; the
    model sees the reason as the call's error result); or ``block`` (the chat ends with
    :class:`~hookloop.GuardrailTripped`; the call is answered as not run). ``None`` is no
    opinion; a raise, any other return and an action the row does not take are trips.
    ``text`` is the call's arguments as JSON.
    """

    call: ToolCall
    tool: Tool
    scope: Scope
    arguments: Mapping[str, Any]
    approval: Literal["none", "pending", "approved"] = "none"

    @property
    def text(self) -> str:
        """The text checked: the call's arguments, as JSON without escapes.

        Written again from ``arguments``: an escaped ``@`` in the model's JSON reads ``@``
        here, so a check of the text sees what the tool will receive.
        """
        return json.dumps(self.arguments, ensure_ascii=False, default=str)


@context()
class ToolResultGuardrailContext:
    """``on_tool_result_guardrail`` (guard): check a tool's result before the model sees it.

    It fires for every call whose tool ran (its result, or its failure) or whose result a
    ``pre_tool_call`` handler supplied, with ``result`` the tool message about to be
    committed. Return a :class:`~hookloop.Verdict`: ``allow``; ``replace`` (the model sees
    the new text instead); or ``block`` (the chat ends with
    :class:`~hookloop.GuardrailTripped`; the call is answered as not run, the result is not
    stored). ``None`` is no opinion; a raise, any other return and an action the row does
    not take are trips. ``text`` is the result's content.
    """

    call: ToolCall
    tool: Tool
    scope: Scope
    result: ToolMessage

    @property
    def text(self) -> str:
        """The text checked: the result as the model would see it."""
        return self.result.content


@context()
class GuardrailVerdictContext:
    """``on_guardrail_verdict`` (observer): a guardrail's verdict stopped or changed something.

    It fires for every ``block``, ``reject`` and ``replace`` (never for ``allow``), and for
    every trip of a guardrail that failed, before the loop acts on it. A session recorder
    keeps it (first, at :attr:`Phase.RECORD`) in the session's side log, which
    :func:`hookloop.guardrails.read_verdicts` reads. Raising ends the chat.

    Attributes:
        position: ``"input"``, ``"output"``, ``"tool_call"`` or ``"tool_result"``.
        guardrail: The guardrail's name (a handler's qualified name).
        verdict: What it decided.
        message_id: The message checked: the user's, the final answer, or the tool
            result; ``None`` for a tool call.
        call_id: The tool call, at the tool positions; else ``None``.
    """

    position: GuardrailPosition
    guardrail: str
    verdict: Verdict
    message_id: str | None = None
    call_id: str | None = None


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
