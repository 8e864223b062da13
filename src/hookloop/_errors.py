"""The one exception tree of hookloop.

Usage errors mean the program is wrong and fixing the code fixes them. Run failures happen
while a chat runs, and a correct program still has to expect them::

    HookloopError
    ├── UsageError                     the program is wrong; raised at the call that is wrong
    │   ├── InvalidMessageError        (also ValueError) a message or its JSON is malformed
    │   ├── ToolDefinitionError        a tool cannot be built from its function
    │   ├── DuplicateNameError         a scope or tool name is taken already
    │   ├── HookRegistrationError      an event or handler that cannot be registered
    │   ├── HookReturnError            (also TypeError) a handler returned a value of the wrong type
    │   ├── ScopeNotFoundError         (also LookupError) no scope has that name
    │   ├── ConcurrentChatError        a second chat on an agent that is still chatting
    │   ├── ScriptExhaustedError       a scripted test model ran out of steps
    │   ├── MissingExtraError          (also ImportError) a class needs an extra that is not
    │   │                              installed; the message names the pip command
    │   ├── MemoryRequestError         (also ValueError) a memory write or search that cannot be
    │   │                              done as asked (unknown type or action, an action the
    │   │                              store cannot do); nothing was written
    │   ├── MissingDepsError           a tool's RunContext names deps and the chat has none
    │   ├── UnknownApprovalError       (also LookupError) a decision for a call not pending
    │   ├── ApprovalMismatchError      a decision made for other arguments than the call's
    │   ├── ApprovalEditError          (also ValueError) an edit's arguments the tool cannot take
    │   ├── ModelSpecError             (also ValueError) a model spec names no provider it can use
    │   ├── LocalModelError            the local model cannot run (extra, file or server missing)
    │   ├── TraceFileError             (also ValueError) a file given as a trace cannot be read
    │   └── HistoryError               a ChatHistory call that cannot apply; history unchanged
    │       ├── MessageNotFoundError   (also LookupError) no message has that id
    │       ├── InvalidRangeError      (also ValueError) a range that ends before it starts
    │       └── DuplicateMessageIdError  (also ValueError) the history holds that id already
    └── RunError                       a chat failed while it ran
        ├── ProviderError              the model provider failed (status, body, retry_after)
        │   ├── RateLimitError         429
        │   ├── OverloadedError        529 / 503 / "overloaded_error"
        │   ├── ServerError            other 5xx
        │   ├── ProviderTimeoutError   no answer in time
        │   ├── ProviderConnectionError  connection dropped or stream truncated
        │   ├── AuthenticationError    401 / 403
        │   ├── NotFoundError          404 (unknown model, wrong URL)
        │   ├── BadRequestError        400 / 422
        │   │   └── ContextOverflowError  the request does not fit the context window
        │   ├── InvalidResponseError   the provider answered something unusable
    │   └── CircuitOpenError       every model of a fallback chain is cooling down
        ├── ToolError                  one tool call failed (the model sees it; the chat goes on)
        │   ├── UnknownToolError
        │   ├── ToolDisabledError
        │   ├── ToolValidationError    the arguments are not valid JSON or have wrong types
        │   ├── ToolExecutionError     the tool's function raised (the cause is chained)
        │   └── ToolResultLostError    a durable turn's worker died while the tool ran; not
        │                              run again (the tool is not idempotent)
        ├── MaxIterationsError         the model kept calling tools past ``max_iterations``
        ├── UsageLimitExceeded         a usage limit (requests, tool calls, tokens, cost, time,
        │                              the repeat limit) would be or was crossed (limit,
        │                              maximum, used, when, usage)
        ├── DurableRecordError         a durable turn's recorded step output cannot be read
        ├── WorkerFencedError          another worker took this one for dead and took its turns
        ├── OutputValidationError      the model's typed answer stayed invalid after
        │                              ``output_retries`` retries (raw, error)
        ├── ChatCancelledError         ``agent.cancel()`` ended the chat
        ├── GuardrailTripped           a guardrail stopped the chat (verdict, guardrail,
        │                              position, usage)
        ├── WaitingForApprovalError    a sub-agent called as a tool waits for approval
        │                              (agent_name, pending)
        ├── StoreError                 a store's database cannot be used (store: where it is)
        │   └── CorruptStoreError      a SQLite store's file is damaged (truncated, overwritten)
        ├── MemoryNotFoundError        (also LookupError) no memory entry has that id or text
        ├── MCPServerError             an MCP server failed (server: which one)
        │   ├── MCPConnectionError     it cannot be reached, or the connection died
        │   ├── MCPTimeoutError        no answer within the toolset's timeout
        │   └── MCPToolError           it answered a call with an error or a malformed result
        └── SessionError               a session store cannot do what was asked (session_id)
            ├── SessionNotFoundError   (also LookupError) no session has that id
            ├── SessionExistsError     the new id of a fork is taken already
            ├── SessionConflictError   another writer appended first; nothing was written
            ├── CorruptSessionError    a stored message cannot be read (seq, reason)
            └── SessionSchemaError     the store's schema is newer than this hookloop reads

Not-found errors of the stores (``MemoryNotFoundError``, ``SessionNotFoundError``) are run
failures: what a store holds is shared state that other processes, retention and the model's
own memory tool change while the program runs, so a correct program still meets them. A
lookup in state the program owns (a history's message ids, its registered scopes) failing is
a usage error.

Task cancellation is not in the tree: a chat whose task is cancelled re-raises
``asyncio.CancelledError`` unchanged, as asyncio code expects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decimal import Decimal

    from ._approval import PendingApproval
    from ._messages import ToolCall, Usage
    from ._verdict import Verdict

__all__ = [
    "AuthenticationError",
    "BadRequestError",
    "ChatCancelledError",
    "CircuitOpenError",
    "ConcurrentChatError",
    "ContextOverflowError",
    "CorruptSessionError",
    "CorruptStoreError",
    "DuplicateMessageIdError",
    "DuplicateNameError",
    "DurableRecordError",
    "GuardrailTripped",
    "HistoryError",
    "HookRegistrationError",
    "HookReturnError",
    "HookloopError",
    "InvalidMessageError",
    "InvalidRangeError",
    "InvalidResponseError",
    "LocalModelError",
    "MCPConnectionError",
    "MCPServerError",
    "MCPTimeoutError",
    "MCPToolError",
    "MaxIterationsError",
    "MemoryNotFoundError",
    "MemoryRequestError",
    "MessageNotFoundError",
    "MissingExtraError",
    "ModelSpecError",
    "NotFoundError",
    "OutputValidationError",
    "OverloadedError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "RetryAttempt",
    "RunError",
    "ScopeNotFoundError",
    "ScriptExhaustedError",
    "ServerError",
    "SessionConflictError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionSchemaError",
    "StoreError",
    "ToolDefinitionError",
    "ToolDisabledError",
    "ToolError",
    "ToolExecutionError",
    "ToolResultLostError",
    "ToolValidationError",
    "TraceFileError",
    "UnknownToolError",
    "UsageError",
    "UsageLimitExceeded",
    "WaitingForApprovalError",
    "WorkerFencedError",
]


class HookloopError(Exception):
    """The root of every exception hookloop raises on purpose."""

    def __reduce__(self) -> tuple[object, ...]:
        # Pickle the state, not a call: most subclasses take other arguments than ``args``.
        return (_unpickle, (type(self), self.args, self.__dict__))


def _unpickle(
    cls: type[HookloopError], args: tuple[object, ...], state: dict[str, object]
) -> HookloopError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryAttempt:
    """One failed attempt of a model call, as a retry strategy saw it.

    Attributes:
        attempt: 1 for the first attempt of the model call.
        error: What the attempt raised.
        wait: Seconds waited before the next attempt (0 for the last one).
    """

    attempt: int
    error: Exception
    wait: float


class UsageError(HookloopError):
    """The program uses hookloop wrongly; the message says how to fix it."""


class InvalidMessageError(UsageError, ValueError):
    """A message, or the JSON it was loaded from, is malformed."""


class ToolDefinitionError(UsageError):
    """A tool cannot be built from the function or arguments given."""


class DuplicateNameError(UsageError):
    """A scope or tool name is already registered on this agent."""


class HookRegistrationError(UsageError):
    """A hook handler cannot be registered for the event named."""


class HookReturnError(UsageError, TypeError):
    """An interceptor returned a value its event does not accept."""


class ScopeNotFoundError(UsageError, LookupError):
    """No scope is registered under the name given."""


class ConcurrentChatError(UsageError):
    """A chat was started on an agent that is still running another one."""


class ScriptExhaustedError(UsageError):
    """A scripted test model was called more times than it has steps."""


class MissingExtraError(UsageError, ImportError):
    """A class needs an optional part of hookloop (an extra) that is not installed.

    Raised when the class is used, never when ``hookloop`` is imported. The message is one
    line that names the command to run.

    Attributes:
        extra: The extra to install, e.g. ``"openai"``.
        needed_by: What needs it, e.g. ``"OpenAIModel"``.
    """

    def __init__(self, *, extra: str, needed_by: str) -> None:
        super().__init__(f"{needed_by} needs the {extra!r} extra: pip install 'hookloop[{extra}]'")
        self.extra = extra
        self.needed_by = needed_by


class ModelSpecError(UsageError, ValueError):
    """A model spec names no known provider, or its provider cannot be used as named."""


class LocalModelError(UsageError):
    """The local model cannot run.

    The extra or the model file is missing, or the server failed to start; the message then
    carries the server's last output.
    """


class TraceFileError(UsageError, ValueError):
    """A file given as a trace is not one this hookloop can read.

    Attributes:
        path: The file.
        line: The first line that cannot be read (1-based), or ``None`` for the whole file.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        where = f"{path}, line {line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class MemoryRequestError(UsageError, ValueError):
    """A memory write or search cannot be done as asked; nothing was written.

    Raised for an unknown memory type or action, an action the store does not support for
    that type, missing or malformed arguments, or a text that matches several entries.
    """


