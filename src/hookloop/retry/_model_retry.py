"""``ModelRetryStrategy``: retrying failed model calls as a plugin on ``after_model_call``."""

from __future__ import annotations

import abc
import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._errors import ProviderError, RetryAttempt
from ..hooks._contexts import AfterModelCallContext, BackoffWaitContext
from ..hooks._dispatch import Disposer, notify
from ..hooks._events import ON_BACKOFF_WAIT
from ..hooks._host import attach_once
from ._hints import provider_hint

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["ModelRetryStrategy", "RetryDecision", "Sleep"]

Sleep = Callable[[float], Awaitable[None]]
"""An async sleep taking seconds; tests pass one that only advances a fake clock."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryDecision:
    """Whether to retry a failed model call, and how many seconds to wait first."""

    retry: bool
    wait: float = 0.0


class ModelRetryStrategy(abc.ABC):
    """A plugin that retries failed model calls.

    Subclass it and decide in :meth:`compute_retry_decision`.

    On every ``after_model_call`` event the base class, in this order:

    1. on the first attempt of a model call (``attempt == 1``), resets its per-call state
       and calls :meth:`on_first_model_attempt`;
    2. does nothing if another handler already set ``retry``, so two strategies on one
       agent never add up their waits;
    3. does nothing on success;
    4. otherwise asks :meth:`compute_retry_decision`, sleeps for ``wait`` (cancellable:
       cancelling the chat ends the wait at once), and sets ``retry``. When it decides not
       to retry after earlier retries, the error gets the attempt history
       (``ProviderError.attempts`` and a note) before the loop raises it.

    One instance holds per-call state, so it serves exactly one agent: using it on a
    second agent raises :class:`~hookloop.UsageError`. Disposing it (calling the disposer
    ``agent.use`` returned) hands it back: it can then serve another agent.

    Args:
        sleep: The async sleep to wait with (``asyncio.sleep``).
        clock: Seconds from a monotonic clock (``time.monotonic``).
    """

    _agent: AgentHost | None = None
    _sleep: Sleep = staticmethod(asyncio.sleep)
    _clock: Callable[[], float] = staticmethod(time.monotonic)
    _call_started: float = 0.0
    _history: tuple[RetryAttempt, ...] = ()

    def __init__(
        self, *, sleep: Sleep = asyncio.sleep, clock: Callable[[], float] = time.monotonic
    ) -> None:
        # The class holds the defaults: an instance only what it was given otherwise.
        if sleep is not asyncio.sleep:
            self._sleep = sleep
        if clock is not time.monotonic:
            self._clock = clock

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """A stable name for the strategy."""

    @abc.abstractmethod
    def compute_retry_decision(
        self, event: AfterModelCallContext
    ) -> RetryDecision | Awaitable[RetryDecision]:
        """Decide whether the failed attempt in ``event`` is retried, and after what wait.

        Called only for failed attempts that no other handler marked for retry.
        """

    def on_first_model_attempt(self) -> None:  # noqa: B027 - a hook, empty on purpose
        """Called at the start of every model call; clear per-call state here."""

    @property
    def elapsed(self) -> float:
        """Seconds since the first failed attempt of the model call being retried ended.

        For the decisions about a failed attempt.
        """
        return self._clock() - self._call_started

    @property
    def history(self) -> tuple[RetryAttempt, ...]:
        """The retried attempts of the current model call."""
        return self._history

    def init_agent(self, agent: AgentHost) -> None:
        """Attach to ``agent``; a subclass that overrides this must call ``super()``.

        Raises:
            UsageError: This instance already serves another agent.
        """
        self._agent = attach_once(
            f"retry strategy {self.name!r}",
            self._agent,
            agent,
            "it keeps per-call state",
            owner=self,
        )
        agent.hooks.add(
            "after_model_call",
            self.retry_model,
            idle_on_answer=self._nothing_retried if _answers_idle(type(self)) else None,
        )
        # Goes into the disposer agent.use() returns, next to the hook's own.
        agent.hooks.adopt(Disposer(lambda: self._release(agent)))

    def _nothing_retried(self) -> bool:
        """Whether :meth:`retry_model` has nothing to do for an answer: no retry to forget.

        Its first-attempt reset leaves a strategy with no retried attempt as it was (the
        library's ``on_first_model_attempt`` clears only what a retry set), so the loop
        skips it for an attempt that answered. A later attempt of the same call (another
        handler retried the answer) finds it as the reset would have left it: ``elapsed``
        starts at the call's first failed attempt.
        """
        return not self._history

    def retry_model(self, event: AfterModelCallContext) -> Awaitable[None] | None:
        """The ``after_model_call`` handler; override the methods above instead.

        A plain function for an attempt that needs no retry (every successful one): it
        returns the retry's coroutine only when there is one to decide and wait for.
        """
        # The fields' slots, not their read-only properties: two calls less a model call.
        if event._attempt == 1:  # type: ignore[attr-defined]
            self._history = ()
            self.on_first_model_attempt()
        if event.retry or event._error is None:  # type: ignore[attr-defined]
            return None
        if not self._history:
            # The call's first failed attempt: elapsed counts from here. (Not from attempt
            # 1, which the loop skips when it answered: another handler may still retry it.)
            self._call_started = self._clock()
        return self._retry(event)

    async def _retry(self, event: AfterModelCallContext) -> None:
        """Decide about a failed attempt; report the wait, wait, and set ``retry``."""
        assert event.error is not None  # retry_model hands on failed attempts only
        decision = self.compute_retry_decision(event)
        if inspect.isawaitable(decision):
            decision = await decision
        if not decision.retry:
            self._give_up(event.attempt, event.error)
            return
        self._history = (
            *self._history,
            RetryAttempt(attempt=event.attempt, error=event.error, wait=decision.wait),
        )
        agent = self._agent
        if agent is not None and (hs := agent.hooks.handlers.get(ON_BACKOFF_WAIT)):
            error = event.error
            ctx = BackoffWaitContext(
                iteration=event.iteration,
                attempt=event.attempt,
                seconds=decision.wait,
                reason=type(error).__name__,
                error=error,
                retry_after=provider_hint(error),
                strategy=self.name,
            )
            await notify(hs, ctx)
        if decision.wait > 0:
            await self._sleep(decision.wait)
        event.retry = True

    def _release(self, agent: AgentHost) -> None:
        # attach_once releases ``_agent``; the agent's retry slot is this plugin's to free.
        if agent.retry_strategy is self:
            agent.retry_strategy = None

    def _give_up(self, attempt: int, error: Exception) -> None:
        if not self._history:
            return
        attempts = (*self._history, RetryAttempt(attempt=attempt, error=error, wait=0.0))
        if isinstance(error, ProviderError):
            error.attempts = attempts
        waited = sum(a.wait for a in attempts)
        kinds = ", ".join(type(a.error).__name__ for a in attempts)
        error.add_note(
            f"{self.name}: gave up after {len(attempts)} attempts and {waited:g}s of waiting "
            f"({kinds})"
        )


def _answers_idle(cls: type[ModelRetryStrategy]) -> bool:
    """Whether ``cls`` keeps the library's success path: its promise to the loop holds.

    Its ``retry_model`` is the base class's, and its ``on_first_model_attempt`` the base's
    (empty) or one marked ``_first_attempt_resets_only`` (it clears only state that a retry
    set, as :class:`~hookloop.retry.DefaultRetryStrategy`'s does). A subclass with an
    ``on_first_model_attempt`` of its own gets every call, as documented.
    """
    if cls.retry_model is not ModelRetryStrategy.retry_model:
        return False
    for klass in cls.__mro__:
        if "on_first_model_attempt" in vars(klass):
            return klass is ModelRetryStrategy or vars(klass).get(
                "_first_attempt_resets_only", False
            )
    return False
