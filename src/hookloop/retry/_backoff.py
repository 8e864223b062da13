"""Backoff and jitter as pure functions, and :class:`Backoff`, a configuration of both.

Delays are in seconds. ``attempt`` is the number of the attempt that just failed (1 for the
first), so the first retry waits ``backoff_delay(1, ...)``. The cap applies before the
jitter, so no jittered delay exceeds it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Literal, TypeAlias

__all__ = ["Backoff", "BackoffKind", "JitterKind", "apply_jitter", "backoff_delay"]

JITTER_RNG = random.Random()
"""The jitter of every strategy not given an ``rng`` of its own.

Unseeded, so sharing it changes no strategy's waits; one per strategy took 2.9 KB of every
idle agent's memory (bench/round3.py, ``agent_kb_with_100_messages``).
"""

BackoffKind: TypeAlias = Literal["constant", "linear", "exponential"]
"""How the wait grows with the attempt: not at all, linearly, or by ``factor`` each time."""
JitterKind: TypeAlias = Literal["none", "full", "equal", "decorrelated"]
"""How a wait is randomised so that clients do not retry in step (see ``apply_jitter``)."""


def backoff_delay(
    attempt: int,
    *,
    kind: BackoffKind = "exponential",
    base: float = 0.5,
    factor: float = 2.0,
    max_delay: float = 30.0,
) -> float:
    """The delay after failed attempt ``attempt``, before jitter, capped at ``max_delay``.

    ``constant`` waits ``base``; ``linear`` waits ``base * attempt``; ``exponential`` waits
    ``base * factor ** (attempt - 1)``.

    Example:
        >>> [backoff_delay(n, base=1.0) for n in (1, 2, 3, 4)]
        [1.0, 2.0, 4.0, 8.0]
        >>> backoff_delay(10, base=1.0, max_delay=30.0)
        30.0
    """
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, got {attempt}")
    if kind == "constant":
        delay = base
    elif kind == "linear":
        delay = base * attempt
    elif kind == "exponential":
        # Compare exponents instead of computing huge powers for large attempt numbers.
        delay = max_delay if attempt > 64 else base * factor ** (attempt - 1)
    else:
        raise ValueError(f"unknown backoff kind {kind!r}")
    return min(delay, max_delay)


def apply_jitter(
    delay: float,
    *,
    kind: JitterKind = "full",
    rng: random.Random,
    base: float = 0.5,
    previous: float | None = None,
    max_delay: float = 30.0,
) -> float:
    """Spread ``delay`` (already capped) so that many clients do not retry in lockstep.

    - ``none``: ``delay``.
    - ``full``: uniform in ``[0, delay]``.
    - ``equal``: ``delay / 2`` plus uniform in ``[0, delay / 2]``.
    - ``decorrelated``: uniform in ``[base, 3 * previous]`` (``previous`` is the last wait,
      ``base`` on the first retry), capped at ``max_delay``. It ignores ``delay``: it grows
      from its own history.
    """
    if kind == "none":
        return delay
    if kind == "full":
        return rng.uniform(0.0, delay)
    if kind == "equal":
        return delay / 2 + rng.uniform(0.0, delay / 2)
    if kind == "decorrelated":
        upper = max(base, 3 * (previous if previous is not None else base))
        return min(max_delay, rng.uniform(base, upper))
    raise ValueError(f"unknown jitter kind {kind!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Backoff:
    """How long to wait between attempts: a backoff curve, a cap, and a jitter.

    Attributes:
        kind: ``constant``, ``linear`` or ``exponential``.
        base: The first delay, in seconds.
        factor: Growth per attempt of the exponential curve.
        max_delay: Cap on the delay, applied before jitter.
        jitter: ``none``, ``full``, ``equal`` or ``decorrelated``.
    """

    kind: BackoffKind = "exponential"
    base: float = 0.5
    factor: float = 2.0
    max_delay: float = 30.0
    jitter: JitterKind = "full"

    def __post_init__(self) -> None:
        if self.kind not in ("constant", "linear", "exponential"):
            raise ValueError(f"unknown backoff kind {self.kind!r}")
        if self.jitter not in ("none", "full", "equal", "decorrelated"):
            raise ValueError(f"unknown jitter kind {self.jitter!r}")
        if self.base < 0 or self.max_delay < 0 or self.factor < 1:
            raise ValueError("base and max_delay must be >= 0 and factor >= 1")

    def delay(self, attempt: int, *, rng: random.Random, previous: float | None = None) -> float:
        """The wait after failed attempt ``attempt``; ``previous`` is the last wait, if any."""
        capped = backoff_delay(
            attempt, kind=self.kind, base=self.base, factor=self.factor, max_delay=self.max_delay
        )
        return apply_jitter(
            capped,
            kind=self.jitter,
            rng=rng,
            base=self.base,
            previous=previous,
            max_delay=self.max_delay,
        )
