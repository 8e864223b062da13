"""Wake-ups on the session queue: a turn starts and its answer arrives without polling.

DBOS's queue is polled: each worker looks for new turns every ``polling_interval`` seconds,
and a process waiting for a turn's output reads its status every few tens of milliseconds. At
low load that polling was most of a durable turn's latency (a turn of 20 ms waited 0.1-0.3 s).
PostgreSQL's LISTEN/NOTIFY removes it:

- a trigger on DBOS's ``workflow_status`` table notifies the channel :data:`CHANNEL` when a
  turn of the session queue is enqueued (submitted, or put back by a takeover) and when one
  ends (which frees its session for the next turn): ``"<status> <workflow id>"``;
- each worker listens (:class:`QueueWaker`) and dequeues at once;
- a :class:`~hookloop.durable.SessionQueue` listens (:class:`Notices`) and wakes the callers
  waiting for the turn that ended.

A notification is only a hint: the dequeue is DBOS's own transaction, and a waiter reads the
turn's status from the database. Polling stays as the fallback (a notification is lost while a
listener reconnects), at a slower pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import Any, Final

from ._dbos_shared import SESSION_QUEUE

__all__ = ["CHANNEL", "ENDED", "Notices", "QueueWaker", "ended_turn", "install_trigger"]

logger = logging.getLogger(__name__)

CHANNEL: Final = "hookloop_sessions"
"""The notification channel of the session queue's trigger."""

ENDED: Final = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})
"""DBOS's statuses of a workflow that has ended."""

_RECONNECT: Final = 1.0  # seconds between two attempts to listen again after an error

# pg_notify refuses a payload of 8,000 bytes or more, which would fail the enqueue itself: a
# longer workflow id is not announced (its turn waits for the polling instead).
_TRIGGER: Final = f"""
CREATE OR REPLACE FUNCTION {{schema}}.hookloop_sessions_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF (TG_OP = 'INSERT' OR NEW.status IS DISTINCT FROM OLD.status)
            AND octet_length(NEW.workflow_uuid) < 7000 THEN
        PERFORM pg_notify('{CHANNEL}', NEW.status || ' ' || NEW.workflow_uuid);
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER hookloop_sessions_notify
AFTER INSERT OR UPDATE OF status ON {{schema}}.workflow_status
FOR EACH ROW WHEN (
    NEW.queue_name = '{SESSION_QUEUE}'
    AND NEW.status IN ('ENQUEUED', {", ".join(f"'{status}'" for status in sorted(ENDED))})
)
EXECUTE FUNCTION {{schema}}.hookloop_sessions_notify()"""
_TRIGGER_LOCK: Final = "SELECT pg_advisory_xact_lock(hashtext('hookloop_sessions_notify'))"


def install_trigger(database_url: str, *, schema: str = "dbos") -> None:
    """Create (or update) the session queue's trigger in DBOS's schema; after DBOS's launch.

    Two workers starting at once would race on ``CREATE OR REPLACE``: a transaction-scoped
    advisory lock takes them one at a time.
    """
    import psycopg

    function, trigger = _TRIGGER.format(schema=schema).split("END $$;")
    with (
        psycopg.connect(database_url, autocommit=True, connect_timeout=10) as conn,
        conn.transaction(),
    ):
        conn.execute(_TRIGGER_LOCK)
        conn.execute(function + "END $$")
        conn.execute(trigger)


