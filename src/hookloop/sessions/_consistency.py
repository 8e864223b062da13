"""Whether a session's record agrees with its log, and what ``repair()`` sets it to.

Every backend keeps a record per session (its ``last_seq``) next to the log of messages. An
append takes ``last_seq + 1``; if the record is behind the log, missing, or at the largest
seq the backend can hold, no append can succeed. Backends look here when an append fails,
so that the caller gets :class:`~hookloop.CorruptSessionError` saying what is wrong
instead of a conflict that no restore can resolve.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .._errors import CorruptSessionError

__all__ = ["MAX_SEQ", "RecordState"]

MAX_SEQ: Final = 2**63 - 1  # a signed 64-bit integer: SQLite's and PostgreSQL's limit


@dataclass(frozen=True, slots=True)
class RecordState:
    """A session's record and its log, read together.

    Attributes:
        session_id: The session.
        has_record: Whether the session's record exists.
        last_seq: The record's ``last_seq`` as stored (not checked).
        first: The lowest seq in the log, ``None`` for an empty log.
        top: The highest seq in the log, ``None`` for an empty log.
        count: How many messages the log holds.
        limit: The largest seq the backend can hold.
    """

    session_id: str
    has_record: bool
    last_seq: object
    first: int | None
    top: int | None
    count: int
    limit: int = MAX_SEQ

    def problem(self) -> str | None:
        """What is inconsistent, or ``None`` when an append can go through."""
        if not self.has_record:
            if not self.count:
                return None
            return (
                f"its record is missing while {self.count} messages remain "
                f"(seq {self.first} to {self.top})"
            )
        last = self.last_seq
        if isinstance(last, bool) or not isinstance(last, int):
            return f"last_seq is {last!r}, not an integer"
        if self.top is not None and self.top > last:
            return f"a message is stored at seq {self.top}, above its record's last_seq {last}"
        if last >= self.limit:
            return f"its last_seq {last} leaves no seq for another message"
        return None

    def check(self) -> None:
        """Raise :class:`CorruptSessionError` if the record and the log disagree."""
        problem = self.problem()
        if problem is not None:
            raise CorruptSessionError(session_id=self.session_id, seq=None, reason=problem)

    def repaired_last_seq(self) -> int:
        """The ``last_seq`` that agrees with the log: the stored one if it does, else the top.

        Raises:
            CorruptSessionError: The log itself reaches the limit; only a new session
                (``export`` what is readable) can go on.
        """
        if self.problem() is None:
            assert isinstance(self.last_seq, int)
            return self.last_seq
        top = self.top or 0
        if top >= self.limit:
            raise CorruptSessionError(
                session_id=self.session_id,
                seq=top,
                reason="a message is stored at the largest seq there is: no repair can make "
                "room after it; export the session and start a new one",
            )
        return top
