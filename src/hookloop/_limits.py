"""Usage limits: what a chat may spend, and what it has spent.

:class:`UsageLimits` is what the user sets (on the agent, or per chat); :class:`Spend` is
what a run has spent (model requests, tool calls, tokens with their cost, seconds). A chat
starts from a :class:`Spend` of what was spent before it (``ChatSetup.spent_before``, which
the session log fills) so a session's limits (``ChatSetup.session_limits``) hold across
chats and processes. See ``docs/budgets.md``.
"""

from __future__ import annotations

import dataclasses
import math
from decimal import Decimal, InvalidOperation
from typing import Final

from ._errors import UsageError
from ._messages import Usage

__all__ = [
    "LIMIT_FIELDS",
    "ZERO_COST",
    "Spend",
    "UsageLimits",
    "checked_cost",
    "limit_cost",
    "zero_usage",
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


def zero_usage() -> Usage:
    """No tokens, at a known cost of zero: where a chat's total starts."""
    return Usage(cost=ZERO_COST)


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
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, (int, float))
                or not math.isfinite(seconds)
                or seconds < 0
            ):
                raise UsageError(
                    f"UsageLimits.seconds must be a number of 0 or more, got {seconds!r}"
                )
            object.__setattr__(self, "seconds", float(seconds))

    @property
    def is_empty(self) -> bool:
        """Whether no limit is set."""
        return all(getattr(self, name) is None for name in LIMIT_FIELDS)

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
    usage: Usage = dataclasses.field(default_factory=zero_usage)
    seconds: float = 0.0

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            requests=self.requests + other.requests,
            tool_calls=self.tool_calls + other.tool_calls,
            usage=self.usage + other.usage,
            seconds=self.seconds + other.seconds,
        )
