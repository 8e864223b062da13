"""Many workers on one PostgreSQL database: one session at a time, dead workers' turns resumed.

A worker is a process with a launched DBOS executor that listens on the session queue
(:mod:`hookloop.durable._queue`: one turn of a session at a time, whichever worker runs it).
What makes a group of workers self-healing:

- **Heartbeats** (:class:`~hookloop.durable._lease.ExecutorLease`): each worker renews its row
  every ``heartbeat`` seconds; a worker whose row is older than ``dead_after`` is dead, one
  live worker claims it atomically and puts its pending workflows back on their queues, where
  any live worker picks them up. Self-hosted DBOS does not notice a dead executor by itself.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .._errors import UsageError, WorkerFencedError
from ._dbos import APPLICATION_VERSION, DBOSEngine
from ._events import TurnEventWriter, install_events_table
from ._lease import ExecutorLease, libpq_url
from ._queue import register_session_queue
from ._turn import DurableChats
from ._wakeup import QueueWaker, install_trigger

if TYPE_CHECKING:
    from .._chat_slot import ChatHost
    from ..sessions._base import SessionStore

__all__ = ["Takeover", "Worker", "WorkerTimings", "run_worker"]

logger = logging.getLogger(__name__)

DEFAULT_GRACE = 30.0
"""Seconds a stopping worker lets its running turns finish before it leaves them."""


@dataclass(frozen=True, kw_only=True)
class WorkerTimings:
    """How often a worker beats and how long a silent worker takes to be declared dead.

    Takeover of a killed worker's turns takes between ``dead_after`` and ``dead_after +
    heartbeat`` seconds. ``dead_after`` must be at least three heartbeats, so a worker that is
    merely slow for a beat or two is not taken over while it still runs its turns.

    Attributes:
        heartbeat: Seconds between two beats (and two looks for dead workers).
        dead_after: Seconds of silence after which a worker is dead.
    """

    heartbeat: float = 1.0
    dead_after: float = 5.0

    def __post_init__(self) -> None:
        if not self.heartbeat > 0:
            raise UsageError(
                f"heartbeat must be a positive number of seconds, not {self.heartbeat}"
            )
        if not (
            self.dead_after >= 3 * self.heartbeat
            or math.isclose(self.dead_after, 3 * self.heartbeat)
        ):
            raise UsageError(
                f"dead_after ({self.dead_after} s) must be at least three heartbeats "
                f"(3 x {self.heartbeat} s), or a slow worker is taken for dead"
            )


@dataclass(frozen=True, kw_only=True)
class Takeover:
    """A dead executor whose pending workflows this worker put back on their queues.

    Attributes:
        executor_id: The dead executor.
        workflow_ids: Its workflows that were pending (they now run on live workers).
        at: ``time.time()`` when the takeover was done.
    """

    executor_id: str
    workflow_ids: tuple[str, ...]
    at: float


class Worker:
    """The heartbeat and takeover duty of one worker process.

    Join it before DBOS is launched and start it after (DBOS launched with this
    ``executor_id``, the same ``app_name`` and the same pinned ``application_version`` as every
    other worker): a background thread beats every ``timings.heartbeat`` seconds and, once
    started, takes over dead executors. Stop it on the way out;
    ``leave=True`` (a graceful exit) hands whatever this executor still had pending to a live
    worker at its next beat instead of after ``dead_after``.

    Args:
        database_url: The PostgreSQL database the workers share (DBOS's system database).
        app_name: The DBOS application name; workers of other applications are not touched.
        executor_id: This worker's DBOS executor id (unique per live worker).
        application_version: The pinned DBOS application version; only dead workers of this
            version are taken over (DBOS recovers a workflow only on its own version).
        timings: Heartbeat interval and dead-after delay.
        on_fenced: Called (on the heartbeat thread) when another worker took this one for dead.
    """

    def __init__(
        self,
        database_url: str,
        *,
        app_name: str,
        executor_id: str,
        application_version: str = APPLICATION_VERSION,
        timings: WorkerTimings = WorkerTimings(),
        on_fenced: Callable[[WorkerFencedError], None] | None = None,
    ) -> None:
        self.executor_id = executor_id
        self.timings = timings
        self.takeovers: list[Takeover] = []
        self.fenced: WorkerFencedError | None = None
        self._on_fenced = on_fenced
        self._lease = ExecutorLease(
            database_url,
            app_name=app_name,
            application_version=application_version,
            executor_id=executor_id,
            dead_after=timings.dead_after,
        )
        self._stop = threading.Event()
        self._taking_over = threading.Event()
        self._thread: threading.Thread | None = None
        # Recovery runs off the heartbeat thread: re-enqueueing a dead worker's thousand turns
        # takes longer than ``dead_after``, and the beats must go on meanwhile.
        self._recovery = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=f"hookloop-recovery-{executor_id}"
        )
        self._recovering: dict[str, Future[tuple[str, ...]]] = {}
        # When this worker's beats began to succeed again (time.monotonic()); None while they
        # fail. A peer is claimed only once this is ``dead_after`` old: see :meth:`beat`.
        self._healthy_since: float | None = None

    def join(self) -> None:
        """Take this executor id in the executors table and start beating, without takeovers.

        Call it before DBOS is launched, which resumes this executor id's pending workflows:
        a second process with the id of a live worker is refused here, before it runs them.

        Raises:
            UsageError: A live worker of this application version already uses this id.
        """
        if self._thread is not None:
            raise UsageError("this worker is started already")
        try:
            self._lease.join(poll=self.timings.heartbeat)
        except BaseException:
            self._lease.close()
            raise
        self._healthy_since = time.monotonic()
        self._thread = threading.Thread(
            target=self._run, name=f"hookloop-worker-{self.executor_id}", daemon=True
        )
        self._thread.start()

    def start(self) -> None:
        """Join the executors table if not done yet, and take over dead workers from now on."""
        if self._taking_over.is_set():
            raise UsageError("this worker is started already")
        if self._thread is None:
            self.join()
        self._taking_over.set()

    def stop(self, *, leave: bool = True) -> None:
        """Stop beating; with ``leave``, have a live worker take what is left here at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._recovery.shutdown(wait=False, cancel_futures=True)
        try:
            if leave and self.fenced is None and self._thread is not None:
                self._lease.leave()
        finally:
            self._lease.close()

    def beat(self) -> list[Takeover]:
        """One beat: renew this worker's heartbeat, then take over dead executors.

        A takeover claims a dead executor, puts its pending workflows back on their queues in
        the background (beats go on meanwhile), and is done at the first beat after that. No
        executor is claimed until this worker's own beats have succeeded for ``dead_after``
        since it joined or last failed to beat: after a database outage every worker's last
        beat is old, and the live ones need that long to beat again.

        Returns:
            The takeovers done since the last beat (also appended to :attr:`takeovers`).

        Raises:
            WorkerFencedError: Another worker declared this one dead.
        """
        if not self._lease.renew():
            raise WorkerFencedError(executor_id=self.executor_id)
        now = time.monotonic()
        if self._healthy_since is None:
            self._healthy_since = now
        if not self._taking_over.is_set():
            return []
        done = []
        for executor_id, recovery in list(self._recovering.items()):
            if not recovery.done():
                continue
            del self._recovering[executor_id]
            try:
                workflow_ids = recovery.result()
            except Exception:  # a database hiccup: the claim stays ours, recover it again
                logger.warning("could not recover executor %s", executor_id, exc_info=True)
                self._recovering[executor_id] = self._recovery.submit(_recover, executor_id)
                continue
            self._lease.release(executor_id)
            done.append(
                Takeover(executor_id=executor_id, workflow_ids=workflow_ids, at=time.time())
            )
            logger.info(
                "worker %s took over %d workflows of dead executor %s",
                self.executor_id,
                len(workflow_ids),
                executor_id,
            )
        # A peer whose beats are stale may only have been cut off from the database as this
        # worker was: after an outage every worker's last beat is old. Each worker beats again
        # within a heartbeat of the database coming back, so waiting until this one's own beats
        # have succeeded for ``dead_after`` (three heartbeats at least) since its last failure
        # gives every live peer time to beat; a peer still stale then is dead (or cut off on its
        # own, and fenced when it comes back).
        if now - self._healthy_since >= self.timings.dead_after:
            for executor_id in self._lease.claim_dead():
                if executor_id not in self._recovering:
                    self._recovering[executor_id] = self._recovery.submit(_recover, executor_id)
        self.takeovers.extend(done)
        return done

    def _run(self) -> None:
        while not self._stop.wait(self.timings.heartbeat):
            try:
                self.beat()
            except WorkerFencedError as exc:
                logger.error("%s", exc)
                self.fenced = exc
                if self._on_fenced is not None:
                    self._on_fenced(exc)
                return
            except Exception:  # a database hiccup: reconnect and beat again next time
                logger.warning("worker %s could not beat", self.executor_id, exc_info=True)
                self._healthy_since = None  # its peers may not have reached the database either
                self._lease.close()

    def __enter__(self) -> Worker:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _recover(executor_id: str) -> tuple[str, ...]:
    """Put a dead executor's pending workflows back on their queues; their ids.

    DBOS 3.4 has no public call for another executor's workflows; this private one is pinned
    by the extra (``dbos>=3.4,<3.5``) and covered by the takeover tests. It only re-enqueues
    workflows still PENDING on ``executor_id``, so a repeated call is harmless.
    """
    from dbos import DBOS

    handles: list[Any] = DBOS._recover_pending_workflows([executor_id])
    return tuple(sorted(handle.workflow_id for handle in handles))


def default_executor_id() -> str:
    """``<host>-<pid>``: unique among live workers (a restart gets a new one)."""
    return f"{socket.gethostname()}-{os.getpid()}"


async def run_worker(
    database_url: str,
    agent: str | Callable[[], ChatHost],
    *,
    sessions: SessionStore | None = None,
    executor_id: str | None = None,
    app_name: str = "hookloop",
    application_version: str = APPLICATION_VERSION,
    timings: WorkerTimings = WorkerTimings(),
    grace: float = DEFAULT_GRACE,
    pool_size: int | None = None,
    sessions_pool: int | None = None,
    stop: asyncio.Event | None = None,
    hurry: asyncio.Event | None = None,
    on_ready: Callable[[Worker], None] | None = None,
) -> int:
    """Run a worker for durable turns until ``stop`` is set (what ``hookloop worker`` runs).

    It launches DBOS on ``database_url`` with this executor id, runs the turns submitted to the
    session queue (``DurableChats(SessionQueue(url), agent, ...).submit(...)`` in any process)
    with the agent ``agent`` builds, beats, and takes over dead workers' turns.

    When ``stop`` is set it takes no new turn and lets the running ones finish for up to
    ``grace`` seconds. If none is left it shuts down and returns 0. If some still run, it hands
    them to a live worker and returns their number **without shutting down**: cancelling them
    would record their cancellation in their sessions, and shutting DBOS down under them would
    fail their steps. The caller must then end the process at once, the way a kill would
    (``os._exit(0)``; ``sys.exit`` would run DBOS's exit handler), before they run another
    step here. Likewise a worker that learns it was taken for dead (its heartbeat stalled past
    ``dead_after``) raises :class:`WorkerFencedError` without shutting down, since its turns
    already run elsewhere: end the process (``hookloop worker`` exits with status 1).

    Args:
        database_url: The workers' PostgreSQL database (DBOS's system database).
        agent: The turns' agent factory, ``"module:function"`` (see ``DurableChats``).
        sessions: Where the sessions are kept; by default a ``PostgresSessionStore`` on
            ``database_url``.
        executor_id: This worker's id; by default ``<host>-<pid>``. Restarting a worker with
            its old id resumes its turns at launch (after a kill, once its last beat is
            ``dead_after`` old). The id of a live worker is refused (``UsageError``).
        app_name: The DBOS application name, the same in all workers.
        application_version: The pinned DBOS application version, the same in all workers.
        timings: Heartbeat interval and dead-after delay.
        grace: Seconds the running turns get to finish once ``stop`` is set.
        pool_size: The most connections DBOS opens to ``database_url`` (DBOS's default: 20);
            see ``DBOSEngine`` and the pool sizing in ``docs/scaling.md``.
        sessions_pool: The size of the default session store's pool
            (``PostgresSessionStore(max_connections=)``, default 10); only without
            ``sessions``.
        stop: Set it to stop the worker (default: runs until cancelled).
        hurry: Set it (after ``stop``) to cut the grace short: the turns still running are
            handed to a live worker at once (``hookloop worker``: a second Ctrl-C).
        on_ready: Called once the worker beats and takes turns.

    Returns:
        0 after a clean shutdown; else the number of turns still running in this process,
        handed to a live worker: end the process at once (``os._exit``).

    Raises:
        WorkerFencedError: Another worker took this one for dead: end the process at once.
        UsageError: ``database_url`` is not a PostgreSQL URL, a bad ``agent``, or a live
            worker of this application version uses ``executor_id``.
    """
    if not libpq_url(database_url).startswith(("postgresql://", "postgres://")):
        raise UsageError(
            f"workers share a PostgreSQL database: {database_url!r} is not a postgresql:// URL"
        )
    executor_id = executor_id or default_executor_id()
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    if sessions is not None and sessions_pool is not None:
        raise UsageError(
            "sessions_pool sizes the default session store: size the pool of the store "
            "passed as sessions instead"
        )
    store = sessions if sessions is not None else _postgres_store(database_url, sessions_pool)
    engine = DBOSEngine(
        database_url,
        app_name=app_name,
        executor_id=executor_id,
        application_version=application_version,
        pool_size=pool_size,
    )
    # The events of the turns a server follows (`hookloop serve --durable` publishes them) go
    # to the events table, written before the turn goes on, so a worker resuming it finds
    # them; other turns run without a stream and write no events.
    events = TurnEventWriter(database_url)
    DurableChats(engine, agent, sessions=store, on_event=events.on_event, published_only=True)
    fenced = asyncio.Event()

    def on_fenced(_: WorkerFencedError) -> None:  # on the heartbeat thread
        loop.call_soon_threadsafe(fenced.set)

    worker = Worker(
        database_url,
        app_name=app_name,
        executor_id=executor_id,
        application_version=application_version,
        timings=timings,
        on_fenced=on_fenced,
    )
    # DBOS makes its own thread pool the loop's default one: the worker's blocking calls get a
    # thread of their own, which DBOS's shutdown does not take away.
    own = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hookloop-worker")
    abandoned = False  # turns still run here: nothing is shut down under them
    try:
        # Before the launch, which resumes this executor id's pending turns: a duplicate of a
        # live worker is refused before it runs that worker's turns a second time.
        await loop.run_in_executor(own, worker.join)
        try:
            await engine.launch()
            waker: QueueWaker | None = None
            try:
                queue = await loop.run_in_executor(own, register_session_queue)
                await loop.run_in_executor(own, install_trigger, libpq_url(database_url))
                await loop.run_in_executor(own, install_events_table, database_url)
                waker = QueueWaker(
                    libpq_url(database_url), lambda: _dequeue(queue), _stopped_taking_turns
                )
                waker.start()
                await loop.run_in_executor(own, worker.start)
                if on_ready is not None:
                    on_ready(worker)
                left = await _until_stopped(
                    stop, hurry or asyncio.Event(), fenced, own, executor_id, grace
                )
                if worker.fenced is not None:
                    abandoned = True
                    raise worker.fenced
                if left:
                    abandoned = True
                    worker.stop(leave=True)
                    logger.warning(
                        "worker %s left %d running turns to a live worker", executor_id, left
                    )
                return left
            finally:
                if waker is not None:
                    waker.stop()
                if not abandoned:
                    await engine.shutdown()
                    await events.close()
        finally:
            if not abandoned:
                await loop.run_in_executor(own, worker.stop)
    finally:
        own.shutdown(wait=False)
        if sessions is None and not abandoned:
            await store.close()


async def _until_stopped(
    stop: asyncio.Event,
    hurry: asyncio.Event,
    fenced: asyncio.Event,
    own: ThreadPoolExecutor,
    executor_id: str,
    grace: float,
) -> int:
    """Wait for ``stop``, then drain; the turns left running. Cut short by ``fenced`` (-1)."""
    taken = asyncio.ensure_future(fenced.wait())
    hurried = asyncio.ensure_future(hurry.wait())
    cut = threading.Event()
    hurried.add_done_callback(lambda wait: None if wait.cancelled() else cut.set())
    try:
        stopped = asyncio.ensure_future(stop.wait())
        await asyncio.wait((stopped, taken), return_when=asyncio.FIRST_COMPLETED)
        if taken.done():
            stopped.cancel()
            return -1
        drain = asyncio.get_running_loop().run_in_executor(own, _drain, executor_id, grace, cut)
        await asyncio.wait((drain, taken), return_when=asyncio.FIRST_COMPLETED)
        if taken.done():
            return -1  # the drain's thread goes on; nothing waits for it
        left: int = drain.result()
        return left
    finally:
        taken.cancel()
        hurried.cancel()


def _postgres_store(database_url: str, pool: int | None) -> SessionStore:
    from ..sessions import PostgresSessionStore

    if pool is None:
        return PostgresSessionStore(libpq_url(database_url))
    return PostgresSessionStore(libpq_url(database_url), max_connections=pool)


def _dequeue(queue: Any) -> None:
    """Start what the session queue can start in this worker now (DBOS's queue thread, once).

    DBOS 3.4 dequeues only on its queue thread's polls and has no public call to poll now;
    this makes the same private calls that thread makes for a queue with a partition
    concurrency of one (the claim is one transaction; two workers claiming at once take
    different turns). Pinned by the extra, covered by the worker tests.
    """
    from dbos._core import execute_dequeued_workflow
    from dbos._dbos import _get_dbos_instance
    from dbos._utils import GlobalParams, generate_uuid

    dbos = _get_dbos_instance()
    owner = generate_uuid()
    started = dbos._sys_db.start_queued_partitioned_workflows(
        queue, GlobalParams.executor_id, GlobalParams.app_version, owner_xid=owner
    )
    if not started:
        return
    for status in dbos._sys_db.get_workflow_statuses(started):
        try:
            execute_dequeued_workflow(dbos, status, owner)
        except Exception:  # as DBOS's queue thread: the others still start
            logger.exception("could not start turn %s", status["workflow_uuid"])


def _stopped_taking_turns() -> bool:
    """Whether this process's DBOS stopped taking turns (:func:`_drain`, or its shutdown)."""
    from dbos._dbos import _get_dbos_instance

    try:
        events = _get_dbos_instance().background_thread_stop_events
    except Exception:  # DBOS was destroyed
        return True
    return any(event.is_set() for event in events)


def _drain(executor_id: str, grace: float, cut: threading.Event) -> int:
    """Take no new turn; wait up to ``grace`` s (or ``cut``) for this executor's turns; the rest.

    DBOS 3.4 stops dequeuing only in ``DBOS.destroy()``, which also tears down what running
    turns need; setting its background threads' stop events (the first thing ``destroy``
    does) stops the queue thread alone. Private, pinned by the extra, covered by the SIGTERM
    tests.
    """
    from dbos import DBOS
    from dbos._dbos import _get_dbos_instance

    for event in _get_dbos_instance().background_thread_stop_events:
        event.set()
    deadline = time.monotonic() + grace
    while True:
        pending = DBOS.list_workflows(
            status="PENDING", executor_id=executor_id, load_input=False, load_output=False
        )
        if not pending or time.monotonic() >= deadline or cut.is_set():
            return len(pending)
        cut.wait(min(0.1, max(0.0, deadline - time.monotonic())))
