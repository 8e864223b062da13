"""The retry strategy an agent uses when you name none."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable

from .._errors import (
    OverloadedError,
    ProviderConnectionError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
)
from ..hooks._contexts import AfterModelCallContext
from ._backoff import JITTER_RNG, Backoff
from ._hints import provider_hint
from ._model_retry import ModelRetryStrategy, RetryDecision, Sleep

__all__ = ["TRANSIENT_ERRORS", "DefaultRetryStrategy"]

_DEFAULT_BACKOFF = Backoff()

TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    RateLimitError,
    OverloadedError,
    ServerError,
    ProviderTimeoutError,
    ProviderConnectionError,
    TimeoutError,
    ConnectionError,
)
"""Failures that may pass if tried again: rate limits, overload, 5xx, timeouts, dropped
connections (also Python's own ``TimeoutError`` and ``ConnectionError`` from custom models).
Authentication errors, bad requests, context overflow and unknown models are not here:
repeating the same request cannot fix them."""


class DefaultRetryStrategy(ModelRetryStrategy):
    """Retries transient provider failures with capped, jittered exponential backoff.

    The wait after a failed attempt is the larger of the backoff and the provider's hint
    (``Retry-After`` / ``retry-after-ms``, from ``ProviderError.retry_after`` or its
    headers), capped at ``max_wait``. It gives up, and the loop raises the last error with
    the attempt history attached, after ``max_attempts`` attempts or when the next wait
    would end more than ``max_total_time`` seconds after the first attempt failed.

    Args:
        max_attempts: Attempts per model call, the first one included.
        max_total_time: Seconds of retrying (waits and retried attempts) allowed after the
            first attempt failed.
        max_wait: Cap on any single wait, provider hints included.
        backoff: The backoff curve and jitter.
        retry_on: The exception types worth another attempt.
        rng: Random source for the jitter (seed it in tests).
        sleep: The async sleep to wait with.
        clock: Seconds from a monotonic clock.
    """

    name = "default-retry"
    # on_first_model_attempt clears only the wait a retry set: nothing to clear when no
    # attempt was retried (ModelRetryStrategy skips it for an answered first attempt then).
    _first_attempt_resets_only = True
    # The defaults live on the class; an instance holds only what it was given otherwise.
    # Every Agent() has a strategy: an idle one is smaller (bench/round3.py, agents_kb_rss).
    max_attempts: int = 5
    max_total_time: float = 90.0
    max_wait: float = 60.0
    backoff: Backoff = _DEFAULT_BACKOFF  # frozen: every strategy may share it
    retry_on: tuple[type[Exception], ...] = TRANSIENT_ERRORS
    _rng: random.Random = JITTER_RNG
    _previous: float | None = None

    def __init__(
        self,
        *,
        max_attempts: int = 5,
        max_total_time: float = 90.0,
        max_wait: float = 60.0,
        backoff: Backoff | None = None,
        retry_on: tuple[type[Exception], ...] = TRANSIENT_ERRORS,
        rng: random.Random | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(sleep=sleep, clock=clock)
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts}")
        if max_total_time < 0 or max_wait < 0:
            raise ValueError("max_total_time and max_wait must be >= 0")
        given = (
            ("max_attempts", max_attempts),
            ("max_total_time", max_total_time),
            ("max_wait", max_wait),
            ("backoff", backoff),
            ("retry_on", retry_on),
            ("_rng", rng),
        )
        cls = type(self)
        for field, value in given:
            if value is not None and value != getattr(cls, field):
                setattr(self, field, value)

    def on_first_model_attempt(self) -> None:
        """Forget the last wait (decorrelated jitter grows from it)."""
        self._previous = None

    def compute_retry_decision(self, event: AfterModelCallContext) -> RetryDecision:
        """Retry transient errors while attempts and time remain."""
        error = event.error
        if not isinstance(error, self.retry_on) or event.attempt >= self.max_attempts:
            return RetryDecision(retry=False)
        wait = self.backoff.delay(event.attempt, rng=self._rng, previous=self._previous)
        hint = provider_hint(error)
        if hint is not None:
            wait = max(wait, hint)
        wait = min(wait, self.max_wait)
        if self.elapsed + wait > self.max_total_time:
            return RetryDecision(retry=False)
        self._previous = wait
        return RetryDecision(retry=True, wait=wait)
