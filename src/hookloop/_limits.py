"""Usage limits: what a chat may spend, and what it has spent.

:class:`UsageLimits` is what the user sets (on the agent, or per chat); :class:`Spend` is
what a run has spent (model requests, tool calls, tokens with their cost, seconds). A chat
starts from a :class:`Spend` of what was spent before it (``ChatSetup.spent_before``, which
the session log fills) so a session's limits (``ChatSetup.session_limits``) hold across
chats and processes. See ``docs/budgets.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from decimal import Decimal, InvalidOperation
from time import monotonic
from typing import TYPE_CHECKING, Any, Final, Literal

from ._errors import UsageError, UsageLimitExceeded
from ._messages import ToolCall, ToolMessage, Usage, tool_result
from .context._tokens import count_overhead

if TYPE_CHECKING:
    from ._pricing import Price, Pricing
    from ._setup import ChatSetup
    from .context._history import ChatHistory
    from .context._sliding_window import SlidingWindow
    from .models._base import Model, ProviderRequest, ToolDefinition

__all__ = [
    "LIMIT_FIELDS",
    "NO_LIMITS",
    "ZERO_COST",
    "ZERO_USAGE",
    "Budget",
    "ChatLimits",
    "RepeatLimit",
    "Spend",
    "UsageLimits",
    "admit_batch",
    "budget_for",
    "canonical_arguments",
    "chat_limits",
    "checked_cost",
    "limit_cost",
    "limits_of",
    "repeat_limit_of",
]

ZERO_COST: Final = Decimal(0)

LIMIT_FIELDS: Final = (
    "requests",
    "tool_calls",
    "input_tokens",
    "output_tokens",
    "total_tokens",
    "tokens_per_request",
    "cost",
    "seconds",
)
"""The fields of :class:`UsageLimits`, in the order a crossed limit is looked for."""

_COUNTS: Final = LIMIT_FIELDS[:6]


ZERO_USAGE: Final = Usage(cost=ZERO_COST)
"""No tokens, at a known cost of zero: where a chat's total starts (frozen: one for all)."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class UsageLimits:
    """The most a chat may spend; ``None`` (the default of each) is no limit on that.

    Checked before each model call (from the request's estimated input tokens and the
    model's price: a call that would cross a limit is not sent) and after it (with the
    usage the provider reported); tool calls before each batch runs; time before each model
    call and between tool batches. Crossing one ends the chat with
    :class:`~hookloop.UsageLimitExceeded`; the history stays valid (every tool call
    answered). Give them as ``Agent(limits=...)``, or ``chat(..., limits=...)`` for one
    chat (which replaces the agent's for that chat).

    Args:
        requests: Model requests: each attempt sent to the provider counts, retries
            included; an answer a ``pre_request`` hook supplies does not.
        tool_calls: Tool calls run. A batch of parallel calls is admitted whole or not at
            all: a batch that would cross the limit is not run (each call is answered
            "not run") and the chat ends.
        input_tokens: Input tokens of all model calls together.
        output_tokens: Output tokens of all model calls together.
        total_tokens: Input and output tokens together.
        tokens_per_request: Input tokens of any one request (estimated before it is sent,
            then as reported).
        cost: US dollars (a ``Decimal``, an int or a float; a float is taken by its
            shortest repr, ``0.1`` as ``Decimal("0.1")``). A chat with a cost limit on a
            model without a price is refused before its first call: see
            :class:`~hookloop.limits.ModelPrice`.
        seconds: Wall-clock seconds from the start of the chat.

    Raises:
        UsageError: A value that is negative, a bool, not finite, or of another type.
    """

    requests: int | None = None
    tool_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    tokens_per_request: int | None = None
    cost: Decimal | float | None = None
    seconds: float | None = None
    # The limits set, as (field, value), and every field's value in LIMIT_FIELDS' order
    # (``_with_lowest``'s): what a chat's budget is made from.
    _set: tuple[tuple[str, int | float | Decimal], ...] = dataclasses.field(
        init=False, repr=False, compare=False
    )
    _caps: tuple[Any, ...] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise UsageError(f"UsageLimits.{name} must be an int of 0 or more, got {value!r}")
        object.__setattr__(self, "cost", checked_cost(self.cost, "UsageLimits.cost"))
        seconds = self.seconds
        if seconds is not None:
            number = math.nan
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                try:
                    number = float(seconds)
                except OverflowError:  # an int too large for a float: no time limit
                    number = math.inf
            if not math.isfinite(number) or number < 0:
                raise UsageError(
                    f"UsageLimits.seconds must be a finite number of 0 or more, got {seconds!r:.40}"
                )
            object.__setattr__(self, "seconds", number)
        caps = tuple(getattr(self, name) for name in LIMIT_FIELDS)
        object.__setattr__(self, "_caps", _with_lowest(caps))
        given = tuple((n, v) for n, v in zip(LIMIT_FIELDS, caps, strict=True) if v is not None)
        object.__setattr__(self, "_set", given)

    @property
    def is_empty(self) -> bool:
        """Whether no limit is set."""
        return not self._set

    def remaining(self, spent: Spend) -> UsageLimits:
        """What is left of these limits after ``spent``: a sub-agent's slice at most this.

        ``tokens_per_request`` stays as it is (it limits each request, not a total); a
        limit already crossed is left at zero. An unknown cost spent leaves the cost limit
        at zero: nothing is known to be left.
        """
        cost = limit_cost(self)
        if cost is not None:
            used = spent.usage.cost
            cost = ZERO_COST if used is None else max(ZERO_COST, cost - used)
        return UsageLimits(
            requests=_less(self.requests, spent.requests),
            tool_calls=_less(self.tool_calls, spent.tool_calls),
            input_tokens=_less(self.input_tokens, spent.usage.input_tokens),
            output_tokens=_less(self.output_tokens, spent.usage.output_tokens),
            total_tokens=_less(self.total_tokens, spent.usage.total_tokens),
            tokens_per_request=self.tokens_per_request,
            cost=cost,
            seconds=None if self.seconds is None else max(0.0, self.seconds - spent.seconds),
        )

    def tightest(self, other: UsageLimits | None) -> UsageLimits:
        """Each limit the lower of this one's and ``other``'s (``None`` is no limit)."""
        if other is None:
            return self
        values = {}
        for name in LIMIT_FIELDS:
            a, b = getattr(self, name), getattr(other, name)
            values[name] = a if b is None else b if a is None else min(a, b)
        return UsageLimits(**values)


