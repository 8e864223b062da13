"""Guardrails in the loop: each guard row's handlers run one at a time, their verdicts judged.

The loop (``_loop.py``) calls in here at four places, each only when the row has handlers:
the user's message before it is committed (and beside the first model call), the final
answer before it is committed, a tool call before it runs, and a tool result before it is
committed. A handler's return goes through :func:`_judged`: ``None`` is no opinion, a
:class:`~hookloop.Verdict` the position takes is acted on, anything else (a raise, another
type, an action the position does not take) is a trip. Every verdict that stops or changes
something fires ``on_guardrail_verdict`` first (the session recorder keeps it), then the loop
acts: a block raises :class:`~hookloop.GuardrailTripped`, which ends the chat through the
loop's error path (every open tool call answered), a reject answers the tool call, a replace
changes the text the later handlers and the model see.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
from collections.abc import Awaitable, Mapping
from typing import TYPE_CHECKING, Any, Final, Literal

import pydantic_core

from ._errors import GuardrailTripped
from ._messages import AssistantMessage, TextPart, ToolCall, ToolMessage, UserMessage, tool_result
from ._output import Accepted
from ._verdict import ALLOW, POSITION_ACTIONS, GuardrailPosition, Verdict
from .hooks._contexts import (
    GuardrailVerdictContext,
    InputGuardrailContext,
    OutputGuardrailContext,
    ToolCallGuardrailContext,
    ToolResultGuardrailContext,
    maker,
)
from .hooks._dispatch import (
    GuardStop,
    Handler,
    Phase,
    guard_stop,
    notify,
    run_guards,
    tripped,
)
from .hooks._events import (
    ON_GUARDRAIL_VERDICT,
    ON_INPUT_GUARDRAIL,
    ON_INPUT_GUARDRAIL_BESIDE,
    ON_OUTPUT_GUARDRAIL,
)

if TYPE_CHECKING:
    from ._loop import ChatRun
    from ._tool_calls import ToolCalls
    from ._tools import Scope, Tool

__all__ = [
    "check_input",
    "check_output",
    "check_tool_call",
    "check_tool_result",
    "settle_beside",
    "start_beside",
]


_OBSERVE: Final = int(Phase.OBSERVE)  # an int compares faster than the IntEnum member
_EAGER: Final = sys.version_info >= (3, 12)  # asyncio.Task(..., eager_start=True)

# The contexts of every chat and tool call, made from their fields in order (maker()).
_input_context: Final = maker(InputGuardrailContext)
_output_context: Final = maker(OutputGuardrailContext)
_tool_call_context: Final = maker(ToolCallGuardrailContext)
_tool_result_context: Final = maker(ToolResultGuardrailContext)


def _checks(handlers: tuple[Handler, ...] | None) -> bool:
    """Whether a guard row has a handler that checks, not only observers of it.

    Observers (at :attr:`Phase.OBSERVE` or later: the trace plugins) see the row fire when
    a guardrail is there, and do not make it fire by themselves: a chat without guardrails
    traces as before, and starts no task beside its first model call.
    """
    return handlers is not None and handlers[0].order < _OBSERVE


_BESIDE_ACTIONS: Final = frozenset({"allow", "block"})
_TYPED_OUTPUT_ACTIONS: Final = frozenset({"allow", "block"})


def _judged(
    outcome: object, handler: Handler, position: GuardrailPosition, actions: frozenset[str]
) -> tuple[Verdict, BaseException | None]:
    """The verdict a handler's outcome stands for, and the exception behind a trip."""
    if isinstance(outcome, Verdict):
        if outcome.action in actions:
            return outcome, None
        return _unknown(
            f"{outcome.action!r} is not a verdict the {position} position takes "
            f"(it takes {', '.join(sorted(actions))})",
            outcome,
        ), None
    if isinstance(outcome, BaseException):
        text = str(outcome)
        kind = type(outcome).__name__
        return _unknown(f"the guardrail raised {kind}" + (f": {text}" if text else "")), outcome
    return _unknown(f"the guardrail returned {type(outcome).__name__}, not a Verdict"), None


