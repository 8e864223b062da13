"""Compaction: old turns summarised before the window fills up, and overflow recovery.

:class:`Compaction` summarises old turns when the window is filling up (proactive, at
``compact_threshold``) and recovers when the provider still says the request is too long
(reactive): truncate old tool results, then drop old turns, then summarise, each step
strictly smaller, and a :class:`~hookloop.ContextOverflowError` with the numbers when nothing
can shrink. A plugin over ``pre_request`` / ``after_model_call``: ``agent.use(Compaction())``.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Literal, TypeAlias

from .._errors import ContextOverflowError, UsageError
from .._messages import AssistantMessage, Message, ToolMessage, UserMessage
from ..hooks._contexts import AfterModelCallContext, HistoryReplacement, PreRequestContext
from ..hooks._dispatch import Phase
from ..hooks._host import attach_once
from ..models._base import Model, ProviderRequest
from ..models._overflow import is_context_overflow
from ._notes import SUMMARY_HEADER
from ._report import report_compaction
from ._sliding_window import left_out, report_left_out, window_limit
from ._tokens import Calibration, TokenCounter, count_overhead, count_request
from ._trim import group_units, trim_to_budget, truncate_tool_results

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["SUMMARY_HEADER", "SUMMARY_PROMPT", "Compaction"]

logger = logging.getLogger(__name__)

SUMMARY_PROMPT = (
    "You summarise the first part of a conversation between a user and an AI assistant "
    "that uses tools, so that the assistant can continue without it. Keep every fact, "
    "decision, number, name, file and open task; keep what the tools returned that still "
    "matters; drop pleasantries. Write plain prose or short bullet points, no preamble."
)
"""The summariser's system prompt."""


_Tier: TypeAlias = Literal["tool_results", "old_turns", "summary"]
_Shrink: TypeAlias = Callable[[ProviderRequest, int], Awaitable[ProviderRequest | None]]