class QueueWaker:
    """A worker's listener: it dequeues as soon as a turn is submitted or a session is freed.

    A daemon thread with a connection of its own that LISTENs on :data:`CHANNEL` and calls
    ``dequeue`` after each burst of notifications. It stops with :meth:`stop`, or when
    ``stopped()`` says so (a draining worker takes no new turn).

    Args:
        database_url: The workers' database (a libpq URL).
        dequeue: Takes what the session queue can start in this worker now.
        stopped: Whether the worker has stopped taking turns.
    """

    def __init__(
        self, database_url: str, dequeue: Callable[[], None], stopped: Callable[[], bool]
    ) -> None:
        self._url = database_url
        self._dequeue = dequeue
        self._stopped = stopped
        self._stop = threading.Event()
        self._conn: Any = None
        self._thread = threading.Thread(target=self._run, name="hookloop-queue-waker", daemon=True)

    def start(self) -> None:
        """Start listening."""
        self._thread.start()

    def stop(self) -> None:
        """Stop listening (at the latest after its current wait of a second)."""
        self._stop.set()

    def _done(self) -> bool:
        return self._stop.is_set() or self._stopped()

    def _run(self) -> None:
        import psycopg

        while not self._done():
            try:
                with psycopg.connect(self._url, autocommit=True, connect_timeout=10) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self._dequeue()  # what was submitted before this listened
                    while not self._done():
                        burst = list(conn.notifies(timeout=1.0, stop_after=1))
                        if not burst or self._done():
                            continue
                        burst += conn.notifies(timeout=0)  # those that came meanwhile
                        if any(_wakes_workers(n.payload) for n in burst):
                            self._dequeue()
            except Exception:  # the database went away: listen again; polling covers the gap
                if self._done():
                    return
                logger.info("the queue waker lost its connection; listening again", exc_info=True)
                self._stop.wait(_RECONNECT)


def _wakes_workers(payload: str) -> bool:
    status = payload.partition(" ")[0]
    return status == "ENQUEUED" or status in ENDED


class Notices:
    """A process's listener on a notification channel: it wakes whoever waits for a key.

    A task on the event loop of :meth:`start`, with a connection of its own, that LISTENs on
    ``channel``; ``key`` reads a notification's payload into the key it wakes (None: no
    one). A waiter (:meth:`watching`) returns when its key is notified or after ``timeout``
    seconds, whichever is first, and then reads what it waits for (a notification is only a
    hint).

    Args:
        database_url: The database (a libpq URL).
        channel: The channel to listen on.
        key: The key a payload wakes, or None.
    """

    def __init__(self, database_url: str, channel: str, key: Callable[[str], str | None]) -> None:
        self._url = database_url
        self._channel = channel
        self._key = key
        self._waiters: dict[str, set[asyncio.Future[None]]] = {}
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start listening, on the running event loop."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._listen())

    async def stop(self) -> None:
        """Stop listening; waiters time out into polling."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @contextlib.contextmanager
    def watching(self, key: str) -> Any:
        """Register interest in ``key`` for the block; yields a wait function.

        Register before reading what is waited for, so that a notification between the read
        and the wait is not missed.
        """
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        holder = [future]
        self._waiters.setdefault(key, set()).add(future)

        async def wait(seconds: float) -> None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(holder[0]), seconds)
            if holder[0].done():  # the next wait needs a new notification
                self._waiters[key].discard(holder[0])
                holder[0] = asyncio.get_running_loop().create_future()
                self._waiters[key].add(holder[0])

        try:
            yield wait
        finally:
            waiting = self._waiters.get(key)
            if waiting is not None:
                waiting.discard(holder[0])
                if not waiting:
                    del self._waiters[key]

    async def _listen(self) -> None:
        import psycopg

        while True:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self._url, autocommit=True, connect_timeout=10
                )
                async with conn:
                    await conn.execute(f"LISTEN {self._channel}")
                    self._wake_all()  # what happened while nobody listened
                    async for notice in conn.notifies():
                        key = self._key(notice.payload)
                        if key is not None:
                            for future in self._waiters.get(key, ()):
                                if not future.done():
                                    future.set_result(None)
            except Exception:  # the database went away: waiters poll meanwhile
                logger.info(
                    "the %s listener lost its connection; listening again",
                    self._channel,
                    exc_info=True,
                )
                await asyncio.sleep(_RECONNECT)

    def _wake_all(self) -> None:
        for waiting in self._waiters.values():
            for future in waiting:
                if not future.done():
                    future.set_result(None)


def ended_turn(payload: str) -> str | None:
    """The workflow id of a turn whose end the payload announces (``"<status> <id>"``)."""
    status, _, workflow_id = payload.partition(" ")
    return workflow_id if status in ENDED else None
