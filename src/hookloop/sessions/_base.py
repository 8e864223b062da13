"""The session store contract: what every backend does, and the values it returns."""

from __future__ import annotations

import abc
import math
from datetime import UTC, datetime
from types import TracebackType
from typing import TYPE_CHECKING

from .._errors import CorruptSessionError, SessionNotFoundError, UsageError
from .._messages import Message, dump_messages
from .._stores._checks import check_limit
from ._codec import MESSAGE_FORMAT
from ._types import (
    EXPORT_FORMAT,
    MAX_SESSION_ID_LENGTH,
    ExportedSession,
    Retention,
    SessionInfo,
    StoredMessage,
)

if TYPE_CHECKING:
    from ._recorder import SessionRecorder

__all__ = ["SessionStore", "check_expected_seq", "check_session_id", "utc"]


class SessionStore(abc.ABC):
    """An append-only log of messages per session, kept in a database.

    Every message appended gets the next sequence number of its session and is committed
    before :meth:`append` returns. Appends never overwrite: two writers appending to one
    session both succeed with distinct sequence numbers, or, when a writer says which
    sequence number it expects to follow (``expected_seq``), the later one fails with
    :class:`~hookloop.SessionConflictError` and writes nothing. An append is
    idempotent by message id, so retrying one whose outcome is unknown (a dropped
    connection) is safe.

    A store connects on first use, once per event loop (threads running their own loops
    may share one store); ``async with store:`` closes the running loop's connections.
    Backends: :class:`~hookloop.sessions.SQLiteSessionStore` (a file, the
    default), :class:`~hookloop.sessions.PostgresSessionStore` and
    :class:`~hookloop.sessions.RedisSessionStore` (several processes or machines).

    Reading a message that cannot be decoded raises
    :class:`~hookloop.CorruptSessionError` naming the session and the sequence
    number; the other sessions stay readable. A store whose schema a newer hookloop wrote
    raises :class:`~hookloop.SessionSchemaError` on first use.

    A backend implements storage only: ``_append_message``, ``_read_records``,
    ``_read_info``, ``_read_infos``, ``_create_session``, ``_fork_session``,
    ``_delete_session`` and :meth:`prune` (``_repair_session`` if it can repair). The
    public methods check their arguments (raising :class:`~hookloop.UsageError`)
    before they call them, so every backend refuses the same bad input the same way.

    Args:
        retention: What to keep; see :class:`Retention`.
    """

    retention: Retention

    def __init__(self, *, retention: Retention | None = None) -> None:
        if retention is not None and not isinstance(retention, Retention):
            raise UsageError(f"retention must be a Retention, got {type(retention).__name__}")
        self.retention = retention or Retention()

    # --- the API: arguments checked here, once, for every backend ------------------------

    async def append(
        self, session_id: str, message: Message, *, expected_seq: int | None = None
    ) -> int:
        """Append ``message`` to the session, creating the session if needed; commit it.

        Args:
            session_id: The session.
            message: The message to append.
            expected_seq: The session's last sequence number as the caller last saw it
                (0 for a session that should be new). When given and the session has moved
                on, nothing is written and :class:`~hookloop.SessionConflictError`
                is raised. When not given, the message simply goes last.

        Returns:
            The message's sequence number. A message whose id the session holds already
            is not written again: its sequence number is returned.

        Raises:
            SessionConflictError: Another writer appended first (``expected_seq``), or the
                session holds another message with the same id.
            CorruptSessionError: The session's own record is broken.
            UsageError: A session id or ``expected_seq`` that cannot be one.
        """
        check_session_id(session_id)
        check_expected_seq(expected_seq)
        return await self._append_message(session_id, message, expected_seq)

    async def records(
        self, session_id: str, *, unreadable: list[CorruptSessionError] | None = None
    ) -> list[StoredMessage]:
        """Every message of the session with its sequence number, oldest first.

        An unknown session has no messages: the result is ``[]``.

        Args:
            session_id: The session.
            unreadable: When given, a message that cannot be decoded is left out of the
                result and its error added to this list, instead of raised.

        Raises:
            CorruptSessionError: A stored message cannot be decoded (without
                ``unreadable``).
        """
        check_session_id(session_id)
        return await self._read_records(session_id, unreadable)

    async def info(self, session_id: str) -> SessionInfo | None:
        """The session's metadata, or ``None`` when there is no such session.

        Raises:
            CorruptSessionError: The session's record is broken.
        """
        check_session_id(session_id)
        return await self._read_info(session_id)

    async def list_sessions(self, *, limit: int | None = None) -> list[SessionInfo]:
        """The sessions, most recently updated first (at most ``limit`` of them).

        A session whose record is broken is left out, with a warning in the log. So are the
        side sessions that hold other sessions' approval records (``"<id>:approvals"``):
        they are not conversations.

        Raises:
            UsageError: ``limit`` is neither ``None`` nor a positive int.
        """
        return await self._read_infos(check_limit(limit))

    async def create(self, session_id: str, *, parent_id: str | None = None) -> SessionInfo:
        """Create an empty session (appending creates one too; this one records a parent).

        Raises:
            SessionExistsError: The id is taken.
        """
        check_session_id(session_id)
        if parent_id is not None:
            check_session_id(parent_id, "parent_id")
        return await self._create_session(session_id, parent_id)

    async def fork(self, session_id: str, new_id: str) -> SessionInfo:
        """Copy a session under a new id, with ``parent_id`` set to ``session_id``.

        The copy keeps the sequence numbers; both sessions go on independently.

        Raises:
            SessionNotFoundError: There is no session ``session_id``.
            SessionExistsError: ``new_id`` is taken.
        """
        check_session_id(session_id)
        check_session_id(new_id, "new_id")
        return await self._fork_session(session_id, new_id)

    async def delete(self, session_id: str) -> bool:
        """Delete the session and its messages; ``False`` when there was no such session.

        Sessions forked from it keep its id as their ``parent_id``.
        """
        check_session_id(session_id)
        return await self._delete_session(session_id)

    @abc.abstractmethod
    async def prune(self) -> int:
        """Apply :attr:`retention`'s ``max_sessions`` and ``max_age`` now.

        Stores also prune when they first connect. Returns how many sessions were deleted.
        """

    async def repair(self, session_id: str) -> SessionInfo:
        """Make the session's record agree with its stored messages, and return it.

        A record that is behind its messages, at the largest sequence number, not a number,
        or missing while messages remain makes every append fail with
        :class:`~hookloop.CorruptSessionError`. Repair sets ``last_seq`` to the last
        stored message (recreating a missing record, without a parent) and the message
        count to what is stored; the messages are not touched. A sound session is left as
        it is. Run it when no other writer is appending to the session.

        Raises:
            SessionNotFoundError: The store has neither a record nor messages for it.
            CorruptSessionError: The messages themselves reach the largest sequence number.
            UsageError: The store cannot repair sessions (a store of your own).
        """
        check_session_id(session_id)
        return await self._repair_session(session_id)

    # --- what a backend implements: storage only, on checked arguments --------------------

    @abc.abstractmethod
    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        """Store the message as :meth:`append` describes."""

    @abc.abstractmethod
    async def _read_records(
        self, session_id: str, unreadable: list[CorruptSessionError] | None
    ) -> list[StoredMessage]:
        """The session's messages as :meth:`records` describes."""

    async def _read_messages(self, session_id: str) -> list[Message]:
        """The session's messages as :meth:`load` describes; a backend may do it cheaper."""
        return [record.message for record in await self._read_records(session_id, None)]

    @abc.abstractmethod
    async def _read_info(self, session_id: str) -> SessionInfo | None:
        """The session's metadata as :meth:`info` describes."""

    @abc.abstractmethod
    async def _read_infos(self, limit: int | None) -> list[SessionInfo]:
        """The sessions as :meth:`list_sessions` describes."""

    @abc.abstractmethod
    async def _create_session(self, session_id: str, parent_id: str | None) -> SessionInfo:
        """Create the session as :meth:`create` describes."""

    @abc.abstractmethod
    async def _fork_session(self, session_id: str, new_id: str) -> SessionInfo:
        """Copy the session as :meth:`fork` describes."""

    @abc.abstractmethod
    async def _delete_session(self, session_id: str) -> bool:
        """Delete the session as :meth:`delete` describes."""

    async def _repair_session(self, session_id: str) -> SessionInfo:
        """Repair the session as :meth:`repair` describes; by default the store cannot."""
        raise UsageError(f"{type(self).__name__} cannot repair sessions")

    async def close(self) -> None:
        """Release the connection; the store connects again if it is used afterwards."""
        return

    # --- built on the above --------------------------------------------------------------

    async def load(self, session_id: str) -> list[Message]:
        """The session's messages, oldest first (``[]`` for an unknown session).

        Raises:
            CorruptSessionError: A stored message cannot be decoded.
        """
        check_session_id(session_id)
        return await self._read_messages(session_id)

    async def export(self, session_id: str, *, readable_only: bool = False) -> ExportedSession:
        """The session as plain JSON values (``json.dumps`` takes it as it is).

        Args:
            session_id: The session.
            readable_only: Leave out the messages that cannot be decoded, and list them
                (``seq`` and ``reason``) under the export's ``"unreadable"`` key, instead of
                raising: to save what can be saved of a damaged session.

        Raises:
            SessionNotFoundError: There is no such session.
            CorruptSessionError: A stored message cannot be decoded (without
                ``readable_only``), or the session's record is broken.
        """
        info = await self.info(session_id)
        if info is None:
            raise SessionNotFoundError(session_id)
        unreadable: list[CorruptSessionError] | None = [] if readable_only else None
        records = await self.records(session_id, unreadable=unreadable)
        dumped = dump_messages(record.message for record in records)
        exported: ExportedSession = {
            "format": EXPORT_FORMAT,
            "version": 1,
            "message_format": MESSAGE_FORMAT,
            "session_id": info.session_id,
            "parent_id": info.parent_id,
            "created_at": info.created_at.isoformat(),
            "updated_at": info.updated_at.isoformat(),
            "messages": [
                {"seq": record.seq, "message": data}
                for record, data in zip(records, dumped, strict=True)
            ],
        }
        if unreadable is not None:
            exported["unreadable"] = [
                {"seq": error.seq, "reason": error.reason} for error in unreadable
            ]
        return exported

    def session(
        self, session_id: str | None = None, *, check_conflicts: bool = True
    ) -> SessionRecorder:
        """A plugin that keeps an agent's conversation in this store.

        ``agent.use(store.session())`` records the agent's own session (``agent.session_id``),
        ``store.session("abc")`` the session ``"abc"``; see
        :class:`~hookloop.sessions.SessionRecorder`.
        """
        from ._recorder import SessionRecorder

        return SessionRecorder(self, session_id, check_conflicts=check_conflicts)

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def check_session_id(session_id: object, what: str = "session_id") -> str:
    """Return ``session_id`` if it is a usable id, else raise :class:`UsageError`."""
    if (
        not isinstance(session_id, str)
        or not session_id
        or len(session_id) > MAX_SESSION_ID_LENGTH
        or not session_id.isprintable()
    ):
        raise UsageError(
            f"{what} must be a non-empty printable str of at most {MAX_SESSION_ID_LENGTH} "
            f"characters, got {session_id!r:.80}"
        )
    return session_id


def check_expected_seq(expected_seq: object) -> None:
    """Raise :class:`UsageError` unless ``expected_seq`` is ``None`` or an int >= 0."""
    if expected_seq is not None and (
        isinstance(expected_seq, bool) or not isinstance(expected_seq, int) or expected_seq < 0
    ):
        raise UsageError(f"expected_seq must be None or an int >= 0, got {expected_seq!r}")


def utc(timestamp: float) -> datetime:
    """A POSIX timestamp as an aware UTC datetime."""
    if not math.isfinite(timestamp):
        raise ValueError(f"not a finite timestamp: {timestamp!r}")
    return datetime.fromtimestamp(timestamp, UTC)
