"""The session queue: turns submitted from any process, run by workers one session at a time.

A DBOS queue partitioned by session id with a partition concurrency of one: however many
workers listen, one turn of a session runs at a time (DBOS's own, public mechanism; the
dequeue is one atomic transaction in PostgreSQL), and a turn submitted while another turn of
its session runs waits in the queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

from .._errors import ChatCancelledError, UsageError
from .._extras import import_extra
from .._stores._reach import without_password
from ._dbos_shared import (
    APPLICATION_VERSION,
    SESSION_QUEUE,
    dbos_workflow_name,
    stopped_turn,
    text_output,
    unreachable,
)
from ._lease import libpq_url
from ._records import decode_turn
from ._wakeup import CHANNEL, ENDED, Notices, ended_turn

__all__ = [
    "QUEUE_POLLING",
    "RESULT_POLLING",
    "SESSION_QUEUE",
    "SessionQueue",
    "register_session_queue",
]

QUEUE_POLLING: Final = 1.0
"""How often (seconds) a worker looks for new turns on the session queue without being woken.

Workers are woken at once when a turn is submitted or a session freed (see
:mod:`hookloop.durable._wakeup`); this polling only covers a wake-up that was lost.
"""

RESULT_POLLING: Final = 1.0
"""How often (seconds) a :class:`SessionQueue` reads the status of a turn it waits for.

It is woken when the turn ends; this polling only covers a wake-up that was lost.
"""


def register_session_queue(*, polling_interval: float = QUEUE_POLLING) -> Any:
    """Declare the session queue in this process's launched DBOS: one turn per session at once.

    Every worker calls it after launching (declaring it again is harmless). Returns DBOS's
    queue object.
    """
    dbos = import_extra("dbos", extra="dbos", by="the session queue")
    return dbos.DBOS.register_queue(
        SESSION_QUEUE, partition_concurrency=1, polling_interval_sec=polling_interval
    )


class SessionQueue:
    """A durable engine for processes that submit turns and leave running them to workers.

    ``DurableChats(SessionQueue(url), "module:function", sessions=store)`` in a web process:
    :meth:`~hookloop.durable.DurableChats.submit` puts the turn on the session queue of the
    PostgreSQL database at ``url`` (no DBOS is launched here), a ``hookloop worker`` runs it,
    and :meth:`~hookloop.durable.TurnHandle.result` waits for its answer.

    Args:
        database_url: The workers' PostgreSQL database (their ``--database``).
        app_name: The workers' DBOS application name.
        application_version: The workers' pinned application version.

    Raises:
        MissingExtraError: ``dbos`` is not installed.
    """

    def __init__(
        self,
        database_url: str,
        *,
        app_name: str = "hookloop",
        application_version: str = APPLICATION_VERSION,
    ) -> None:
        self._dbos = import_extra("dbos", extra="dbos", by="SessionQueue")
        self._url = database_url
        self._app_name = app_name
        self._version = application_version
        self._client: Any = None
        self._cancelled: set[str] = set()  # the turns cancel() was called for here
        self._ends = Notices(libpq_url(database_url), CHANNEL, ended_turn)

    def __repr__(self) -> str:
        return f"SessionQueue({without_password(self._url)!r})"

    def register(self, name: str, body: Callable[[str], Awaitable[str]]) -> None:
        """Accept a workflow's name; its body runs in the workers, never here."""

    async def launch(self) -> None:
        """Connect to the workers' database, making DBOS's tables there if no worker has yet.

        Raises:
            StoreError: The database cannot be reached.
        """
        if self._client is None:
            try:
                # A DBOS client never makes the tables it writes to: without this, turns
                # submitted before the first worker ever launched would fail.
                await asyncio.to_thread(self._dbos.DBOS.migrate, self._url)
                self._client = self._dbos.DBOSClient(
                    system_database_url=self._url, application_name=self._app_name
                )
            except Exception as exc:
                cannot = unreachable(self._url, exc)
                if cannot is not None:
                    raise cannot from exc
                raise
            self._ends.start()

    async def shutdown(self) -> None:
        """Disconnect; submitted turns go on in the workers."""
        client, self._client = self._client, None
        await self._ends.stop()
        if client is not None:
            client.destroy()

    async def start(self, name: str, workflow_id: str, payload: str) -> None:
        """Queue the turn under its session's partition, or join the turn with that id.

        A turn with that id that a store error stopped is resumed from its records.
        """
        session_id, _, _ = decode_turn(payload, workflow_id)
        options = {
            "workflow_name": dbos_workflow_name(name),
            "queue_name": SESSION_QUEUE,
            "queue_partition_key": session_id,
            "workflow_id": workflow_id,
            "app_version": self._version,
        }
        client = self._require_client()
        handle = await client.enqueue_async(options, name, payload)
        status = await handle.get_status()
        if status is not None and status.status == "CANCELLED":  # stopped on a store error
            await client.resume_workflow_async(workflow_id, queue_name=SESSION_QUEUE)

    async def result(self, workflow_id: str) -> str:
        """Wait for the turn to end in whichever worker runs it; its output."""
        handle = await self._require_client().retrieve_workflow_async(workflow_id)
        with self._ends.watching(workflow_id) as ended:
            while (await handle.get_status()).status not in ENDED:
                await ended(RESULT_POLLING)
        try:
            output = await handle.get_result(polling_interval_sec=RESULT_POLLING)
        except self._dbos.error.DBOSAwaitedWorkflowCancelledError as exc:
            if workflow_id in self._cancelled:
                raise ChatCancelledError(f"durable turn {workflow_id!r} was cancelled") from None
            raise stopped_turn(workflow_id) from exc
        return text_output(output, workflow_id, "output")

    async def status(self, workflow_id: str) -> str | None:
        """The turn's status as DBOS records it (``"PENDING"``, ``"SUCCESS"``...), or None."""
        found = await self._require_client().list_workflows_async(
            workflow_ids=[workflow_id], load_input=False, load_output=False
        )
        return str(found[0].status) if found else None

    async def cancel(self, workflow_id: str) -> None:
        """Cancel the turn: it ends at its next step, in whichever worker runs it.

        Its waiters here get ``ChatCancelledError``; its messages so far stay in the
        session. (A start with its id resumes it.)
        """
        self._cancelled.add(workflow_id)
        await self._require_client().cancel_workflow_async(workflow_id)

    async def step(self, name: str, body: Callable[[], Awaitable[str]]) -> str:
        """Not here: turns run in the workers."""
        raise UsageError("a SessionQueue submits turns; the workers run their steps")

    def workflow_id(self) -> str:
        """Not here: turns run in the workers."""
        raise UsageError("a SessionQueue submits turns; the workers run them")

    async def wait_earlier(self, prefix: str) -> None:
        """Not here: turns run in the workers."""
        raise UsageError("a SessionQueue submits turns; the workers run them")

    def _require_client(self) -> Any:
        if self._client is None:
            raise UsageError("launch the session queue first: await queue.launch()")
        return self._client

    async def __aenter__(self) -> SessionQueue:
        await self.launch()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()
