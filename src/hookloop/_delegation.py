"""Delegation: an agent hands a task to a sub-agent, directly or as a tool of its model.

What a delegation guarantees:

- The sub-agent's chat runs in a task of its own; cancelling the delegating task (or the
  parent's chat) cancels it, and waits until it has closed its history.
- What it spent (model requests, tool calls, tokens with their cost) is added to the
  parent's running chat, if any, also when it fails: it counts against the parent's limits
  (its chat's and its session's) and is in the parent's session's spend records.
- It may spend at most what the parent's limits have left when it starts, and at most
  ``limits`` (a slice: ``sub.as_tool(limits=UsageLimits(cost=...))``); crossing either ends
  its chat with :class:`~hookloop.UsageLimitExceeded` (as a tool: an error result the
  parent's model sees; the parent's own next model call is then checked against the
  parent's limits with the sub-agent's spend added).
- Without dependencies of its own (``Agent(deps=...)``), its tools get the parent's running
  chat's (``RunContext.deps``).
- Its hook events reach the parent's ``on_subagent_event`` handlers tagged with the agent
  path; further up too, when the parent is itself a sub-agent.
- ``on_delegation`` fires on the parent once the sub-agent succeeded.
- One delegation at a time per sub-agent: parallel tool calls of one sub-agent take turns,
  so its conversation stays in order.
- The sub-agent's background work (its async memory hooks) becomes the parent's too: the
  delegation does not wait for it, and the parent's ``aclose()`` (or leaving ``async with
  parent:``) does, so nobody has to close the sub-agent itself. Up the chain as well.
- As a tool (``sub.as_tool()``), a sub-agent whose chat ends with calls waiting for a
  person's approval gives the calling model an error result naming them
  (``waiting for a person's approval: tool(arguments)``), never an empty success; the
  calls wait in the sub-agent (``sub.pending_approvals()`` / ``sub.resume(...)``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final

from ._chat_slot import ChatHost, current_slot
from ._errors import UsageError, WaitingForApprovalError
from ._limits import ChatLimits, UsageLimits
from ._loop import ChatRun
from ._messages import UserMessage
from ._run_context import NO_DEPS
from ._tools import Tool
from .hooks._contexts import DelegationContext, SubAgentEventContext
from .hooks._dispatch import Disposer, Phase, notify, notify_reporting
from .hooks._events import EVENT_TABLE, ON_DELEGATION, ON_SUBAGENT_EVENT

if TYPE_CHECKING:
    from ._stream_events import AgentResponse

__all__ = ["Relay", "as_tool", "delegate"]

Relay = Callable[[tuple[str, ...], str, object], Awaitable[None]]
"""Passes a sub-agent's event (path below the receiver, event name, context) upwards."""

_FORWARDED: Final = tuple(sorted(spec.name for spec in EVENT_TABLE.values() if spec.forwarded))


@dataclasses.dataclass(slots=True, eq=False)
class _SubAgent:
    """What delegation keeps about an agent it hands tasks to."""

    relay: Relay | None = None
    """Set while the agent works for a parent whose side listens to its events."""
    lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
    """Makes delegations to the agent take turns (one lock per event loop)."""


# Weak: an agent that is gone takes its entry with it.
_SUB_AGENTS: weakref.WeakKeyDictionary[ChatHost, _SubAgent] = weakref.WeakKeyDictionary()


async def delegate(
    parent: ChatHost,
    task: str,
    sub: ChatHost,
    *,
    metadata: Mapping[str, Any] | None = None,
    limits: UsageLimits | None = None,
) -> AgentResponse:
    """Run ``task`` as a chat of ``sub`` on behalf of ``parent``; see the module docstring.

    ``limits``: the most the sub-agent's chat may spend (within what the parent has left).

    Raises:
        UsageError: ``sub`` is ``parent``, ``task`` is not a non-empty str, or ``limits``
            is not ``UsageLimits``.
        Exception: Whatever the sub-agent's chat raised (``ChatCancelledError`` included).
        asyncio.CancelledError: The delegating task was cancelled.
    """
    if sub is parent:
        raise UsageError(f"agent {parent.name!r} cannot delegate to itself")
    if not isinstance(task, str) or not task.strip():
        raise UsageError(f"a delegated task must be a non-empty str, got {task!r:.80}")
    info = dict(metadata or {})
    if limits is not None and not isinstance(limits, UsageLimits):
        raise UsageError(f"limits must be UsageLimits or None, got {type(limits).__name__}")
    state = _SUB_AGENTS.setdefault(sub, _SubAgent())
    async with _lock_for(state):
        slot = sub._slot
        parent_run = parent._slot.run
        inherited = parent_run.deps if parent_run is not None and sub.deps is NO_DEPS else NO_DEPS
        # UsageError if its own calls wait for approval, ConcurrentChatError if it chats
        run = await sub._start(
            UserMessage(content=task), None, inherited, limits=_share(sub, parent_run, limits)
        )
        relay = _relay_for(parent)
        previous_relay, state.relay = state.relay, relay
        forwarding: list[Disposer] = []
        try:
            if relay is not None:
                forwarding = _forward(sub, relay)
            response = await asyncio.ensure_future(slot.drive(run))
        finally:
            slot.release(run)  # cancelled before its task even started
            state.relay = previous_relay
            for dispose in forwarding:
                dispose()
            _roll_up(parent, run)
            _adopt_background(parent, sub)
    if hs := parent.hooks.handlers.get(ON_DELEGATION):
        ctx = DelegationContext(
            task=task,
            result=response.text,
            agent_name=sub.name,
            metadata=info,
            response=response,
            path=(parent.name, sub.name),
        )
        await notify_reporting(hs, ctx)
    return response