class HistoryError(UsageError):
    """A :class:`~hookloop.ChatHistory` call cannot be applied as given.

    The history is left exactly as it was before the call.
    """


class MessageNotFoundError(HistoryError, LookupError):
    """No message in the history has the id given.

    Attributes:
        message_id: The id that was looked for.
    """

    def __init__(self, message: str, *, message_id: str) -> None:
        super().__init__(message)
        self.message_id = message_id


class InvalidRangeError(HistoryError, ValueError):
    """A message range cannot be applied: it ends before it starts, or holds the system prompt.

    Attributes:
        start_id: The id the range starts at.
        end_id: The id the range ends at.
    """

    def __init__(self, message: str, *, start_id: str, end_id: str) -> None:
        super().__init__(message)
        self.start_id = start_id
        self.end_id = end_id


class DuplicateMessageIdError(HistoryError, ValueError):
    """A message's id is already taken by another message of the history.

    Attributes:
        message_id: The id that is taken.
    """

    def __init__(self, message: str, *, message_id: str) -> None:
        super().__init__(message)
        self.message_id = message_id


class RunError(HookloopError):
    """A chat failed while it ran."""


class ProviderError(RunError):
    """The model provider failed.

    Attributes:
        status: The HTTP status, when the failure came with one.
        body: The error body as the provider sent it (parsed JSON or text).
        retry_after: Seconds the provider asked us to wait, from ``Retry-After`` or
            ``retry-after-ms``.
        model: The model the request was for.
        headers: Response headers that matter for handling the error (rate-limit headers).
        attempts: When a retry strategy gave up on this error, every attempt of the model
            call, this one last.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        body: object = None,
        retry_after: float | None = None,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.body = body
        self.retry_after = retry_after
        self.model = model
        self.headers: Mapping[str, str] = dict(headers or {})
        self.attempts: tuple[RetryAttempt, ...] = ()

    def __str__(self) -> str:
        parts = [self.message]
        if self.status is not None:
            parts.append(f"status={self.status}")
        if self.model is not None:
            parts.append(f"model={self.model!r}")
        if self.retry_after is not None:
            parts.append(f"retry_after={self.retry_after:g}s")
        return parts[0] if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"


class RateLimitError(ProviderError):
    """The provider rejected the request for rate limiting (HTTP 429)."""


class OverloadedError(ProviderError):
    """The provider is overloaded (HTTP 529 or 503, Anthropic's ``overloaded_error``)."""


class ServerError(ProviderError):
    """The provider failed with a server error (HTTP 5xx)."""


class ProviderTimeoutError(ProviderError):
    """The provider did not answer in time."""


class ProviderConnectionError(ProviderError):
    """The connection to the provider failed or a stream ended early."""


class AuthenticationError(ProviderError):
    """The provider rejected the credentials (HTTP 401 or 403)."""


class NotFoundError(ProviderError):
    """The provider does not know the model or the endpoint (HTTP 404)."""


class BadRequestError(ProviderError):
    """The provider rejected the request as malformed (HTTP 400 or 422)."""


class ContextOverflowError(BadRequestError):
    """The request does not fit the model's context window.

    Attributes:
        request_tokens: The size of the rejected request, when known.
        limit_tokens: The model's context window, when known.
    """

    def __init__(
        self,
        message: str,
        *,
        request_tokens: int | None = None,
        limit_tokens: int | None = None,
        status: int | None = None,
        body: object = None,
        model: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message, status=status, body=body, model=model, headers=headers)
        self.request_tokens = request_tokens
        self.limit_tokens = limit_tokens


class InvalidResponseError(ProviderError):
    """The provider answered, but the answer cannot be used (missing fields, broken stream)."""


class CircuitOpenError(ProviderError):
    """Every model of a fallback chain failed recently and is skipped until its cool-down."""


class ToolError(RunError):
    """One tool call failed. The model sees the message; the chat goes on.

    Attributes:
        tool_name: The name the model called.
        call_id: The id of the tool call.
    """

    def __init__(self, message: str, *, tool_name: str, call_id: str) -> None:
        super().__init__(message)
        self.message = message
        self.tool_name = tool_name
        self.call_id = call_id

    def __str__(self) -> str:
        return self.message


class UnknownToolError(ToolError):
    """The model called a tool that the agent does not have."""


class ToolDisabledError(ToolError):
    """The model called a tool (or a tool of a scope) that is disabled now."""


class ToolValidationError(ToolError):
    """The model's arguments are not valid JSON or do not match the tool's parameters."""


class ToolExecutionError(ToolError):
    """The tool's own function raised; the original exception is the ``__cause__``."""


class ToolResultLostError(ToolError):
    """A durable turn's worker died while this tool ran, and the tool is not idempotent.

    The tool is not run again: the model gets this error as the call's result (the text
    is :data:`RESULT_LOST_TEXT` with the tool's name) and decides what to do. See
    ``docs/durable.md``.
    """

    def __init__(self, *, tool_name: str, call_id: str) -> None:
        super().__init__(
            RESULT_LOST_TEXT.format(tool=tool_name), tool_name=tool_name, call_id=call_id
        )

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_lost, (self.tool_name, self.call_id)


RESULT_LOST_TEXT = (
    "result lost in a crash: the worker running tool {tool!r} stopped before its result was "
    "recorded; it was not run again because it is not idempotent, so it may or may not have "
    "taken effect"
)
"""What the model reads for a call whose result was lost (``{tool}`` is the tool's name)."""


def _rebuild_lost(tool_name: str, call_id: str) -> ToolResultLostError:
    return ToolResultLostError(tool_name=tool_name, call_id=call_id)


class DurableRecordError(RunError):
    """A durable turn's recorded step output cannot be read back; the turn stops there.

    The session keeps every message committed before; nothing is run again.

    Attributes:
        workflow_id: The turn's workflow id.
        step: The step whose recorded output is unreadable.
    """

    def __init__(self, *, workflow_id: str, step: str, reason: str) -> None:
        super().__init__(
            f"durable turn {workflow_id!r}: the recorded output of step {step!r} cannot be "
            f"read ({reason})"
        )
        self.workflow_id = workflow_id
        self.step = step
        self.reason = reason

    def __reduce__(self) -> tuple[object, ...]:
        return _rebuild_record, (self.workflow_id, self.step, self.reason)


def _rebuild_record(workflow_id: str, step: str, reason: str) -> DurableRecordError:
    return DurableRecordError(workflow_id=workflow_id, step=step, reason=reason)


class WorkerFencedError(RunError):
    """Another worker declared this one dead (its heartbeat stalled) and took its turns.

    The worker stops: its turns now run elsewhere, and running them here too would repeat
    their steps. A restart with the same executor id rejoins cleanly.

    Attributes:
        executor_id: This worker's executor id.
    """

    def __init__(self, *, executor_id: str) -> None:
        super().__init__(
            f"executor {executor_id!r} was declared dead by another worker (its heartbeat "
            "stalled longer than dead_after); its turns were handed over"
        )
        self.executor_id = executor_id


class MaxIterationsError(RunError):
    """The model still asked for tools after ``max_iterations`` model calls.

    Attributes:
        max_iterations: The limit that was reached.
    """

    def __init__(self, max_iterations: int) -> None:
        super().__init__(
            f"the model still called tools after {max_iterations} iterations "
            "(raise Agent(max_iterations=...) if the task needs more steps)"
        )
        self.max_iterations = max_iterations


class UsageLimitExceeded(RunError):
    """A usage limit of the chat would be crossed, or was: the chat ended here.

    Raised inside the chat: every tool call in the history is answered, ``on_chat_error``
    fires. Checked before a model call, that call was not sent; before a batch, none ran.

    Attributes:
        limit: Which limit: the name of a :class:`~hookloop.UsageLimits` field
            (``"requests"``, ``"cost"``, ...) or ``"repeat_limit"``.
        maximum: The limit as set.
        used: What the chat would have used with the refused step (``when`` is "before
            the call" or "tool batch"), or what it used (``when`` is "after the call");
            ``None`` for a cost that became unknown, which a cost limit never takes for
            "within the limit". A session's limits count what it spent before the chat too.
        when: ``"before the call"``, ``"after the call"`` or ``"tool batch"``.
        usage: The chat's tokens and their cost so far (the partial usage).
        tool_call: For ``"repeat_limit"``, the call made once too often; else ``None``.
    """

    def __init__(
        self,
        *,
        limit: str,
        maximum: int | float | Decimal,
        used: int | float | Decimal | None,
        when: str,
        usage: Usage,
        tool_call: ToolCall | None = None,
    ) -> None:
        if limit == "repeat_limit":
            name = tool_call.name if tool_call is not None else "?"
            text = f"tool {name!r} was called {used} times with the same arguments"
            super().__init__(f"{text} (repeat_limit {maximum}); the chat ended")
        else:
            shown = "an unknown amount" if used is None else _amount(used)
            super().__init__(
                f"usage limit {limit}={maximum} {_WHEN.get(when, when)}: {shown} (raise it in "
                "UsageLimits: Agent(limits=...), chat(..., limits=...) or session_limits=)"
            )
        self.limit = limit
        self.maximum = maximum
        self.used = used
        self.when = when
        self.usage = usage
        self.tool_call = tool_call


def _amount(used: int | float | Decimal) -> str:
    return f"{used.normalize():f}" if hasattr(used, "normalize") else f"{used:g}"


_WHEN: Mapping[str, str] = {
    "before the call": "would be crossed by the next model call, not sent",
    "after the call": "was crossed by the last model call",
    "tool batch": "would be crossed by the next batch of tool calls, none run",
}


class OutputValidationError(RunError):
    """The model's answer did not validate as the chat's output type, retries used up.

    Attributes:
        raw: The model's last answer as it sent it (the output tool's arguments, or text).
        error: Why it did not validate: a pydantic ``ValidationError``, or a
            :class:`ValueError` saying what was wrong with its form.
        attempts: How many answers were tried.
    """

    def __init__(self, *, raw: str, error: Exception, attempts: int) -> None:
        super().__init__(
            f"the model's answer did not validate after {attempts} attempt"
            f"{'' if attempts == 1 else 's'} (raise output_retries to allow more): {error}"
        )
        self.raw = raw
        self.error = error
        self.attempts = attempts


class ChatCancelledError(RunError):
    """``agent.cancel()`` ended the chat.

    Attributes:
        reason: What the caller of ``cancel()`` passed, if anything.
    """

    def __init__(self, reason: object = None) -> None:
        super().__init__("the chat was cancelled" + ("" if reason is None else f": {reason}"))
        self.reason = reason


class GuardrailTripped(RunError):
    """A guardrail stopped the chat: it blocked, or it failed (a trip, never a pass).

    The history stays valid: a blocked input or final answer is not in it (nor in the
    session log), and every tool call in it is answered. A guardrail that raised, returned
    something that is not a :class:`~hookloop.Verdict`, or returned a verdict its position
    does not take trips with a ``"block"`` verdict whose reason starts ``unknown verdict``
    (the exception it raised is the ``__cause__``).

    Attributes:
        verdict: The verdict that stopped the chat.
        guardrail: The guardrail's name.
        position: ``"input"``, ``"output"``, ``"tool_call"`` or ``"tool_result"``.
        usage: The chat's tokens until it stopped (what a guardrail running beside the
            first model call let it spend; a model call cut short reports none).
    """

    def __init__(self, *, verdict: Verdict, guardrail: str, position: str, usage: Usage) -> None:
        reason = f": {verdict.reason}" if verdict.reason else ""
        super().__init__(f"the {position} guardrail {guardrail!r} stopped the chat{reason}")
        self.verdict = verdict
        self.guardrail = guardrail
        self.position = position
        self.usage = usage


class WaitingForApprovalError(RunError):
    """A sub-agent called as a tool ended its chat with calls waiting for approval.

    The calling model sees it as the tool's error result; the calls wait in the sub-agent.

    Attributes:
        agent_name: The sub-agent.
        pending: Its calls that wait.
    """

    def __init__(self, agent_name: str, pending: tuple[PendingApproval, ...]) -> None:
        calls = ", ".join(f"{p.tool_name}({p.arguments})" for p in pending)
        super().__init__(f"{agent_name} is waiting for a person's approval: {calls}")
        self.agent_name = agent_name
        self.pending = pending


class StoreError(RunError):
    """A store's database cannot be used.

    Attributes:
        store: Where the store is (a file path or a server address).
    """

    def __init__(self, message: str, *, store: str) -> None:
        super().__init__(message)
        self.store = store


class CorruptStoreError(StoreError):
    """The store's database file is damaged (truncated, or a header or page overwritten).

    Every call on the store raises it until the file is replaced (from a backup, or by a new
    file); a SQLite file that is only partly damaged can often be saved with the ``sqlite3``
    shell's ``.recover`` command.

    Attributes:
        store: The file.
        reason: What SQLite said.
    """

    def __init__(self, *, store: str, reason: str) -> None:
        super().__init__(
            f"the store's database file {store} is damaged ({reason}): restore it from a "
            "backup or start a new file",
            store=store,
        )
        self.reason = reason


class MemoryNotFoundError(RunError, LookupError):
    """No memory entry has the id, or contains the text, that a replace or remove named.

    A run failure, like :class:`SessionNotFoundError`: the entry may have been removed by
    another process or by the model through the memory tool.

    Attributes:
        memory_type: The memory type searched.
        target: The id or text that was looked for.
    """

    def __init__(self, message: str, *, memory_type: str, target: str) -> None:
        super().__init__(message)
        self.memory_type = memory_type
        self.target = target


class MCPServerError(RunError):
    """An MCP server failed.

    Raised by a tool of an :class:`~hookloop.mcp.MCPToolset`, it becomes the cause of the
    tool error the model sees, and the chat goes on; raised while the toolset connects or
    lists its tools at the start of a chat, it ends that chat. The next use reconnects.

    Attributes:
        server: Which server: its URL (secrets masked), or its name (a command's arguments
            never appear: they may hold secrets).
    """

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class MCPConnectionError(MCPServerError):
    """The MCP server cannot be reached, the connection died, or it was closed during the call.

    A connection dies when a stdio server's process exits, say; it is closed by
    ``aclose()`` (the toolset's or the agent's).
    """


class MCPTimeoutError(MCPServerError):
    """The MCP server did not answer within the toolset's timeout.

    Attributes:
        timeout: The seconds waited.
    """

    def __init__(self, message: str, *, server: str, timeout: float) -> None:
        super().__init__(message, server=server)
        self.timeout = timeout


class MCPToolError(MCPServerError):
    """The MCP server answered a tool call with an error, or with a result that is malformed.

    Attributes:
        tool_name: The tool's name on the server (without the toolset's prefix).
        code: The JSON-RPC error code, when the server refused the call with one.
    """

    def __init__(
        self, message: str, *, server: str, tool_name: str, code: int | None = None
    ) -> None:
        super().__init__(message, server=server)
        self.tool_name = tool_name
        self.code = code


class SessionError(RunError):
    """A session store cannot do what was asked.

    Attributes:
        session_id: The session concerned, or ``None`` for the store as a whole.
    """

    def __init__(self, message: str, *, session_id: str | None) -> None:
        super().__init__(message)
        self.session_id = session_id


class SessionNotFoundError(SessionError, LookupError):
    """No session has the id given."""

    session_id: str

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r} in the store", session_id=session_id)


