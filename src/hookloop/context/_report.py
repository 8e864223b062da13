"""The context policies' figures as hook events: ``on_trim`` and ``on_compaction``.

The token counts cost a pass over the messages, so they are taken only when someone
listens: without a handler, reporting costs one dictionary lookup.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from .._messages import Message
from ..hooks._contexts import CompactionContext, TrimContext
from ..hooks._dispatch import notify
from ..hooks._events import ON_COMPACTION, ON_TRIM
from ..models._base import ProviderRequest
from ._tokens import count_request

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["report_compaction", "report_trim"]


async def report_trim(
    agent: AgentHost,
    *,
    iteration: int,
    attempt: int,
    reason: Literal["window", "overflow"],
    before: Sequence[Message],
    after: Sequence[Message],
    budget: int,
    window: int | None,
) -> None:
    """Fire ``on_trim``: a request keeps ``after`` of the messages ``before``."""
    handlers = agent.hooks.handlers.get(ON_TRIM)
    if not handlers:
        return
    count = agent.history.token_counter.count_message
    ctx = TrimContext(
        iteration=iteration,
        attempt=attempt,
        reason=reason,
        messages_before=len(before),
        messages_after=len(after),
        tokens_before=sum(map(count, before)),
        tokens_after=sum(map(count, after)),
        budget=budget,
        window=window,
    )
    await notify(handlers, ctx)


async def report_compaction(
    agent: AgentHost,
    *,
    iteration: int,
    attempt: int,
    tier: Literal["summary", "tool_results", "old_turns"],
    before: ProviderRequest,
    after: ProviderRequest,
    window: int | None,
) -> None:
    """Fire ``on_compaction``: a compaction policy made ``before`` into ``after``."""
    handlers = agent.hooks.handlers.get(ON_COMPACTION)
    if not handlers:
        return
    counter = agent.history.token_counter
    ctx = CompactionContext(
        iteration=iteration,
        attempt=attempt,
        tier=tier,
        messages_before=len(before.messages),
        messages_after=len(after.messages),
        tokens_before=count_request(before, counter=counter),
        tokens_after=count_request(after, counter=counter),
        window=window,
    )
    await notify(handlers, ctx)
