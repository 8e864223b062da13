"""What a guardrail decides: :class:`Verdict`, and which verdicts each position takes."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal, TypeAlias

from ._errors import UsageError

__all__ = ["ACTIONS", "ALLOW", "POSITION_ACTIONS", "GuardrailPosition", "Verdict", "VerdictAction"]

VerdictAction: TypeAlias = Literal["allow", "block", "reject", "replace"]
"""What a guardrail decided: let it pass, end the chat, refuse a tool call, or change the text."""

GuardrailPosition: TypeAlias = Literal["input", "output", "tool_call", "tool_result"]
"""Where a guardrail checks: the user's message, the final answer, a tool call, a result."""

ACTIONS: Final = ("allow", "block", "reject", "replace")

POSITION_ACTIONS: Final[Mapping[str, frozenset[str]]] = MappingProxyType(
    {
        "input": frozenset({"allow", "block", "replace"}),
        "output": frozenset({"allow", "block", "replace"}),
        "tool_call": frozenset({"allow", "block", "reject"}),
        "tool_result": frozenset({"allow", "block", "replace"}),
    }
)
"""The actions each position takes; any other verdict there is a trip (fail closed)."""

_EMPTY: Final[Mapping[str, object]] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What a guardrail decided about the text it checked; make one with the class methods.

    ``Verdict.allow()`` lets the text pass; ``Verdict.block(reason)`` is a tripwire: the
    chat ends with :class:`~hookloop.GuardrailTripped`; ``Verdict.reject(reason)`` (tool
    calls only) answers the call with the reason, which the model sees, and the tool does
    not run; ``Verdict.replace(text)`` (input, output, tool result) goes on with ``text``
    instead: a redaction. A position that does not take an action treats it as a trip.

    Attributes:
        action: ``"allow"``, ``"block"``, ``"reject"`` or ``"replace"``.
        reason: Why, for people and logs (and the model, for a rejected tool call).
        data: Details a program may read (what was found, scores...); kept read-only. In
            the session log it is stored as JSON (values that are not JSON as their text).
        replacement: For ``"replace"``, the text that goes on instead; else ``None``.

    Raises:
        UsageError: An unknown action, a reason that is not a str, or a replacement missing
            from a ``"replace"`` verdict (or given to another).
    """

    action: VerdictAction
    reason: str = ""
    data: Mapping[str, object] = dataclasses.field(default_factory=lambda: _EMPTY, hash=False)
    replacement: str | None = None

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise UsageError(f"a Verdict's action is one of {ACTIONS}, got {self.action!r}")
        if not isinstance(self.reason, str):
            raise UsageError(f"a Verdict's reason must be a str, got {type(self.reason).__name__}")
        if (self.action == "replace") != isinstance(self.replacement, str):
            raise UsageError("a 'replace' Verdict (and only one) carries a replacement str")
        if not isinstance(self.data, Mapping):
            raise UsageError(f"a Verdict's data must be a mapping, got {type(self.data).__name__}")
        if self.data is not _EMPTY:
            object.__setattr__(self, "data", MappingProxyType(dict(self.data)))

    def __reduce__(self) -> tuple[object, ...]:
        # ``data`` is a read-only view, which pickle cannot take (a durable engine pickles a
        # turn's error): it travels as a dict and is made read-only again.
        return (_rebuild, (self.action, self.reason, dict(self.data), self.replacement))

    # A static method: a guardrail returns it for every tool call and result, and calling a
    # class method makes a bound method each time. A subclass gets a class method (below).
    @staticmethod
    def allow(reason: str = "", *, data: Mapping[str, object] = _EMPTY) -> Verdict:
        """The text passes unchanged."""
        if not reason and data is _EMPTY:
            return ALLOW  # immutable: one for every plain allow
        return Verdict(action="allow", reason=reason, data=data)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super(Verdict, cls).__init_subclass__(**kwargs)  # (slots=True: no bare super())
        # Its allow() makes its own instances, unless it has one of its own (or a mixin's).
        if inspect.getattr_static(cls, "allow") is vars(Verdict)["allow"]:
            cls.allow = classmethod(_allow_of)  # type: ignore[assignment, method-assign]

    @classmethod
    def block(cls, reason: str, *, data: Mapping[str, object] = _EMPTY) -> Verdict:
        """A tripwire: the chat ends with :class:`~hookloop.GuardrailTripped`."""
        return cls(action="block", reason=reason, data=data)

    @classmethod
    def reject(cls, reason: str, *, data: Mapping[str, object] = _EMPTY) -> Verdict:
        """A tool call is not run; the model is told ``reason`` as the call's error result."""
        return cls(action="reject", reason=reason, data=data)

    @classmethod
    def replace(
        cls, text: str, reason: str = "", *, data: Mapping[str, object] = _EMPTY
    ) -> Verdict:
        """The chat goes on with ``text`` instead of what was checked (a redaction)."""
        return cls(action="replace", reason=reason, data=data, replacement=text)


ALLOW: Final = Verdict(action="allow")
"""``Verdict.allow()``: the one plain allow, which the guard rows tell apart by identity."""


def _allow_of(
    cls: type[Verdict], reason: str = "", *, data: Mapping[str, object] = _EMPTY
) -> Verdict:
    """``allow()`` of a subclass of :class:`Verdict`: an instance of it."""
    return cls(action="allow", reason=reason, data=data)


_allow_of.__name__ = _allow_of.__qualname__ = "allow"  # ``Sub.allow`` pickles by its name


def _rebuild(
    action: VerdictAction, reason: str, data: dict[str, object], replacement: str | None
) -> Verdict:
    return Verdict(action=action, reason=reason, data=data or _EMPTY, replacement=replacement)