class Compaction:
    """Summarises old turns before the window fills up, and recovers when it overflows.

    **Proactive**: before the first attempt of a model call, when the request is estimated
    at ``compact_threshold`` (a fraction of the window) or more, the oldest turns are
    summarised: ``on_pre_compress`` fires with them, a model writes the summary, and one
    summary message (with the texts the handlers returned) replaces them in the stored
    history. The newest turns worth ``keep_recent`` of the window stay as they are.

    **Reactive**: when a model call fails with a context overflow, the next attempt's request
    is made strictly smaller, trying in order: truncating old tool results to
    ``tool_result_chars``; dropping old turns (to ``shrink`` of the current size);
    summarising as above. When none shrinks the request, the chat fails with
    :class:`~hookloop.ContextOverflowError` carrying the request's size and the window.

    Args:
        compact_threshold: Utilisation of the window that triggers proactive compaction.
        keep_recent: Fraction of the window the kept newest turns may take.
        summarizer: The model that writes summaries; by default the agent's own.
        max_tokens: The window; by default the model's ``context_window``.
        tool_result_chars: How much of each old tool result the first reactive tier keeps.
        shrink: The fraction of its size the second reactive tier trims a request to.
        prompt: The summariser's system prompt.
    """

    name = "compaction"

    def __init__(
        self,
        *,
        compact_threshold: float = 0.8,
        keep_recent: float = 0.3,
        summarizer: Model | None = None,
        max_tokens: int | None = None,
        tool_result_chars: int = 2_000,
        shrink: float = 0.7,
        prompt: str = SUMMARY_PROMPT,
    ) -> None:
        if not 0 < compact_threshold <= 1 or not 0 < keep_recent < 1 or not 0 < shrink < 1:
            raise UsageError("compact_threshold must be in (0, 1]; keep_recent, shrink in (0, 1)")
        self.compact_threshold = compact_threshold
        self.keep_recent = keep_recent
        self.summarizer = summarizer
        self.max_tokens = max_tokens
        self.tool_result_chars = tool_result_chars
        self.shrink = shrink
        self.prompt = prompt
        self._agent: AgentHost | None = None
        self._calibration: Calibration | None = None
        self.compactions = 0
        """How many summaries were made (a figure for tests and monitoring)."""

    def init_agent(self, agent: AgentHost) -> None:
        """Register the proactive check and the recovery.

        The check runs first in ``pre_request``; the recovery runs early in
        ``after_model_call``, before retry strategies.
        """
        self._agent = attach_once(
            "a Compaction", self._agent, agent, "it keeps per-agent state", owner=self
        )
        agent.add_hook("pre_request", self._proactive, order=Phase.COMPACT)
        agent.add_hook("after_model_call", self._after, order=Phase.COMPACT_RECOVER)

    # -- proactive ---------------------------------------------------------------------------

    def estimate(self, request: ProviderRequest) -> int:
        """Estimated input tokens of ``request``, calibrated by the last reported usage."""
        counter = self._require_agent().history.token_counter
        if self._calibration is not None:
            return self._calibration.estimate(request, counter=counter)
        return count_request(request, counter=counter)

    async def _proactive(self, ctx: PreRequestContext) -> ProviderRequest | None:
        window = window_limit(ctx.model, self.max_tokens)
        if ctx.attempt != 1 or window is None:
            return None
        if self.estimate(ctx.request) < self.compact_threshold * window:
            return None
        summarised = await self._summarise(ctx.request, int(window * self.keep_recent))
        if summarised is None:
            return None
        smaller, ctx.replace_history = summarised
        self._count(ctx.replace_history)
        await report_compaction(
            self._require_agent(),
            iteration=ctx.iteration,
            attempt=ctx.attempt,
            tier="summary",
            before=ctx.request,
            after=smaller,
            window=window,
        )
        return smaller

    # -- reactive ----------------------------------------------------------------------------

    async def _after(self, ctx: AfterModelCallContext) -> None:
        if ctx.error is None:
            if ctx.response is not None and ctx.response.usage is not None:
                self._calibration = Calibration.from_usage(ctx.request, ctx.response.usage)
            return
        if ctx.retry or not is_context_overflow(ctx.error):
            return
        agent = self._require_agent()
        counter = agent.history.token_counter
        request = ctx.request
        size = count_request(request, counter=counter)
        self._calibration = None
        window = window_limit(ctx.model, self.max_tokens)
        tiers: tuple[tuple[_Tier, _Shrink], ...] = (
            ("tool_results", self._truncate_tool_results),
            ("old_turns", self._drop_old_turns),
        )
        for tier, smaller in tiers:
            candidate = await smaller(request, size)
            if candidate is not None and count_request(candidate, counter=counter) < size:
                report_left_out(ctx, left_out(request.messages, candidate.messages))  # no summary
                ctx.request = candidate
                ctx.retry = True
                await self._report(ctx, tier, request, candidate, window)
                return
        summarised = await self._summarise(request, int(size * self.keep_recent))
        if summarised is not None and count_request(summarised[0], counter=counter) < size:
            ctx.request, ctx.replace_history = summarised  # only now, when it is known to help
            self._count(ctx.replace_history)
            ctx.retry = True
            await self._report(ctx, "summary", request, ctx.request, window)
            return
        raise ContextOverflowError(
            f"the request ({size} tokens) does not fit the model's context window "
            f"({window if window is not None else 'unknown'} tokens) and nothing in it can "
            "be made smaller",
            request_tokens=size,
            limit_tokens=window,
            model=request.model,
        ) from ctx.error

    async def _truncate_tool_results(
        self, request: ProviderRequest, size: int
    ) -> ProviderRequest | None:
        messages = truncate_tool_results(
            request.messages, max_chars=self.tool_result_chars, keep_recent=1
        )
        return None if messages == request.messages else _with(request, messages)

    async def _drop_old_turns(self, request: ProviderRequest, size: int) -> ProviderRequest | None:
        agent = self._require_agent()
        counter = agent.history.token_counter
        budget = max(int(size * self.shrink) - count_overhead(request, counter=counter), 1)
        kept = trim_to_budget(request.messages, budget, counter=counter)
        if count_request(_with(request, kept), counter=counter) >= size:
            return None
        return _with(request, kept)

    # -- summarising -------------------------------------------------------------------------

    async def _summarise(
        self, request: ProviderRequest, keep_tokens: int
    ) -> tuple[ProviderRequest, HistoryReplacement] | None:
        """Summarise the oldest turns: the smaller request and the new stored conversation.

        Nothing is changed here: the loop commits the conversation, after ``on_pre_compress``
        (whose texts join the summary). The newest turns worth ``keep_tokens`` stay. So does
        the last user message, the task in hand: when it falls among the old turns, it moves
        to just after the summary.
        """
        agent = self._require_agent()
        history = agent.history
        stored = history.messages
        cut = _split_point(stored, keep_tokens, history.token_counter)
        old = list(stored[:cut])
        kept = list(stored[cut:])
        if not any(isinstance(m, UserMessage) for m in kept):
            last_user = next(
                (i for i in range(len(old) - 1, -1, -1) if isinstance(old[i], UserMessage)), None
            )
            if last_user is not None:
                kept.insert(0, old.pop(last_user))
        if not old:
            return None
        summary = await self._write_summary(old)
        message = UserMessage(content=f"{SUMMARY_HEADER}\n\n{summary.strip()}")
        # The request's own copies of the kept messages (context added to the last user
        # message, truncated results) stay as they are; messages it had left out stay out.
        in_request = {m.id: m for m in request.messages}
        smaller = _with(request, (message, *(in_request[m.id] for m in kept if m.id in in_request)))
        return smaller, HistoryReplacement(removed=tuple(old), summary=message, kept=tuple(kept))

    async def _report(
        self,
        ctx: AfterModelCallContext,
        tier: _Tier,
        before: ProviderRequest,
        after: ProviderRequest,
        window: int | None,
    ) -> None:
        await report_compaction(
            self._require_agent(),
            iteration=ctx.iteration,
            attempt=ctx.attempt,
            tier=tier,
            before=before,
            after=after,
            window=window,
        )

    def _count(self, change: HistoryReplacement) -> None:
        self.compactions += 1
        logger.info(
            "compacting %d messages of agent %r into a summary",
            len(change.removed),
            self._require_agent().name,
        )

    async def _write_summary(self, messages: Sequence[Message]) -> str:
        agent = self._require_agent()
        model = self.summarizer or agent.model
        transcript = "\n".join(_describe(m) for m in messages)
        request = ProviderRequest(
            model=model.name,
            system=self.prompt,
            messages=(UserMessage(content=f"Summarise this conversation:\n\n{transcript}"),),
        )
        response = await model.request(request)
        return response.content or "(the summariser returned nothing)"

    def _require_agent(self) -> AgentHost:
        if self._agent is None:
            raise UsageError("Compaction is not attached to an agent: agent.use(Compaction())")
        return self._agent


def _with(request: ProviderRequest, messages: Sequence[Message]) -> ProviderRequest:
    return dataclasses.replace(request, messages=tuple(messages))


def _split_point(messages: Sequence[Message], keep_tokens: int, counter: TokenCounter) -> int:
    """Where the kept newest turns start: the start of a turn unit.

    The newest units are kept while they fit ``keep_tokens`` (the newest always is). Returns
    0 when every unit fits, so there is nothing old to summarise.
    """
    units = group_units(messages)
    kept = 0
    start = len(messages)
    for unit in reversed(units):
        size = sum(counter.count_message(messages[i]) for i in unit)
        if kept + size > keep_tokens and start < len(messages):
            break
        kept += size
        start = unit.start
    return start


def _describe(message: Message) -> str:
    if isinstance(message, AssistantMessage):
        calls = "; ".join(f"called {c.name}({c.arguments})" for c in message.tool_calls)
        return f"assistant: {message.content} {calls}".strip()
    if isinstance(message, ToolMessage):
        status = "error" if message.is_error else "result"
        return f"tool {message.tool_name} {status}: {message.content}"
    if isinstance(message, UserMessage):
        return f"user: {message.text}"
    return f"{message.role}: {message.content}"
