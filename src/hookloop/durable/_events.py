"""A durable turn's events, from whichever worker runs it to whoever watches it (any process).

A worker's turn streams events (text and tool-call deltas, committed messages, tool calls
started and finished, restarts); a web server in another process shows them to a client.
This is the channel between the two, and it knows nothing of the engine that runs the turn
(DBOS or another): a turn is named by its workflow id, and its events are rows of the table
:data:`TABLE` in the workers' PostgreSQL database, numbered ``1, 2, 3...`` per turn.

- :class:`TurnEventWriter` appends them. ``DurableChats(..., on_event=writer.on_event)``
  attaches it where a turn builds its agent: it finds the running turn's id in
  :data:`~hookloop._run_context.durable_turn`. An engine that streams from elsewhere calls
  :meth:`TurnEventWriter.append` with the turn's id.
- :class:`TurnEventLog` reads them after a sequence number and wakes its readers when a
  turn has new ones: a trigger on the table notifies :data:`CHANNEL` (LISTEN/NOTIFY), with
  a slow polling as the fallback for a notification lost while its listener reconnects.

**A resumed turn duplicates nothing and loses nothing.** A turn resumed after its worker died
runs its code again from the top, and sends again the events of its replayed part that come
from outside the recorded calls: committed messages, tool calls started and finished (a
recorded model call sends no deltas again). Each of these has a key of its own (the message's
or call's id, which the records keep), unique per turn in the table, so the second sending is
not stored; the deltas of a model call, and its restart, are new events whenever they come.
A key that is stored was sent before its turn went on, so everything the first run sent is
in the table before what the resumed run adds: readers see one sequence, its numbers stable.

Rows are kept for :data:`RETENTION` after they were written, then deleted by the writers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Iterator
from typing import Any, Final

from .._messages import ToolCall, ToolMessage, load_messages
from .._run_context import durable_turn
from .._stores._reach import cannot_reach, without_password
from .._stream_events import (
    AgentEvent,
    MessageCommitted,
    ModelCallRestarted,
    ModelRetry,
    ToolCallFinished,
    ToolCallStarted,
)
from ..models._base import TextDelta, ToolCallDelta
from ..sessions._codec import encode_message, json_text
from ._lease import libpq_url
from ._wakeup import Notices

__all__ = [
    "CHANNEL",
    "RETENTION",
    "TABLE",
    "RemoteError",
    "TurnEventLog",
    "TurnEventWriter",
    "decode_event",
    "encode_event",
    "install_events_table",
]

logger = logging.getLogger(__name__)

TABLE: Final = "hookloop_turn_events"
"""The table of the turns' events: ``(turn, seq)`` is the key; ``key`` is unique per turn."""

CHANNEL: Final = "hookloop_turn_events"
"""The channel notified with a turn's workflow id when an event of it is stored."""

RETENTION: Final = 24 * 3600.0
"""Seconds a turn's events are kept after they were written."""

POLLING: Final = 1.0
"""Seconds a reader waits for a notification before it reads anyway (a lost notification)."""

_PRUNE_EVERY: Final = 600.0  # seconds between two deletions of old rows by one writer
_ATTEMPTS: Final = 5  # a write tried again on a new connection (a server restart)
_BACKOFF: Final = 0.2  # seconds before the first retry, doubled each time