class SessionExistsError(SessionError):
    """A session with the id given exists already (the new id of a fork must be free)."""

    session_id: str

    def __init__(self, session_id: str) -> None:
        super().__init__(f"session {session_id!r} exists already", session_id=session_id)


class SessionConflictError(SessionError):
    """Another writer appended to the session first; nothing was written.

    Raised when an append's ``expected_seq`` is not the session's last sequence number any
    more, or when a message id already in the session comes again with other content.

    Attributes:
        expected_seq: The last sequence number the writer expected, if it said one.
        actual_seq: The session's last sequence number when the append was refused.
    """

    session_id: str

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        expected_seq: int | None = None,
        actual_seq: int | None = None,
    ) -> None:
        super().__init__(message, session_id=session_id)
        self.expected_seq = expected_seq
        self.actual_seq = actual_seq


class CorruptSessionError(SessionError):
    """A stored message of the session cannot be read; the store's other sessions can.

    Attributes:
        seq: The sequence number of the bad message (``None`` when the session's own record
            is what is broken).
        reason: What is wrong with it.
    """

    session_id: str

    def __init__(self, *, session_id: str, seq: int | None, reason: str) -> None:
        where = f"message seq {seq}" if seq is not None else "its record"
        super().__init__(
            f"session {session_id!r} is corrupt at {where}: {reason}", session_id=session_id
        )
        self.seq = seq
        self.reason = reason


class SessionSchemaError(SessionError):
    """The store's schema version is one this hookloop cannot use (a newer release wrote it).

    Attributes:
        store: Where the store is, for the message (a path or a server address).
        found: The schema version found in the store.
        supported: The newest schema version this hookloop knows.
    """

    def __init__(self, *, store: str, found: int | str, supported: int) -> None:
        super().__init__(
            f"the session store {store} has schema version {found}, but this hookloop knows "
            f"versions up to {supported}: upgrade hookloop to open it",
            session_id=None,
        )
        self.store = store
        self.found = found
        self.supported = supported


def error_line(exc: BaseException) -> str:
    """``exc``'s message on one line (its type's name when it has none), for a log or a reply."""
    return " ".join(str(exc).split()) or type(exc).__name__