def as_tool(
    sub: ChatHost,
    *,
    name: str | None = None,
    description: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    limits: UsageLimits | None = None,
) -> Tool:
    """A tool that delegates the model's ``task`` to ``sub`` and returns its answer.

    The agent whose chat calls the tool is the parent (see :func:`delegate`), and each
    call may spend at most ``limits`` of what the parent has left. Outside any chat, the
    tool just runs a chat of ``sub`` (with its own limits only).
    """
    if limits is not None and not isinstance(limits, UsageLimits):
        raise UsageError(f"limits must be UsageLimits or None, got {type(limits).__name__}")
    tool_name = name if name is not None else sub.name
    summary = description or (
        f"Hand a task to the {sub.name} agent and get its answer. Give it everything it "
        "needs to know: it does not see this conversation."
    )

    async def run(task: str) -> object:
        # The output, not the text: a sub-agent with an output type answers through its
        # output tool, and its text is then empty. Without one, the output is the text.
        slot = current_slot()
        if slot is None or slot.owner is sub:
            response = await sub.chat(task)
        else:
            response = await delegate(slot.owner, task, sub, metadata=metadata, limits=limits)
        if response.pending_approvals:
            raise WaitingForApprovalError(sub.name, response.pending_approvals)
        return response.output

    run.__doc__ = f"""{summary}

    Args:
        task: The task, with all the context the {sub.name} agent needs.
    """
    return Tool.from_function(run, name=tool_name, description=summary)


def _lock_for(state: _SubAgent) -> asyncio.Lock:
    """The lock that gives delegations to a sub-agent one at a time (one per event loop)."""
    loop = asyncio.get_running_loop()
    held = state.lock
    if held is None or held[0] is not loop:
        held = (loop, asyncio.Lock())
        state.lock = held
    return held[1]


def _relay_for(parent: ChatHost) -> Relay | None:
    """How the sub-agent's events reach ``parent`` and above; ``None`` if nobody listens."""
    working_for = _SUB_AGENTS.get(parent)
    upstream = working_for.relay if working_for is not None else None
    if ON_SUBAGENT_EVENT not in parent.hooks.handlers and upstream is None:
        return None

    async def relay(path: tuple[str, ...], event: str, ctx: object) -> None:
        full = (parent.name, *path)
        if hs := parent.hooks.handlers.get(ON_SUBAGENT_EVENT):
            await notify(hs, SubAgentEventContext(path=full, event=event, context=ctx))
        if upstream is not None:
            await upstream(full, event, ctx)

    return relay


def _forward(sub: ChatHost, relay: Relay) -> list[Disposer]:
    """Register, on ``sub``, one handler per event that hands the event to ``relay``."""
    path = (sub.name,)

    def forwarder(event: str) -> Callable[[object], Awaitable[None]]:
        async def forward(ctx: object) -> None:
            await relay(path, event, ctx)

        forward.__qualname__ = f"delegation.forward[{event}]"
        return forward

    return [sub.hooks.add(event, forwarder(event), order=Phase.FORWARD) for event in _FORWARDED]


def _share(sub: ChatHost, parent_run: ChatRun | None, limits: UsageLimits | None) -> ChatLimits:
    """The sub-agent chat's limits: its own, what the parent has left, and the slice."""
    own = sub._limits
    share = limits
    if parent_run is not None and (left := parent_run.left()) is not None:
        share = left.tightest(share)
    if share is None:
        return own
    mine = own.limits
    return ChatLimits(share if mine is None else share.tightest(mine), own.repeat)


def _roll_up(parent: ChatHost, run: ChatRun) -> None:
    parent_run = parent._slot.run
    if parent_run is not None:
        parent_run.add_spent(run.spend)


def _adopt_background(parent: ChatHost, sub: ChatHost) -> None:
    """Make the parent's ``aclose()`` wait for what the sub-agent left running."""
    if len(sub.background):
        _ = parent.background.spawn(
            sub.background.drain(), f"background work of sub-agent {sub.name!r}"
        )