def _with_lowest(caps: tuple[Any, ...]) -> tuple[Any, ...]:
    """``caps`` (every field's, in ``LIMIT_FIELDS``' order) and the lowest token caps.

    The two added are the lowest of the token caps checked before a model call (tokens per
    request, input, total) and of those checked after it (the same and output), ``None``
    when none is set: a budget checks all of them at once below it (``Budget.before_call``).
    """
    _, _, inputs, outputs, total, per_request, _, _ = caps
    before = None
    for cap in (per_request, inputs, total):  # (a loop: min() of a generator costs 5x)
        if cap is not None and (before is None or cap < before):
            before = cap
    after = before
    if outputs is not None and (after is None or outputs < after):
        after = outputs
    return (*caps, before, after)


def limit_cost(limits: UsageLimits) -> Decimal | None:
    """``limits.cost`` as the ``Decimal`` it was made into."""
    cost = limits.cost
    assert cost is None or isinstance(cost, Decimal)  # __post_init__ made it one
    return cost


def _less(limit: int | None, used: int) -> int | None:
    return None if limit is None else max(0, limit - used)


def checked_cost(value: object, what: str) -> Decimal | None:
    """``value`` as a finite, non-negative ``Decimal`` of dollars; ``None`` stays ``None``.

    Raises:
        UsageError: ``value`` is a bool, not a number, not finite, or negative.
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (Decimal, int, float)):
        raise UsageError(f"{what} must be a Decimal, an int or a float, got {value!r}")
    try:
        cost = value if isinstance(value, Decimal) else Decimal(repr(value))
    except InvalidOperation:
        cost = Decimal("NaN")
    if not cost.is_finite() or cost < 0:
        raise UsageError(f"{what} must be a finite amount of 0 or more, got {value!r}")
    return cost


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Spend:
    """What a run spent: model requests, tool calls, tokens with their cost, seconds.

    A chat's limits are checked against what it spent; a session's against what was spent
    before the chat (``ChatSetup.spent_before``) plus the chat's.

    Attributes:
        requests: Model requests sent to a provider.
        tool_calls: Tool calls admitted to run.
        usage: Tokens, and their cost (``None`` when a call was not priced).
        seconds: Wall-clock seconds.
    """

    requests: int = 0
    tool_calls: int = 0
    usage: Usage = ZERO_USAGE
    seconds: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            requests=self.requests + other.requests,
            tool_calls=self.tool_calls + other.tool_calls,
            usage=self.usage + other.usage,
            seconds=self.seconds + other.seconds,
        )


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RepeatLimit:
    """How often a chat may call the same tool with the same arguments.

    Arguments are the same when their JSON is (keys sorted, spacing ignored). Give it as
    ``Agent(repeat_limit=...)`` or ``chat(..., repeat_limit=...)``: a ``RepeatLimit``, or an
    int for ``RepeatLimit(times=n)``.

    Args:
        times: How many such calls run; the next one does not.
        then: What happens to the call past ``times``: ``"tell"`` answers it with an error
            the model sees (it may try something else; the chat goes on), ``"stop"`` ends
            the chat with :class:`~hookloop.UsageLimitExceeded` (``limit ==
            "repeat_limit"``) before the batch runs.

    Raises:
        UsageError: ``times`` is not a positive int, or ``then`` is neither.
    """

    times: int
    then: Literal["tell", "stop"] = "tell"

    def __post_init__(self) -> None:
        times = self.times
        if isinstance(times, bool) or not isinstance(times, int) or times < 1:
            raise UsageError(f"RepeatLimit.times must be an int of 1 or more, got {times!r}")
        if self.then not in ("tell", "stop"):
            raise UsageError(f"RepeatLimit.then must be 'tell' or 'stop', got {self.then!r}")

    def told(self, call: ToolCall) -> str:
        """The answer the model gets for a call past the limit."""
        return (
            f"not run: you called {call.name} with the same arguments {self.times} "
            f"time{'' if self.times == 1 else 's'} already in this chat; use the results you "
            "have, or call it with other arguments"
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ChatLimits:
    """One chat's usage limits and repeat limit, as the agent resolved them."""

    limits: UsageLimits | None = None
    repeat: RepeatLimit | None = None


