"""The DBOS engine: durable turns as DBOS workflows, each call a DBOS step.

The only module of hookloop that imports ``dbos`` (the ``dbos`` extra). DBOS keeps one
instance per process, so one :class:`DBOSEngine` is launched per process at a time.
"""

from __future__ import annotations

import asyncio
import binascii
import contextlib
import os
import pickle
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from types import ModuleType
from typing import Any, Final

from .._errors import ChatCancelledError, DurableRecordError, StoreError, UsageError
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
from ._engine import EngineLifecycle, WorkflowBody

__all__ = ["APPLICATION_VERSION", "DBOSEngine"]

_POLL_SECONDS: Final = 0.1  # how often a wait on another worker's turn reads its status

# The workflow bodies of the engine that is launched (DBOS is one instance per process).
_bodies: dict[str, WorkflowBody] = {}
# The turns this process's callers wait for, settled when one stops on a store error.
_stopped: dict[str, asyncio.Future[None]] = {}
# The DBOS workflow function of each workflow name, registered once per process.
_workflows: dict[str, Callable[[str, str], Awaitable[str]]] = {}


def _dbos() -> ModuleType:
    return import_extra("dbos", extra="dbos", by="DBOSEngine")


def _registered_workflow(dbos: Any, name: str) -> Callable[[str, str], Awaitable[str]]:
    """The DBOS workflow function of ``name``, registered once per process."""
    workflow = _workflows.get(name)
    if workflow is None:

        async def hookloop_workflow(name: str, payload: str) -> str:
            body = _bodies.get(name)
            if body is None:
                raise UsageError(
                    f"no durable workflow named {name!r} is registered in this worker "
                    "(make the DurableChats before launching the engine)"
                )
            try:
                return await body(payload)
            except StoreError:
                await _stop_resumable(dbos)
                raise

        workflow = dbos.DBOS.workflow(name=dbos_workflow_name(name))(hookloop_workflow)
        _workflows[name] = workflow
    return workflow


