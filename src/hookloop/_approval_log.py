"""The approval records that outlive a process, and what they say is still to do.

With a session recorder, each request and each decision is appended to a side session of
the same store (:func:`approval_session_id`), one record per message. :func:`read_log`
reads the records into an :class:`ApprovalLog`: the latest batch's requests, the decisions
recorded on them, and the calls a repair set aside. :func:`approval_state` holds the log
against the history: which calls still wait, and how each call that was decided but has no
result yet is answered now (a :class:`Ruling`), which is how a chat recovers from a process
that died between recording its decisions and committing the results:

- a denied call is answered with its denial;
- when only part of the batch's decisions was recorded, the resume that recorded them ran
  nothing yet (every decision is recorded before any call runs): an approved call runs, once,
  on the resume that decides the rest;
- when every decision was recorded, the approved calls may have run: the loop runs an
  idempotent tool again and answers any other with :class:`~hookloop.ToolResultLostError`;
- a call a repair set aside (:meth:`SessionRecorder.repair_approvals`) is answered
  :data:`SET_ASIDE_TEXT`.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from ._approval import (
    NO_REASON,
    ApprovalDecision,
    ApprovalEditError,
    ApprovalMismatchError,
    PendingApproval,
    UnknownApprovalError,
    arguments_digest,
)
from ._errors import CorruptSessionError, ToolError, UsageError
from ._messages import AssistantMessage, Message, ToolMessage, UserMessage
from ._run_context import MissingDepsError

if TYPE_CHECKING:
    from ._tools import ScopeRegistry
    from .context._history import ChatHistory

_RECORD = "hookloop.approval"
SPEND_RECORD: Final = "hookloop.usage"
"""The side session also holds the session's spend records, which this log passes over."""
VERDICT_RECORD: Final = "hookloop.verdict"
"""The side session also holds the guardrails' verdict records (``_guardrail_log.py``), which
this log passes over."""
_KINDS = ("request", "decision", "repair")
SIDE_SUFFIX = ":approvals"
"""An approval side session's id is its session's id with this suffix..."""
SIDE_PREFIX = "approvals:"
"""...or, when that would be too long, this prefix and 64 lowercase hex digits (a hash)."""
_HASHED_SIDE = re.compile(r"approvals:[0-9a-f]{64}")

SET_ASIDE_TEXT = (
    "no result: the approval record of this call was damaged and set aside by a repair, so "
    "whether it ran is not known; check before calling it again"
)
"""What the model reads for a call whose approval record a repair set aside."""


def approval_session_id(session_id: str) -> str:
    """The side session of a store that holds ``session_id``'s approval records."""
    side = session_id + SIDE_SUFFIX
    if len(side) <= 256:
        return side
    return SIDE_PREFIX + hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()


def is_approval_session(session_id: str) -> bool:
    """Whether ``session_id`` has the form of an approval side session (not a conversation)."""
    return session_id.endswith(SIDE_SUFFIX) or _HASHED_SIDE.fullmatch(session_id) is not None


# --- records -------------------------------------------------------------------------------


def encode_request(pending: PendingApproval) -> UserMessage:
    """The record of a request, as a message of the side session."""
    return _message(
        kind="request",
        message_id=pending.message_id,
        call_id=pending.call_id,
        tool_name=pending.tool_name,
        arguments=pending.arguments,
        model_arguments=pending.model_arguments,
        digest=pending.digest,
        reason=pending.reason,
    )


def encode_decision(decision: ApprovalDecision, message_id: str) -> UserMessage:
    """The record of a decision, as a message of the side session."""
    return _message(
        kind="decision",
        message_id=message_id,
        call_id=decision.call_id,
        action=decision.action,
        digest=decision.digest,
        reason=decision.reason,
        arguments=decision.arguments,
    )


def encode_repair(message_id: str, call_ids: Sequence[str]) -> UserMessage:
    """The record of a repair: the records before it are set aside, and so are these calls."""
    return _message(kind="repair", message_id=message_id, calls=list(call_ids))


