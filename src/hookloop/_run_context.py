"""The run context a tool can ask for: the chat's dependencies and where the call stands.

A tool parameter annotated with :class:`RunContext` is filled in by the loop and left out of
the tool's JSON schema, so the model never sees it. ``RunContext[Deps]`` is generic: a type
checker checks what the tool does with ``ctx.deps`` against ``Deps``.
"""

from __future__ import annotations

import contextvars
import enum
import types
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Annotated,
    Generic,
    Literal,
    Protocol,
    TypeVar,
    Union,
    get_args,
    get_origin,
)

from ._errors import UsageError

if TYPE_CHECKING:
    from ._messages import Usage
    from .hooks._host import AgentHost

__all__ = ["NO_DEPS", "MissingDepsError", "RunContext"]

DepsT = TypeVar("DepsT")


class DurableTurn(Protocol):
    """The durable turn running in this context (``hookloop.durable`` sets it)."""

    agent: AgentHost | None
    workflow_id: str
    """The turn's workflow id: the same in every run of the turn."""

    def idempotency_key(self, call_id: str) -> str:
        """The key of a tool call that stays the same every time the call runs."""
        ...


durable_turn: contextvars.ContextVar[DurableTurn | None] = contextvars.ContextVar(
    "hookloop_durable_turn", default=None
)
"""The durable turn whose code runs in this context, if any."""


class NoDeps(enum.Enum):
    """The type of :data:`NO_DEPS`, the marker for "no dependencies were given"."""

    NO_DEPS = enum.auto()


NO_DEPS: Literal[NoDeps.NO_DEPS] = NoDeps.NO_DEPS
"""Passed as ``deps`` (the default), it means the chat has no dependencies."""


class MissingDepsError(UsageError):
    """A tool that needs the chat's dependencies ran in a chat that has none.

    A tool whose :class:`RunContext` names a dependencies type (``RunContext[Deps]``, anything
    but ``RunContext[None]`` or a bare ``RunContext``) needs ``deps=`` on the chat or the agent.
    The chat ends with this error: running the tool without them is a bug in the program, not
    something the model can fix.

    Attributes:
        tool_name: The tool that asked.
    """

    def __init__(self, tool_name: str) -> None:
        super().__init__(
            f"tool {tool_name!r} takes RunContext with dependencies, but the chat has none: "
            "pass chat(..., deps=...) or Agent(deps=...)"
        )
        self.tool_name = tool_name


@dataclass(frozen=True, slots=True, kw_only=True)
class RunContext(Generic[DepsT]):
    """What a tool learns about the chat that called it.

    Declare a parameter of this type (any name) and the loop passes it in; it is not part of
    the tool's JSON schema.

    Attributes:
        deps: The chat's dependencies: ``chat(..., deps=...)``, else ``Agent(deps=...)``; in
            a sub-agent without its own, the delegating chat's. ``None`` for a bare
            ``RunContext`` or ``RunContext[None]`` in a chat without any.
        agent: The agent whose chat called the tool.
        usage: Tokens used by the chat so far, sub-agents' included; in a chat resumed
            after an approval (``agent.resume``), from the resume on.
        session_id: The agent's session.
        call_id: The id of this tool call.
        tool_name: The tool's name.
        attempt: 1 on the first run of the call, one more on each retry
            (``on_tool_call_error`` with ``retry = True``).
    """

    deps: DepsT
    agent: AgentHost
    usage: Usage
    session_id: str
    call_id: str
    tool_name: str
    attempt: int = 1

    @property
    def idempotency_key(self) -> str | None:
        """In a durable turn, a key that is the same every time this call runs.

        ``"<workflow id>:<call id>"``, also when the worker died and a resumed run of the
        turn runs the call again; pass it to the service the tool calls so that it acts
        once. ``None`` outside a durable turn (and in a sub-agent's chat inside one). See
        ``docs/durable.md``.
        """
        # Read from the context, not stored: a chat that is not durable pays nothing.
        turn = durable_turn.get()
        if turn is None or turn.agent is not self.agent:
            return None
        return turn.idempotency_key(self.call_id)


def context_kind(hint: object) -> Literal["none", "plain", "deps", "union"]:
    """Whether a parameter's annotation is a :class:`RunContext`, and one naming dependencies.

    ``"none"``: not a run context; ``"plain"``: a bare ``RunContext`` or ``RunContext[None]``;
    ``"deps"``: ``RunContext[Deps]`` for any other ``Deps``; ``"union"``: a union with a run
    context in it (``Optional[RunContext[Deps]]``), which the loop cannot tell how to fill.
    ``Annotated[...]`` is looked through.
    """
    while get_origin(hint) is Annotated:
        hint = get_args(hint)[0]
    if hint is RunContext:
        return "plain"
    origin = get_origin(hint)
    if origin is Union or origin is types.UnionType:
        inner = (context_kind(arg) for arg in get_args(hint))
        return "union" if any(kind != "none" for kind in inner) else "none"
    if origin is not RunContext:
        return "none"
    return "plain" if get_args(hint) == (type(None),) else "deps"