class DBOSEngine(EngineLifecycle):
    """A :class:`~hookloop.durable.DurableEngine` on DBOS (``pip install 'hookloop[dbos]'``).

    Args:
        database_url: DBOS's system database: ``sqlite:///path/to/file.db`` for one machine,
            ``postgresql://user:password@host:port/db`` for many.
        app_name: DBOS's application name (lowercase letters, digits, ``-`` and ``_``).
        executor_id: This worker's id. A worker that restarts with the same id resumes
            the turns it left unfinished, about a second after launch.
        application_version: See :data:`APPLICATION_VERSION`.
        pool_size: The most connections DBOS opens to its system database (DBOS's default:
            20). With N workers on one PostgreSQL server, keep the sum of every process's
            pools under the server's ``max_connections`` (see ``docs/scaling.md``).

    Raises:
        MissingExtraError: ``dbos`` is not installed.
        UsageError: ``database_url`` is not a non-empty str, or ``pool_size`` is not a
            positive int.
    """

    def __init__(
        self,
        database_url: str,
        *,
        app_name: str = "hookloop",
        executor_id: str | None = None,
        application_version: str = APPLICATION_VERSION,
        pool_size: int | None = None,
    ) -> None:
        if not isinstance(database_url, str) or not database_url:
            raise UsageError(f"database_url must be a non-empty str, got {database_url!r}")
        if pool_size is not None and (
            type(pool_size) is not int or pool_size < 1  # bool is not a size
        ):
            raise UsageError(f"pool_size must be a positive int, got {pool_size!r}")
        self._dbos = _dbos()
        self._config: dict[str, Any] = {
            "name": app_name,
            "system_database_url": database_url,
            "application_version": application_version,
            "log_level": "WARNING",
        }
        if executor_id is not None:
            self._config["executor_id"] = executor_id
        if pool_size is not None:
            self._config["sys_db_pool_size"] = pool_size
        self._bodies: dict[str, WorkflowBody] = {}
        # The handles of turns this worker started, by id: waiting on one awaits its task
        # (a handle found by id polls the database).
        self._handles: dict[str, Any] = {}
        self._launched = False
        self._cancelled: set[str] = set()  # the turns cancel() was called for here
        self._lock: int | None = None  # the SQLite file's lock, held while launched

    def __repr__(self) -> str:
        # Without the password: a repr ends up in logs and tracebacks.
        return f"DBOSEngine({without_password(self._config['system_database_url'])!r})"

    @property
    def launched(self) -> bool:
        """Whether :meth:`launch` ran (and :meth:`shutdown` did not since)."""
        return self._launched

    async def launch(self) -> None:
        """Start DBOS; the turns this worker (its ``executor_id``) left unfinished resume.

        Raises:
            UsageError: The engine is launched already, or another one is in this process.
            StoreError: The database cannot be reached, or (SQLite) another process runs
                durable turns on the same file.
        """
        if self._launched:
            raise UsageError("the engine is launched already")
        if _bodies:
            raise UsageError("another durable engine is launched in this process")
        dbos = self._dbos
        for name in self._bodies:
            _registered_workflow(dbos, name)
        _check_sqlite(self._config["system_database_url"])
        _bodies.update(self._bodies)
        lock = _lock_sqlite_file(self._config["system_database_url"])
        try:
            dbos.DBOS(config=self._config)
            # From inside the event loop: DBOS then runs recovered workflows on this loop.
            dbos.DBOS.launch()
        except BaseException as exc:
            _bodies.clear()
            dbos.DBOS.destroy()
            if lock is not None:
                os.close(lock)
            cannot = unreachable(self._config["system_database_url"], exc)
            if cannot is not None:
                raise cannot from exc
            raise
        self._lock = lock
        self._launched = True

    async def shutdown(self) -> None:
        """Stop DBOS; turns still running resume at the next launch of this worker."""
        if not self._launched:
            return
        self._launched = False
        self._handles.clear()
        _bodies.clear()
        try:
            await asyncio.to_thread(self._dbos.DBOS.destroy)
        finally:
            lock, self._lock = self._lock, None
            if lock is not None:
                os.close(lock)

    async def start(self, name: str, workflow_id: str, payload: str) -> None:
        """Start workflow ``name`` as ``workflow_id``, or join the one that has that id."""
        self._require_launched()
        if name not in self._bodies:
            raise UsageError(f"no durable workflow named {name!r} is registered in this engine")
        dbos = self._dbos
        with dbos.SetWorkflowID(workflow_id):
            workflow = _registered_workflow(dbos, name)
            handle = await dbos.DBOS.start_workflow_async(workflow, name, payload)
        if not isinstance(getattr(handle, "task", None), asyncio.Future):  # it existed
            handle = await _resume_if_stopped(handle, dbos.DBOS.resume_workflow_async)
        if self._handles.setdefault(workflow_id, handle) is handle:
            task = getattr(handle, "task", None)  # a turn this worker runs
            if isinstance(task, asyncio.Future):
                # Dropped when the turn ends, awaited or not; result() then reads the record.
                task.add_done_callback(lambda _: self._forget(workflow_id, handle))

    def _forget(self, workflow_id: str, handle: object) -> None:
        if self._handles.get(workflow_id) is handle:
            del self._handles[workflow_id]

    async def result(self, workflow_id: str) -> str:
        """Wait for the workflow to end; its output, or the exception it raised."""
        self._require_launched()
        handle = self._handles.get(workflow_id)
        if handle is None:
            handle = await self._dbos.DBOS.retrieve_workflow_async(workflow_id)
        stopped = _stopped[workflow_id] = asyncio.get_running_loop().create_future()
        getting = asyncio.ensure_future(handle.get_result(polling_interval_sec=_POLL_SECONDS))
        try:
            await asyncio.wait((getting, stopped), return_when=asyncio.FIRST_COMPLETED)
            if not getting.done():  # a store error stopped it: resumable, see start()
                getting.cancel()
                await asyncio.gather(getting, return_exceptions=True)
                raise stopped_turn(workflow_id)
            output = getting.result()
        except _UNREADABLE as exc:  # its recorded output, or its input when it was resumed
            raise _unreadable(workflow_id, "output", exc) from exc
        except self._dbos.error.DBOSAwaitedWorkflowCancelledError as exc:
            if workflow_id in self._cancelled:
                raise ChatCancelledError(f"durable turn {workflow_id!r} was cancelled") from None
            raise stopped_turn(workflow_id) from exc
        finally:
            if _stopped.get(workflow_id) is stopped:
                del _stopped[workflow_id]
            self._handles.pop(workflow_id, None)
        return text_output(output, workflow_id, "output")

    async def cancel(self, workflow_id: str) -> None:
        """Cancel the turn: it stops at its next step.

        Its waiters in this process get ``ChatCancelledError``; DBOS records a cancelled turn
        as it records one a store error stopped, so a waiter in another process gets
        ``StoreError``, and a start with the turn's id resumes it (see docs/durable.md).
        """
        self._require_launched()
        self._cancelled.add(workflow_id)
        await self._dbos.DBOS.cancel_workflow_async(workflow_id)

    async def step(self, name: str, body: Callable[[], Awaitable[str]]) -> str:
        """Run ``body`` as the next DBOS step of the running workflow, or replay it.

        Raises:
            DurableRecordError: The step's record cannot be read, or is another step's.
        """
        ran = False

        async def run() -> str:
            nonlocal ran
            ran = True
            return await body()

        try:
            output = await self._dbos.DBOS.run_step_async({"name": name}, run)
        except (*_UNREADABLE, self._dbos.error.DBOSUnexpectedStepError) as exc:
            if ran:  # the body's own error
                raise
            raise _unreadable(self.workflow_id(), name, exc) from exc
        if isinstance(output, str):
            return output
        return text_output(output, self.workflow_id(), name)

    async def wait_earlier(self, prefix: str) -> None:
        """Wait for this worker's earlier unfinished workflows whose ids start with ``prefix``.

        Ordered by DBOS's creation time (whole seconds on SQLite), then id. Run inside the
        workflow, DBOS records the list and each wait as steps, so a replay waits for the
        same ones.
        """
        dbos = self._dbos.DBOS
        own = self.workflow_id()
        pending = await dbos.list_workflows_async(
            status=["PENDING", "ENQUEUED"],  # DBOS's recovery enqueues what it resumes
            workflow_id_prefix=prefix,
            executor_id=dbos.executor_id,
            app_version=self._config["application_version"],
            load_input=False,
            load_output=False,
        )
        if any(w.workflow_id == own and w.queue_name == SESSION_QUEUE for w in pending):
            return  # the session queue runs one turn of a session at a time already
        # The turns the session queue holds wait for its partition, not for this one.
        order = {
            w.workflow_id: (w.created_at or 0, w.workflow_id)
            for w in pending
            if w.queue_name != SESSION_QUEUE
        }
        mine = order.get(own)
        if mine is None:  # not this worker's (taken over): no order to keep here
            return
        for workflow_id in sorted(order, key=order.__getitem__):
            if order[workflow_id] >= mine:
                continue
            handle = await dbos.retrieve_workflow_async(workflow_id)
            with contextlib.suppress(Exception):  # its own caller gets its error
                await handle.get_result(polling_interval_sec=_POLL_SECONDS)

    def workflow_id(self) -> str:
        """The id of the DBOS workflow running now.

        Raises:
            UsageError: Not called from inside a workflow.
        """
        workflow_id = self._dbos.DBOS.workflow_id
        if not isinstance(workflow_id, str):
            raise UsageError("workflow_id() is only known inside a durable workflow")
        return workflow_id

    def _require_launched(self) -> None:
        if not self._launched:
            raise UsageError("launch the engine first: await engine.launch()")


