"""Guardrail verdicts in the session log: why a message is missing, changed or refused.

With a session recorder, every verdict that stopped or changed something
(``on_guardrail_verdict``) is appended, before the loop acts on it, to the session's side
session (the one that holds its approval records, :func:`approval_session_id`), one record
per message. The text checked is never in a record (a blocked message may hold the very
data the guardrail kept out); a redaction's replacement is, as the history holds it.
:func:`read_verdicts` reads them back.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._approval_log import VERDICT_RECORD, approval_session_id
from ._errors import CorruptSessionError
from ._messages import UserMessage
from ._verdict import GuardrailPosition, Verdict
from .hooks._contexts import GuardrailVerdictContext

if TYPE_CHECKING:
    from .sessions._base import SessionStore
    from .sessions._recorder import SessionRecorder

__all__ = ["VERDICT_RECORD", "VerdictRecord", "encode_verdict", "read_verdicts", "verdict_writer"]


@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictRecord:
    """A guardrail verdict as the session log keeps it.

    Attributes:
        seq: Its place in the side session (records of one session are in order).
        position: Where the guardrail checked.
        guardrail: Its name.
        verdict: What it decided (``data`` as it read back from JSON).
        message_id: The message checked (see :class:`~hookloop.guardrails.GuardrailVerdictContext`).
        call_id: The tool call, at the tool positions.
    """

    seq: int
    position: GuardrailPosition
    guardrail: str
    verdict: Verdict
    message_id: str | None
    call_id: str | None


def encode_verdict(ctx: GuardrailVerdictContext) -> UserMessage:
    """The record of a verdict, as a message of the side session."""
    v = ctx.verdict
    record = {
        "record": VERDICT_RECORD,
        "position": ctx.position,
        "guardrail": ctx.guardrail,
        "action": v.action,
        "reason": v.reason,
        "data": dict(v.data),
        "replacement": v.replacement,
        "message_id": ctx.message_id,
        "call_id": ctx.call_id,
    }
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), default=str)
    return UserMessage(content=text)


def is_verdict_record(data: dict[str, Any]) -> bool:
    """Whether a side session's parsed record is a verdict record."""
    return data.get("record") == VERDICT_RECORD


def verdict_writer(
    recorder: SessionRecorder,
) -> Callable[[GuardrailVerdictContext], Awaitable[None]]:
    """The ``on_guardrail_verdict`` handler a session recorder registers (at ``RECORD``)."""

    async def record_verdict(ctx: GuardrailVerdictContext) -> None:
        session_id = recorder.session_id
        if session_id is not None:
            await recorder.store.append(approval_session_id(session_id), encode_verdict(ctx))

    record_verdict.__qualname__ = "SessionRecorder._on_guardrail_verdict"
    return record_verdict


async def read_verdicts(store: SessionStore, session_id: str) -> tuple[VerdictRecord, ...]:
    """The guardrail verdicts a session recorder kept for ``session_id``, in order.

    Raises:
        CorruptSessionError: A verdict record cannot be read.
    """
    side = approval_session_id(session_id)
    records = await store.records(side)
    kept: list[VerdictRecord] = []
    for record in records:
        message = record.message
        content = message.content
        try:
            data = json.loads(content) if isinstance(content, str) else None
        except ValueError:
            data = None
        if not isinstance(data, dict) or not is_verdict_record(data):
            continue  # an approval record, or not ours
        try:
            verdict = Verdict(
                action=data["action"],
                reason=data["reason"],
                data=data["data"],
                replacement=data["replacement"],
            )
            kept.append(
                VerdictRecord(
                    seq=record.seq,
                    position=data["position"],
                    guardrail=data["guardrail"],
                    verdict=verdict,
                    message_id=data["message_id"],
                    call_id=data["call_id"],
                )
            )
        except Exception as exc:  # a damaged record: say where
            raise CorruptSessionError(
                session_id=side, seq=record.seq, reason=f"a guardrail verdict record: {exc}"
            ) from exc
    return tuple(kept)