# The notification carries the turn's workflow id; pg_notify refuses 8,000 bytes or more (the
# readers of a longer id read it at their polling).
_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    turn text NOT NULL,
    seq integer NOT NULL,
    key text,
    event text NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (turn, seq),
    UNIQUE (turn, key)
);
CREATE INDEX IF NOT EXISTS {TABLE}_at ON {TABLE} (at);
CREATE OR REPLACE FUNCTION {TABLE}_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF octet_length(NEW.turn) < 7000 THEN
        PERFORM pg_notify('{CHANNEL}', NEW.turn);
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER {TABLE}_notify AFTER INSERT ON {TABLE}
FOR EACH ROW EXECUTE FUNCTION {TABLE}_notify();
"""
_SCHEMA_LOCK: Final = f"SELECT pg_advisory_xact_lock(hashtext('{TABLE}'))"

# The next number is taken in the insert itself. Two writers of one turn at once (a worker
# taken for dead that still runs) may take the same number: the second insert then stores
# nothing, and the writer tries again with the next one.
_INSERT: Final = f"""
INSERT INTO {TABLE} (turn, seq, key, event)
SELECT %(turn)s, coalesce(max(seq), 0) + 1, %(key)s, %(event)s FROM {TABLE} WHERE turn = %(turn)s
ON CONFLICT DO NOTHING RETURNING seq
"""
_KEY_STORED: Final = f"SELECT 1 FROM {TABLE} WHERE turn = %s AND key = %s"
_READ: Final = f"SELECT seq, event FROM {TABLE} WHERE turn = %s AND seq > %s ORDER BY seq"
_PRUNE: Final = f"DELETE FROM {TABLE} WHERE at < clock_timestamp() - make_interval(secs => %s)"


def install_events_table(database_url: str) -> None:
    """Create the events table and its trigger if needed (workers and readers, at start).

    Raises:
        StoreError: The database cannot be used.
    """
    import psycopg

    url = libpq_url(database_url)
    try:
        with (
            psycopg.connect(url, autocommit=True, connect_timeout=10) as conn,
            conn.transaction(),
        ):
            conn.execute(_SCHEMA_LOCK)
            conn.execute(_SCHEMA)
    except psycopg.OperationalError as exc:
        raise cannot_reach("turn events' database", without_password(url), exc) from exc


class RemoteError(Exception):
    """An error that happened in another process, known by its description only.

    A :class:`~hookloop.ModelRetry` read back from the channel carries one: ``str()`` is the
    original's ``"<type>: <message>"``.
    """


def encode_event(event: AgentEvent) -> tuple[str | None, str] | None:
    """An event as ``(key, JSON text)``; ``None`` for one the channel does not carry.

    The key is the event's own identity for the events a resumed turn sends again (None for
    the others). The turn's end (``chat_done``) and typed outputs are not carried: a reader
    learns the end from the engine, with the turn's response.
    """
    if isinstance(event, TextDelta):
        return None, json_text({"type": event.type, "text": event.text})
    if isinstance(event, ToolCallDelta):
        data = {
            "type": event.type,
            "index": event.index,
            "id": event.id,
            "name": event.name,
            "arguments": event.arguments,
        }
        return None, json_text(data)
    if isinstance(event, MessageCommitted):
        message = json.loads(encode_message(event.message))
        return f"message:{event.message.id}", json_text({"type": event.type, "message": message})
    if isinstance(event, ToolCallStarted):
        data = {"type": event.type, "call": _call(event.call), "iteration": event.iteration}
        return f"started:{event.call.id}", json_text(data)
    if isinstance(event, ToolCallFinished):
        data = {
            "type": event.type,
            "call": _call(event.call),
            "message": json.loads(encode_message(event.message)),
            "iteration": event.iteration,
        }
        return f"finished:{event.message.id}", json_text(data)
    if isinstance(event, ModelRetry):
        error = None if event.error is None else f"{type(event.error).__name__}: {event.error}"
        data = {
            "type": event.type,
            "iteration": event.iteration,
            "attempt": event.attempt,
            "error": error,
        }
        return None, json_text(data)
    if isinstance(event, ModelCallRestarted):
        return None, json_text({"type": event.type, "iteration": event.iteration})
    return None


def decode_event(text: str) -> AgentEvent:
    """The event of a JSON text made by :func:`encode_event`.

    Raises:
        ValueError: The text is not one (a row written by another release).
    """
    data: dict[str, Any] = json.loads(text)
    kind = data.get("type")
    if kind == "text_delta":
        return TextDelta(text=data["text"])
    if kind == "tool_call_delta":
        return ToolCallDelta(
            index=data["index"], id=data["id"], name=data["name"], arguments=data["arguments"]
        )
    if kind == "message":
        return MessageCommitted(message=load_messages([data["message"]])[0])
    if kind == "tool_call_started":
        return ToolCallStarted(call=ToolCall(**data["call"]), iteration=data["iteration"])
    if kind == "tool_call_finished":
        return ToolCallFinished(
            call=ToolCall(**data["call"]),
            message=_message(data["message"], ToolMessage),
            iteration=data["iteration"],
        )
    if kind == "model_retry":
        error = data["error"]
        return ModelRetry(
            iteration=data["iteration"],
            attempt=data["attempt"],
            error=None if error is None else RemoteError(error),
        )
    if kind == "model_call_restarted":
        return ModelCallRestarted(iteration=data["iteration"])
    raise ValueError(f"not a turn event: {text[:80]!r}")


def _call(call: ToolCall) -> dict[str, str]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def _message(item: object, kind: type[Any]) -> Any:
    (message,) = load_messages([item])
    if not isinstance(message, kind):
        raise ValueError(f"a {message.role} message where a {kind.__name__} was expected")
    return message


class TurnEventWriter:
    """Appends the events of the turns a worker runs to the events table.

    ``on_event`` is what ``DurableChats(on_event=...)`` takes: each event of the turn running
    in its context is stored before the turn goes on (so a resumed turn finds it). A lost
    connection is made again (a database restart), a few times over some seconds; after that
    the event raises :class:`~hookloop.StoreError`, which stops the turn as resumable.

    Args:
        database_url: The workers' PostgreSQL database.
    """

    def __init__(self, database_url: str) -> None:
        self._url = libpq_url(database_url)
        self._conn: Any = None
        self._lock = asyncio.Lock()
        self._pruned = 0.0

    def __repr__(self) -> str:
        return f"TurnEventWriter({without_password(self._url)!r})"

    async def on_event(self, event: AgentEvent) -> None:
        """Store ``event`` under the durable turn running in this context (if any)."""
        turn = durable_turn.get()
        if turn is not None:
            await self.append(turn.workflow_id, event)

    async def append(self, turn: str, event: AgentEvent) -> int | None:
        """Store one event of ``turn``; its number.

        None if the channel does not carry it or stored it already (a resumed turn's
        replayed event).

        Raises:
            StoreError: The database cannot be reached.
        """
        encoded = encode_event(event)
        if encoded is None:
            return None
        key, text = encoded
        params = {"turn": turn, "key": key, "event": text}
        async with self._lock:
            for attempt in range(_ATTEMPTS):
                try:
                    return await self._insert(params)
                except Exception as exc:
                    if not _lost(exc) or attempt == _ATTEMPTS - 1:
                        await self._drop()
                        if _lost(exc):
                            where = without_password(self._url)
                            raise cannot_reach("turn events' database", where, exc) from exc
                        raise
                    logger.info("turn events: the connection was lost (%s); again", exc)
                    await self._drop()
                    await asyncio.sleep(_BACKOFF * 2**attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    async def _insert(self, params: dict[str, Any]) -> int | None:
        conn = await self._connection()
        while True:
            cursor = await conn.execute(_INSERT, params)
            row = await cursor.fetchone()
            if row is not None:
                break
            if params["key"] is not None:
                found = await conn.execute(_KEY_STORED, (params["turn"], params["key"]))
                if await found.fetchone() is not None:
                    return None  # sent before (a replay)
            # another writer took that number meanwhile: the next one
        if time.monotonic() - self._pruned > _PRUNE_EVERY:
            self._pruned = time.monotonic()
            await conn.execute(_PRUNE, (RETENTION,))
        seq: int = row[0]
        return seq

    async def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            import psycopg

            self._conn = await psycopg.AsyncConnection.connect(
                self._url, autocommit=True, connect_timeout=10
            )
        return self._conn

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                await conn.close()

    async def close(self) -> None:
        """Close its connection."""
        async with self._lock:
            await self._drop()


def _lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the connection to PostgreSQL was lost or cannot be made."""
    import psycopg

    return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError, OSError))


