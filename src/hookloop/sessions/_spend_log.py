"""The spend records of a session: what its chats spent, kept beside its messages.

With a session recorder, each model call's spend is appended to the session's side session
(the one that holds its approval records, :func:`~hookloop._approval_log.approval_session_id`)
before its assistant message is stored, and once more when the chat ends. A record holds
running totals, not a call's own figures:

- ``total``: what the session had spent when the record was written (requests, tool calls,
  tokens with their cost, seconds);
- ``base``: what it had spent before the record's chat began;
- ``chat``: the chat's key: a durable turn's workflow id, or an id drawn for the chat.

Totals, not sums, because a store may drop old records (``Retention(max_messages=...)``
keeps the newest of each session, side sessions included): the newest record alone says
what the session spent. A session's spend only grows, so the newest record is the one with
the most tokens (then requests, tool calls, seconds), whatever order the records were
stored in. A durable turn run again after a crash starts from the ``base`` of its own
records (its recorded steps are counted again as they replay, once) and writes its
records again under the same message ids, which a store keeps once.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .._approval_log import SPEND_RECORD as RECORD
from .._errors import CorruptSessionError, InvalidMessageError
from .._limits import Spend
from .._messages import Message, UserMessage, dump_usage, load_usage

__all__ = ["SpendRecord", "encode_spend", "is_spend_record", "latest_spend"]


@dataclass(frozen=True, slots=True)
class SpendRecord:
    """One spend record: the session's totals before the chat and when it was written."""

    chat: str
    base: Spend
    total: Spend

    def before(self, chat: str) -> Spend:
        """What the session spent before chat ``chat`` began, this being the newest record."""
        return self.base if chat == self.chat else self.total


def encode_spend(chat: str, key: str, base: Spend, total: Spend) -> UserMessage:
    """The record of ``total`` in chat ``chat``, as a message of the side session.

    Its id comes from the chat and ``key`` (the assistant message's id, or ``"end"``), so a
    durable turn run again writes the very record its first run wrote, which the store then
    keeps once.
    """
    digest = hashlib.sha256(f"{chat}\0{key}".encode("utf-8", "surrogatepass")).hexdigest()
    content = {"record": RECORD, "chat": chat, "base": _dump(base), "total": _dump(total)}
    return UserMessage(
        content=json.dumps(content, ensure_ascii=False, separators=(",", ":")),
        id=f"msg_spend_{digest[:32]}",
    )


def is_spend_record(data: dict[str, Any]) -> bool:
    """Whether a side-session record's JSON object is a spend record."""
    return data.get("record") == RECORD


def latest_spend(
    session_id: str,
    records: Sequence[tuple[int, Message]],
    unreadable: Iterable[CorruptSessionError] = (),
) -> SpendRecord | None:
    """The newest spend record of a side session's records; ``None`` when it has none.

    Records before the side session's last repair record
    (:meth:`~hookloop.sessions.SessionRecorder.repair_approvals`) that cannot be read are
    set aside; approval records are not looked at otherwise.

    Raises:
        CorruptSessionError: A record after the last repair cannot be read, or a spend
            record's fields are not a spend's.
    """
    repaired = max((seq for seq, message in records if _is_repair(message)), default=0)
    for error in unreadable:
        if (error.seq or 0) > repaired:
            raise error
    newest: SpendRecord | None = None
    for seq, message in records:
        data = _spend_data(message)
        if data is None:
            continue
        try:
            record = SpendRecord(data["chat"], _load(data["base"]), _load(data["total"]))
            if not isinstance(record.chat, str):
                raise TypeError("chat")
        except (KeyError, TypeError, ValueError, InvalidMessageError) as exc:
            if seq < repaired:
                continue
            reason = f"a spend record that cannot be read ({exc!r})"
            raise CorruptSessionError(session_id=session_id, seq=seq, reason=reason) from None
        if newest is None or _order(record.total) >= _order(newest.total):
            newest = record
    return newest


def _is_repair(message: Message) -> bool:
    content = message.content if isinstance(message, UserMessage) else None
    if not (isinstance(content, str) and "repair" in content):
        return False
    try:
        data = json.loads(content)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("kind") == "repair"


def _spend_data(message: Message) -> dict[str, Any] | None:
    if not (isinstance(message, UserMessage) and isinstance(message.content, str)):
        return None
    if RECORD not in message.content:  # approval records: not parsed here
        return None
    try:
        data = json.loads(message.content)
    except ValueError:
        return None
    return data if isinstance(data, dict) and is_spend_record(data) else None


def _order(spend: Spend) -> tuple[int, int, int, float]:
    # Tokens first: a replayed turn takes them from its recorded steps, exactly (a recorded
    # answer's retried requests are not recorded).
    return (spend.usage.total_tokens, spend.requests, spend.tool_calls, spend.seconds)


def _dump(spend: Spend) -> dict[str, object]:
    return {
        "requests": spend.requests,
        "tool_calls": spend.tool_calls,
        "seconds": spend.seconds,
        "usage": dump_usage(spend.usage),
    }


def _load(data: object) -> Spend:
    if not isinstance(data, dict):
        raise TypeError("not an object")
    requests, tool_calls, seconds = data["requests"], data["tool_calls"], data["seconds"]
    if not (_count(requests) and _count(tool_calls)):
        raise TypeError("requests and tool_calls must be ints of 0 or more")
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise TypeError("seconds must be a number of 0 or more")
    return Spend(
        requests=requests,
        tool_calls=tool_calls,
        usage=load_usage(data["usage"]),
        seconds=float(seconds),
    )


def _count(value: object) -> bool:
    return type(value) is int and value >= 0
