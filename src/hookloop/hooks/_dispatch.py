"""The registry that holds handlers, the one function that calls them, and the phases.

:class:`HookRegistry` keeps each event's handlers in firing order (ascending ``order``, then
registration); :func:`dispatch` calls them, sync or async, for every kind of event; built-in
plugins take their place among them by a named :class:`Phase`. The full contract, with the
firing order drawn once, is in ``docs/hooks.md``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from types import FunctionType, MethodType
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, cast

from .._errors import HookRegistrationError, HookReturnError
from .._verdict import ALLOW, Verdict
from ._contexts import FixedFieldError, ScopeContext, ToolReturn
from ._events import AFTER_MODEL_CALL, EVENT_TABLE, EVENTS, EventSpec

if TYPE_CHECKING:
    from .._tools import Scope

__all__ = ["Disposer", "Handler", "HookRegistry", "Phase", "dispatch"]

logger = logging.getLogger(__name__)


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
    # A guardrail's check (registered by HookRegistry.add_guardrail): the guardrail's name,
    # the handler's label; its return must be a Verdict (None is a trip, not "no opinion").
    guardrail: str | None = None
    # A tool-call guardrail's check: the approval stage it leaves alone (_guard.py).
    skips: str | None = None
    # An after_model_call handler's promise (HookRegistry.add's ``idle_on_answer``).
    idle_on_answer: Callable[[], bool] | None = None

    @property
    def label(self) -> str:
        """The handler's qualified name, for messages (a guardrail's: its name)."""
        return self.guardrail or getattr(self.fn, "__qualname__", None) or repr(self.fn)


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """Whether calling ``fn`` returns a coroutine (async functions, async ``__call__``)."""
    plain = fn.__func__ if type(fn) is MethodType else fn  # a method: its function's
    if type(plain) is FunctionType and not plain.__dict__:
        # A plain function with nothing set on it (no wrapper's ``__wrapped__``, no
        # ``inspect.markcoroutinefunction``): its code says it, as inspect would read it.
        # A plugin registers dozens of these per agent (the JSON-lines trace: 32).
        return bool(plain.__code__.co_flags & inspect.CO_COROUTINE)
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

    # One per agent: kept small.
    __slots__ = ("_collectors", "_seq", "answer_promises", "answered", "guards", "handlers")

    def __init__(self) -> None:
        self.handlers: dict[str, tuple[Handler, ...]] = {}
        # Handlers on the guard rows (guardrails): without any, the loop's guardrail checks
        # cost one attribute read per tool call instead of a dictionary lookup per row.
        self.guards = 0
        # The after_model_call row for an attempt that answered (answered_row()): the
        # promises its handlers made (idle_on_answer), and the handlers that made none.
        self.answer_promises: tuple[Callable[[], bool], ...] = ()
        self.answered: tuple[Handler, ...] = ()
        self._seq = 0  # the registrations so far (an int: an idle agent is smaller)
        self._collectors: list[list[Disposer]] | None = None  # made by the first collect()

    def add(
        self,
        event: str,
        fn: Callable[[Any], Any],
        *,
        order: int = 0,
        idle_on_answer: Callable[[], bool] | None = None,
    ) -> Disposer:
        """Register ``fn`` for ``event``; returns its disposer.

        ``idle_on_answer`` (``after_model_call`` only): a promise that, while it returns
        true, ``fn`` does nothing for an attempt that answered (no error). When every
        handler of the row promises it, the loop skips the event for such an attempt: no
        context is made and no handler called. The retry strategies and the sliding window
        promise it for their success path, which every model call of ``Agent()`` takes.
        When the row has handlers that promised nothing, only those are called for such
        an attempt (in their order), while every promise of the row holds.

        Raises:
            HookRegistrationError: Unknown event, a handler that is not callable, an order
                that is not an int, an async handler for a sync-only event, or an
                ``idle_on_answer`` that is not a plain function or not on
                ``after_model_call``.
        """
        if idle_on_answer is not None and (
            event != "after_model_call"
            or not callable(idle_on_answer)
            or is_async_callable(idle_on_answer)  # the loop asks it in passing, unawaited
        ):
            raise HookRegistrationError(
                "idle_on_answer is a plain function, for an after_model_call handler only; "
                f"got {idle_on_answer!r} for {event!r}"
            )
        return self._add(event, fn, order, None, None, idle_on_answer)

    def add_guardrail(
        self,
        event: str,
        check: Callable[[Any], Any],
        *,
        name: str,
        order: int = 0,
        skips: str | None = None,
    ) -> Disposer:
        """Register a guardrail's ``check`` on the guard row ``event``, as it is.

        Unlike a plain handler on the row, its return must be a
        :class:`~hookloop.Verdict`: ``None`` or anything else is a trip (fail closed).
        ``name`` is the guardrail's (the handler's label); ``skips``, for a tool-call
        guardrail, the approval stage (``"pending"`` or ``"approved"``) it does not check.
        The check is called directly, with no wrapper around it: it runs for every tool
        call and result.

        Raises:
            HookRegistrationError: As :meth:`add`; or ``event`` is not a guard row, ``name``
                not a non-empty str, ``skips`` another value.
        """
        spec = EVENT_TABLE.get(event)
        if spec is not None and spec.kind != "guard":
            raise HookRegistrationError(f"{event!r} is not a guard row: a guardrail goes on one")
        if not isinstance(name, str) or not name:
            raise HookRegistrationError(f"a guardrail's name must be a non-empty str, got {name!r}")
        if skips not in (None, "pending", "approved"):
            raise HookRegistrationError(
                f"skips must be None, 'pending' or 'approved', got {skips!r}"
            )
        return self._add(event, check, order, name, skips)

    def _add(
        self,
        event: str,
        fn: Callable[[Any], Any],
        order: int,
        guardrail: str | None,
        skips: str | None,
        idle_on_answer: Callable[[], bool] | None = None,
    ) -> Disposer:
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
        # A Phase is kept as it is: int(Phase.TRIM) would be a new int per registration.
        handler = Handler(
            event, fn, is_async, order, self._seq, spec, guardrail, skips, idle_on_answer
        )
        self._seq += 1
        if spec.kind == "guard":
            self.guards += 1
        current = self.handlers.get(event, ())
        if not current or current[-1].order <= order:  # the latest goes last: no sort
            self.handlers[event] = (*current, handler)
        else:
            self.handlers[event] = tuple(sorted((*current, handler), key=_firing_key))
        if event == AFTER_MODEL_CALL:
            self._answer_row()
        return self.adopt(Disposer(lambda: self._remove(handler)))

    def _answer_row(self) -> None:
        row = self.handlers.get(AFTER_MODEL_CALL, ())
        self.answer_promises = tuple(h.idle_on_answer for h in row if h.idle_on_answer is not None)
        self.answered = tuple(h for h in row if h.idle_on_answer is None)

    def adopt(self, disposer: Disposer) -> Disposer:
        """Hand ``disposer`` to every :meth:`collect` block open now; returns it."""
        for collected in self._collectors or ():
            collected.append(disposer)
        return disposer

    def _remove(self, handler: Handler) -> None:
        current = self.handlers.get(handler.event, ())
        remaining = tuple(h for h in current if h is not handler)
        if handler.spec.kind == "guard" and len(remaining) < len(current):
            self.guards -= 1
        if remaining:
            self.handlers[handler.event] = remaining
        else:
            self.handlers.pop(handler.event, None)
        if handler.event == AFTER_MODEL_CALL:
            self._answer_row()

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
                if type(exc) is FixedFieldError and handler is not None:
                    _explain(exc, handler, ctx)
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

_Mode: TypeAlias = Literal["observe", "each", "each_quietly", "report", "collect", "chain", "guard"]
_EVERY: Final = frozenset({"each", "each_quietly"})


async def dispatch(handlers: tuple[Handler, ...], ctx: Any, mode: _Mode) -> object:
    """Call ``handlers`` in order with ``ctx``, sync or async, and apply ``mode``.

    A handler call costs a call: the context itself refuses a write to a field the event
    does not let handlers set (``_contexts.py``), so nothing is checked around a handler.

    Modes:
        observe: Returns are ignored; an exception propagates, noted with the handler.
        each / each_quietly: Like observe, but a cancellation does not skip the later
            handlers; it is raised once the last handler returned. ``each_quietly`` logs
            an exception (ERROR, with the traceback) and goes on.
        report: Returns are ignored; an exception is logged at WARNING and ignored.
        collect: Returns the list of strings returned.
        chain: An interceptor chain over the context field the event's row names: a return
            of an ``accept`` type becomes ``ctx.<field>`` (a :class:`ToolReturn` is
            unwrapped), a return of a ``stop`` type ends the chain and is returned.
        guard: Returns ``(handler, outcome)`` for the first handler whose return is
            neither ``None`` nor an allowing :class:`~hookloop.Verdict`, or that raised
            (``outcome`` the exception, annotated, not raised); ``None`` when every
            handler let it pass. The guardrail loop (``_guard.py``) judges the outcome and
            dispatches to the handlers after it.

    Raises:
        HookReturnError: A collector or interceptor returned a value of another type, or a
            handler set a field of the context it may not set.
    """
    cancelled: asyncio.CancelledError | None = None
    texts: list[str] | None = None  # collect mode's
    for handler in handlers:
        try:
            if handler.is_async:  # decided at registration
                # The usual async handler returns None: on to the next at once (3% less
                # per call than going through the checks below).
                if (result := await handler.fn(ctx)) is None and handler.guardrail is None:
                    continue
            # A sync function may return an awaitable (a guardrail's Verdict, returned for
            # every tool call, is told apart at once).
            elif (
                (result := handler.fn(ctx)) is not None
                and type(result) is not Verdict
                and inspect.isawaitable(result)
            ):
                result = await result
        except asyncio.CancelledError as exc:
            if mode not in _EVERY:
                raise
            cancelled = cancelled or exc
            continue
        except Exception as exc:
            if mode == "guard":
                return tripped(exc, handler, ctx)  # a trip, never a pass: _guard.py says so
            if type(exc) is FixedFieldError:
                _explain(exc, handler, ctx)
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
        if result is None and handler.guardrail is None:  # (a guardrail's check: a trip)
            continue
        if mode == "guard":
            if type(result) is Verdict and result.action == "allow":
                continue
            return _stopped(handler, result, ctx)
        if mode == "collect":
            if not isinstance(result, str):
                raise _bad_return(handler, result, (str,), ())
            if texts is None:
                texts = []
            texts.append(result)
        elif mode == "chain":
            spec = handler.spec
            if spec.stop and isinstance(result, spec.stop):
                return result
            if not isinstance(result, spec.accept):
                raise _bad_return(handler, result, spec.accept, spec.stop)
            # The field is fixed for handlers: its private slot takes the returned value.
            value = result.value if isinstance(result, ToolReturn) else result
            setattr(ctx, f"_{spec.field}", value)
    if mode == "collect":
        return texts or []
    if cancelled is not None:
        raise cancelled
    return None


def notify(handlers: tuple[Handler, ...], ctx: object) -> Awaitable[object]:
    """Observers: run in order; an exception propagates with a note naming the handler."""
    return dispatch(handlers, ctx, "observe")


def notify_plainly(handlers: tuple[Handler, ...], ctx: object) -> Awaitable[object] | None:
    """:func:`notify`, calling plain-function handlers right here, with no coroutine.

    For an event of every model call whose handlers are usually plain functions that return
    ``None`` (``after_model_call``: the window's and the retry strategy's): ``None`` when
    every handler ran so; from the first async handler (or a return to await) on, the
    awaitable of the rest, which the caller awaits at once.
    """
    for index, handler in enumerate(handlers):
        if handler.is_async:
            return dispatch(handlers[index:] if index else handlers, ctx, "observe")
        try:
            result = handler.fn(ctx)
        except Exception as exc:
            if type(exc) is FixedFieldError:
                _explain(exc, handler, ctx)
            _annotate(exc, handler)
            raise
        if result is not None and inspect.isawaitable(result):
            return _observe_after(handlers, index, ctx, result)
    return None


async def _observe_after(
    handlers: tuple[Handler, ...], index: int, ctx: object, pending: Awaitable[object]
) -> None:
    """:func:`notify_plainly` from a plain handler's awaitable return on: it, then the rest."""
    try:
        await pending
    except Exception as exc:
        handler = handlers[index]
        if type(exc) is FixedFieldError:
            _explain(exc, handler, ctx)
        _annotate(exc, handler)
        raise
    if rest := handlers[index + 1 :]:
        await dispatch(rest, ctx, "observe")