NO_LIMITS: Final = ChatLimits()
"""The limits of an agent without any."""


def chat_limits(
    base: ChatLimits, limits: object, repeat_limit: object, default: object = None
) -> ChatLimits:
    """``base`` with the usage and repeat limits given, each unless it is ``default``.

    Raises:
        UsageError: A value that is not a ``UsageLimits`` / repeat limit or ``None``.
    """
    keep_limits, keep_repeat = limits is default, repeat_limit is default
    if keep_limits and keep_repeat:
        return base
    return ChatLimits(
        base.limits if keep_limits else limits_of(limits),
        base.repeat if keep_repeat else repeat_limit_of(repeat_limit),
    )


def repeat_limit_of(value: object) -> RepeatLimit | None:
    """``repeat_limit=`` as given (None, an int, a :class:`RepeatLimit`) as one or ``None``.

    Raises:
        UsageError: Anything else.
    """
    if value is None or isinstance(value, RepeatLimit):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return RepeatLimit(times=value)
    raise UsageError(f"repeat_limit must be an int, a RepeatLimit or None, got {value!r}")


def limits_of(value: object) -> UsageLimits | None:
    """``limits=`` as given: a :class:`UsageLimits` (an empty one is none) or ``None``.

    Raises:
        UsageError: Anything else.
    """
    if value is None:
        return None
    if not isinstance(value, UsageLimits):
        raise UsageError(f"limits must be a UsageLimits or None, got {value!r}")
    return None if value.is_empty else value


