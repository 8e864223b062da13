"""Tool calls that wait for a person: the pending calls and the decisions on them.

A call needs approval when its tool says so (``@tool(requires_approval=...)``) or a
``pre_tool_call`` handler returns :class:`Defer`. The chat then ends with the call in
``response.pending_approvals``; ``agent.resume(decisions)`` goes on. Each pending call
carries a digest of its id, tool and arguments; a decision made with its methods carries
the digest computed from those fields, and ``resume()`` compares it with the digest of the
call as the runtime has it, so a decision about other arguments is refused.

The records that outlive a process, and what they say is still to do, are in
``_approval_log.py``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._errors import UsageError

__all__ = [
    "ApprovalDecision",
    "ApprovalEditError",
    "ApprovalMismatchError",
    "Defer",
    "PendingApproval",
    "UnknownApprovalError",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Defer:
    """Returned by a ``pre_tool_call`` handler: the call waits for a person's decision.

    Attributes:
        reason: Why, for the person deciding (``PendingApproval.reason``).
    """

    reason: str = ""


_ACTIONS = ("approve", "deny", "edit")
NO_REASON = "no reason given"
"""The reason a denial record without one is read with (records of older versions)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """What a person decided about one pending call; make it with the call's methods.

    It is checked when it is made, before anything can run or be recorded: ``action`` is
    exactly one of ``"approve"``, ``"deny"``, ``"edit"``; a denial has a reason; an edit
    has its arguments as a JSON object text; an approval has none (an approval with other
    arguments is an edit).

    Attributes:
        call_id: The pending call.
        action: ``"approve"`` runs it with the pending call's ``arguments``, ``"deny"``
            answers it with ``reason`` as an error the model sees, ``"edit"`` runs it with
            ``arguments`` instead.
        digest: The digest of the pending call the decision was made for.
        reason: For a denial, what the model is told (never empty).
        arguments: For an edit, the arguments the tool receives, as a JSON object text.

    Raises:
        UsageError: Any of the above does not hold.
    """

    call_id: str
    action: Literal["approve", "deny", "edit"]
    digest: str
    reason: str = ""
    arguments: str | None = None

    def __post_init__(self) -> None:
        action: object = self.action  # what a web page sent, whatever the annotation says
        if type(action) is not str or action not in _ACTIONS:
            raise UsageError(
                f"an approval decision's action must be exactly 'approve', 'deny' or 'edit', "
                f"got {action!r:.80}; nothing was run or recorded"
            )
        for name in ("call_id", "digest", "reason"):
            if type(getattr(self, name)) is not str:
                raise UsageError(
                    f"an approval decision's {name} must be a str, got "
                    f"{type(getattr(self, name)).__name__}"
                )
        if not self.call_id:
            raise UsageError("an approval decision needs the call_id of the pending call")
        if action == "deny" and not self.reason.strip():
            raise UsageError("a denial needs a reason: the model sees it as the call's result")
        if action == "edit":
            _check_arguments(self.arguments, "an edit")
        elif self.arguments is not None:
            raise UsageError(
                f"an approval decision with action {action!r} takes no arguments; to run the "
                "call with other arguments, make an edit (pending.edit(arguments))"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A tool call waiting for a person's decision.

    Attributes:
        call_id: The model's id for the call.
        tool_name: The tool it calls.
        arguments: The arguments the tool will receive if the call is approved (a JSON
            object text): the model's, as ``pre_tool_call`` handlers changed them. This is
            what the person approves, and exactly what runs.
        digest: A digest of the call id, tool and both argument texts; a decision made with
            this item's methods carries the digest computed from these fields, so an item
            whose fields were changed (a stored copy, say) is refused by ``resume()``.
        reason: Why it needs approval: a :class:`Defer`'s reason, or empty.
        message_id: The assistant message that made the call.
        requested_digest: ``None``, unless the call in the history is no longer the one
            the approval was asked for (its tool or arguments were changed since): then
            the digest it was asked for, and only :meth:`deny` is accepted for it.
        model_arguments: The arguments as the model sent them, for context (the same text
            as ``arguments`` when no handler changed them; filled in when not given).
    """

    call_id: str
    tool_name: str
    arguments: str
    digest: str
    reason: str = ""
    message_id: str = ""
    requested_digest: str | None = None
    model_arguments: str | None = None

    def __post_init__(self) -> None:
        if self.model_arguments is None:
            object.__setattr__(self, "model_arguments", self.arguments)

    @property
    def changed(self) -> bool:
        """Whether the call changed since its approval was asked for (only a denial goes)."""
        return self.requested_digest is not None

    @property
    def rewritten(self) -> bool:
        """Whether ``pre_tool_call`` handlers changed the model's arguments."""
        return self.model_arguments != self.arguments

    @property
    def parsed_arguments(self) -> Any:
        """The arguments as JSON values (the raw text when it is not JSON)."""
        try:
            return json.loads(self.arguments)
        except ValueError:
            return self.arguments

    def approve(self) -> ApprovalDecision:
        """Run the call with :attr:`arguments`, exactly."""
        return ApprovalDecision(call_id=self.call_id, action="approve", digest=self._bound())

    def deny(self, reason: str) -> ApprovalDecision:
        """Do not run it; the model sees ``reason`` as the call's (error) result.

        Raises:
            UsageError: ``reason`` is empty.
        """
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError("deny() needs a reason: the model sees it as the call's result")
        return ApprovalDecision(
            call_id=self.call_id, action="deny", digest=self._bound(), reason=reason
        )

    def edit(self, arguments: Mapping[str, Any] | str) -> ApprovalDecision:
        """Run it with ``arguments`` (a mapping, or a JSON object text) instead, exactly.

        The arguments are what the tool receives: no ``pre_tool_call`` handler changes them.

        Raises:
            UsageError: ``arguments`` is not a JSON object.
        """
        text = arguments if isinstance(arguments, str) else _dumps(arguments)
        _check_arguments(text, "edit()", shown=arguments)
        return ApprovalDecision(
            call_id=self.call_id, action="edit", digest=self._bound(), arguments=text
        )

    def _bound(self) -> str:
        # Computed from the fields the person was shown, never taken from ``digest``: a
        # copy whose arguments were changed and whose digest was kept is refused.
        return arguments_digest(self.call_id, self.tool_name, self.arguments, self.model_arguments)


def _check_arguments(text: object, what: str, *, shown: object = None) -> None:
    parsed: object = None
    if isinstance(text, str):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
    if not isinstance(parsed, dict):
        shown = text if shown is None else shown
        raise UsageError(f"{what} needs a JSON object of arguments, got {shown!r:.80}")


class UnknownApprovalError(UsageError, LookupError):
    """A decision names a call that is not waiting for approval.

    Attributes:
        call_id: The call the decision named.
    """

    def __init__(self, call_id: str, pending: Sequence[str], *, decided: bool = False) -> None:
        waiting = ", ".join(repr(c) for c in pending) or "none"
        what = (
            f"call {call_id!r} was decided already (its decision is recorded)"
            if decided
            else f"no pending call has id {call_id!r}"
        )
        super().__init__(f"{what}; pending: {waiting}")
        self.call_id = call_id


class ApprovalMismatchError(UsageError):
    """A decision was made for a call whose id, tool or arguments have changed since.

    Nothing was run or recorded. Decide again on the calls as they are now.

    Attributes:
        call_id: The call.
        expected: The digest the decision was made for.
        actual: The digest of the call as it is now.
    """

    def __init__(self, call_id: str, *, expected: str, actual: str) -> None:
        super().__init__(
            f"the decision for call {call_id!r} was made for other arguments (digest "
            f"{expected[:12]}, now {actual[:12]}); decide again on the pending call"
        )
        self.call_id = call_id
        self.expected = expected
        self.actual = actual


class ApprovalEditError(UsageError, ValueError):
    """An edit's arguments do not fit the tool: the person typed something it cannot take.

    Nothing was run or recorded; the call still waits. Show the message to the person and
    ask again.

    Attributes:
        call_id: The call.
        tool_name: Its tool.
        problem: What is wrong with the arguments.
    """

    def __init__(self, call_id: str, tool_name: str, problem: str) -> None:
        super().__init__(f"the edit of call {call_id!r} is refused: {problem}")
        self.call_id = call_id
        self.tool_name = tool_name
        self.problem = problem


def arguments_digest(
    call_id: str, tool_name: str, arguments: str, model_arguments: str | None = None
) -> str:
    """The SHA-256 hex digest of a call's id, tool name and arguments texts.

    ``model_arguments`` (the model's, when handlers changed them into ``arguments``) is
    part of it only when it differs from ``arguments``.
    """
    fields = [call_id, tool_name, arguments]
    if model_arguments is not None and model_arguments != arguments:
        fields.append(model_arguments)
    payload = json.dumps(fields, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