def notify_each(
    handlers: tuple[Handler, ...], ctx: object, *, quietly: bool = False
) -> Awaitable[object]:
    """Observers, every one of them, even if the task is cancelled meanwhile.

    For ``on_message``: a message in the history must reach every handler exactly once
    (the session recorder first), wherever a cancellation lands. A cancellation that ends a
    handler early does not skip the handlers after it: the awaitable raises it once the
    last handler returned. An exception propagates with a note naming the handler, or with
    ``quietly`` is logged (ERROR, with the traceback) and swallowed.
    """
    return dispatch(handlers, ctx, "each_quietly" if quietly else "each")


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


def answered_row(registry: HookRegistry) -> tuple[Handler, ...] | None:
    """The ``after_model_call`` handlers to call for an attempt that answered, if fewer.

    The handlers that made no promise (see :meth:`HookRegistry.add`'s ``idle_on_answer``),
    in their order, when every promise of the row holds now: the others promised to do
    nothing for an answer. ``None`` when a promise does not hold: every handler is called.
    """
    # Every model call of Agent() asks: a plain loop, no generator (as records_spend).
    for idle in registry.answer_promises:
        if not idle():
            return None
    return registry.answered


def run_guards(
    handlers: tuple[Handler, ...], ctx: object
) -> GuardStop | Awaitable[GuardStop | None] | None:
    """Guardrails: the first handler that did not let it pass, with its return or exception.

    Sync handlers are called right here, with no coroutine (a guardrail runs for every
    tool call and result, and nearly always lets it pass): the result is ``None`` when every
    handler let it pass, or the ``(handler, outcome)`` that stopped. From the first async
    handler on (or a sync one that returned an awaitable), the result is an awaitable of
    the same, which the caller awaits.
    """
    for handler in handlers:  # (no enumerate: the index is looked up when it is needed)
        if handler.is_async:  # (the first one, usually: no index, no copy)
            rest = handlers if handler is handlers[0] else handlers[handlers.index(handler) :]
            return dispatch(rest, ctx, "guard")  # type: ignore[return-value]
        try:
            result = handler.fn(ctx)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return tripped(exc, handler, ctx)
        if result is ALLOW:  # Verdict.allow(): the usual return, told by one comparison
            continue
        if (stop := guard_stop(handlers, handler, ctx, result)) is not None:
            return stop
    return None