def canonical_arguments(arguments: str) -> str:
    """A call's arguments as JSON with sorted keys, for "the same arguments"."""
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments


class Budget:
    """One chat's limits and what it spent against them (requests, tool calls, time).

    Made when the chat starts, only if it has limits or a repeat limit: without them the
    loop pays one ``is None`` test per model call and per tool batch. The chat's tokens are
    the loop's own total (``ChatRun.usage``), passed in.

    A limit of the chat and one of the session (``session_limits``, less what was spent
    before the chat) are folded into one remaining amount per field, kept in a slot of its
    own (``None`` when unset), so each check is one test and one comparison; the error
    names the limit as set and what it counts. The request's tokens are estimated only
    when a token or cost limit needs them.

    Raises:
        UsageError: A cost limit with a model that has no price, or a session whose spend
            before this chat has an unknown cost.
    """

    __slots__ = (
        "_cost",
        "_deadline",
        "_estimates",
        "_given",
        "_history",
        "_input_tokens",
        "_lowest_after",
        "_lowest_before",
        "_output_tokens",
        "_overhead",
        "_pricing",
        "_rate",
        "_requests",
        "_seconds",
        "_seen",
        "_tokens_per_request",
        "_tool_calls",
        "_total_tokens",
        "_window",
        "checks_after",
        "repeat",
        "requests",
        "started",
        "tool_calls",
    )

    def __init__(
        self,
        limits: UsageLimits | None,
        session_limits: UsageLimits | None,
        spent_before: Spend | None,
        repeat: RepeatLimit | None,
        model: Model,
        pricing: Pricing,
        history: ChatHistory,
        window: SlidingWindow | None = None,
    ) -> None:
        # A chat's own limits are its caps as they are (every chat start makes a budget);
        # a session's are folded in, less what the session spent before.
        self._given = (limits, session_limits, spent_before or _NOTHING)
        caps = (limits or _NO_LIMIT)._caps if session_limits is None else self._folded_caps()
        (
            self._requests,
            self._tool_calls,
            self._input_tokens,
            self._output_tokens,
            self._total_tokens,
            self._tokens_per_request,
            self._cost,
            self._seconds,
            # The lowest token caps checked before a call and after it: see before_call.
            self._lowest_before,
            self._lowest_after,
        ) = caps
        self._pricing = pricing
        self._rate: tuple[Model | None, str, Decimal | None] = (None, "", None)
        self._history = history
        self._window = window  # the chat's, which counts the requests it builds
        self._overhead: tuple[str | None, tuple[ToolDefinition, ...], object, int] = (
            None,
            (),
            None,
            0,
        )
        self._estimates = not (
            self._tokens_per_request is None
            and self._input_tokens is None
            and self._total_tokens is None
            and self._cost is None
        )
        self.checks_after = self._estimates or self._output_tokens is not None
        self.repeat = repeat
        self._seen: dict[tuple[str, str], int] | None = None
        self.requests = 0
        self.tool_calls = 0
        self.started = monotonic()
        self._deadline = None if self._seconds is None else self.started + self._seconds
        if self._cost is not None:
            self._rated(model)  # (it raises for a model without a price)

    def _sources(self, name: str) -> tuple[Any, Any] | None:
        """The limit that sets field ``name``'s cap, and what was spent before it counted.

        The chat's own limit, or its session's less what the session spent before this
        chat, whichever leaves less (the chat's on a tie).

        Raises:
            UsageError: The session's cost limit, and what it spent before has an unknown cost.
        """
        limits, session_limits, spent_before = self._given
        source: tuple[Any, Any] | None = None
        if limits is not None and (maximum := getattr(limits, name)) is not None:
            source = (maximum, 0)
        if session_limits is not None and (maximum := getattr(session_limits, name)) is not None:
            offset = _spent(spent_before, name)
            if offset is None:
                raise UsageError(
                    "the session's cost limit cannot be checked: what it spent before "
                    "has an unknown cost (a call without a price)"
                )
            if source is None or maximum - offset < source[0]:
                source = (maximum, offset)
        return source

    def _folded_caps(self) -> tuple[Any, ...]:
        """Every field's cap, the chat's and its session's limits folded (see _sources)."""
        caps = []
        for name in LIMIT_FIELDS:
            source = self._sources(name)
            caps.append(None if source is None else source[0] - source[1])
        return _with_lowest(tuple(caps))

    # -- model calls ----------------------------------------------------------------------

    def before_call(self, request: ProviderRequest, model: Model, usage: Usage) -> None:
        """Admit one model request (an attempt) to ``model``, or raise.

        Raises:
            UsageLimitExceeded: Sending it would cross a limit (``when="before the call"``).
            UsageError: A cost limit, and ``model`` has no price.
        """
        if (deadline := self._deadline) is not None and (now := monotonic()) >= deadline:
            raise self._exceeded("seconds", now - self.started, _BEFORE, usage)
        requests = self.requests + 1
        if (cap := self._requests) is not None and requests > cap:
            raise self._exceeded("requests", requests, _BEFORE, usage)
        if self._estimates:  # a token or cost limit: the request's tokens are needed
            # The window's request (every iteration's) is counted already: the window says.
            window = self._window
            tokens = window.request_tokens(request) if window is not None else None
            if tokens is None:
                tokens = self._estimate(request)
            # The request's tokens and the chat's input tokens with them are at most its
            # total tokens with them: below the lowest of the three caps, none is crossed.
            # (usage.total_tokens, without the property's call: this runs every iteration)
            if (lowest := self._lowest_before) is not None and (
                usage.input_tokens + usage.output_tokens + tokens > lowest
            ):
                self._tokens_before(tokens, usage)
            if (cost_cap := self._cost) is not None:
                estimate = usage.cost  # an unknown cost so far: nothing is known left
                if estimate is not None:
                    rated, name, rate = self._rate  # the last model's flat price per token
                    if model is rated and rate is not None and model.name == name:
                        estimate += tokens * rate  # (its price's input_cost, without calls)
                    else:
                        estimate += self._rated(model).input_cost(tokens)
                if estimate is None or estimate > cost_cap:
                    raise self._exceeded("cost", estimate, _BEFORE, usage)
        self.requests = requests

    def _rated(self, model: Model) -> Price:
        """``model``'s price, its flat price per input token kept for :meth:`before_call`.

        Raises:
            UsageError: ``model`` has no price.
        """
        price = self.price(model)
        self._rate = (model, model.name, self._pricing.input_rate(price))
        return price

    def _tokens_before(self, tokens: int, usage: Usage) -> None:
        """Raise for the first token limit a request of ``tokens`` would cross, if any."""
        if (cap := self._tokens_per_request) is not None and tokens > cap:
            raise self._exceeded("tokens_per_request", tokens, _BEFORE, usage, each=True)
        if (cap := self._input_tokens) is not None and usage.input_tokens + tokens > cap:
            used = usage.input_tokens + tokens
            raise self._exceeded("input_tokens", used, _BEFORE, usage)
        if (cap := self._total_tokens) is not None and usage.total_tokens + tokens > cap:
            used = usage.total_tokens + tokens
            raise self._exceeded("total_tokens", used, _BEFORE, usage)

    def after_call(self, usage: Usage, reported: Usage | None) -> None:
        """Check the chat's tokens and cost after a model call, with what it reported.

        Only for a budget that ``checks_after`` (a token or cost limit). ``usage`` is the
        chat's tokens with ``reported``'s.

        Raises:
            UsageLimitExceeded: A limit was crossed (``when="after the call"``).
        """
        # Every count checked is at most the chat's total tokens (the call's input tokens
        # are in them): below the lowest token cap, none is crossed.
        if (lowest := self._lowest_after) is not None and (
            usage.input_tokens + usage.output_tokens > lowest  # (total_tokens, no call)
        ):
            self._tokens_after(usage, reported)
        if (cost_cap := self._cost) is not None and (
            (cost := usage.cost) is None or cost > cost_cap
        ):
            raise self._exceeded("cost", cost, _AFTER, usage)

    def _tokens_after(self, usage: Usage, reported: Usage | None) -> None:
        """Raise for the first token limit the chat's ``usage`` crossed, if any."""
        if (
            (cap := self._tokens_per_request) is not None
            and reported is not None
            and reported.input_tokens > cap
        ):
            raise self._exceeded(
                "tokens_per_request", reported.input_tokens, _AFTER, usage, each=True
            )
        if (cap := self._input_tokens) is not None and usage.input_tokens > cap:
            raise self._exceeded("input_tokens", usage.input_tokens, _AFTER, usage)
        if (cap := self._output_tokens) is not None and usage.output_tokens > cap:
            raise self._exceeded("output_tokens", usage.output_tokens, _AFTER, usage)
        if (cap := self._total_tokens) is not None and usage.total_tokens > cap:
            raise self._exceeded("total_tokens", usage.total_tokens, _AFTER, usage)

    def price(self, model: Model) -> Price:
        """``model``'s price, which a cost limit needs.

        Raises:
            UsageError: It has none.
        """
        price = self._pricing.price_of(model)
        if price is None:
            raise UsageError(
                f"a cost limit is set and model {model.name!r} has no price, so its calls "
                "cannot be counted against it: give one with Agent(prices={"
                f"{model.name!r}: ModelPrice(input_per_mtok=..., output_per_mtok=...)"
                "}) (see docs/budgets.md)"
            )
        return price

    def _estimate(self, request: ProviderRequest) -> int:
        """The input tokens of ``request``, counted with the history's counter.

        A request whose messages are the newest of the stored history takes their counts
        from the history, which keeps them.
        """
        history = self._history
        messages = request.messages
        stored = history._messages
        n, m = len(messages), len(stored)
        counter = history._counter  # the token_counter property's own field
        if n and n <= m and messages[-1] is stored[-1] and messages[0] is stored[m - n]:
            counts = history._counts
            if len(counts) != m:  # (every message counted, the usual case: no call)
                counts = history._counted()
            tokens = history._total - (sum(counts[: m - n]) if m > n else 0)
        else:
            tokens = sum(map(counter.count_message, messages))
        # The system prompt and tools are the same objects request after request: their
        # tokens are counted once (a tuple of the same definitions compares by identity).
        system, tools, counted_by, overhead = self._overhead
        if request.system is not system or request.tools != tools or counter is not counted_by:
            overhead = count_overhead(request, counter=counter)
            self._overhead = (request.system, request.tools, counter, overhead)
        return tokens + overhead

    # -- tools ----------------------------------------------------------------------------

    def left(self, usage: Usage) -> UsageLimits:
        """What is left of the chat's limits after what it spent (none: no limit).

        Its own limits and its session's, the tighter of each; ``usage``: its tokens. It is
        the most a sub-agent it delegates to may spend (and, being limits, makes the
        sub-agent's chat count its requests and tool calls for this one).
        """
        slots = ((name, getattr(self, f"_{name}")) for name in LIMIT_FIELDS)
        caps = {name: cap for name, cap in slots if cap is not None}
        if not caps:
            return _NO_LIMIT
        spent = self.spent(usage)
        at_least_zero = {name: max(cap, 0) for name, cap in caps.items()}
        return UsageLimits(**at_least_zero).remaining(spent)

    def admit_tools(self, calls: int, usage: Usage) -> UsageLimitExceeded | None:
        """Count a batch of ``calls`` tool calls, or return why it may not run (none runs).

        Every budget counts its tool calls (a session's spend records and a parent's limits
        count a sub-agent's too), as :func:`admit_batch`.
        """
        if (deadline := self._deadline) is not None and (now := monotonic()) >= deadline:
            return self._exceeded("seconds", now - self.started, _BATCH, usage)
        total = self.tool_calls + calls
        if (limit := self._tool_calls) is not None and total > limit:
            return self._exceeded("tool_calls", total, _BATCH, usage)
        self.tool_calls = total
        return None

    def repeated(self, call: ToolCall) -> bool:
        """Count ``call``; whether it is past the repeat limit (then it is not counted)."""
        repeat = self.repeat
        assert repeat is not None
        seen = self._seen
        if seen is None:
            seen = self._seen = {}
        key = (call.name, canonical_arguments(call.arguments))
        count = seen.get(key, 0)
        if count >= repeat.times:
            return True
        seen[key] = count + 1
        return False

    # -- the errors -----------------------------------------------------------------------

    def _exceeded(
        self,
        name: str,
        used: int | float | Decimal | None,
        when: str,
        usage: Usage,
        *,
        each: bool = False,
    ) -> UsageLimitExceeded:
        source = self._sources(name)
        assert source is not None  # a cap was crossed: a limit sets it
        maximum, offset = source
        if used is not None and not each:  # a limit of each request has no offset
            used = used + offset
        return UsageLimitExceeded(limit=name, maximum=maximum, used=used, when=when, usage=usage)

    def spent(self, usage: Usage) -> Spend:
        """What the chat spent so far, with its tokens ``usage``."""
        return Spend(
            requests=self.requests,
            tool_calls=self.tool_calls,
            usage=usage,
            seconds=monotonic() - self.started,
        )


