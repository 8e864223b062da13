"""The turn loop of one chat: the only place that sequences hook events.

``agent.chat()`` awaits ``ChatRun.run()`` in the caller's task and asks the model for whole
answers. ``agent.chat_stream()`` runs the same coroutine in the consumer's task with an
``emit`` callback (see ``_stream.py``), asks the model to stream, and hands the events to the
consumer. The steps, in order, are drawn in ``docs/hooks.md``: the chat and its tool calls are
here, each model call's steps (with their attempts) in ``_model_call.py``, and what a chat runs
with and how each request is built in ``_setup.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from typing import TYPE_CHECKING, Any, Final

import pydantic

from ._approval import PendingApproval
from ._approval_log import Ruling
from ._errors import (
    ChatCancelledError,
    HookReturnError,
    MaxIterationsError,
    OutputValidationError,
)
from ._guard import (
    check_input,
    check_output,
    settle_beside,
    start_beside,
)
from ._limits import ZERO_USAGE, Spend, UsageLimits, budget_for
from ._messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from ._model_call import ModelCalls
from ._output import Accepted, OutputSpec, Rejected
from ._setup import ChatSetup, Resumption, build_request
from ._stream_events import (
    AgentEvent,
    AgentResponse,
    ChatDone,
    message_committed,
    tool_call_finished,
)
from ._tool_calls import ToolCalls, Waiting, tool_text
from .hooks._contexts import (
    ApprovalDecisionContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    MessageContext,
    OutputReturn,
    OutputValidationErrorContext,
    maker,
)
from .hooks._dispatch import Handler, notify, notify_each, run_chain
from .hooks._events import (
    ON_APPROVAL_DECISION,
    ON_CHAT_ABORT,
    ON_CHAT_DONE,
    ON_CHAT_ERROR,
    ON_CHAT_START,
    ON_INPUT_GUARDRAIL,
    ON_INPUT_GUARDRAIL_BESIDE,
    ON_MESSAGE,
    ON_OUTPUT_VALIDATION_ERROR,
)
from .models._base import ProviderResponse

if TYPE_CHECKING:
    pass

CANCELLED_TOOL_TEXT = "cancelled: the chat ended before this tool call finished"
OUTPUT_ACCEPTED_TEXT = "Final answer received."
NOT_RUN_AFTER_OUTPUT_TEXT = "not run: the final answer was given in the same turn"
_RETRY: Final = object()  # _settle_output's "the model tries again"


class ChatRun(ModelCalls, ToolCalls):
    """The state of one chat.

    ``emit`` is ``None`` for ``chat()``; for ``chat_stream()`` it receives every event.
    """

    __slots__ = (
        "_beside",
        "_finished_results",
        "_handlers",
        "_history",
        "_hooks",
        "_iteration",
        "_message",
        "_new",
        "_output_failures",
        "_rulings",
        "_setup",
        "_tripped",
        "_unanswered",
        "_waiting",
        "cancel_delivered",
        "cancel_reason",
        "cancel_requested",
        "emit",
        "finished",
        "task",
        "task_cancelled",
    )

    def __init__(
        self,
        setup: ChatSetup,
        message: UserMessage | Resumption,
        emit: Callable[[AgentEvent], Awaitable[None]] | None = None,
    ) -> None:
        self._setup = setup
        self._handlers = setup.handlers
        self._hooks = setup.agent.hooks  # its ``guards``: whether any guardrail is there
        self._history = setup.history
        self._message = message
        self._new: list[Message] = []
        self._unanswered: dict[str, ToolCall] = {}
        self._finished_results: dict[str, ToolMessage] = {}
        self._waiting: list[Waiting] = []
        # How each decided call of a resumed chat is answered, while _decide runs them.
        self._rulings: dict[str, Ruling] | None = None
        self._usage = ZERO_USAGE  # a chat's total starts at a known cost of zero
        self._budget = (  # refuses a cost limit on a model without a price
            None
            if setup.limits is None and setup.session_limits is None and setup.repeat_limit is None
            else budget_for(setup)
        )
        self._iteration = 0
        self._output_failures = 0
        # The input guardrails running beside the first model call (_guard.py), and what
        # ended the chat if they tripped while it ran.
        self._beside: asyncio.Task[BaseException | None] | None = None
        self._tripped: BaseException | None = None
        self.emit = emit
        # The task running the chat; a streamed chat has none while its consumer holds an
        # event (_stream.py), and then cancel() only sets the flag.
        self.task: asyncio.Task[object] | None = None
        self.cancel_delivered = False  # a CancelledError for cancel() is on its way
        self.cancel_requested = False
        self.cancel_reason: object = None
        self.task_cancelled = False
        self.finished = False

    @property
    def deps(self) -> object:
        """The chat's dependencies (``NO_DEPS`` for none); a sub-agent inherits them."""
        return self._setup.deps

    @property
    def usage(self) -> Usage:
        """Tokens used so far, sub-agents' included."""
        return self._usage

    @property
    def spend(self) -> Spend:
        """What the chat spent so far (what its limits are checked against).

        Sub-agents' included. The tokens and their cost always; requests, tool calls and
        seconds in a chat with any limit, or whose spend a session recorder keeps (either
        gives it a budget).
        """
        budget = self._budget
        return Spend(usage=self._usage) if budget is None else budget.spent(self._usage)

    def add_spent(self, spent: Spend) -> None:
        """Count a sub-agent's spend as this chat's (its next checks include it)."""
        self._usage = self._usage + spent.usage
        if (budget := self._budget) is not None:
            budget.requests += spent.requests
            budget.tool_calls += spent.tool_calls

    def left(self) -> UsageLimits | None:
        """What the chat's limits (its own and its session's) have left.

        ``None`` when the chat counts no requests and tool calls (it has no budget).
        """
        budget = self._budget
        return None if budget is None else budget.left(self._usage)

    def cancel(self, reason: object) -> bool:
        """Ask the chat to end; returns False when it has finished already."""
        if self.finished or self.cancel_requested:
            return False
        self.cancel_requested = True
        self.cancel_reason = reason
        task = self.task
        if task is None or task.done():
            # The loop checks the flag before its first model call; a stream checks it when
            # it resumes its chat.
            return True
        try:
            current = asyncio.current_task()
        except RuntimeError:  # another thread, e.g. a sync tool in a worker thread
            task.get_loop().call_soon_threadsafe(self._cancel_task, task)
            return True
        # From inside the chat's own task (a hook or an inline tool) the flag is enough: the
        # loop checks it at every step boundary (_checkpoint), and a pending task.cancel()
        # would outlive the chat.
        if current is not task:
            self._cancel_task(task)
        return True

    def _checkpoint(self) -> None:
        """End the chat here if cancel() was called from inside its own task.

        From a hook or an inline tool, cancel() only sets the flag; every step boundary
        checks it.
        """
        if self.cancel_requested:
            raise asyncio.CancelledError

    def _cancel_task(self, task: asyncio.Task[object]) -> None:
        # From another thread this runs later: the task may have moved on (a stream's
        # consumer may hold an event, or the stream delivered the cancellation itself).
        if not (self.finished or self.cancel_delivered or task.done()) and self.task is task:
            self.cancel_delivered = self.task_cancelled = True
            task.cancel()

    # -- the chat ------------------------------------------------------------------------

    def run(self) -> Coroutine[Any, Any, AgentResponse]:
        """The chat, to await at once: it runs to its end and returns the response."""
        # Not a coroutine of its own: one frame less for every resumption of the chat
        # (each event of a stream resumes it through every frame).
        self.task = asyncio.current_task()
        return self._run(self._handlers, self.emit)

    async def _run(
        self,
        handlers: dict[str, tuple[Handler, ...]],
        emit: Callable[[AgentEvent], Awaitable[None]] | None,
    ) -> AgentResponse:
        try:
            start = self._message
            user = start.user if isinstance(start, Resumption) else start
            if user is not None and (hs := handlers.get(ON_CHAT_START)):
                await notify(hs, ChatStartContext(message=user))
            if isinstance(start, Resumption):
                await self._decide(start)
            if user is not None:
                if ON_INPUT_GUARDRAIL in handlers:
                    user = await check_input(self, user)
                await self._commit(user)
                if ON_INPUT_GUARDRAIL_BESIDE in handlers:
                    self._beside = start_beside(self, user)
            # A resumed chat's first model call follows tool results, as a later iteration's
            # does: a forcing tool choice is not applied to it again.
            response = await self._iterate(0 if user is not None else 1)
            self.finished = True
        except asyncio.CancelledError as exc:
            if (tripped := self._tripped) is not None:  # a guardrail beside the model call
                if self.task_cancelled and self.task is not None:
                    self.task.uncancel()
                tripped.__suppress_context__ = True
                await self._fail(tripped)
            again = await self._abort(exc, CANCELLED_TOOL_TEXT)
            if self.cancel_requested:
                if self.task_cancelled and self.task is not None:
                    self.task.uncancel()
                if again is not None:  # the task was cancelled once more while closing
                    raise again from None
                raise ChatCancelledError(self.cancel_reason) from None
            raise
        except Exception as exc:
            await self._fail(exc)
        except (KeyboardInterrupt, SystemExit) as exc:
            # Propagates, but the history stays valid: the open calls get an answer first.
            # A cancellation arriving meanwhile yields to the interruption, which ends the
            # task all the same.
            text = f"not run: the chat was interrupted ({type(exc).__name__})"
            await self._abort(exc, text)
            raise
        finally:
            if self._beside is not None:  # the chat ended before its first model call did
                self._beside.cancel()
        # Exactly one terminal event per chat: an exception from on_chat_done reaches the
        # caller, but on_chat_error does not fire after on_chat_done.
        if hs := handlers.get(ON_CHAT_DONE):
            await notify(hs, ChatDoneContext(response=response))
        if emit is not None:
            await emit(ChatDone(response=response))
        return response

    async def _fail(self, exc: BaseException) -> None:
        """End the chat with ``exc``: answer the open tool calls, fire ``on_chat_error``."""
        self.finished = True
        again = await self._close_unanswered("not run: the chat ended with an error")
        if isinstance(exc, Exception) and (hs := self._handlers.get(ON_CHAT_ERROR)):
            try:
                await notify_each(hs, ChatErrorContext(error=exc), quietly=True)
            except asyncio.CancelledError as cancelled:
                again = cancelled
        if again is not None:
            raise again from exc
        raise exc

    async def _iterate(self, after_tools: int = 0) -> AgentResponse:
        setup = self._setup
        for iteration in range(setup.max_iterations):
            self._iteration = iteration
            self._checkpoint()
            request = build_request(setup, iteration + after_tools)
            if setup.steps is None:
                if self._unhooked():  # nothing between request and answer: no steps to run
                    model = setup.model
                    response = self._answered(await model.request(request), model)
                else:
                    response = await self._call_model(iteration, request)
                message = response.to_message()
            else:
                response, message = await self._recorded_model_call(setup.steps, iteration, request)
            self._checkpoint()
            if self._hooks.guards:  # guardrails (_guard.py), before the answer is committed
                if self._beside is not None:  # the input's, beside the first model call
                    await settle_beside(self)
                if not message.tool_calls or setup.output is not None:  # a final answer?
                    message = await check_output(self, message)
            if calls := message.tool_calls:  # (one call, the usual case: no comprehension)
                self._unanswered = (
                    {calls[0].id: calls[0]} if len(calls) == 1 else {c.id: c for c in calls}
                )
            if (announcing := self._commit_now(message)) is not None:
                await announcing
            if (budget := self._budget) is not None and budget.checks_after:
                budget.after_call(self._usage, response.usage)  # the answer is kept
            output = setup.output
            if output is not None and (verdict := output.judge(message)) is not None:
                value = await self._settle_output(iteration, output, verdict, message)
                if value is not _RETRY:
                    self._checkpoint()
                    return self._response(message, response, iteration, value)
                if self._waiting:  # the turn's other calls ran, and some wait
                    return await self._wait_for_approval(message, response, iteration)
                continue
            if not message.tool_calls:
                self._checkpoint()
                return self._response(message, response, iteration, message.content)
            await self._run_tools(iteration, message.id, message.tool_calls)
            if self._waiting:
                return await self._wait_for_approval(message, response, iteration)
        raise MaxIterationsError(setup.max_iterations)

    def _response(
        self,
        message: AssistantMessage,
        response: ProviderResponse,
        iteration: int,
        output: object,
        pending: tuple[PendingApproval, ...] = (),
    ) -> AgentResponse[Any]:
        return AgentResponse(
            message=message,
            messages=tuple(self._new),
            usage=self._usage,
            iterations=iteration + 1,
            finish_reason=response.finish_reason,
            output=output,
            pending_approvals=pending,
        )

    async def _wait_for_approval(
        self, message: AssistantMessage, response: ProviderResponse, iteration: int
    ) -> AgentResponse[Any]:
        """End the chat with the calls that wait for approval; the others have run.

        ``on_approval_request`` fired for each as soon as it was found to wait.
        """
        waiting, self._waiting = self._waiting, []
        order = {call.id: i for i, call in enumerate(message.tool_calls)}
        pending = tuple(w.pending for w in sorted(waiting, key=lambda w: order[w.call.id]))
        self._setup.approvals.requests = pending
        self._checkpoint()
        for p in pending:  # answered by resume(), not by this chat's closing
            self._unanswered.pop(p.call_id, None)
        return self._response(message, response, iteration, None, pending)

    async def _decide(self, resumption: Resumption) -> None:
        """Answer the decided calls: run the approved and edited ones, deny the rest.

        A call runs with exactly the arguments that were decided on (a ruling's).
        """
        calls = {call.id: call for call in resumption.message.tool_calls}
        if hs := self._handlers.get(ON_APPROVAL_DECISION):
            for p, decision in resumption.decided:
                await notify(hs, ApprovalDecisionContext(pending=p, decision=decision))
        batch = tuple(
            dataclasses.replace(calls[r.call_id], arguments=r.arguments)
            if r.action in ("run", "lost")
            else calls[r.call_id]
            for r in resumption.rulings
        )
        self._unanswered = {call.id: call for call in batch}
        self._rulings = {r.call_id: r for r in resumption.rulings}
        try:
            # Admitted to the tool-call limit when they were asked for: not counted again.
            await self._run_tools(0, resumption.message.id, batch, admitted=True)
        finally:  # the next batch's calls may reuse these ids
            self._rulings = None

    # -- typed output --------------------------------------------------------------------

    async def _settle_output(
        self,
        iteration: int,
        spec: OutputSpec[Any],
        verdict: Accepted | Rejected,
        message: AssistantMessage,
    ) -> object:
        """Take a valid answer, or tell the model what is wrong; ``_RETRY`` when it retries.

        The output tool call gets its tool message either way. With a valid answer the
        other calls of the turn are answered as not run; with an invalid one the other
        output calls are answered with what is wrong with each, and the rest run.

        Raises:
            OutputValidationError: The answer is invalid and no retry is left.
        """
        if isinstance(verdict, Rejected):
            self._output_failures += 1
            verdict = await self._on_invalid_output(spec, verdict)
        call = verdict.call
        if isinstance(verdict, Accepted):
            if call is not None:  # every call answered, in call order
                for other in message.tool_calls:
                    accepted = other is call
                    text = OUTPUT_ACCEPTED_TEXT if accepted else NOT_RUN_AFTER_OUTPUT_TEXT
                    await self._commit(tool_text(other, text, error=not accepted), iteration)
            return verdict.value
        if self._output_failures > spec.retries:
            raise OutputValidationError(
                raw=verdict.raw, error=verdict.error, attempts=self._output_failures
            )
        if call is None:
            await self._commit(UserMessage(content=verdict.message))
            return _RETRY
        # The output calls are answered with what is wrong with each, the others run; all
        # are committed in call order.
        answers = {call.id: tool_text(call, verdict.message, error=True)}
        for rejected in verdict.others:
            assert rejected.call is not None  # an output tool call's verdict
            answers[rejected.call.id] = tool_text(rejected.call, rejected.message, error=True)
        await self._run_tools(iteration, message.id, message.tool_calls, answered=answers)
        return _RETRY

    async def _on_invalid_output(
        self, spec: OutputSpec[Any], verdict: Rejected
    ) -> Accepted | Rejected:
        """``on_output_validation_error``: a handler may rewrite the message or supply a value.

        Raises:
            HookReturnError: A handler's ``OutputReturn`` is not a valid output either.
        """
        hs = self._handlers.get(ON_OUTPUT_VALIDATION_ERROR)
        if not hs:
            return verdict
        ctx = OutputValidationErrorContext(
            raw=verdict.raw,
            error=verdict.error,
            attempt=self._output_failures,
            retry_message=verdict.message,
        )
        supplied = await run_chain(hs, ctx)
        if isinstance(supplied, OutputReturn):
            try:
                return Accepted(spec.validate(supplied.value), verdict.call)
            except pydantic.ValidationError as exc:
                raise HookReturnError(
                    f"an on_output_validation_error handler returned an output that is not "
                    f"valid: {exc}"
                ) from exc
        if ctx.retry_message is verdict.message:
            return verdict
        return dataclasses.replace(verdict, message=ctx.retry_message)

    def _commit_now(self, message: Message, iteration: int = 0) -> Awaitable[object] | None:
        """:meth:`_commit` without a coroutine of its own: the awaitable announcing it, or None.

        ``None`` when nobody is told (no stream, no ``on_message`` handler: the usual chat);
        otherwise the awaitable of the announcement (see :meth:`_commit`), which the caller
        awaits at once. The loop's two commits of every iteration go through here: with
        ``on_message`` handlers a coroutine around theirs cost about 1.2k instructions each.
        """
        call = self._append(message)
        if self.emit is not None:
            return self._announce(message, call, iteration)
        if ON_MESSAGE in self._handlers:  # (`in`: the usual chat has none)
            return notify_each(self._handlers[ON_MESSAGE], _message_context(message))
        return None

    def _append(self, message: Message) -> ToolCall | None:
        """Append ``message`` to the history; returns the call a tool message answers."""
        self._history.append_committed(message)
        self._new.append(message)
        if isinstance(message, ToolMessage):
            return self._unanswered.pop(message.tool_call_id, None)
        return None

    async def _commit(self, message: Message, iteration: int = 0) -> None:
        """Append ``message`` to the history and announce it, as one step.

        A cancellation cannot split the two: once the message is in the history it reaches
        every ``on_message`` handler (the session recorder) and the stream, and only then
        does a cancellation that arrived meanwhile take effect.
        """
        if (announcing := self._commit_now(message, iteration)) is not None:
            await announcing

    async def _announce(
        self, message: Message, call: ToolCall | None, iteration: int, *, quietly: bool = False
    ) -> None:
        """``on_message`` and the stream's events for a committed message, all of them.

        A cancellation that arrived meanwhile is raised once every one of them is done.
        """
        cancelled: asyncio.CancelledError | None = None
        emit = self.emit
        if emit is not None and call is not None and isinstance(message, ToolMessage):
            try:
                await emit(tool_call_finished(call, message, iteration))
            except asyncio.CancelledError as exc:
                cancelled = exc
        if hs := self._handlers.get(ON_MESSAGE):
            try:
                await notify_each(hs, _message_context(message), quietly=quietly)
            except asyncio.CancelledError as exc:
                cancelled = exc
        if emit is not None:
            try:
                await emit(message_committed(message))
            except asyncio.CancelledError as exc:
                cancelled = cancelled or exc
        if cancelled is not None:
            raise cancelled

    async def _abort(self, exc: BaseException, text: str) -> asyncio.CancelledError | None:
        """Close the chat that did not finish: answer open calls, fire ``on_chat_abort``.

        Returns a cancellation that arrived while closing, for the caller to raise.
        """
        self.finished = True
        cancelled = await self._close_unanswered(text)
        if hs := self._handlers.get(ON_CHAT_ABORT):
            reason = self.cancel_reason if self.cancel_requested else _reason(exc)
            try:
                await notify_each(hs, ChatAbortContext(reason=reason), quietly=True)
            except asyncio.CancelledError as again:
                cancelled = again
        return cancelled

    async def _close_unanswered(self, text: str) -> asyncio.CancelledError | None:
        """Answer every tool call still open, so the history stays valid for the next chat.

        A call whose tool finished but was not committed yet (it waited for an earlier call)
        keeps its real result; the others get ``text`` as an error result. Every answer is
        committed and announced even if the task is cancelled again meanwhile; such a
        cancellation is returned, for the caller to raise.
        """
        finished = self._finished_results
        history = self._history
        steps = self._setup.steps
        closing: list[tuple[ToolCall, ToolMessage]] = []
        for call in self._unanswered.values():
            message = finished.get(call.id)
            if message is None or history.get_message_by_id(message.id) is not None:
                message = tool_text(call, text, error=True)
                if steps is not None:
                    message = dataclasses.replace(message, id=steps.closing_id(call.id))
            closing.append((call, message))
        self._unanswered = {}
        self._finished_results = {}
        for _, message in closing:
            history.append_committed(message)
            self._new.append(message)
        cancelled: asyncio.CancelledError | None = None
        for call, message in closing:
            try:
                await self._announce(message, call, self._iteration, quietly=True)
            except asyncio.CancelledError as again:
                cancelled = cancelled or again
        return cancelled


_message_context: Final = maker(MessageContext)  # every message's (no keyword call)


def _reason(exc: BaseException) -> object:
    if not isinstance(exc, asyncio.CancelledError):
        return exc  # an interruption (KeyboardInterrupt, SystemExit) is its own reason
    return exc.args[0] if exc.args else None
