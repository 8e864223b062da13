"""The sliding window: each request trimmed to the model's window, the history untouched.

:class:`SlidingWindow` is the plugin every ``Agent()`` uses by default: before each model call
it builds the request from the newest messages that fit the token budget (whole turns, never
a tool result without its call), reports what it leaves out (``on_pre_compress``,
``on_trim``), and recovers from a provider's overflow by shrinking the next attempt. The
helpers at the top are shared with :mod:`._compaction`.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from .._errors import ContextOverflowError, UsageError
from .._messages import AssistantMessage, Message, ToolMessage, UserMessage
from ..hooks._contexts import AfterModelCallContext, PreRequestContext
from ..hooks._dispatch import Handler, Phase
from ..hooks._events import ON_PRE_COMPRESS, ON_TRIM
from ..hooks._host import attach_once
from ..models._base import Model, ProviderRequest
from ..models._overflow import is_context_overflow
from ._report import report_trim
from ._tokens import REPLY_PRIMING, TokenCounter, count_overhead, count_request
from ._trim import _unit_end, _unit_start, cut_to_fit, step_start, trim_to_budget

if TYPE_CHECKING:
    from ..hooks._host import AgentHost
    from ._history import ChatHistory

__all__ = ["SlidingWindow", "left_out", "report_left_out", "window_limit"]

logger = logging.getLogger(__name__)

DEFAULT_HEADROOM = 0.25
"""The fraction of the budget one step of the window frees (``SlidingWindow(headroom=)``)."""


def window_limit(model: Model, max_tokens: int | None) -> int | None:
    """The window to fit: ``max_tokens``, else that of the model this attempt calls."""
    return max_tokens if max_tokens is not None else model.context_window


def left_out(messages: Sequence[Message], kept: Sequence[Message]) -> list[Message]:
    staying = {m.id for m in kept}  # truncated copies keep their ids: they stay
    return [m for m in messages if m.id not in staying]


def report_left_out(
    ctx: PreRequestContext | AfterModelCallContext, going: Sequence[Message]
) -> None:
    """Tell the loop that ``going`` is left out: it fires ``on_pre_compress`` with them."""
    if going:
        ctx.left_out = (*ctx.left_out, *going)


class SlidingWindow:
    """Trims every request to fit a token budget, keeping the newest turns.

    The system prompt, the last user message and the whole turn in progress (the tool calls
    and results after that message) always stay; older turns go first, a tool call never
    loses its results, and a single message too large for the whole budget is truncated with
    a visible marker. The stored history is never changed. Before a request leaves messages
    out, ``on_pre_compress`` fires once with each message it leaves out for the first time
    (the policy reports them in ``ctx.left_out``; the loop fires the event).

    The budget of a request is the smallest of: the window (``max_tokens``, else the model's
    ``context_window``) minus room for the answer, and the history's ``max_context_tokens``.
    When the turn in progress does not fit it whole, it is sent alone with its texts cut
    (tool results first, the largest first, each with a visible marker); when even that
    cannot fit, the chat ends with a :class:`~hookloop.ContextOverflowError` that says what
    took the budget, before anything is sent.

    With ``recover`` (the default), a provider's overflow error is recovered from: the
    request is trimmed to a smaller budget (the provider's own figures when its error gives
    them, else ``shrink`` of the request's size) and sent again, rebuilt from the history so
    that ``pre_request`` rewrites apply once. Once such a smaller request goes through, later
    requests to that model (with the same room for the answer) keep to its budget. When
    nothing can be left out, the provider's error ends the chat. The window is that of the
    model each attempt calls (a fallback's own).

    The window moves in steps: once the conversation no longer fits, the oldest turns go in a
    block of ``headroom`` of the budget, and the window then starts at the same message until
    the conversation has grown by that much again. The requests in between begin with the
    same messages, byte for byte, so a provider's prompt cache serves that prefix (Anthropic's
    breakpoints, OpenAI's automatic caching); a window that dropped one message per request
    would miss the cache on every call. Where the steps fall depends only on the messages and
    the budget (multiples of the step, counted from the first message), so another process
    or a restored session moves the window at the same places.

    This is the policy every :class:`~hookloop.Agent` uses unless told otherwise
    (``Agent(context=...)``).

    Args:
        max_tokens: The window to fit; by default the model's ``context_window``.
        reserve: Tokens kept free for the answer when ``settings.max_tokens`` is not set; by
            default 1024, or a quarter of the window when that is smaller.
        recover: Recover from a provider's overflow error by trimming further.
        shrink: The fraction of its size a request is trimmed to on an overflow error that
            gives no figures.
        headroom: The fraction of the budget one step of the window frees; ``0`` keeps the
            most that fits, dropping the oldest turn as each new one comes (every request
            then starts with other messages). A larger step keeps the cache warm longer and
            the window emptier: on average ``1 - headroom / 2`` of the budget is used
            (``bench/cache.py``).

    Raises:
        UsageError: A ``max_tokens`` that is not positive, a negative ``reserve``, a
            ``shrink`` not in ``(0, 1)`` or a ``headroom`` not in ``[0, 1)``.
    """

    name = "sliding-window"

    # Slots: every agent has one (bench/context.py, agent_kb_100_messages_*).
    __slots__ = (
        "_agent",
        "_ceilings",
        "_frame",
        "_frame_overhead",
        "_frame_room",
        "_pending",
        "_shown",
        "_state",
        "_trim_hook",
        "headroom",
        "max_tokens",
        "recover",
        "reserve",
        "shrink",
    )

    def __init__(
        self,
        *,
        max_tokens: int | None = None,
        reserve: int | None = None,
        recover: bool = True,
        shrink: float = 0.7,
        headroom: float = DEFAULT_HEADROOM,
    ) -> None:
        if max_tokens is not None and max_tokens < 1:
            raise UsageError(f"max_tokens must be positive, got {max_tokens}")
        if reserve is not None and reserve < 0:
            raise UsageError(f"reserve must be >= 0, got {reserve}")
        if not 0 < shrink < 1:
            raise UsageError(f"shrink must be in (0, 1), got {shrink}")
        if not 0 <= headroom < 1:
            raise UsageError(f"headroom must be in [0, 1), got {headroom}")
        self.max_tokens = max_tokens
        self.headroom = headroom
        self.reserve = reserve
        self.recover = recover
        self.shrink = shrink
        self._agent: AgentHost | None = None
        # Budgets a provider's overflow taught us, per model and room for the answer; one is
        # kept only once a request trimmed to it went through (_pending until then).
        self._ceilings: dict[tuple[str, int], int] | None = None  # made on the first one
        self._pending: tuple[tuple[str, int], int] | None = None
        # What the last request's room was worked out from, and the room (see _room).
        self._frame: tuple[object, ...] | None = None
        self._frame_room = 0
        self._frame_overhead = 0  # the tokens of its system prompt, tools and priming
        self._shown: set[str] | None = None  # ids already passed to on_pre_compress
        self._state: _Window | None = None  # the window, kept from one request to the next
        self._trim_hook: object = None  # the pre_request handler, once attached

    def init_agent(self, agent: AgentHost) -> None:
        """Trim in ``pre_request``, after the user's handlers and before ContextHooks.

        The recovery runs in ``after_model_call`` after ContextHooks (a user's ``on_error``
        decides first) and before retry strategies.
        """
        self._agent = attach_once(
            "a SlidingWindow", self._agent, agent, "it keeps per-agent state", owner=self
        )
        # The bound method registered, kept: `passes` knows it by identity every iteration.
        self._trim_hook = self._trim
        agent.add_hook("pre_request", self._trim_hook, order=Phase.TRIM)
        if self.recover:
            agent.hooks.add(
                "after_model_call",
                self._recover,
                order=Phase.WINDOW_RECOVER,
                idle_on_answer=self._nothing_pending,
            )

    def _nothing_pending(self) -> bool:
        """Whether :meth:`_recover` has nothing to do for an answer: no ceiling to confirm."""
        return self._pending is None

    def _budget(self, request: ProviderRequest, model: Model) -> _Budget:
        """The token budget of ``request`` to ``model`` and which limit sets it."""
        agent = self._require_agent()
        window = window_limit(model, self.max_tokens)
        answer = request.settings.max_tokens
        if answer is None:
            answer = self.reserve
            if answer is None:
                answer = min(DEFAULT_RESERVE, window // 4) if window is not None else 0
        budget = _Budget(agent.history.max_context_tokens, "history", window, answer)
        if window is not None and window - answer < budget.total:
            budget = _Budget(window - answer, "window", window, answer)
        key = (model.name, answer)
        ceiling = self._ceilings.get(key) if self._ceilings is not None else None
        if self._pending is not None and self._pending[0] == key:
            ceiling = min(ceiling or self._pending[1], self._pending[1])
        if ceiling is not None and ceiling < budget.total:
            budget = _Budget(ceiling, "ceiling", window, answer)
        if (notes := agent.history._notes) is not None and notes.tokens:
            # What on_pre_compress handlers kept goes into the request too (the loop's).
            budget = budget._replace(total=budget.total - notes.tokens)
        return budget

    def _room(self, request: ProviderRequest, history: ChatHistory, model: Model) -> int:
        """Tokens the messages of ``request`` may take: its budget less the rest of it.

        Worked out again only when something it depends on changed since the last request
        (the system prompt, the tools, the settings, the model, a limit, a ceiling learned,
        the texts ``on_pre_compress`` handlers kept):
        every iteration of a chat asks, and the answer rarely changes.
        """
        counter = history._counter  # the properties' own fields: this runs every request
        notes = history._notes  # what on_pre_compress handlers kept takes room too
        frame = (
            0 if notes is None else notes.tokens,
            request.system,
            request.tools,
            request.settings,
            model,
            model.context_window,
            self.max_tokens,
            self.reserve,
            history._max,
            counter,
        )
        if frame == self._frame:
            return self._frame_room
        overhead = count_overhead(request, counter=counter)
        room = self._budget(request, model).total - overhead
        self._frame, self._frame_room, self._frame_overhead = frame, room, overhead
        return room

    def request_messages(
        self, request: ProviderRequest, history: ChatHistory, model: Model
    ) -> tuple[Message, ...] | None:
        """The messages of the next request: the window of the stored history that fits.

        For the agent's loop, which builds every request with it (``request`` is the request
        without its messages; the loop may give it the result as its messages, before anyone
        else sees it). The result is what trimming the whole history would keep,
        found in time that does not grow with the history: the window's start and its token
        sum are kept from one request to the next and moved over the messages added since
        (and back, when the budget grew). ``None`` when the whole history must be sent and
        trimmed as usual: the stored history needs repair, or ``history`` is not the history
        of the agent this policy is attached to. ``model`` is the one the request goes to.
        """
        if self._agent is None or self._agent.history is not history:
            return None
        self._pending = None  # a new model call: an unconfirmed ceiling is forgotten
        state = self._state
        if (
            state is not None
            and state.history is history
            and state.version == history.version == history.checked_version
        ):
            # Messages were only appended since the last request (the same version, checked).
            if state.start == 0:
                # Every iteration of a chat that fits: the window held the whole conversation,
                # so it is the whole conversation again if all of it fits. Its tokens are the
                # history's.
                history._counted()
                tokens = history._total
                room = self._room(request, history, model)
                if tokens <= room:
                    whole = state.sent = tuple(history._messages)
                    state.sent_end = len(whole)
                    state.sent_tokens = tokens
                    state.seen, state.tokens, state.fitted = len(whole), tokens, room
                    state.room = room
                    state.bare, state.model = request, model
                    return whole
            elif state.hold is not None:
                # Every iteration of a chat whose window moves in steps, between two steps.
                held = self._held(state, request, history, model)
                if held is not None:
                    return held
        lists = history._checked_lists()
        if lists is None:
            self._state = None
            return None
        messages, counts = lists
        n = len(messages)
        if (
            state is None
            or state.history is not history
            or state.version != history.version
            or state.seen > n
        ):
            last_user = _last_user(messages, n, -1)
            start = _guess_start(messages, last_user)
            state = self._state = _Window(history, history.version, start, sum(counts[start:]), n)
            state.last_user, state.user_seen = last_user, n
        elif state.seen < n:
            state.tokens += sum(counts[state.seen :])
            state.seen = n
        if state.user_seen < n:  # the fast path above leaves it for when it is needed
            state.last_user = _last_user(messages, n, state.user_seen - 1, state.last_user)
            state.user_seen = n
        room = self._room(request, history, model)
        start, tokens, last_user = state.start, state.tokens, state.last_user
        # The trim keeps the longest run of whole turn units, from the newest back, that fits
        # (token sums only grow towards the oldest): walk the start back while the unit before
        # it fits, then forward while the window does not. A start fitted before to this room
        # or a larger one, with only messages appended since, cannot go back: nothing older fit
        # then, and the window has only grown.
        if state.fitted is None or room > state.fitted:
            while start > 0:
                before = _unit_start(messages, start)
                size = sum(counts[before:start])
                if tokens + size > room:
                    break
                start, tokens = before, tokens + size
        while tokens > room and start < last_user:
            end = _unit_end(messages, start)
            tokens -= sum(counts[start:end])
            start = end
        state.start, state.tokens, state.fitted = start, tokens, room
        sent = start
        state.hold = None
        if start > 0 and tokens <= room and (step := int(room * self.headroom)) > 0:
            before = history._total - tokens
            sent = _stepped(state, messages, counts, before, step)
            if sent > start and (unit := _unit_start(messages, sent)) >= start:
                state.hold = before + sum(counts[start:unit])
        if tokens <= room and start > 0:
            # Something was left out: the window starts at a user message (trim's rule 4).
            while sent < last_user and not isinstance(messages[sent], UserMessage):
                sent += 1
        if sent == state.sent_start and state.sent_end >= 0:
            # The window starts where the last one did (a window in steps moves once a
            # step): it is the last one and the messages appended since, made in one copy
            # instead of a slice and its copy (a long conversation's window is long).
            state.sent += tuple(messages[state.sent_end :])
        else:
            state.sent = tuple(messages[sent:]) if sent else tuple(messages)
        state.sent_start, state.sent_end = sent, n
        state.sent_tokens = tokens if sent == start else None
        # Only a window that fits is exactly what the trim keeps; _trim finishes the others.
        state.room = room if tokens <= room else None
        state.bare, state.model = request, model
        return state.sent

    def _held(
        self, state: _Window, request: ProviderRequest, history: ChatHistory, model: Model
    ) -> tuple[Message, ...] | None:
        """The last window and the messages appended since, while the window in steps holds.

        The common iteration of a long chat; ``None`` when the general path must run. The
        caller checked that messages were only appended since the last request. That request
        had this room and step and its window in steps started after the unit that begins
        ``state.hold`` tokens in (see ``_Window.hold``). While the history's tokens less the
        room stay at most that, the largest window that fits starts at or before that unit,
        and the tokens before it stay below the multiple of the step the last request
        reached (the window in steps starts at the *first* boundary that reaches it, so the
        unit before had not): the multiple of the step, the window in steps and the user
        message it starts at (trim's rule 4) are the last request's. A new last user message
        changes none of them, unless it was the last user message that held the window back.

        What the general path would only count (``start``, ``tokens``, ``seen``,
        ``last_user``, ``user_seen``) stays behind, as valid as before: the general path
        catches up from there when it runs next.
        """
        room = self._room(request, history, model)
        cut, hold = state.cut, state.hold
        if room != state.room or hold is None or cut is None or cut[0] != int(room * self.headroom):
            return None
        history._counted()
        if history._total - room > hold:
            return None  # the largest window starts after that unit: the window moves
        messages = history._messages
        n = len(messages)
        if cut[2] >= 0:  # held back by the last user message: a new one moves it on
            if _last_user(messages, n, state.user_seen - 1) >= 0:
                return None
            state.user_seen = n
        state.sent += tuple(messages[state.sent_end :])
        state.sent_end = n
        state.bare, state.model = request, model
        return state.sent

    def _trim(
        self, ctx: PreRequestContext
    ) -> ProviderRequest | Coroutine[Any, Any, ProviderRequest | None] | None:
        """The window's ``pre_request`` handler: a plain call when the request fits as built.

        The request the window built (:meth:`request_messages`) for this model and frame,
        with nothing to report, is the common case: it returns ``None`` without a coroutine.
        Anything else is :meth:`_fit_request`'s, which the dispatch awaits.
        """
        # The fixed fields' slots, not their read-only properties: two calls less a request.
        if ctx._attempt == 1:  # type: ignore[attr-defined]
            self._pending = None  # a new model call: an unconfirmed ceiling is forgotten
        if self._as_built(ctx._request, ctx.model):  # type: ignore[attr-defined]
            return None
        return self._fit_request(ctx)

    def _as_built(self, request: ProviderRequest, model: Model) -> bool:
        """Whether ``request`` to ``model`` is the one the window built and fits as it is.

        The window's ``pre_request`` handler leaves such a request alone: it holds the
        messages :meth:`request_messages` chose for this model and frame, which fit, with no
        ceiling pending and nothing to report (no ``on_trim`` listener for what it left out,
        nothing new for ``on_pre_compress``).
        """
        state = self._state
        agent = self._agent
        if (
            state is None
            or agent is None
            or request.messages is not state.sent
            or state.room is None
            or self._pending is not None
            or model is not state.model
            or (request is not state.bare and not _same_frame(request, state.bare))
        ):
            return False
        if not state.sent_start:  # nothing left out: nothing to report
            return True
        handlers = agent.hooks.handlers  # no key for an event without handlers
        return ON_TRIM not in handlers and (
            ON_PRE_COMPRESS not in handlers or state.announced >= state.sent_start
        )

    def request_tokens(self, request: ProviderRequest) -> int | None:
        """The estimated input tokens of ``request`` if it is the request the window built.

        Its messages' tokens and its system prompt's, tools' and priming's, which the window
        counted to build it (the count :func:`~hookloop.context.count_request` gives, with
        the history's counter); ``None`` for any other request. For the usage limits, which
        check every request's tokens before it is sent.
        """
        state = self._state
        if (
            state is None
            or request is not state.bare
            or request.messages is not state.sent
            or state.sent_tokens is None
        ):
            return None
        return state.sent_tokens + self._frame_overhead

    def passes(self, handlers: tuple[Handler, ...], request: ProviderRequest, model: Model) -> bool:
        """Whether the ``pre_request`` chain ``handlers`` would leave ``request`` as it is.

        For the agent's loop, which then skips the chain (its context and dispatch): true
        when the window's own handler is the only one and the request fits as the window
        built it (see :meth:`_as_built`), the common case of every iteration.
        """
        return (
            len(handlers) == 1
            and handlers[0].fn is self._trim_hook
            and self._as_built(request, model)
        )

    async def _fit_request(self, ctx: PreRequestContext) -> ProviderRequest | None:
        agent = self._require_agent()
        request = ctx.request
        if ctx.attempt == 1:
            self._pending = None  # a new model call: an unconfirmed ceiling is forgotten
        history = agent.history
        counter = history.token_counter
        messages = request.messages
        state = self._state
        budget: _Budget | None = None
        overhead = room = 0
        if (
            state is not None
            and messages is state.sent
            # A hook changed the frame, or this attempt goes to another model (a fallback), or
            # with a budget an overflow just taught: the window may not be the right one.
            and (
                not _same_frame(request, state.bare)
                or ctx.model is not state.model
                or self._pending is not None
            )
        ):
            budget = self._budget(request, ctx.model)
            overhead = count_overhead(request, counter=counter)
            room = budget.total - overhead
        if (
            state is not None
            and messages is state.sent
            and state.room is not None
            and (budget is None or state.room == room)
        ):
            # The window the request was built with: it fits as it is; what it leaves out
            # is everything older.
            if agent.hooks.handlers.get(ON_PRE_COMPRESS) and state.announced < state.sent_start:
                lists = history._checked_lists()
                going = lists[0][state.announced : state.sent_start] if lists else ()
                state.announced = state.sent_start
                report_left_out(ctx, self._first_time(going, ()))
            await self._report_window(ctx, state)
            return None
        if (
            ctx.attempt == 1
            and state is not None
            and state.room is not None
            and messages is not state.sent
        ):
            # A handler before this one (a compaction) rewrote the request the window built:
            # what the window left out of it is reported all the same.
            await self._report_window(ctx, state)
        if budget is None:
            budget = self._budget(request, ctx.model)
            overhead = count_overhead(request, counter=counter)
            room = budget.total - overhead
        size = sum(map(counter.count_message, messages))
        trimmed: tuple[Message, ...] | None = None
        while size > room > 0:
            trimmed = trim_to_budget(messages, room, counter=counter, headroom=self.headroom)
            if trimmed is not messages:
                break  # it left something out: whatever is older would go too
            # All of it fits: older messages the request was built without may fit too.
            wider = self._widen(history, messages)
            if wider is None:
                break
            messages, trimmed = wider, None
            size = sum(map(counter.count_message, messages))
        if messages is not request.messages:
            request = dataclasses.replace(request, messages=messages)
        if size <= room:
            return None if request is ctx.request else request
        kept = self._fit(request, budget, overhead, trimmed)
        report_left_out(ctx, self._first_time(messages, kept))
        await report_trim(
            agent,
            iteration=ctx.iteration,
            attempt=ctx.attempt,
            reason="window",
            before=messages,
            after=kept,
            budget=room,
            window=budget.window,
        )
        return dataclasses.replace(request, messages=kept)

    async def _report_window(self, ctx: PreRequestContext, state: _Window) -> None:
        """``on_trim`` for the stored messages the window left out of this request."""
        agent = self._require_agent()
        if not state.sent_start or ON_TRIM not in agent.hooks.handlers:
            return
        lists = agent.history._checked_lists()
        older = lists[0][: state.sent_start] if lists else ()
        await report_trim(
            agent,
            iteration=ctx.iteration,
            attempt=ctx.attempt,
            reason="window",
            before=(*older, *state.sent),
            after=state.sent,
            budget=state.room if state.room is not None else 0,
            window=window_limit(ctx.model, self.max_tokens),
        )

    def _widen(
        self, history: ChatHistory, messages: tuple[Message, ...]
    ) -> tuple[Message, ...] | None:
        """``messages`` (a request built from the window) with older stored messages first.

        Twice as many as the window has, from a unit boundary; ``None`` when the request
        already starts at the oldest message, or was not built from the window (a hook gave
        it other messages, or the history changed since).
        """
        state = self._state
        if state is None or state.sent_start == 0 or state.history is not history:
            return None
        sent = state.sent
        if messages is not sent and (
            len(messages) != len(sent) or not messages or messages[0].id != sent[0].id
        ):
            return None
        lists = history._checked_lists()
        if lists is None or state.version != history.version:
            return None
        stored = lists[0]
        end = state.sent_start
        start = max(0, end - max(2 * len(messages), 64))
        while start > 0 and isinstance(stored[start], ToolMessage):
            start -= 1  # a unit boundary: a tool result stays with its call
        wider = (*stored[start:end], *messages)
        state.sent, state.sent_start, state.room = wider, start, None
        state.sent_end = -1  # messages may be another's (a hook's): not a slice of stored
        return wider

    def _fit(
        self,
        request: ProviderRequest,
        budget: _Budget,
        overhead: int,
        kept: tuple[Message, ...] | None = None,
    ) -> tuple[Message, ...]:
        """The messages of ``request`` that fit, with the turn in progress whole.

        ``kept``: what :func:`trim_to_budget` keeps of them, when already known.
        """
        counter = self._require_agent().history.token_counter
        messages = request.messages
        room = budget.total - overhead
        turn = _current_turn(messages)
        if room > 0:
            if kept is None:
                kept = trim_to_budget(messages, room, counter=counter, headroom=self.headroom)
            if _keeps_turn(kept, turn) and sum(map(counter.count_message, kept)) <= room:
                return kept
            # Only the turn fits, if its texts are cut (tool results first).
            cut = cut_to_fit(turn, room, counter=counter)
            if cut is not None:
                return cut
        raise _turn_does_not_fit(request, turn, budget, counter)

    def _first_time(self, messages: Sequence[Message], kept: Sequence[Message]) -> list[Message]:
        """The messages of ``messages`` not ``kept`` that no request left out before.

        Nobody listens without an ``on_pre_compress`` handler: nothing is worked out then.
        """
        agent = self._require_agent()
        if not agent.hooks.handlers.get(ON_PRE_COMPRESS):
            return []
        shown = self._shown
        if shown is None:
            shown = self._shown = set()
        going = [m for m in left_out(messages, kept) if m.id not in shown]
        shown.update(m.id for m in going)
        return going

    def _recover(self, ctx: AfterModelCallContext) -> Coroutine[Any, Any, None] | None:
        """The window's ``after_model_call`` handler: a plain call unless the request overflowed.

        An overflow is :meth:`_shrink`'s, which the dispatch awaits.
        """
        # The field's slot, not its read-only property: a call less on every model call.
        error: BaseException | None = ctx._error  # type: ignore[attr-defined]
        if error is None:
            if self._pending is not None:  # the smaller request went through: keep its budget
                key, ceiling = self._pending
                if self._ceilings is None:
                    self._ceilings = {}
                self._ceilings[key] = ceiling
                self._frame = None  # the room depends on the ceilings
                self._pending = None
            return None
        if ctx.retry or not is_context_overflow(error):
            return None
        return self._shrink(ctx, error)

    async def _shrink(self, ctx: AfterModelCallContext, error: BaseException) -> None:
        agent = self._require_agent()
        counter = agent.history.token_counter
        request = ctx.request
        size = count_request(request, counter=counter)
        target = int(size * self.shrink)
        if isinstance(error, ContextOverflowError) and error.request_tokens and error.limit_tokens:
            # The provider's figures: scale our estimate by how far over the limit it was.
            target = min(target, int(size * error.limit_tokens / error.request_tokens * 0.95))
        budget = _Budget(target, "ceiling", None, 0)
        try:
            kept = self._fit(request, budget, count_overhead(request, counter=counter))
        except ContextOverflowError:
            return  # the turn in progress alone is too large: the provider's error stands
        smaller = dataclasses.replace(request, messages=kept)
        if count_request(smaller, counter=counter) >= size:
            return  # nothing left out or cut: sending it again cannot help
        report_left_out(ctx, self._first_time(request.messages, kept))
        await report_trim(
            agent,
            iteration=ctx.iteration,
            attempt=ctx.attempt,
            reason="overflow",
            before=request.messages,
            after=kept,
            budget=target - count_overhead(request, counter=counter),
            window=window_limit(ctx.model, self.max_tokens),
        )
        answer = self._budget(request, ctx.model).answer
        self._pending = ((ctx.model.name, answer), target)
        logger.info(
            "the provider said the request (about %d tokens) does not fit; retrying with %d "
            "of its %d messages",
            size,
            len(kept),
            len(request.messages),
        )
        # The next attempt starts again from the built request, which _trim fits to the new
        # budget; handing it `smaller` would run the pre_request rewrites (ContextHooks'
        # before_request) a second time on a request that already has them.
        ctx.retry = True

    def _require_agent(self) -> AgentHost:
        if self._agent is None:
            raise UsageError(
                "SlidingWindow is not attached to an agent: agent.use(SlidingWindow())"
            )
        return self._agent


DEFAULT_RESERVE = 1024
"""Tokens a request leaves free for the answer when ``settings.max_tokens`` is not set (at
most a quarter of the window)."""


class _Budget(NamedTuple):
    total: int  # tokens the whole request may take
    source: Literal["history", "window", "ceiling"]  # which limit sets it
    window: int | None
    answer: int

    @property
    def reason(self) -> str:
        if self.source == "window":
            return f"the window of {self.window} minus {self.answer} kept for the answer"
        if self.source == "history":
            return "the history's max_context_tokens"
        return "the size the provider accepted after an overflow"


def _same_frame(request: ProviderRequest, other: ProviderRequest | None) -> bool:
    """Whether the two requests have the same system prompt, tools and settings objects."""
    return (
        other is not None
        and request.system is other.system
        and request.tools is other.tools
        and request.settings is other.settings
    )


class _Window:
    """Where the window of a history starts and what it holds (see ``request_messages``)."""

    __slots__ = (
        "announced",
        "bare",
        "cut",
        "fitted",
        "history",
        "hold",
        "last_user",
        "model",
        "room",
        "seen",
        "sent",
        "sent_end",
        "sent_start",
        "sent_tokens",
        "start",
        "tokens",
        "user_seen",
        "version",
    )

    def __init__(
        self, history: ChatHistory, version: int, start: int, tokens: int, seen: int
    ) -> None:
        self.history = history
        self.version = version  # the history's version it was kept for
        self.start = start  # a unit boundary, at or before the first message the trim keeps
        self.tokens = tokens  # tokens of the messages from start to seen
        self.seen = seen  # how many stored messages it has counted
        self.last_user = -1  # position of the last user message
        self.user_seen = 0  # how many stored messages last_user was looked for in
        self.sent: tuple[Message, ...] = ()  # the messages the last request was built with
        self.sent_start = 0  # where they start in the history
        self.sent_end = 0  # and end, when they are the stored messages between (else -1)
        self.sent_tokens: int | None = None  # their tokens, when counted exactly
        self.room: int | None = None  # their room, when they are exactly what the trim keeps
        self.announced = 0  # the stored messages before this were passed to on_pre_compress
        self.bare: ProviderRequest | None = None  # the request the window was made for
        self.model: Model | None = None  # and the model it goes to
        self.fitted: int | None = None  # the room start was last fitted to, walking back
        # When the last request's window in steps started after the largest window that fit,
        # and the unit before it did not start before that window: the tokens before that
        # unit, which the history's tokens less the room may reach without the window in
        # steps moving (SlidingWindow._held); else None.
        self.hold: int | None = None
        # Where the window in steps starts, for which step and multiple of it (and last user
        # message, when that held it back): it moves only when one of them does.
        self.cut: tuple[int, int, int, int] | None = None  # (step, target, last_user, start)


def _stepped(
    state: _Window, messages: Sequence[Message], counts: Sequence[int], before: int, step: int
) -> int:
    """Where the window in steps starts (:func:`step_start`), worked out once per step.

    ``before`` is the tokens before ``state.start``, the largest window's start. Between two
    steps every request asks again with the same multiple of the step: the answer is kept.
    """
    target = -(-before // step) * step
    cut = state.cut
    if (
        cut is not None
        and cut[0] == step
        and cut[1] == target
        and cut[3] >= state.start
        and (cut[2] < 0 or cut[2] == state.last_user)
    ):
        return cut[3]
    start = step_start(messages, counts, state.start, before, step, state.last_user)
    # A start held back by the last user message moves on with it; any other stays.
    state.cut = (step, target, state.last_user if start == state.last_user else -1, start)
    return start


_GUESS = 64
"""How many of the newest messages a window starts with when it knows nothing yet."""


def _last_user(messages: Sequence[Message], end: int, stop: int, default: int = -1) -> int:
    """The position of the last user message in ``messages[stop + 1 : end]``, else ``default``."""
    for index in range(end - 1, stop, -1):
        if isinstance(messages[index], UserMessage):
            return index
    return default


def _guess_start(messages: Sequence[Message], last_user: int) -> int:
    """A unit boundary at or before the last user message, near the newest messages."""
    if last_user < 0:
        return 0  # without a user message the whole history is the turn in progress
    start = min(last_user, max(0, len(messages) - _GUESS))
    while start > 0 and isinstance(messages[start], ToolMessage):
        start -= 1
    return start


def _current_turn(messages: Sequence[Message]) -> Sequence[Message]:
    """The turn in progress: the last user message and everything after it."""
    for index in range(len(messages) - 1, -1, -1):
        if isinstance(messages[index], UserMessage):
            return messages[index:]
    return messages


def _keeps_turn(kept: Sequence[Message], turn: Sequence[Message]) -> bool:
    # Kept messages are in order and truncated copies keep their ids: the turn is the tail.
    if len(kept) < len(turn):
        return False
    tail = kept[len(kept) - len(turn) :]
    return all(a.id == b.id for a, b in zip(tail, turn, strict=True))


def _turn_does_not_fit(
    request: ProviderRequest, turn: Sequence[Message], budget: _Budget, counter: TokenCounter
) -> ContextOverflowError:
    tools = counter.count_tools(request.tools) if request.tools else 0
    system = counter.count_system(request.system) if request.system else 0
    turn_tokens = sum(map(counter.count_message, turn))
    calls = sum(len(m.tool_calls) for m in turn if isinstance(m, AssistantMessage))
    what = f" and its {calls} tool calls with their results" if calls else ""
    return ContextOverflowError(
        f"the turn in progress does not fit the context budget, so nothing was sent: tool "
        f"schemas take {tools} of the {budget.total} tokens ({budget.reason}), the system "
        f"prompt {system}, the turn in progress {turn_tokens} (the last user message{what}). "
        "Raise the budget, send fewer or smaller tools, or shorten the input.",
        request_tokens=REPLY_PRIMING + tools + system + turn_tokens,
        limit_tokens=budget.total,
        model=request.model,
    )
