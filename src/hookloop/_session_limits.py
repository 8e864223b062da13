"""A session's limits: what the session spent before a chat, for ``Agent(session_limits=...)``.

The spend of a session comes from its session log when the agent uses a session recorder
(``SessionRecorder.spent_before``: every process and chat that recorded it, see
``sessions/_spend_log.py``). Without one, the session is what this agent chatted in this
process since it entered the session: a tally kept by handlers added only to agents that
have session limits.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Final

from ._chat_slot import current_slot
from ._errors import UsageError
from ._limits import Spend, UsageLimits
from .hooks._dispatch import Phase

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ._chat_slot import ChatHost
    from ._setup import ChatSetup
    from .hooks._contexts import SessionSwitchContext
    from .hooks._host import AgentHost

__all__ = [
    "NO_SESSION_LIMITS",
    "check_session_limits",
    "records_spend",
    "seed_session",
    "session_spend",
    "spent_before",
    "watch_session",
]

NO_SESSION_LIMITS: Final = UsageLimits()
"""A session's limits when it has none but its spend is recorded: the chat counts it all."""


class _Tally:
    """What the agent's chats in this process spent in its current session."""

    __slots__ = ("spent",)

    def __init__(self) -> None:
        self.spent = Spend()


# Weak: an agent that is gone takes its tally with it.
_TALLIES: weakref.WeakKeyDictionary[AgentHost, _Tally] = weakref.WeakKeyDictionary()


def check_session_limits(value: object) -> UsageLimits | None:
    """``Agent(session_limits=...)`` checked: ``UsageLimits`` or ``None``.

    Raises:
        UsageError: Anything else.
    """
    if value is None or isinstance(value, UsageLimits):
        return value
    raise UsageError(f"session_limits must be UsageLimits or None, got {type(value).__name__}")


def watch_session(agent: AgentHost) -> None:
    """Count what ``agent``'s chats spend in its session, for a session without a store."""
    tally = _TALLIES.setdefault(agent, _Tally())

    def chat_ended(ctx: object) -> None:
        slot = current_slot()
        if slot is not None and slot.owner is agent and slot.run is not None:
            tally.spent = tally.spent + slot.run.spend

    def switched(ctx: SessionSwitchContext) -> None:
        tally.spent = Spend()

    for event in ("on_chat_done", "on_chat_error", "on_chat_abort"):
        agent.add_hook(event, chat_ended, order=Phase.RECORD)
    agent.add_hook("on_session_switch", switched, order=Phase.RECORD)


async def seed_session(agent: ChatHost, setup: ChatSetup, limits: UsageLimits | None) -> None:
    """Give the chat of ``setup`` its session's ``limits`` and what it spent before.

    With a recorder, also for a session without limits: the chat then counts its requests
    and tool calls for the session's spend records.
    """
    with agent._slot.holding("start a chat"):
        setup.spent_before = await spent_before(agent)
    setup.session_limits = limits or NO_SESSION_LIMITS


def records_spend(plugins: Iterable[object]) -> bool:
    """Whether one of ``plugins`` records the session's spend (a session recorder)."""
    # Every chat start asks: a plain loop, no generator (bench/loop.py).
    for plugin in plugins:  # noqa: SIM110
        if hasattr(plugin, "spent_before"):
            return True
    return False


async def spent_before(agent: AgentHost) -> Spend:
    """What ``agent``'s session spent before the chat that starts now.

    Its log's when a session recorder keeps one; otherwise what this process's chats spent.
    """
    for plugin in agent.plugins:
        read = getattr(plugin, "spent_before", None)  # a session recorder
        if read is not None:
            spent: Spend = await read()
            return spent
    tally = _TALLIES.get(agent)
    return tally.spent if tally is not None else Spend()


async def session_spend(agent: AgentHost) -> Spend:
    """What ``agent``'s session spent so far (a running chat's spend so far included)."""
    for plugin in agent.plugins:
        read = getattr(plugin, "spent", None)  # a session recorder
        if read is not None and getattr(plugin, "spent_before", None) is not None:
            spent: Spend = await read()
            return spent
    tally = _TALLIES.get(agent)
    total = tally.spent if tally is not None else Spend()
    slot = current_slot()
    if slot is not None and slot.owner is agent and slot.run is not None:
        total = total + slot.run.spend
    return total