class TurnEventLog:
    """Reads the turns' events, and wakes its readers when a turn has new ones.

    ``async with TurnEventLog(url) as log:`` (or :meth:`start` / :meth:`stop`) listens on
    :data:`CHANNEL` with a connection of its own. A reader registers with :meth:`watching`
    before it reads, so an event stored between the read and the wait is not missed.

    Args:
        database_url: The workers' PostgreSQL database.
    """

    def __init__(self, database_url: str) -> None:
        self._url = libpq_url(database_url)
        self._notices = Notices(self._url, CHANNEL, lambda payload: payload)
        self._conn: Any = None
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return f"TurnEventLog({without_password(self._url)!r})"

    async def start(self) -> None:
        """Create the table if needed and listen, on the running event loop.

        Raises:
            StoreError: The database cannot be used.
        """
        await asyncio.to_thread(install_events_table, self._url)
        self._notices.start()

    async def stop(self) -> None:
        """Stop listening and close the connections."""
        await self._notices.stop()
        async with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None:
                with contextlib.suppress(Exception):
                    await conn.close()

    async def __aenter__(self) -> TurnEventLog:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @contextlib.contextmanager
    def watching(self, turn: str) -> Iterator[Any]:
        """Interest in ``turn`` for the block; yields ``wait(seconds)``.

        ``wait`` returns when the turn has new events, or after ``seconds``.
        """
        with self._notices.watching(turn) as wait:
            yield wait

    async def read(self, turn: str, after: int = 0) -> list[tuple[int, AgentEvent]]:
        """The events of ``turn`` numbered after ``after``, in order.

        Raises:
            StoreError: The database cannot be reached (after one new connection).
        """
        async with self._lock:
            for attempt in range(2):
                try:
                    if self._conn is None or self._conn.closed:
                        import psycopg

                        self._conn = await psycopg.AsyncConnection.connect(
                            self._url, autocommit=True, connect_timeout=10
                        )
                    cursor = await self._conn.execute(_READ, (turn, after))
                    rows = await cursor.fetchall()
                    break
                except Exception as exc:
                    conn, self._conn = self._conn, None
                    if conn is not None:
                        with contextlib.suppress(Exception):
                            await conn.close()
                    if not _lost(exc):
                        raise
                    if attempt == 1:
                        where = without_password(self._url)
                        raise cannot_reach("turn events' database", where, exc) from exc
        return [(seq, decode_event(text)) for seq, text in rows]