GuardStop: TypeAlias = "tuple[Handler, object]"


def guard_stop(
    handlers: tuple[Handler, ...], handler: Handler, ctx: object, result: object
) -> GuardStop | Awaitable[GuardStop | None] | None:
    """What the return of sync guard ``handler`` (one of ``handlers``) means for ``ctx``.

    ``None`` when it lets the text pass (an allowing verdict, or no opinion from a plain
    handler); otherwise what :func:`run_guards` returns for it: the ``(handler, outcome)``
    that stopped, or, for an awaitable return, the awaitable of it and the handlers after
    it. For a return that is not ``Verdict.allow()``'s shared allow, which the callers tell
    apart themselves with one comparison.
    """
    if type(result) is Verdict:
        return None if result.action == "allow" else (handler, result)
    if result is None and handler.guardrail is None:  # no opinion
        return None
    if inspect.isawaitable(result):
        return _guards_after(handlers, handlers.index(handler), ctx, result)
    return _stopped(handler, result, ctx)


def _stopped(handler: Handler, result: object, ctx: object) -> GuardStop:
    """The outcome of a guard handler that did not let ``ctx`` pass.

    A guardrail's check that returned anything but a :class:`~hookloop.Verdict` failed: its
    outcome is a ``TypeError`` saying so (a trip, as if the check had raised it).
    """
    if handler.guardrail is not None and not isinstance(result, Verdict):
        error = TypeError(f"the check returned {type(result).__name__}, not a Verdict")
        return tripped(error, handler, ctx)
    return handler, result


