"""The registration API: a :class:`Guardrail` is a plugin that adds one guard row's handler.

``input_guardrail(check)``, ``output_guardrail(check)``, ``tool_call_guardrail(check)`` and
``tool_result_guardrail(check)`` make one (each also works as a decorator, bare or with
options); ``agent.use(guardrail)`` or ``Agent(plugins=[...])`` adds it. A check is a
function of the row's context, sync or async, returning a :class:`~hookloop.Verdict`, or an
:class:`~hookloop.Agent` (an LLM judge) whose typed answer is the verdict. The guardrail
fails closed: a check that returns anything else (``None`` included) or raises is a trip.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeAlias, cast, overload

from .._chat_slot import current_slot
from .._errors import UsageError
from .._limits import Spend, UsageLimits
from .._messages import ToolMessage
from .._verdict import GuardrailPosition, Verdict
from ..hooks._host import AgentHost

if TYPE_CHECKING:
    from .._stream_events import AgentResponse

__all__ = [
    "JUDGE_PROMPT",
    "Check",
    "Guardrail",
    "input_guardrail",
    "output_guardrail",
    "tool_call_guardrail",
    "tool_result_guardrail",
]

Check: TypeAlias = Callable[[Any], Verdict | Awaitable[Verdict]] | AgentHost
"""A guardrail's check: a function of the row's context (sync or async) returning a
:class:`~hookloop.Verdict`, or an :class:`~hookloop.Agent` that judges ``ctx.text``."""


class _Chats(AgentHost, Protocol):
    """An agent as a judge uses it: a chat whose answer is typed."""

    async def chat(
        self, message: str, *, output_type: type[Verdict], limits: UsageLimits | None = ...
    ) -> AgentResponse[Verdict]:
        """One chat; ``response.output`` is the verdict."""
        ...


_ROWS: Final = {
    "input": "on_input_guardrail",
    "output": "on_output_guardrail",
    "tool_call": "on_tool_call_guardrail",
    "tool_result": "on_tool_result_guardrail",
}

JUDGE_PROMPT = (
    "You are a guardrail. Judge the {position} below, between the markers, and answer with "
    "a verdict: action 'allow' if it is acceptable, 'block' if it must stop the "
    "conversation{reject}, with a short reason.\n<<<\n{text}\n>>>"
)
"""What an agent judge is asked; ``{position}``, ``{text}`` and ``{reject}`` are filled in."""


class Guardrail:
    """A check at one position of the loop, as a plugin: ``agent.use(guardrail)``.

    Make one with :func:`input_guardrail`, :func:`output_guardrail`,
    :func:`tool_call_guardrail` or :func:`tool_result_guardrail`. It registers one handler on
    its position's row of the event table (``on_input_guardrail`` ...), named after the
    guardrail, at ``order`` (the handlers of a row run in order, and a block stops the rest).
    A guardrail holds no state of its own: one may serve several agents.

    Attributes:
        position: ``"input"``, ``"output"``, ``"tool_call"`` or ``"tool_result"``.
        check: The function or agent judge.
        name: The guardrail's name (in :class:`~hookloop.GuardrailTripped`, the trace and
            the session log).
        run_beside: For an input guardrail: run beside the first model call instead of
            before it.
        before_approval: For a tool-call guardrail: check a call that needs approval before
            the person is asked, instead of once they approved it.
        order: Its place among the row's handlers (see ``docs/hooks.md``).
    """

    def __init__(
        self,
        position: GuardrailPosition,
        check: Check,
        *,
        name: str | None = None,
        run_beside: bool = False,
        before_approval: bool = False,
        order: int = 0,
    ) -> None:
        if position not in _ROWS:
            raise UsageError(f"a guardrail's position is one of {sorted(_ROWS)}, got {position!r}")
        if not (isinstance(check, AgentHost) or callable(check)):
            raise UsageError(f"a guardrail's check must be a function or an Agent, got {check!r}")
        if run_beside and position != "input":
            raise UsageError("run_beside is for input guardrails")
        if before_approval and position != "tool_call":
            raise UsageError("before_approval is for tool-call guardrails")
        self.position: GuardrailPosition = position
        self.check = check
        self.name = name or _name_of(check)
        self.run_beside = run_beside
        self.before_approval = before_approval
        self.order = order
        self._judge: _Judge | None = (
            _Judge(cast("_Chats", check), position) if isinstance(check, AgentHost) else None
        )

    def __repr__(self) -> str:
        return f"Guardrail({self.position!r}, {self.name!r})"

    def init_agent(self, agent: AgentHost) -> None:
        """Register the guardrail's check on its row, as it is (no wrapper around it).

        The row holds it to returning a :class:`~hookloop.Verdict` and names it after the
        guardrail; a tool-call guardrail's check is not called at the approval stage it
        leaves alone (``before_approval``).
        """
        row = "on_input_guardrail_beside" if self.run_beside else _ROWS[self.position]
        check: Callable[[Any], object] = self._judge or self.check  # type: ignore[assignment]
        skips = None
        if self.position == "tool_call":
            skips = "approved" if self.before_approval else "pending"
        agent.hooks.add_guardrail(row, check, name=self.name, order=self.order, skips=skips)


class _Judge:
    """An agent asked for a :class:`~hookloop.Verdict` on ``ctx.text``, one check at a time.

    Its history is cleared before each check (each verdict stands on its own), and its
    tokens count as the guarded chat's.
    """

    def __init__(self, agent: _Chats, position: GuardrailPosition) -> None:
        self.agent = agent
        self.position = position
        self._lock: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None

    async def __call__(self, ctx: Any) -> Verdict:
        loop = asyncio.get_running_loop()
        if self._lock is None or self._lock[0] is not loop:
            self._lock = (loop, asyncio.Lock())
        prompt = JUDGE_PROMPT.format(
            position=self.position.replace("_", " "),
            text=ctx.text,
            reject=", 'reject' to refuse this tool call only"
            if self.position == "tool_call"
            else "",
        )
        slot = current_slot()
        run = slot.run if slot is not None else None
        # Held to what the guarded chat's limits have left, as a sub-agent is.
        left = run.left() if run is not None else None
        async with self._lock[1]:
            self.agent.history.clear_history()
            if left is None:
                response = await self.agent.chat(prompt, output_type=Verdict)
            else:
                response = await self.agent.chat(prompt, output_type=Verdict, limits=left)
        if run is not None:
            # The judge's spend is the guarded chat's, as a sub-agent's is.
            calls = sum(isinstance(m, ToolMessage) for m in response.messages)
            spent = Spend(usage=response.usage, requests=response.iterations, tool_calls=calls)
            run.add_spent(spent)
        verdict: Verdict = response.output
        return verdict


def _name_of(check: object) -> str:
    if isinstance(check, AgentHost):
        return check.name
    name = getattr(check, "__name__", None) or type(check).__name__
    return str(name)


_Decorator: TypeAlias = Callable[[Check], Guardrail]


def _make(
    position: GuardrailPosition, check: Check | None, **options: Any
) -> Guardrail | _Decorator:
    if check is None:
        return lambda fn: Guardrail(position, fn, **options)
    return Guardrail(position, check, **options)


@overload
def input_guardrail(
    check: Check, /, *, name: str | None = None, run_beside: bool = False, order: int = 0
) -> Guardrail: ...
@overload
def input_guardrail(
    *, name: str | None = None, run_beside: bool = False, order: int = 0
) -> _Decorator: ...
def input_guardrail(
    check: Check | None = None,
    /,
    *,
    name: str | None = None,
    run_beside: bool = False,
    order: int = 0,
) -> Guardrail | _Decorator:
    """A guardrail on the user's message; also a decorator (``@input_guardrail``).

    By default it blocks: the message is checked before it is committed, and the model is
    not called until every input guardrail passed it; a ``replace`` verdict redacts it. With
    ``run_beside=True`` it runs beside the chat's first model call (the message is committed
    and sent), which is cancelled when it trips; it cannot redact then.
    """
    return _make("input", check, name=name, run_beside=run_beside, order=order)


@overload
def output_guardrail(check: Check, /, *, name: str | None = None, order: int = 0) -> Guardrail: ...
@overload
def output_guardrail(*, name: str | None = None, order: int = 0) -> _Decorator: ...
def output_guardrail(
    check: Check | None = None, /, *, name: str | None = None, order: int = 0
) -> Guardrail | _Decorator:
    """A guardrail on the final answer (and typed output), before it is committed.

    A block means the answer is never stored; a ``replace`` verdict (text answers only)
    changes what is committed. Also a decorator (``@output_guardrail``).
    """
    return _make("output", check, name=name, order=order)


@overload
def tool_call_guardrail(
    check: Check, /, *, name: str | None = None, before_approval: bool = False, order: int = 0
) -> Guardrail: ...
@overload
def tool_call_guardrail(
    *, name: str | None = None, before_approval: bool = False, order: int = 0
) -> _Decorator: ...
def tool_call_guardrail(
    check: Check | None = None,
    /,
    *,
    name: str | None = None,
    before_approval: bool = False,
    order: int = 0,
) -> Guardrail | _Decorator:
    """A guardrail on each tool call before it runs: allow, ``reject`` or ``block``.

    A call that needs a person's approval is checked once they approved it, or with
    ``before_approval=True`` before they are asked. Also a decorator.
    """
    return _make("tool_call", check, name=name, before_approval=before_approval, order=order)


@overload
def tool_result_guardrail(
    check: Check, /, *, name: str | None = None, order: int = 0
) -> Guardrail: ...
@overload
def tool_result_guardrail(*, name: str | None = None, order: int = 0) -> _Decorator: ...
def tool_result_guardrail(
    check: Check | None = None, /, *, name: str | None = None, order: int = 0
) -> Guardrail | _Decorator:
    """A guardrail on each tool result before the model sees it.

    It passes it, ``replace``-s it or ``block``-s the chat. Also a decorator.
    """
    return _make("tool_result", check, name=name, order=order)
