"""``ContextHooks``: rewrite the context before each attempt, recover from provider errors.

The shape follows frame-agent-sdk's ``ContextHooks`` (``beforeRequest``, ``onError``,
``isRetryableError``, ``maxRetries``), in Python names and on top of hookloop's own events:
``before_request`` runs last in ``pre_request``, right before the model is called, and
``on_error`` runs in ``after_model_call``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, TypeAlias, TypeVar

from .._messages import Message
from ..hooks._contexts import AfterModelCallContext, PreRequestContext
from ..hooks._dispatch import Phase
from ..models._base import ProviderRequest
from ..models._overflow import is_context_overflow

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = [
    "ContextBeforeRequestResult",
    "ContextHooks",
    "ContextOnErrorResult",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextBeforeRequestResult:
    """What ``before_request`` may change; ``None`` fields keep the current value."""

    messages: Sequence[Message] | None = None
    system_prompt: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextOnErrorResult:
    """What ``on_error`` decided: ``retry`` with (optionally) new messages / system prompt."""

    retry: bool = False
    messages: Sequence[Message] | None = None
    system_prompt: str | None = None


_T = TypeVar("_T")
BeforeRequest: TypeAlias = Callable[
    ..., ContextBeforeRequestResult | Awaitable[ContextBeforeRequestResult | None] | None
]
OnError: TypeAlias = Callable[
    ..., ContextOnErrorResult | Awaitable[ContextOnErrorResult | None] | None
]


class ContextHooks:
    """Context rewriting around every model attempt, as a plugin: ``agent.use(ContextHooks(...))``.

    Args:
        before_request: Called before every attempt with keyword arguments ``model`` (the
            name), ``attempt`` (1 for the first), ``messages`` (a list) and
            ``system_prompt`` (``""`` when there is none). Returns a
            :class:`ContextBeforeRequestResult` or ``None``; sync or async.
        on_error: Called when an attempt failed with a retryable error while retries
            remain, with the same arguments plus ``error``. Returns a
            :class:`ContextOnErrorResult`; only ``retry=True`` retries, with the messages and
            system prompt it gives. Sync or async.
        is_retryable_error: Decides which errors reach ``on_error``; by default
            :func:`is_context_overflow`.
        max_retries: Retries beyond the first attempt (default 0: none).

    ``on_error`` leaves an error alone when another handler already set ``retry`` (no
    stacking), and the history itself is never changed: only the request of the next attempt.
    """

    name = "context-hooks"

    def __init__(
        self,
        *,
        before_request: BeforeRequest | None = None,
        on_error: OnError | None = None,
        is_retryable_error: Callable[[Exception], bool] = is_context_overflow,
        max_retries: int = 0,
    ) -> None:
        if max_retries < 0:
            raise ValueError(f"max_retries must be >= 0, got {max_retries}")
        self.before_request = before_request
        self.on_error = on_error
        self.is_retryable_error = is_retryable_error
        self.max_retries = max_retries
        self._retries = 0  # this plugin's own retries of the current model call

    def init_agent(self, agent: AgentHost) -> None:
        """Register on ``pre_request`` (last, right before the model) and ``after_model_call``."""
        if self.before_request is not None:
            agent.add_hook("pre_request", self._before, order=Phase.LAST)
        if self.on_error is not None:
            agent.add_hook("after_model_call", self._after, order=Phase.CONTEXT_RECOVER)

    async def _before(self, ctx: PreRequestContext) -> ProviderRequest | None:
        assert self.before_request is not None
        request = ctx.request
        result: ContextBeforeRequestResult | None = await _maybe_await(
            self.before_request(
                model=request.model,
                attempt=ctx.attempt,
                messages=list(request.messages),
                system_prompt=request.system or "",
            )
        )
        return None if result is None else _apply(request, result.messages, result.system_prompt)

    async def _after(self, ctx: AfterModelCallContext) -> None:
        assert self.on_error is not None
        if ctx.attempt == 1:
            self._retries = 0
        error = ctx.error
        if error is None or ctx.retry or self._retries >= self.max_retries:
            return
        if not self.is_retryable_error(error):
            return
        request = ctx.request
        result: ContextOnErrorResult | None = await _maybe_await(
            self.on_error(
                model=request.model,
                attempt=ctx.attempt,
                error=error,
                messages=list(request.messages),
                system_prompt=request.system or "",
            )
        )
        if result is not None and result.retry:
            ctx.request = _apply(request, result.messages, result.system_prompt)
            ctx.retry = True
            self._retries += 1


async def _maybe_await(value: _T | Awaitable[_T]) -> _T:
    if inspect.isawaitable(value):
        return await value
    return value


def _apply(
    request: ProviderRequest, messages: Sequence[Message] | None, system: str | None
) -> ProviderRequest:
    if messages is not None:
        request = replace(request, messages=tuple(messages))
    if system is not None:
        request = replace(request, system=system or None)
    return request
