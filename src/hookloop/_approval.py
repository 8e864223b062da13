"""Tool calls that wait for a person: the pending calls, the decisions, and their records.

A call needs approval when its tool says so (``@tool(requires_approval=...)``) or a
``pre_tool_call`` handler returns :class:`Defer`. The chat then ends with the call in
``response.pending_approvals``; ``agent.resume(decisions)`` goes on. Each pending call
carries a digest of its id, tool and arguments; a decision carries the digest it was made
for, so a decision about arguments that changed since (other than by an edit) is refused.

With a session recorder, the requests and decisions are also kept in a side session of the
same store (:func:`approval_session_id`), one record per message, so another process can
restore the session and resume.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ._errors import CorruptSessionError, UsageError
from ._messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage

__all__ = [
    "ApprovalDecision",
    "ApprovalMismatchError",
    "Defer",
    "PendingApproval",
    "UnknownApprovalError",
]

_RECORD = "hookloop.approval"


@dataclass(frozen=True, slots=True, kw_only=True)
class Defer:
    """Returned by a ``pre_tool_call`` handler: the call waits for a person's decision.

    Attributes:
        reason: Why, for the person deciding (``PendingApproval.reason``).
    """

    reason: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalDecision:
    """What a person decided about one pending call; make it with the call's methods.

    Attributes:
        call_id: The pending call.
        action: ``"approve"`` runs it, ``"deny"`` answers it with ``reason`` as an error
            the model sees, ``"edit"`` runs it with ``arguments`` instead.
        digest: The digest of the pending call the decision was made for.
        reason: For a denial, what the model is told.
        arguments: For an edit, the new arguments as a JSON object text.
    """

    call_id: str
    action: Literal["approve", "deny", "edit"]
    digest: str
    reason: str = ""
    arguments: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A tool call waiting for a person's decision.

    Attributes:
        call_id: The model's id for the call.
        tool_name: The tool it calls.
        arguments: Its arguments as the model sent them (a JSON object text).
        digest: A digest of the call id, tool and arguments (see :func:`arguments_digest`).
        reason: Why it needs approval: a :class:`Defer`'s reason, or empty.
        message_id: The assistant message that made the call.
        requested_digest: ``None``, unless the call in the history is no longer the one
            the approval was asked for (its tool or arguments were changed since): then
            the digest it was asked for, and only :meth:`deny` is accepted for it.
    """

    call_id: str
    tool_name: str
    arguments: str
    digest: str
    reason: str = ""
    message_id: str = ""
    requested_digest: str | None = None

    @property
    def changed(self) -> bool:
        """Whether the call changed since its approval was asked for (only a denial goes)."""
        return self.requested_digest is not None

    @property
    def parsed_arguments(self) -> Any:
        """The arguments as JSON values (the raw text when it is not JSON)."""
        try:
            return json.loads(self.arguments)
        except ValueError:
            return self.arguments

    def approve(self) -> ApprovalDecision:
        """Run the call as it is."""
        return ApprovalDecision(call_id=self.call_id, action="approve", digest=self.digest)

    def deny(self, reason: str) -> ApprovalDecision:
        """Do not run it; the model sees ``reason`` as the call's (error) result."""
        if not isinstance(reason, str) or not reason.strip():
            raise UsageError("deny() needs a reason: the model sees it as the call's result")
        return ApprovalDecision(
            call_id=self.call_id, action="deny", digest=self.digest, reason=reason
        )

    def edit(self, arguments: Mapping[str, Any] | str) -> ApprovalDecision:
        """Run it with ``arguments`` (a mapping, or a JSON object text) instead.

        Raises:
            UsageError: ``arguments`` is not a JSON object.
        """
        text = arguments if isinstance(arguments, str) else _dumps(arguments)
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise UsageError(f"edit() needs a JSON object of arguments, got {arguments!r:.80}")
        return ApprovalDecision(
            call_id=self.call_id, action="edit", digest=self.digest, arguments=text
        )