async def _stop_resumable(dbos: Any) -> None:
    """End the running turn as cancelled, not failed: a start with its id resumes it.

    A store that cannot be reached is no reason to fail a turn for good: DBOS records a
    failure as final, whereas a cancelled workflow resumes from its records. The cancellation
    is made outside the workflow's context (a thread of its own), so that DBOS does not
    record it as one of the turn's steps.
    """
    workflow_id = dbos.DBOS.workflow_id
    loop = asyncio.get_running_loop()
    with contextlib.suppress(Exception):  # the database is away: the turn fails instead
        await loop.run_in_executor(None, dbos.DBOS.cancel_workflow, workflow_id)
    future = _stopped.get(workflow_id)
    if future is not None and not future.done():
        future.get_loop().call_soon_threadsafe(_settle, future)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


async def _resume_if_stopped(handle: Any, resume: Any) -> Any:
    """If the turn of ``handle`` was stopped resumable (cancelled), resume it; the handle."""
    status = await handle.get_status()
    if status is None or status.status != "CANCELLED":
        return handle
    return await resume(handle.workflow_id)


def _check_sqlite(
    url: str,
    python: tuple[int, ...] = sys.version_info[:2],
    sqlite: tuple[int, ...] = sqlite3.sqlite_version_info,
) -> None:
    """Refuse a SQLite system database that DBOS cannot write on this Python.

    On Python 3.12+ DBOS stamps its rows with SQLite's ``unixepoch('subsec')``, which
    SQLite 3.42 introduced; an older SQLite (a Python built against the system's) gives NULL
    there, and DBOS fails to launch with a NOT NULL constraint error that names neither.

    Raises:
        UsageError: Python 3.12+ with a SQLite older than 3.42, for a ``sqlite://`` URL.
    """
    if url.startswith("sqlite:") and python >= (3, 12) and sqlite < (3, 42):
        found = ".".join(map(str, sqlite))
        raise UsageError(
            f"DBOS on Python 3.12+ needs SQLite 3.42 or later for a SQLite database; this "
            f"Python has SQLite {found}: use a postgresql:// URL, or a Python built with a "
            "newer SQLite"
        )


def _lock_sqlite_file(url: str) -> int | None:
    """Lock DBOS's SQLite file for this process; the lock's descriptor (None: not SQLite).

    Two processes running durable turns on one SQLite file would race each other's turns (and
    DBOS's recovery), so the second one is refused here. The lock (``flock``) is the file's
    own and independent of SQLite's locks; it goes with the process, however it ends.

    Raises:
        StoreError: Another process holds the lock.
    """
    if not url.startswith("sqlite:///"):
        return None
    path = url.removeprefix("sqlite:///").partition("?")[0]
    if not path or path == ":memory:":
        return None
    try:
        import fcntl
    except ImportError:  # not on a POSIX system: nothing to lock with
        return None
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(descriptor)
        raise StoreError(
            f"another process runs durable turns on the SQLite file {path}: one process per "
            "SQLite file (stop the other one, give each process its own file, or run workers "
            "on PostgreSQL)",
            store=path,
        ) from exc
    return descriptor


# What DBOS raises for a value it recorded but cannot read back (it pickles in base64).
_UNREADABLE: Final = (binascii.Error, pickle.UnpicklingError, EOFError)


def _unreadable(workflow_id: str, step: str, exc: Exception) -> DurableRecordError:
    reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return DurableRecordError(workflow_id=workflow_id, step=step, reason=reason)