async def _guards_after(
    handlers: tuple[Handler, ...], index: int, ctx: object, pending: Awaitable[object]
) -> GuardStop | None:
    """:func:`run_guards` from a sync handler's awaitable return on: it, then the rest."""
    handler = handlers[index]
    try:
        result = await pending
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return tripped(exc, handler, ctx)
    if not (type(result) is Verdict and result.action == "allow") and (
        result is not None or handler.guardrail is not None
    ):
        return _stopped(handler, result, ctx)
    rest = handlers[index + 1 :]
    return await dispatch(rest, ctx, "guard") if rest else None  # type: ignore[return-value]


def tripped(exc: Exception, handler: Handler, ctx: object) -> GuardStop:
    """A guardrail that raised: the exception, noted with the handler, is its outcome."""
    if type(exc) is FixedFieldError:
        _explain(exc, handler, ctx)
    _annotate(exc, handler)
    return handler, exc


def _explain(error: FixedFieldError, handler: Handler, ctx: object) -> None:
    """Name the event and the handler in a refused write, and what it may do instead."""
    if error.context is not type(ctx):
        return  # another context (a sub-agent's, say): its own message says it all
    spec = handler.spec
    how = (
        "return the new value instead"
        if error.field == spec.field
        else f"the fields it may set are: {', '.join(spec.settable) or 'none'}"
    )
    error.args = (f"the {handler.event!r} handler {handler.label} set ctx.{error.field}; {how}",)


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
