"""Falling back to other models when one fails, with a circuit breaker per model."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from .._errors import CircuitOpenError, UsageError
from ..hooks._contexts import AfterModelCallContext, PreRequestContext
from ..hooks._dispatch import Phase
from ..models._base import Model, ProviderRequest
from ._default import TRANSIENT_ERRORS
from ._model_retry import ModelRetryStrategy, RetryDecision, Sleep

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["CircuitBreaker", "FallbackStrategy"]


class CircuitBreaker:
    """Keeps a failing model skipped for a cool-down.

    After ``failure_threshold`` failures in a row a model's circuit opens: it is skipped
    until ``cooldown`` seconds have passed. Then one attempt is let through; success closes
    the circuit, failure opens it for another cool-down.
    """

    def __init__(
        self,
        *,
        failure_threshold: int = 1,
        cooldown: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if failure_threshold < 1 or cooldown < 0:
            raise ValueError("failure_threshold must be >= 1 and cooldown >= 0")
        self.failure_threshold = failure_threshold
        self.cooldown = cooldown
        self._clock = clock
        self._failures: dict[int, int] = {}
        self._open_until: dict[int, float] = {}

    def allows(self, model: Model) -> bool:
        """Whether ``model`` may be called now (closed, or half-open after its cool-down)."""
        return self._open_until.get(id(model), 0.0) <= self._clock()

    def is_half_open(self, model: Model) -> bool:
        """Whether the model's circuit opened before and its cool-down is over (on trial)."""
        until = self._open_until.get(id(model))
        return until is not None and until <= self._clock()

    def record_failure(self, model: Model) -> None:
        """Count a failure; open the circuit at the threshold, or at once while on trial."""
        key = id(model)
        if self.is_half_open(model):
            self._open_until[key] = self._clock() + self.cooldown  # the trial failed
            return
        self._failures[key] = self._failures.get(key, 0) + 1
        if self._failures[key] >= self.failure_threshold:
            self._open_until[key] = self._clock() + self.cooldown
            self._failures[key] = 0

    def record_success(self, model: Model) -> None:
        """Close the circuit."""
        self._failures.pop(id(model), None)
        self._open_until.pop(id(model), None)


class FallbackStrategy(ModelRetryStrategy):
    """On a failed attempt, move to the next model: the agent's own, then ``fallbacks``.

    Each model has a circuit: after ``failure_threshold`` failures in a row it is skipped,
    from the first attempt of every model call on, until ``cooldown`` seconds have passed.
    When every model's circuit is open, the last error is raised. The switch is immediate
    (no wait); combine it with the default strategy on the same agent for backoff, and
    whichever decides first wins, without adding up waits.

    Args:
        fallbacks: The models to try after the agent's own, in order.
        retry_on: The exception types that trigger a fallback.
        failure_threshold: Failures in a row that open a model's circuit.
        cooldown: Seconds an open circuit keeps its model skipped.
        sleep: The async sleep (unused unless a subclass waits).
        clock: Seconds from a monotonic clock.
    """

    name = "fallback"

    def __init__(
        self,
        fallbacks: Sequence[Model],
        *,
        retry_on: tuple[type[Exception], ...] = TRANSIENT_ERRORS,
        failure_threshold: int = 1,
        cooldown: float = 60.0,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(sleep=sleep, clock=clock)
        if not fallbacks or not all(isinstance(m, Model) for m in fallbacks):
            raise UsageError("FallbackStrategy needs one or more fallback Model objects")
        self.fallbacks = tuple(fallbacks)
        self.retry_on = retry_on
        self.breaker = CircuitBreaker(
            failure_threshold=failure_threshold, cooldown=cooldown, clock=clock
        )

    def chain(self) -> tuple[Model, ...]:
        """The models in the order they are tried."""
        primary = self._agent.model if self._agent is not None else None
        return (*((primary,) if primary is not None else ()), *self.fallbacks)

    def init_agent(self, agent: AgentHost) -> None:
        """Attach, and pick the first model whose circuit is closed before each call."""
        super().init_agent(agent)
        agent.add_hook("pre_request", self._choose_model, order=Phase.ROUTE)
        agent.add_hook("after_model_call", self._record_success, order=Phase.OBSERVE)

    def _choose_model(self, ctx: PreRequestContext) -> ProviderRequest | None:
        if ctx.attempt == 1:
            chain = self.chain()
            chosen = next((m for m in chain if self.breaker.allows(m)), None)
            if chosen is None:
                names = ", ".join(m.name for m in chain)
                raise CircuitOpenError(
                    f"every model's circuit is open ({names}); none is called until a "
                    f"cool-down of {self.breaker.cooldown:g}s has passed",
                    model=ctx.request.model,
                )
            ctx.model = chosen
        # Every attempt names the model it goes to; the built request names the agent's.
        if ctx.request.model != ctx.model.name:
            return dataclasses.replace(ctx.request, model=ctx.model.name)
        return None

    def _record_success(self, ctx: AfterModelCallContext) -> None:
        if ctx.error is None:
            self.breaker.record_success(ctx.model)

    def compute_retry_decision(self, event: AfterModelCallContext) -> RetryDecision:
        """Open the failing model's circuit count and switch to the next allowed model."""
        if not isinstance(event.error, self.retry_on):
            return RetryDecision(retry=False)
        self.breaker.record_failure(event.model)
        chain = self.chain()
        start = next((i for i, m in enumerate(chain) if m is event.model), -1) + 1
        for model in chain[start:]:
            if self.breaker.allows(model):
                event.model = model  # pre_request names it in the next attempt's request
                return RetryDecision(retry=True)
        return RetryDecision(retry=False)