class UnknownApprovalError(UsageError, LookupError):
    """A decision names a call that is not waiting for approval.

    Attributes:
        call_id: The call the decision named.
    """

    def __init__(self, call_id: str, pending: Sequence[str]) -> None:
        waiting = ", ".join(repr(c) for c in pending) or "none"
        super().__init__(f"no pending call has id {call_id!r}; pending: {waiting}")
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


def arguments_digest(call_id: str, tool_name: str, arguments: str) -> str:
    """The SHA-256 hex digest of a call's id, tool name and raw arguments text."""
    payload = json.dumps([call_id, tool_name, arguments], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def approval_session_id(session_id: str) -> str:
    """The side session of a store that holds ``session_id``'s approval records."""
    side = f"{session_id}:approvals"
    if len(side) <= 256:
        return side
    return "approvals:" + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


def encode_request(pending: PendingApproval) -> UserMessage:
    """The record of a request, as a message of the side session."""
    return UserMessage(
        content=_dumps(
            {
                "record": _RECORD,
                "kind": "request",
                "message_id": pending.message_id,
                "call_id": pending.call_id,
                "tool_name": pending.tool_name,
                "arguments": pending.arguments,
                "digest": pending.digest,
                "reason": pending.reason,
            }
        )
    )


def encode_decision(decision: ApprovalDecision, message_id: str) -> UserMessage:
    """The record of a decision, as a message of the side session."""
    return UserMessage(
        content=_dumps(
            {
                "record": _RECORD,
                "kind": "decision",
                "message_id": message_id,
                "call_id": decision.call_id,
                "action": decision.action,
                "digest": decision.digest,
                "reason": decision.reason,
                "arguments": decision.arguments,
            }
        )
    )


def decode_records(
    session_id: str, records: Sequence[tuple[int, Message]]
) -> list[PendingApproval]:
    """The requests of the latest batch in a side session's records not decided yet.

    A call with a decision record counts as decided even if its result never came (the
    process died on the way): it is claimed, and never run a second time.

    Raises:
        CorruptSessionError: A record is not an approval record.
    """
    requests: list[PendingApproval] = []
    for seq, message in records:
        data = _record(session_id, seq, message)
        if data["kind"] != "request":
            continue
        fields = {
            k: data.get(k)
            for k in ("message_id", "call_id", "tool_name", "arguments", "digest", "reason")
        }
        if not all(isinstance(v, str) for v in fields.values()):
            raise CorruptSessionError(
                session_id=session_id, seq=seq, reason="an approval request with missing fields"
            )
        if fields["digest"] != arguments_digest(
            fields["call_id"],  # type: ignore[arg-type]
            fields["tool_name"],  # type: ignore[arg-type]
            fields["arguments"],  # type: ignore[arg-type]
        ):
            raise CorruptSessionError(
                session_id=session_id,
                seq=seq,
                reason="an approval request whose digest does not match its call",
            )
        if requests and requests[-1].message_id != fields["message_id"]:
            requests = []  # a later batch: the earlier one was decided
        requests.append(PendingApproval(**fields))  # type: ignore[arg-type]
    decided = decided_calls(session_id, records)
    return [r for r in requests if (r.message_id, r.call_id) not in decided]


def open_requests(
    requests: Sequence[PendingApproval], history: Sequence[Message]
) -> tuple[PendingApproval, ...]:
    """The requests still waiting, as the calls are in ``history``, in call order.

    A request waits while its call is in ``history`` and has no result there. What waits is
    the history's call (the one that runs), not the request's copy of it; a call whose tool
    or arguments changed since the request comes with ``requested_digest`` set.
    """
    if not requests:
        return ()
    message_id = requests[0].message_id
    calls: tuple[ToolCall, ...] | None = None
    answered: set[str] = set()
    for message in history:
        if isinstance(message, AssistantMessage) and message.id == message_id:
            calls = message.tool_calls
            answered = set()
        elif calls is not None and isinstance(message, ToolMessage):
            answered.add(message.tool_call_id)
    if calls is None:
        return ()
    by_id = {request.call_id: request for request in requests}
    still: list[PendingApproval] = []
    for call in calls:
        request = by_id.get(call.id)
        if request is None or call.id in answered:
            continue
        digest = arguments_digest(call.id, call.name, call.arguments)
        still.append(
            PendingApproval(
                call_id=call.id,
                tool_name=call.name,
                arguments=call.arguments,
                digest=digest,
                reason=request.reason,
                message_id=message_id,
                requested_digest=None if digest == request.digest else request.digest,
            )
        )
    return tuple(still)


def has_unanswered_call(history: Sequence[Message]) -> bool:
    """Whether some tool call in ``history`` has no result (so a call may still wait)."""
    calls: set[str] = set()
    for message in history:
        if isinstance(message, AssistantMessage):
            calls.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            calls.discard(message.tool_call_id)
    return bool(calls)


def decided_calls(session_id: str, records: Sequence[tuple[int, Message]]) -> set[tuple[str, str]]:
    """The (message id, call id) of every decision record in a side session's records.

    Raises:
        CorruptSessionError: A record is not an approval record.
    """
    decided: set[tuple[str, str]] = set()
    for seq, message in records:
        data = _record(session_id, seq, message)
        if data["kind"] == "decision":
            decided.add((str(data.get("message_id")), str(data.get("call_id"))))
    return decided


def _record(session_id: str, seq: int, message: Message) -> dict[str, Any]:
    data: object = None
    if isinstance(message, UserMessage) and isinstance(message.content, str):
        try:
            data = json.loads(message.content)
        except ValueError:
            data = None
    if (
        not isinstance(data, dict)
        or data.get("record") != _RECORD
        or data.get("kind") not in ("request", "decision")
    ):
        raise CorruptSessionError(session_id=session_id, seq=seq, reason="not an approval record")
    return data


def _dumps(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class ApprovalBook:
    """The requests of the latest batch that waited for approval, as this process saw them.

    The agent holds one; the loop fills it when a chat ends with pending calls. A session
    recorder's side session is the record that outlives the process.
    """

    __slots__ = ("requests",)

    def __init__(self) -> None:
        self.requests: tuple[PendingApproval, ...] = ()


def checked_decisions(
    pending: Sequence[PendingApproval], decisions: Iterable[ApprovalDecision]
) -> tuple[tuple[PendingApproval, ApprovalDecision], ...]:
    """Pair every pending call with its decision, in call order.

    Raises:
        UsageError: Nothing is pending, a decision is not an :class:`ApprovalDecision`, a
            call is decided twice or not at all.
        UnknownApprovalError: A decision names a call that is not pending.
        ApprovalMismatchError: An approval or edit was made for other arguments than the
            call's, or the call changed since its approval was asked for (a denial is
            always accepted).
    """
    if not pending:
        raise UsageError("nothing to resume: no tool call is waiting for approval")
    by_id = {p.call_id: p for p in pending}
    chosen: dict[str, ApprovalDecision] = {}
    for decision in decisions:
        if not isinstance(decision, ApprovalDecision):
            raise UsageError(
                "resume() takes decisions made with pending.approve(), .deny(reason) or "
                f".edit(arguments), got {type(decision).__name__}"
            )
        p = by_id.get(decision.call_id)
        if p is None:
            raise UnknownApprovalError(decision.call_id, list(by_id))
        if decision.call_id in chosen:
            raise UsageError(f"call {decision.call_id!r} is decided twice")
        # A denial runs nothing, so it stands whatever the call became since.
        if decision.action != "deny":
            if decision.digest != p.digest:
                raise ApprovalMismatchError(p.call_id, expected=decision.digest, actual=p.digest)
            if p.requested_digest is not None:
                raise ApprovalMismatchError(p.call_id, expected=p.requested_digest, actual=p.digest)
        chosen[decision.call_id] = decision
    missing = [c for c in by_id if c not in chosen]
    if missing:
        raise UsageError(f"every pending call needs a decision; undecided: {missing}")
    return tuple((p, chosen[p.call_id]) for p in pending)
