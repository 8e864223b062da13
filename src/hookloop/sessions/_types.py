"""The values session stores take and return."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, Literal, NotRequired, TypedDict

from .._errors import UsageError
from .._messages import Message

__all__ = [
    "EXPORT_FORMAT",
    "MAX_SESSION_ID_LENGTH",
    "SCHEMA_VERSION",
    "ExportedMessage",
    "ExportedSession",
    "Retention",
    "SessionInfo",
    "StoredMessage",
    "UnreadableMessage",
]

SCHEMA_VERSION = 1
"""The version of the stores' schema (tables, keys) this hookloop writes and reads."""

EXPORT_FORMAT: Final = "hookloop.session"
"""The ``format`` field of :meth:`SessionStore.export`'s result."""

MAX_SESSION_ID_LENGTH = 256


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredMessage:
    """A message as a session holds it.

    Attributes:
        seq: Its sequence number in the session: 1 for the first message ever appended, one
            more for each later one. Never reused, also after retention removed older ones.
        message: The message.
    """

    seq: int
    message: Message


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """What a store knows about one session besides its messages.

    Attributes:
        session_id: The session's id.
        parent_id: The session it was forked from (or opened as a continuation of).
        created_at: When it was created (UTC).
        updated_at: When a message was last appended to it (UTC).
        message_count: Messages it holds now (after retention).
        last_seq: The sequence number of its last message; 0 before the first.
    """

    session_id: str
    parent_id: str | None
    created_at: datetime
    updated_at: datetime
    message_count: int
    last_seq: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """What a store keeps; every limit is off unless given.

    Attributes:
        max_messages: Per session, only the newest ``max_messages`` messages are kept: each
            append removes what falls out. Sequence numbers are not renumbered. A restored
            history may then start with a tool result whose call was removed; the agent's
            request repair drops it. A session's side records (approval requests and
            decisions, spend, guardrail verdicts) are kept whole.
        max_sessions: :meth:`SessionStore.prune` keeps only the ``max_sessions`` most
            recently updated sessions.
        max_age: :meth:`SessionStore.prune` deletes sessions not updated for longer.

    Raises:
        UsageError: A limit that is not positive.
    """

    max_messages: int | None = None
    max_sessions: int | None = None
    max_age: timedelta | None = None

    def __post_init__(self) -> None:
        for name in ("max_messages", "max_sessions"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise UsageError(f"Retention({name}=...) must be a positive int, got {value!r}")
        if self.max_age is not None and (
            not isinstance(self.max_age, timedelta) or self.max_age <= timedelta(0)
        ):
            raise UsageError(
                f"Retention(max_age=...) must be a positive timedelta, got {self.max_age!r}"
            )

    @property
    def prunes(self) -> bool:
        """Whether :meth:`SessionStore.prune` has anything to do."""
        return self.max_sessions is not None or self.max_age is not None


class ExportedMessage(TypedDict):
    """One message of an exported session."""

    seq: int
    message: dict[str, Any]


class UnreadableMessage(TypedDict):
    """A message ``export(readable_only=True)`` left out: where it is and what is wrong."""

    seq: int | None
    reason: str


class ExportedSession(TypedDict):
    """A session as :meth:`SessionStore.export` returns it: plain JSON values only.

    ``unreadable`` is there only in an export with ``readable_only=True``.
    """

    format: Literal["hookloop.session"]
    version: int
    message_format: int
    session_id: str
    parent_id: str | None
    created_at: str
    updated_at: str
    messages: list[ExportedMessage]
    unreadable: NotRequired[list[UnreadableMessage]]