def _message(**fields: object) -> UserMessage:
    return UserMessage(
        content=json.dumps({"record": _RECORD, **fields}, ensure_ascii=False, separators=(",", ":"))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ApprovalLog:
    """What the approval records say about the latest batch of calls that waited.

    Attributes:
        message_id: The assistant message that made the batch (empty: no batch).
        requests: The calls of the batch that waited, as they were asked for.
        decisions: The decisions recorded on them, in the order they were recorded.
        set_aside: The calls of the batch a repair set aside.
    """

    message_id: str = ""
    requests: tuple[PendingApproval, ...] = ()
    decisions: tuple[ApprovalDecision, ...] = ()
    set_aside: frozenset[str] = frozenset()

    def decided(self, message_id: str, call_id: str) -> bool:
        """Whether a decision on that call of that batch is recorded."""
        return message_id == self.message_id and any(d.call_id == call_id for d in self.decisions)


def read_log(
    session_id: str,
    records: Sequence[tuple[int, Message]],
    unreadable: Iterable[CorruptSessionError] = (),
) -> ApprovalLog:
    """The log of a side session's records (``unreadable``: those the store could not read).

    Records before the last repair record are set aside, readable or not.

    Raises:
        CorruptSessionError: A record after the last repair is not an approval record, or
            a request's digest does not match its call, or an approval or edit was
            recorded for another digest than its request's.
    """
    parsed: list[tuple[int, dict[str, Any] | CorruptSessionError]] = []
    for seq, message in records:
        data = _parse(session_id, seq, message)
        if data is not PASSED_OVER:  # spend and verdict records share the side session
            parsed.append((seq, data))
    parsed += [(error.seq or 0, error) for error in unreadable]
    parsed.sort(key=lambda item: item[0])
    repaired = max(
        (seq for seq, data in parsed if isinstance(data, dict) and data["kind"] == "repair"),
        default=0,
    )
    log = ApprovalLog()
    for seq, data in parsed:
        if seq < repaired:
            continue
        if isinstance(data, CorruptSessionError):
            raise data
        log = _apply(session_id, seq, data, log)
    return log


def _apply(session_id: str, seq: int, data: dict[str, Any], log: ApprovalLog) -> ApprovalLog:
    message_id = data.get("message_id")
    if not isinstance(message_id, str):
        raise _corrupt(session_id, seq, f"an approval {data['kind']} without its message id")
    if data["kind"] == "repair":
        calls = data.get("calls")
        if not isinstance(calls, list) or not all(isinstance(c, str) for c in calls):
            raise _corrupt(session_id, seq, "an approval repair without its calls")
        return ApprovalLog(message_id=message_id, set_aside=frozenset(calls))
    if data["kind"] == "request":
        request = _request(session_id, seq, data, message_id)
        if message_id != log.message_id:
            return ApprovalLog(message_id=message_id, requests=(request,))  # a later batch
        kept = tuple(r for r in log.requests if r.call_id != request.call_id)
        return ApprovalLog(
            message_id=message_id,
            requests=(*kept, request),
            decisions=log.decisions,
            set_aside=log.set_aside,
        )
    if message_id != log.message_id:
        return log  # a decision on an earlier batch
    decision = _decision(session_id, seq, data)
    asked = next((r for r in log.requests if r.call_id == decision.call_id), None)
    if asked is not None and decision.action != "deny" and decision.digest != asked.digest:
        raise _corrupt(
            session_id, seq, "an approval decision made for another digest than its request's"
        )
    return ApprovalLog(
        message_id=message_id,
        requests=log.requests,
        decisions=(*log.decisions, decision),
        set_aside=log.set_aside,
    )


def _request(session_id: str, seq: int, data: dict[str, Any], message_id: str) -> PendingApproval:
    fields = {k: data.get(k) for k in ("call_id", "tool_name", "arguments", "digest", "reason")}
    # Records of versions before model_arguments were kept: the arguments are the model's.
    fields["model_arguments"] = data.get("model_arguments", fields["arguments"])
    if not all(isinstance(v, str) for v in fields.values()):
        raise _corrupt(session_id, seq, "an approval request with missing fields")
    text: dict[str, str] = fields  # type: ignore[assignment]  # all str, checked above
    if text["digest"] != arguments_digest(
        text["call_id"], text["tool_name"], text["arguments"], text["model_arguments"]
    ):
        raise _corrupt(session_id, seq, "an approval request whose digest does not match its call")
    return PendingApproval(message_id=message_id, **text)


def _decision(session_id: str, seq: int, data: dict[str, Any]) -> ApprovalDecision:
    reason = data.get("reason")
    if data.get("action") == "deny" and (not isinstance(reason, str) or not reason.strip()):
        reason = NO_REASON  # a denial recorded without a reason (an earlier version)
    try:
        return ApprovalDecision(
            call_id=data.get("call_id"),  # type: ignore[arg-type]  # checked by the class
            action=data.get("action"),  # type: ignore[arg-type]
            digest=data.get("digest"),  # type: ignore[arg-type]
            reason=reason,  # type: ignore[arg-type]
            arguments=data.get("arguments"),
        )
    except UsageError as exc:
        reason = f"an approval decision that cannot be used: {exc}"
        raise _corrupt(session_id, seq, reason) from None


PASSED_OVER: Final[dict[str, Any]] = {}
"""What :func:`_parse` returns for a record of the side session that is not an approval's:
a spend record (``sessions/_spend_log.py``) or a verdict record (``_guardrail_log.py``)."""


def _parse(session_id: str, seq: int, message: Message) -> dict[str, Any] | CorruptSessionError:
    data: object = None
    if isinstance(message, UserMessage) and isinstance(message.content, str):
        try:
            data = json.loads(message.content)
        except ValueError:
            data = None
    if isinstance(data, dict) and data.get("record") == _RECORD and data.get("kind") in _KINDS:
        return data
    if isinstance(data, dict) and data.get("record") in (SPEND_RECORD, VERDICT_RECORD):
        return PASSED_OVER
    return _corrupt(session_id, seq, "not an approval record")


def _corrupt(session_id: str, seq: int, reason: str) -> CorruptSessionError:
    return CorruptSessionError(session_id=session_id, seq=seq, reason=reason)


# --- what is still to do -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ruling:
    """How the loop answers one decided call of a batch.

    Attributes:
        call_id: The call.
        action: ``"run"`` runs it with ``arguments``, exactly (no handler changes them);
            ``"lost"`` means it may have run: an idempotent tool runs again with
            ``arguments``, any other is answered with ``ToolResultLostError``; ``"deny"``
            answers it with ``reason``; ``"set_aside"`` with :data:`SET_ASIDE_TEXT`.
        arguments: For ``"run"`` and ``"lost"``, the arguments the tool receives.
        reason: For ``"deny"``, what the model is told.
    """

    call_id: str
    action: Literal["run", "lost", "deny", "set_aside"]
    arguments: str = ""
    reason: str = ""

    def answer(self) -> str:
        """The text a ``"deny"`` or ``"set_aside"`` ruling answers its call with."""
        return f"denied: {self.reason}" if self.action == "deny" else SET_ASIDE_TEXT


@dataclass(frozen=True, slots=True)
class ApprovalState:
    """Where the latest batch stands against the history.

    Attributes:
        message: The assistant message of the batch, when some call of it is open.
        pending: The calls that wait for a decision, in call order.
        rulings: How each call decided (or set aside) earlier and still without a result is
            answered now, in call order.
    """

    message: AssistantMessage | None = None
    pending: tuple[PendingApproval, ...] = ()
    rulings: tuple[Ruling, ...] = ()


NOTHING = ApprovalState()


def approval_state(log: ApprovalLog, history: Sequence[Message]) -> ApprovalState:
    """What the log says is still to do about the calls ``history`` has not answered.

    A request waits while its call is in ``history`` without a result and no decision on
    it is recorded. What waits is the request as it was asked for (the arguments the tool
    will receive), while the history's call is the one it was asked about; a call whose tool
    or arguments changed since comes as the history has it, with ``requested_digest`` set.
    """
    if not log.message_id:
        return NOTHING
    message: AssistantMessage | None = None
    answered: set[str] = set()
    for item in history:
        if isinstance(item, AssistantMessage) and item.id == log.message_id:
            message, answered = item, set()
        elif message is not None and isinstance(item, ToolMessage):
            answered.add(item.tool_call_id)
    if message is None:
        return NOTHING
    requests = {r.call_id: r for r in log.requests}
    decisions = {d.call_id: d for d in log.decisions}
    pending: list[PendingApproval] = []
    decided: list[tuple[int, PendingApproval, ApprovalDecision]] = []
    rulings: list[tuple[int, Ruling]] = []
    for index, call in enumerate(message.tool_calls):
        if call.id in answered:
            continue
        if call.id in log.set_aside:
            rulings.append((index, Ruling(call.id, "set_aside")))
            continue
        request = requests.get(call.id)
        if request is None:
            continue  # not a call that waited: the request repair answers it if need be
        if call.name != request.tool_name or call.arguments != request.model_arguments:
            request = PendingApproval(
                call_id=call.id,
                tool_name=call.name,
                arguments=call.arguments,
                digest=arguments_digest(call.id, call.name, call.arguments),
                reason=request.reason,
                message_id=message.id,
                requested_digest=request.digest,
            )
        decision = decisions.get(call.id)
        if decision is None:
            pending.append(request)
        else:
            decided.append((index, request, decision))
    # Every decision of a resume is recorded before any call runs: while some call of the
    # batch still waits, none of the decided ones has started.
    started = not pending
    for index, request, decision in decided:
        rulings.append((index, _recovered(request, decision, started=started)))
    rulings.sort(key=lambda item: item[0])
    if not pending and not rulings:
        return NOTHING
    return ApprovalState(message, tuple(pending), tuple(r for _, r in rulings))


def _recovered(request: PendingApproval, decision: ApprovalDecision, *, started: bool) -> Ruling:
    if decision.action == "deny":
        return Ruling(request.call_id, "deny", reason=decision.reason)
    if request.changed:  # the call in the history is not the one approved: never run it
        return Ruling(request.call_id, "set_aside")
    arguments = request.arguments if decision.arguments is None else decision.arguments
    return Ruling(request.call_id, "lost" if started else "run", arguments)


def rulings_for(
    decided: Iterable[tuple[PendingApproval, ApprovalDecision]],
) -> tuple[Ruling, ...]:
    """How the calls decided now are answered: exactly what the person approved or typed."""
    out: list[Ruling] = []
    for pending, decision in decided:
        if decision.action == "deny":
            out.append(Ruling(pending.call_id, "deny", reason=decision.reason))
        elif decision.action == "edit":
            assert decision.arguments is not None  # an edit has them (checked when made)
            out.append(Ruling(pending.call_id, "run", decision.arguments))
        else:
            out.append(Ruling(pending.call_id, "run", pending.arguments))
    return tuple(out)


def in_call_order(message: AssistantMessage, rulings: Iterable[Ruling]) -> tuple[Ruling, ...]:
    """``rulings`` sorted in the order of ``message``'s calls."""
    order = {call.id: index for index, call in enumerate(message.tool_calls)}
    return tuple(sorted(rulings, key=lambda ruling: order[ruling.call_id]))


def has_unanswered_call(history: Sequence[Message]) -> bool:
    """Whether some tool call in ``history`` has no result (so a call may still wait)."""
    calls: set[str] = set()
    for message in history:
        if isinstance(message, AssistantMessage):
            calls.update(call.id for call in message.tool_calls)
        elif isinstance(message, ToolMessage):
            calls.discard(message.tool_call_id)
    return bool(calls)


def open_calls(history: Sequence[Message]) -> tuple[str, tuple[str, ...]]:
    """The last assistant message with tool calls, and its calls without a result."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answered = {m.tool_call_id for m in history[index + 1 :] if isinstance(m, ToolMessage)}
            return message.id, tuple(c.id for c in message.tool_calls if c.id not in answered)
    return "", ()


class ApprovalBook:
    """The requests of the latest batch that waited for approval, as this process saw them.

    The agent holds one; the loop fills it when a chat ends with pending calls. A session
    recorder's side session is the record that outlives the process.
    """

    __slots__ = ("requests",)

    def __init__(self) -> None:
        self.requests: tuple[PendingApproval, ...] = ()

    def log(self) -> ApprovalLog:
        """The requests as a log (this process records no decisions apart from the calls)."""
        requests = self.requests
        return ApprovalLog(message_id=requests[0].message_id if requests else "", requests=requests)


async def current_state(
    plugins: Iterable[object], book: ApprovalBook, history: ChatHistory
) -> ApprovalState:
    """The latest batch's pending calls and decided calls without results.

    The log comes from the first plugin with an ``approval_log`` (a session recorder, whose
    records outlive the process, and which may restore ``history`` as it reads them), else
    from ``book`` (this process's requests).
    """
    # Every chat asks: with nothing recorded, no log is made and the history is not read
    # (bench/loop.py, window_ratio_100k_to_100).
    log: ApprovalLog
    for plugin in plugins:
        read = getattr(plugin, "approval_log", None)
        if read is not None:
            log = await read()
            break
    else:
        if not book.requests:
            return NOTHING
        log = book.log()
    if not log.message_id:
        return NOTHING
    return approval_state(log, history.messages)


def check_deps(scopes: ScopeRegistry, rulings: Iterable[Ruling], message: AssistantMessage) -> None:
    """Refuse, before anything is recorded, a call to run whose tool needs deps (none given).

    Raises:
        MissingDepsError: A call of ``message`` that runs by its ruling takes
            ``RunContext[Deps]``.
    """
    names = {call.id: call.name for call in message.tool_calls}
    for ruling in rulings:
        if ruling.action not in ("run", "lost"):
            continue
        found = scopes.lookup(names[ruling.call_id])
        if found is not None and found[0].needs_deps:
            raise MissingDepsError(found[0].name)


def checked_decisions(
    pending: Sequence[PendingApproval],
    decisions: Iterable[ApprovalDecision],
    decided: Iterable[Ruling] = (),
) -> tuple[tuple[PendingApproval, ApprovalDecision], ...]:
    """Pair every pending call with its decision, in call order.

    Each approval or edit is compared with the digest of the pending call as the runtime
    has it (from its own record), never taken on trust. ``decided`` are the calls of the
    batch decided earlier, which a decision cannot name again.

    Raises:
        UsageError: A decision is not an :class:`ApprovalDecision`, or a call is decided
            twice or not at all.
        UnknownApprovalError: A decision names a call that is not pending.
        ApprovalMismatchError: An approval or edit was made for other arguments than the
            call's, or the call changed since its approval was asked for (a denial is
            always accepted).
    """
    if isinstance(decisions, (str, bytes, Mapping)) or not isinstance(decisions, Iterable):
        raise UsageError(
            "resume() takes a list of decisions made with pending.approve(), .deny(reason) or "
            f".edit(arguments), got {type(decisions).__name__}"
        )
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
            earlier = any(r.call_id == decision.call_id for r in decided)
            raise UnknownApprovalError(decision.call_id, list(by_id), decided=earlier)
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


def check_edit(decision: ApprovalDecision, tool_name: str, scopes: ScopeRegistry) -> None:
    """Refuse an edit whose arguments the tool cannot take, before anything runs.

    Raises:
        ApprovalEditError: The arguments do not validate against the tool's parameters.
    """
    if decision.action != "edit" or decision.arguments is None:
        return
    found = scopes.lookup(tool_name)
    if found is None:  # the tool is gone: the call is answered as an unknown tool's
        return
    try:
        found[0].validate(decision.call_id, decision.arguments)
    except ToolError as exc:
        raise ApprovalEditError(decision.call_id, tool_name, str(exc)) from None