def _unknown(why: str, verdict: Verdict | None = None) -> Verdict:
    data: dict[str, object] = {"unknown_verdict": True}
    if verdict is not None:
        data["returned"] = verdict.action
    return Verdict.block(f"unknown verdict: {why}", data=data)


async def _settle(
    run: ToolCalls,
    handlers: tuple[Handler, ...],
    ctx: Any,
    position: GuardrailPosition,
    pending: GuardStop | Awaitable[GuardStop | None],
    *,
    actions: frozenset[str] | None = None,
    message_id: str | None = None,
    call_id: str | None = None,
) -> tuple[Verdict, str] | None:
    """Act on the handler that did not let ``ctx`` pass, then run the handlers after it.

    The loop's checks run every handler first (:func:`run_guards`: the usual case is that
    every one lets it pass, with no coroutine) and come here with what did not finish at
    once: the first handler that did not let it pass, or the awaitable of the handlers from
    the first async one on. A replace is applied to ``ctx`` and the next handler sees it.
    Returns a reject, with its guardrail's name.

    Raises:
        GuardrailTripped: A handler blocked, or failed.
    """
    stopped = pending if isinstance(pending, tuple) else await pending
    if stopped is None:
        return None
    taken = POSITION_ACTIONS[position] if actions is None else actions
    while True:
        handler, outcome = stopped
        handlers = handlers[handlers.index(handler) + 1 :]
        verdict, cause = _judged(outcome, handler, position, taken)
        if verdict.action != "allow":  # (an allowing Verdict of a subclass goes on)
            rejected = await _act(
                run, ctx, position, handler.label, verdict, cause, message_id, call_id
            )
            if rejected is not None:
                return rejected
        if not handlers:
            return None
        next_stop = run_guards(handlers, ctx)
        if next_stop is not None and not isinstance(next_stop, tuple):
            next_stop = await next_stop
        if next_stop is None:
            return None
        stopped = next_stop


async def _act(
    run: ToolCalls,
    ctx: Any,
    position: GuardrailPosition,
    name: str,
    verdict: Verdict,
    cause: BaseException | None,
    message_id: str | None,
    call_id: str | None,
) -> tuple[Verdict, str] | None:
    """Record a verdict that stops or changes something, then carry it out."""
    if vhs := run._handlers.get(ON_GUARDRAIL_VERDICT):
        if position == "tool_result":
            message_id = ctx.result.id
        await notify(
            vhs,
            GuardrailVerdictContext(
                position=position,
                guardrail=name,
                verdict=verdict,
                message_id=message_id,
                call_id=call_id,
            ),
        )
    if verdict.action == "replace":
        assert verdict.replacement is not None  # a replace verdict carries one
        _replace(ctx, verdict.replacement)
        return None
    if verdict.action == "reject":
        return verdict, name
    tripped = GuardrailTripped(verdict=verdict, guardrail=name, position=position, usage=run.usage)
    raise tripped from cause


def _replace(ctx: object, text: str) -> None:
    """Put ``text`` in place of what ``ctx`` checks (into the context's private slots)."""
    if isinstance(ctx, InputGuardrailContext):
        message = ctx.message
        content: str | tuple[Any, ...] = text
        if not isinstance(message.content, str):  # the text parts give way; images stay
            others = tuple(p for p in message.content if not isinstance(p, TextPart))
            content = (TextPart(text=text), *others)
        object.__setattr__(ctx, "_message", dataclasses.replace(message, content=content))
    elif isinstance(ctx, OutputGuardrailContext):
        answer = dataclasses.replace(ctx.message, content=text)
        object.__setattr__(ctx, "_message", answer)
        object.__setattr__(ctx, "_output", text)
        object.__setattr__(ctx, "_text", text)
    elif isinstance(ctx, ToolResultGuardrailContext):
        object.__setattr__(ctx, "_result", dataclasses.replace(ctx.result, content=text))


# --- the positions ---------------------------------------------------------------------------