_NO_LIMIT: Final = UsageLimits()
_BEFORE: Final = "before the call"
_AFTER: Final = "after the call"
_BATCH: Final = "tool batch"


def _spent(spent: Spend, name: str) -> int | float | Decimal | None:
    if name in ("requests", "tool_calls", "seconds"):
        value: int | float | Decimal | None = getattr(spent, name)
        return value
    if name == "tokens_per_request":
        return 0
    if name == "total_tokens":
        return spent.usage.total_tokens
    if name == "cost":
        return spent.usage.cost
    tokens: int = getattr(spent.usage, name)
    return tokens


_NOTHING: Final = Spend()


def budget_for(setup: ChatSetup) -> Budget | None:
    """The budget of a chat with ``setup``; ``None`` when it has no limit of any kind.

    Raises:
        UsageError: A cost limit with a model that has no price (see :class:`Budget`).
    """
    if setup.limits is None and setup.session_limits is None and setup.repeat_limit is None:
        return None
    pricing = setup.pricing
    if pricing is None:
        from ._pricing import Pricing  # (it prices with this module's checks)

        pricing = Pricing()
    return Budget(
        setup.limits,
        setup.session_limits,
        setup.spent_before,
        setup.repeat_limit,
        setup.model,
        pricing,
        setup.history,
        setup.window,
    )


def admit_batch(
    budget: Budget,
    calls: tuple[ToolCall, ...],
    answered: dict[str, ToolMessage] | None,
    usage: Usage,
) -> tuple[dict[str, ToolMessage] | None, UsageLimitExceeded | None]:
    """A tool batch through the repeat limit and the tool-call and time limits.

    Returns the batch's answers known before it runs (``answered`` plus a "not run" answer
    for each call past the repeat limit with ``then="tell"``) and, when the batch may not
    run at all, why: the whole batch is refused, none of it runs.
    """
    if (repeat := budget.repeat) is not None:
        for call in calls:
            if (answered is not None and call.id in answered) or not budget.repeated(call):
                continue
            if repeat.then == "stop":
                error = UsageLimitExceeded(
                    limit="repeat_limit",
                    maximum=repeat.times,
                    used=repeat.times + 1,
                    when="tool batch",
                    usage=usage,
                    tool_call=call,
                )
                return answered, error
            answered = dict(answered or {})
            answered[call.id] = tool_result(call, repeat.told(call), is_error=True)
    running = len(calls) - (len(answered) if answered else 0)
    return answered, budget.admit_tools(running, usage)
