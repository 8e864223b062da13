"""The tool calls of a chat: a batch run concurrently, each call through its hooks.

``pre_tool_call`` (and the tool-call guardrails), approval, the handler with its retries,
``on_tool_call_result`` / ``on_tool_call_error`` (and the tool-result guardrails), as drawn
in ``docs/hooks.md``. :class:`~hookloop._loop.ChatRun` runs each batch of a chat through
these steps and commits the results in call order.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final, Literal

from ._approval import Defer, PendingApproval, arguments_digest
from ._approval_log import Ruling
from ._errors import (
    ToolDisabledError,
    ToolError,
    ToolExecutionError,
    ToolResultLostError,
    UnknownToolError,
    UsageError,
    UsageLimitExceeded,
)
from ._guard import (
    check_tool_call,
    check_tool_result,
)
from ._limits import ZERO_USAGE, Spend, admit_batch
from ._messages import (
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    tool_result,
)
from ._run_context import NO_DEPS, MissingDepsError, RunContext
from ._setup import ChatSetup, StepRunner
from ._stream_events import (
    AgentEvent,
    tool_call_started,
)
from ._tools import exception_text, serialize_result
from .hooks._contexts import (
    ApprovalRequestContext,
    PreToolCallContext,
    ToolErrorContext,
    ToolResultContext,
    ToolReturn,
    maker,
)
from .hooks._dispatch import Handler, notify, run_chain
from .hooks._events import (
    ON_APPROVAL_REQUEST,
    ON_TOOL_CALL_ERROR,
    ON_TOOL_CALL_GUARDRAIL,
    ON_TOOL_CALL_RESULT,
    ON_TOOL_RESULT_GUARDRAIL,
    PRE_TOOL_CALL,
)

if TYPE_CHECKING:
    from ._limits import Budget, Spend
    from ._setup import ChatSetup
    from ._tools import Scope, Tool
    from .hooks._dispatch import HookRegistry

__all__ = ["ToolCalls", "Waiting", "tool_text"]


@dataclasses.dataclass(frozen=True, slots=True)
class Waiting:
    """A call of the batch that waits for approval instead of running."""

    pending: PendingApproval
    call: ToolCall
    tool: Tool
    scope: Scope


class ToolCalls:
    """The tool-call steps of a chat; :class:`~hookloop._loop.ChatRun` is the chat."""

    __slots__ = ()

    _setup: ChatSetup
    _handlers: dict[str, tuple[Handler, ...]]
    _hooks: HookRegistry
    _usage: Usage
    _budget: Budget | None
    _unanswered: dict[str, ToolCall]
    _finished_results: dict[str, ToolMessage]
    _waiting: list[Waiting]
    _rulings: dict[str, Ruling] | None
    emit: Callable[[AgentEvent], Awaitable[None]] | None

    if TYPE_CHECKING:

        @property
        def usage(self) -> Usage: ...

        @property
        def spend(self) -> Spend: ...

        def add_spent(self, spent: Spend) -> None: ...

        def _checkpoint(self) -> None: ...

        async def _commit(self, message: Message, iteration: int = 0) -> None: ...

        def _commit_now(self, message: Message, iteration: int = 0) -> Awaitable[object] | None: ...

    async def _run_tools(
        self,
        iteration: int,
        message_id: str,
        calls: tuple[ToolCall, ...],
        answered: dict[str, ToolMessage] | None = None,
        *,
        admitted: bool = False,
    ) -> None:
        """Run the calls concurrently; commit their results in call order.

        A call that waits for approval is kept in ``_waiting`` instead. A call in
        ``answered`` does not run: its answer is committed in its place in the order.
        ``message_id`` is the assistant message that made the calls. ``admitted``: the
        limits admitted the batch already (decided calls, counted when they were asked for).
        """
        if (budget := self._budget) is not None and not admitted:
            if budget.repeat is None and answered is None:  # (the usual batch: one call less)
                refused = budget.admit_tools(len(calls), self._usage)
            else:
                answered, refused = admit_batch(budget, calls, answered, self._usage)
            if refused is not None:
                await self._refuse(iteration, calls, answered, refused)
        emit = self.emit
        if emit is not None:
            for call in calls:
                if answered is None or call.id not in answered:
                    await emit(tool_call_started(call, iteration))
        self._finished_results.clear()  # per batch: a provider may reuse call ids across turns
        if len(calls) == 1 and answered is None:
            self._checkpoint()
            outcome = await self._run_call(calls[0])  # (no _outcome: one coroutine less)
            if isinstance(outcome, Waiting):
                self._waiting.append(await self._asked(message_id, outcome))
            elif (announcing := self._commit_now(outcome, iteration)) is not None:
                await announcing
            return
        tasks = [
            _answered(answer)
            if answered is not None and (answer := answered.get(call.id)) is not None
            else asyncio.ensure_future(self._keep(message_id, call))
            for call in calls
        ]
        try:
            for task in tasks:
                outcome = await task
                if isinstance(outcome, Waiting):
                    self._waiting.append(outcome)
                else:
                    await self._commit(outcome, iteration)
        finally:
            pending = [task for task in tasks if not task.done()]
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.wait(pending)
            for task in tasks:  # one failure ends the chat; the others are retrieved here
                if not task.cancelled():
                    task.exception()

    async def _refuse(
        self,
        iteration: int,
        calls: tuple[ToolCall, ...],
        answered: dict[str, ToolMessage] | None,
        error: UsageLimitExceeded,
    ) -> None:
        """End the chat before a batch that may not run: each call is answered "not run".

        Raises:
            UsageLimitExceeded: ``error``, once every call of the batch is answered.
        """
        for call in calls:
            answer = answered.get(call.id) if answered is not None else None
            text = f"not run: the chat reached its {error.limit} limit"
            await self._commit(answer or tool_text(call, text, error=True), iteration)
        raise error

    async def _keep(self, message_id: str, call: ToolCall) -> ToolMessage | Waiting:
        outcome = await self._outcome(message_id, call)
        if isinstance(outcome, ToolMessage):
            self._finished_results[call.id] = outcome
        return outcome

    async def _outcome(self, message_id: str, call: ToolCall) -> ToolMessage | Waiting:
        """Run one call; a call found to wait fires ``on_approval_request`` at once.

        At once, not when the batch is done: a session recorder then keeps the request
        even if the process dies while another call of the batch runs.
        """
        outcome = await self._run_call(call)
        if isinstance(outcome, Waiting):
            return await self._asked(message_id, outcome)
        return outcome

    def _run_call(self, call: ToolCall) -> Coroutine[Any, Any, ToolMessage | Waiting]:
        """The coroutine running one call through its hooks (as a durable step in a turn)."""
        steps = self._setup.steps
        return self._execute(call) if steps is None else self._recorded_tool_call(steps, call)

    async def _asked(self, message_id: str, waiting: Waiting) -> Waiting:
        """``waiting`` as a call of the assistant message ``message_id``, announced.

        ``on_approval_request`` has fired for it when this returns.
        """
        w = dataclasses.replace(
            waiting, pending=dataclasses.replace(waiting.pending, message_id=message_id)
        )
        if hs := self._handlers.get(ON_APPROVAL_REQUEST):
            await notify(
                hs,
                ApprovalRequestContext(pending=w.pending, call=w.call, tool=w.tool, scope=w.scope),
            )
        return w

    async def _recorded_tool_call(self, steps: StepRunner, call: ToolCall) -> ToolMessage | Waiting:
        """One tool call as a durable step (its hooks inside): a replay takes the record.

        A call that waits for approval is recorded as waiting: the turn ends with it, and a
        later turn (``DurableChats.resume``) runs it once it is decided.
        """
        found = self._setup.scopes.lookup(call.name)

        async def run() -> tuple[ToolMessage | PendingApproval, Spend | None]:
            before = self.spend  # tool steps run one at a time: only this call adds
            outcome = await self._execute(call)
            if isinstance(outcome, Waiting):
                return outcome.pending, None
            return outcome, _spent_since(before, self.spend)

        async def lost(error: ToolResultLostError) -> ToolMessage:
            tool, scope = found if found is not None else (None, None)
            return await self._failed(call, tool, scope, error)

        idempotent = found is not None and found[0].idempotent
        message, spent = await steps.tool_call(call, idempotent, run, lost)
        if isinstance(message, PendingApproval):
            if found is None:  # a record that names a tool this agent does not have
                raise UsageError(f"tool {call.name!r} waits for approval but is not registered")
            tool, scope = found
            return Waiting(message, call, tool, scope)
        if spent is not None:
            self.add_spent(spent)
        return message

    async def _execute(self, call: ToolCall) -> ToolMessage | Waiting:
        """Run one tool call through its hooks; returns the tool message, or the wait.

        In a chat answering decided calls (``_rulings``), the call's ruling stands in for
        approval: a denial answers it at once; an approved call (``call`` carries the
        decided arguments) runs with exactly those arguments, whatever ``pre_tool_call``
        handlers return as a new call; one that may have run already runs again only if its
        tool is idempotent.
        """
        error: ToolError
        rulings = self._rulings
        ruling = rulings.get(call.id) if rulings is not None else None
        if ruling is not None and ruling.action in ("deny", "set_aside"):
            return tool_text(call, ruling.answer(), error=True)
        scopes = self._setup.scopes
        found = scopes.lookup(call.name)
        if found is None:
            known = ", ".join(sorted(scopes.tool_names)) or "none"
            error = UnknownToolError(
                f"unknown tool {call.name!r}; available tools: {known}",
                tool_name=call.name,
                call_id=call.id,
            )
            return await self._failed(call, None, None, error)
        tool, scope = found
        if ruling is not None and ruling.action == "lost" and not tool.idempotent:
            lost = ToolResultLostError(tool_name=tool.name, call_id=call.id)
            return await self._failed(call, tool, scope, lost)
        original = call
        deferred: Defer | None = None
        if hs := self._handlers.get(PRE_TOOL_CALL):
            ctx = _pre_tool_call(call, tool, scope)
            supplied = await run_chain(hs, ctx)
            # A decided call runs as decided: the person approved these very arguments.
            call = ctx.call if ruling is None else original
            self._checkpoint()
            if supplied is None:  # (the usual return: no type to tell)
                pass
            elif isinstance(supplied, ToolReturn):
                return await self._succeeded(original, call, tool, scope, supplied.value)
            elif isinstance(supplied, Exception):
                return await self._failed(original, tool, scope, supplied, call)
            elif isinstance(supplied, Defer):
                deferred = supplied
        scope_on = scope.enabled is True or scope.is_enabled()  # (no call for a plain flag)
        if not (scope_on and (tool.enabled is True or tool.is_enabled())):
            reason = "" if scope_on else f": its scope {scope.name!r} is disabled"
            error = ToolDisabledError(
                f"tool {tool.name!r} is disabled{reason}",
                tool_name=tool.name,
                call_id=original.id,
            )
            return await self._failed(original, tool, scope, error, call)
        try:
            arguments = tool.validate(original.id, call.arguments)
        except ToolError as exc:
            return await self._failed(original, tool, scope, exc, call)
        waits = ruling is None and (
            deferred is not None
            or (tool.requires_approval is not False and tool.needs_approval(arguments))
        )
        guards = self._hooks.guards
        if guards and (hs := self._handlers.get(ON_TOOL_CALL_GUARDRAIL)):
            stage: Literal["none", "pending", "approved"] = (
                "approved" if ruling is not None else "pending" if waits else "none"
            )
            checking = check_tool_call(self, hs, call, original, tool, scope, arguments, stage)
            if checking is not None and (rejected := await checking) is not None:
                return rejected
        if waits:
            # The person is asked about the arguments the tool will receive (as handlers
            # changed them, which the predicate judged), with the model's for context.
            pending = PendingApproval(
                call_id=original.id,
                tool_name=original.name,
                arguments=call.arguments,
                model_arguments=original.arguments,
                digest=arguments_digest(
                    original.id, original.name, call.arguments, original.arguments
                ),
                reason=deferred.reason if deferred is not None else "",
            )
            return Waiting(pending, original, tool, scope)
        attempt = 1
        while True:
            if (name := tool.context_parameter) is not None:
                arguments = {**arguments, name: self._run_context(original, tool, attempt)}
            try:
                result = await tool.invoke(arguments)
                break
            except Exception as exc:
                kind, text = type(exc).__name__, exception_text(exc)
                error = ToolExecutionError(
                    f"tool {tool.name!r} failed: {kind}" + ("" if text == kind else f": {text}"),
                    tool_name=tool.name,
                    call_id=original.id,
                )
                error.__cause__ = exc
                final, retry = await self._on_error(call, tool, scope, error, attempt)
                if not retry:
                    failed = _error_message(original, final)
                    checked = self._checked(call, tool, scope, failed)
                    return checked if isinstance(checked, ToolMessage) else await checked
                attempt += 1
        if ON_TOOL_CALL_RESULT in self._handlers:
            # _succeeded's chain, here: a coroutine around it cost about 1.2k instructions
            # for every tool call with on_tool_call_result handlers.
            returned = _tool_result_context(call, tool, scope, result)
            await run_chain(self._handlers[ON_TOOL_CALL_RESULT], returned)
            result = returned.result
        message = tool_result(original, serialize_result(result))
        if guards and (hs := self._handlers.get(ON_TOOL_RESULT_GUARDRAIL)):
            checked = check_tool_result(self, hs, call, tool, scope, message)
            return checked if isinstance(checked, ToolMessage) else await checked
        return message

    def _checked(
        self, call: ToolCall, tool: Tool, scope: Scope, message: ToolMessage
    ) -> ToolMessage | Awaitable[ToolMessage]:
        """``message`` through the tool-result guardrails, or an awaitable of the result.

        It (or its replacement) at once when they let it pass without waiting.
        """
        if hs := self._handlers.get(ON_TOOL_RESULT_GUARDRAIL):
            return check_tool_result(self, hs, call, tool, scope, message)
        return message

    def _run_context(self, call: ToolCall, tool: Tool, attempt: int) -> RunContext[object]:
        setup = self._setup
        deps = setup.deps
        if deps is NO_DEPS:
            if tool.needs_deps:
                raise MissingDepsError(tool.name)
            deps = None
        return RunContext(
            deps=deps,
            agent=setup.agent,
            usage=self._usage,
            session_id=setup.agent.session_id,
            call_id=call.id,
            tool_name=tool.name,
            attempt=attempt,
        )

    async def _succeeded(
        self, original: ToolCall, call: ToolCall, tool: Tool, scope: Scope, result: object
    ) -> ToolMessage:
        if hs := self._handlers.get(ON_TOOL_CALL_RESULT):
            ctx = _tool_result_context(call, tool, scope, result)
            await run_chain(hs, ctx)
            result = ctx.result
        checked = self._checked(call, tool, scope, tool_result(original, serialize_result(result)))
        return checked if isinstance(checked, ToolMessage) else await checked

    async def _failed(
        self,
        original: ToolCall,
        tool: Tool | None,
        scope: Scope | None,
        error: Exception,
        call: ToolCall | None = None,
    ) -> ToolMessage:
        final, _ = await self._on_error(call or original, tool, scope, error, 1)
        return _error_message(original, final)

    async def _on_error(
        self, call: ToolCall, tool: Tool | None, scope: Scope | None, error: Exception, attempt: int
    ) -> tuple[Exception, bool]:
        """Run ``on_tool_call_error``; returns the (possibly replaced) error and ``retry``."""
        hs = self._handlers.get(ON_TOOL_CALL_ERROR)
        if not hs:
            return error, False
        ctx = ToolErrorContext(call=call, tool=tool, scope=scope, error=error, attempt=attempt)
        await run_chain(hs, ctx)
        return ctx.error, ctx.retry


# Every tool call's contexts, made from their fields in order (no keyword call).
_pre_tool_call: Final = maker(PreToolCallContext)
_tool_result_context: Final = maker(ToolResultContext)


def _spent_since(before: Spend, now: Spend) -> Spend | None:
    """The requests, tool calls and tokens added to ``before`` to make ``now``; ``None``: none."""
    requests, tool_calls = now.requests - before.requests, now.tool_calls - before.tool_calls
    usage = _used_since(before.usage, now.usage)
    if usage is None and not requests and not tool_calls:
        return None
    return Spend(requests=requests, tool_calls=tool_calls, usage=usage or ZERO_USAGE)


def _used_since(before: Usage, now: Usage) -> Usage | None:
    """The tokens added to ``before`` to make ``now``; ``None`` for none."""
    if now == before:
        return None
    a, b = now.cost, before.cost
    return Usage(
        input_tokens=now.input_tokens - before.input_tokens,
        output_tokens=now.output_tokens - before.output_tokens,
        cached_input_tokens=now.cached_input_tokens - before.cached_input_tokens,
        reasoning_tokens=now.reasoning_tokens - before.reasoning_tokens,
        cache_write_tokens=now.cache_write_tokens - before.cache_write_tokens,
        cost=None if a is None or b is None else a - b,
    )


def _answered(message: ToolMessage) -> asyncio.Future[ToolMessage | Waiting]:
    """A call's answer known before the batch runs, awaited in its place in the order."""
    future: asyncio.Future[ToolMessage | Waiting] = asyncio.get_running_loop().create_future()
    future.set_result(message)
    return future


def tool_text(call: ToolCall, text: str, *, error: bool) -> ToolMessage:
    return tool_result(call, text, is_error=error)


def _error_message(call: ToolCall, error: Exception) -> ToolMessage:
    return tool_result(call, exception_text(error), is_error=True)