async def check_input(run: ChatRun, message: UserMessage) -> UserMessage:
    """``on_input_guardrail``: the message to commit (it may be redacted).

    Raises:
        GuardrailTripped: A guardrail blocked the message (it is not committed).
    """
    hs = run._handlers.get(ON_INPUT_GUARDRAIL)
    if hs is None or not _checks(hs):
        return message
    ctx = _input_context(message)
    if (stopped := run_guards(hs, ctx)) is not None:
        await _settle(run, hs, ctx, "input", stopped, message_id=message.id)
    return ctx.message


def start_beside(run: ChatRun, message: UserMessage) -> asyncio.Task[BaseException | None] | None:
    """``on_input_guardrail_beside`` in a task of its own, beside the first model call.

    When it trips before the chat waits for it (:func:`settle_beside`), it cancels the chat
    with ``run.cancel()``, and the chat ends with the trip (``ChatRun._tripped``) instead.
    On Python 3.12+ the task starts eagerly: its handlers run at once up to the first that
    waits, and ``None`` stands for a task that let the message pass before then.
    """
    hs = run._handlers.get(ON_INPUT_GUARDRAIL_BESIDE)
    if hs is None or not _checks(hs):
        return None

    async def check() -> BaseException | None:
        ctx = _input_context(message)
        try:
            if (stopped := run_guards(hs, ctx)) is not None:
                await _settle(
                    run, hs, ctx, "input", stopped, actions=_BESIDE_ACTIONS, message_id=message.id
                )
        except Exception as exc:  # a trip, or a verdict observer that raised: the chat's end
            return exc
        return None

    loop = asyncio.get_running_loop()
    if _EAGER:
        # A task's first step otherwise waits for a turn of the event loop, which the chat
        # then waits for too (about 20 us a chat): usually the handlers let the message
        # pass without waiting at all.
        task = asyncio.Task(check(), loop=loop, eager_start=True)  # type: ignore[call-arg,unused-ignore]
        if task.done() and not task.cancelled() and task.result() is None:
            return None
    else:
        task = loop.create_task(check())

    def interrupt(done: asyncio.Task[BaseException | None]) -> None:
        # Only while the chat has not reached settle_beside (there, it reads the outcome),
        # and not when the chat is ending already (cancel() says).
        if (
            run._beside is done
            and not done.cancelled()
            and (error := done.result()) is not None
            and run.cancel(error)
        ):
            run._tripped = error

    task.add_done_callback(interrupt)
    return task


async def settle_beside(run: ChatRun) -> None:
    """Wait for the guardrails beside the first model call, before its answer is used.

    Raises:
        GuardrailTripped: One of them tripped (the answer is not committed).
    """
    task = run._beside
    run._beside = None
    if task is None:
        return
    error = await task  # cancelled with the chat, if the chat is cancelled meanwhile
    if error is not None:
        raise error


async def check_output(run: ChatRun, message: AssistantMessage) -> AssistantMessage:
    """``on_output_guardrail`` for a final answer: the answer to commit (maybe replaced).

    A message that is not a final answer (tool calls to run, an invalid typed answer the
    model will retry) is returned as it is.

    Raises:
        GuardrailTripped: A guardrail blocked the answer (it is not committed).
    """
    hs = run._handlers.get(ON_OUTPUT_GUARDRAIL)
    if hs is None or not _checks(hs):
        return message
    spec = run._setup.output
    actions: frozenset[str] | None = None
    if spec is None:
        if message.tool_calls:
            return message
        value: object = message.content
        text = message.content
    else:
        judged = spec.judge(message)
        if not isinstance(judged, Accepted):
            return message
        value = judged.value
        # The value as JSON without escapes: a check of the text sees what is committed.
        text = _as_text(value)
        if not spec.plain_text:
            actions = _TYPED_OUTPUT_ACTIONS
    ctx = _output_context(message, value, text)
    if (stopped := run_guards(hs, ctx)) is not None:
        await _settle(run, hs, ctx, "output", stopped, actions=actions, message_id=message.id)
    return ctx.message


def check_tool_call(
    run: ToolCalls,
    handlers: tuple[Handler, ...],
    call: ToolCall,
    original: ToolCall,
    tool: Tool,
    scope: Scope,
    arguments: Mapping[str, Any],
    approval: Literal["none", "pending", "approved"],
) -> Awaitable[ToolMessage | None] | None:
    """``on_tool_call_guardrail``: ``None`` when the call may run, or an awaitable.

    The awaitable gives the rejection that answers ``original``, or ``None`` (the handlers
    after the one that did not let it pass let it through), and raises
    :class:`~hookloop.GuardrailTripped` when a guardrail blocked the call. A plain call when
    every guardrail is sync and lets the call pass: it runs for every tool call.
    """
    if handlers[0].order >= _OBSERVE:  # _checks, inlined: it runs for every tool call
        return None
    if approval != "none":  # a guardrail checks a call that needs approval at one stage
        handlers = tuple(h for h in handlers if h.skips != approval)
        if not handlers:
            return None
    ctx = _tool_call_context(call, tool, scope, arguments, approval)
    if len(handlers) > 1 or (only := handlers[0]).is_async:
        stopped = run_guards(handlers, ctx)
    else:  # one sync guardrail, the usual row: called here as run_guards would (a frame less)
        try:
            result = only.fn(ctx)
        except Exception as exc:
            stopped = tripped(exc, only, ctx)
        else:
            if result is ALLOW:
                return None
            stopped = guard_stop(handlers, only, ctx, result)
    if stopped is None:
        return None
    return _tool_call_stopped(run, handlers, ctx, stopped, original)


async def _tool_call_stopped(
    run: ToolCalls,
    handlers: tuple[Handler, ...],
    ctx: ToolCallGuardrailContext,
    pending: GuardStop | Awaitable[GuardStop | None],
    original: ToolCall,
) -> ToolMessage | None:
    # The handlers' awaitable first: when they let it pass (async handlers with no opinion,
    # the usual case), _settle's coroutine is not made.
    stopped = pending if isinstance(pending, tuple) else await pending
    if stopped is None:
        return None
    rejected = await _settle(run, handlers, ctx, "tool_call", stopped, call_id=original.id)
    if rejected is None:
        return None
    verdict, name = rejected
    text = f"rejected by the guardrail {name!r}" + (f": {verdict.reason}" if verdict.reason else "")
    return tool_result(original, text, is_error=True)


def check_tool_result(
    run: ToolCalls,
    handlers: tuple[Handler, ...],
    call: ToolCall,
    tool: Tool,
    scope: Scope,
    result: ToolMessage,
) -> ToolMessage | Awaitable[ToolMessage]:
    """``on_tool_result_guardrail``: the result to commit (maybe replaced), or an awaitable.

    An awaitable of it when a guardrail is async or did not let the result pass; it raises
    :class:`~hookloop.GuardrailTripped` when a guardrail blocked the result (it is not
    committed).
    """
    if handlers[0].order >= _OBSERVE:  # _checks, inlined: it runs for every tool result
        return result
    ctx = _tool_result_context(call, tool, scope, result)
    if len(handlers) > 1 or (only := handlers[0]).is_async:
        stopped = run_guards(handlers, ctx)
    else:  # one sync guardrail, the usual row: called here as run_guards would (a frame less)
        try:
            returned = only.fn(ctx)
        except Exception as exc:
            stopped = tripped(exc, only, ctx)
        else:
            if returned is ALLOW:
                return result
            stopped = guard_stop(handlers, only, ctx, returned)
    if stopped is None:
        return result
    return _tool_result_stopped(run, handlers, ctx, stopped, result)


async def _tool_result_stopped(
    run: ToolCalls,
    handlers: tuple[Handler, ...],
    ctx: ToolResultGuardrailContext,
    pending: GuardStop | Awaitable[GuardStop | None],
    result: ToolMessage,
) -> ToolMessage:
    stopped = pending if isinstance(pending, tuple) else await pending  # (as above)
    if stopped is None:
        return result
    await _settle(run, handlers, ctx, "tool_result", stopped, call_id=result.tool_call_id)
    return ctx.result


def _as_text(value: object) -> str:
    """A typed output as JSON without escapes (its text when it is one)."""
    if isinstance(value, str):
        return value
    return pydantic_core.to_json(value, fallback=str).decode()
