"""The Temporal engine: a durable turn is a Temporal workflow, each call an activity.

Temporal's workflow code must be deterministic and do no I/O, while a turn's code between
its calls runs hooks and writes the session. So the turn's code runs in the activities:
each activity replays the turn from the top with the records of the calls so far (no call
runs again: each recorded one gives back its output, as on DBOS), runs the next call, and
returns its record at once. The workflow (``_temporal_workflow.py``) only keeps the records
and schedules the next activity. A crash in an activity shows as a second attempt of it:
the call that was running runs again, except a tool that is not idempotent, answered
"result lost".

The only modules of hookloop that import ``temporalio`` (the ``temporal`` extra).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import dataclasses
import json
import logging
import pickle
import re
from collections.abc import Awaitable, Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

from .._errors import (
    ChatCancelledError,
    DurableRecordError,
    RunError,
    StoreError,
    UsageError,
    error_line,
)
from .._extras import extra_needed
from ..sessions._base import SessionStore
from ._engine import EngineLifecycle, WorkflowBody
from ._replay import BEGIN_STEP, MODEL_STEP, TOOL_STARTED_STEP, TOOL_STEP

if TYPE_CHECKING:
    from temporalio.client import Client
    from temporalio.worker import Worker, WorkflowRunner

__all__ = ["TemporalEngine"]

logger = logging.getLogger(__name__)

# The names of _temporal_workflow.py, which imports temporalio: this module may not at once.
_MODEL, _TOOL, _FINISH = "hookloop.model", "hookloop.tool", "hookloop.finish"
_RETRY_LATER, _TURN_FAILED = "hookloop.RetryLater", "hookloop.TurnFailed"
# The activity each step runs in; a begin step runs in whichever comes first.
_KIND: Final = {MODEL_STEP: _MODEL, TOOL_STARTED_STEP: _TOOL, TOOL_STEP: _TOOL}
# Steps that come before their call in the same activity: after a crash of that activity
# (a second attempt) they count as having run.
_PRELUDES: Final = frozenset({BEGIN_STEP, TOOL_STARTED_STEP})


def _temporal_modules() -> tuple[Any, Any, Any]:
    with extra_needed("temporal", by="TemporalEngine"):
        from temporalio import activity, client, worker

    return activity, client, worker


class _Stop(BaseException):
    """Raised by :meth:`TemporalEngine.step` once the activity's call is recorded.

    A ``BaseException``: it must leave the turn's code untouched by its ``except Exception``
    blocks and without the cancellation path, which would answer the open calls.
    """


Record = tuple[str, str] | tuple[str, str, bool]
"""A step's record: its name and output, or its name, its exception (pickled) and ``True``."""


@dataclasses.dataclass(slots=True, kw_only=True)
class _Activity:
    """What one activity of a turn knows and records."""

    kind: str
    workflow_id: str
    records: list[Record]
    crashed: bool  # an earlier attempt of this activity died
    new: list[Record] = dataclasses.field(default_factory=list)
    index: int = 0
    next: str | None = None  # the activity to run next, once this one stops
    stopped: bool = False  # its call is recorded (or is another activity's): no more steps

    def stop(self, next_kind: str) -> _Stop:
        """End the activity's work: every later step of the turn's code raises too.

        The other calls of a batch wait for the one that stops (one step at a time); one of
        them would otherwise take the next step in this activity once the lock is free.
        """
        self.next, self.stopped = next_kind, True
        return _Stop()


_running: contextvars.ContextVar[_Activity | None] = contextvars.ContextVar(
    "hookloop_temporal_activity", default=None
)


class TemporalEngine(EngineLifecycle):
    """A :class:`~hookloop.durable.DurableEngine` on Temporal (``hookloop[temporal]``).

    A turn is the workflow ``hookloop.turn``; each model call is the activity
    ``hookloop.model``, each tool call ``hookloop.tool``, and the code after the last call
    ``hookloop.finish``. Every worker of a deployment uses the same ``task_queue`` and
    registers the same agent paths (``DurableChats``).

    Args:
        address: The Temporal server, ``"host:port"``.
        task_queue: The task queue the turns run on.
        namespace: The Temporal namespace.
        worker: Run a Temporal worker in this process at :meth:`launch` (``False``: only
            start turns and wait for them, as a web server that hands turns to workers).
        heartbeat: Seconds of silence after which Temporal takes a running call's worker for
            dead and runs the call again on another worker.
        retry: Seconds before a call runs again (first pause; doubled up to 30 s).
        call_timeout: Seconds one call's activity may take at most.
        connect_timeout: Seconds :meth:`launch` tries to reach the server.
        grace: Seconds running calls get to finish at :meth:`shutdown`.
        payloads: Where payloads over 256 KiB go (a long tool result, a large message),
            the history keeping a reference: the turns' session store, say. The same in
            every worker and submitter. ``None``: they stay inline, up to the server's
            limit on one payload (2 MB by default).

    Raises:
        MissingExtraError: ``temporalio`` is not installed.
        UsageError: A bad argument.
    """

    replays_each_call = True
    """Each call's activity replays the turn's earlier part (its events are not sent again)."""

    def __init__(
        self,
        address: str = "localhost:7233",
        *,
        task_queue: str = "hookloop",
        namespace: str = "default",
        worker: bool = True,
        heartbeat: float = 10.0,
        retry: float = 1.0,
        call_timeout: float = 3600.0,
        connect_timeout: float = 10.0,
        grace: float = 30.0,
        payloads: SessionStore | None = None,
    ) -> None:
        for label, text in (("address", address), ("task_queue", task_queue)):
            if not isinstance(text, str) or not text.strip():
                raise UsageError(f"{label} must be a non-empty str, got {text!r}")
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit() or "/" in address or any(c.isspace() for c in address):
            raise UsageError(f"address must be 'host:port' (localhost:7233), got {address!r}")
        for label, seconds in (
            ("heartbeat", heartbeat),
            ("retry", retry),
            ("call_timeout", call_timeout),
            ("connect_timeout", connect_timeout),
            ("grace", grace),
        ):
            if type(seconds) not in (int, float) or not seconds > 0:
                raise UsageError(f"{label} must be a positive number of seconds, got {seconds!r}")
        _temporal_modules()
        self.address = address
        self.task_queue = task_queue
        self.namespace = namespace
        self._run_worker = worker
        self._options = json.dumps(
            {"heartbeat": heartbeat, "retry": retry, "call_timeout": call_timeout}
        )
        self._heartbeat = float(heartbeat)
        self._connect_timeout = float(connect_timeout)
        self._grace = float(grace)
        if payloads is not None and not isinstance(payloads, SessionStore):
            raise UsageError(f"payloads must be a SessionStore, got {type(payloads).__name__}")
        self._payloads = payloads
        self._bodies: dict[str, WorkflowBody] = {}
        self._client: Client | None = None
        self._worker: Worker | None = None
        self._polling: asyncio.Future[None] | None = None
        self._polled = False  # a worker was seen polling the task queue

    def __repr__(self) -> str:
        return f"TemporalEngine({self.address!r}, task_queue={self.task_queue!r})"

    @property
    def launched(self) -> bool:
        """Whether :meth:`launch` ran (and :meth:`shutdown` did not since)."""
        return self._client is not None

    async def launch(self) -> None:
        """Connect to the server and (``worker=True``) start polling the task queue.

        Raises:
            UsageError: The engine is launched already.
            StoreError: The server cannot be reached within ``connect_timeout``.
        """
        if self._client is not None:
            raise UsageError("the engine is launched already")
        _, client_module, worker_module = _temporal_modules()
        from ._temporal_payloads import data_converter

        def connect() -> Awaitable[Client]:
            return client_module.Client.connect(  # type: ignore[no-any-return]
                self.address,
                namespace=self.namespace,
                data_converter=data_converter(self._payloads),
            )

        try:
            async with asyncio.timeout(self._connect_timeout):
                client = await _when_ready(connect)
        except (RuntimeError, OSError, TimeoutError, ValueError) as exc:
            reason = "no answer in time" if isinstance(exc, TimeoutError) else error_line(exc)
            raise StoreError(
                f"the Temporal server at {self.address} cannot be used: {reason}",
                store=self.address,
            ) from None
        if self._run_worker:
            from ._temporal_workflow import TurnWorkflow

            self._worker = worker_module.Worker(
                client,
                task_queue=self.task_queue,
                workflows=[TurnWorkflow],
                activities=[self._activity(kind) for kind in (_MODEL, _TOOL, _FINISH)],
                workflow_runner=workflow_runner(),
                # A dead worker's sticky queue holds the turn's next workflow task this long.
                sticky_queue_schedule_to_start_timeout=timedelta(seconds=1),
                graceful_shutdown_timeout=timedelta(seconds=self._grace),
            )
            self._polling = asyncio.ensure_future(self._worker.run())
        self._client = client

    async def shutdown(self) -> None:
        """Stop polling; calls still running after ``grace`` run again on another worker."""
        worker, self._worker = self._worker, None
        polling, self._polling = self._polling, None
        self._client = None
        if worker is not None:
            await worker.shutdown()
        if polling is not None:
            with contextlib.suppress(Exception):  # its error was logged by the SDK
                await polling

    async def start(self, name: str, workflow_id: str, payload: str) -> None:
        """Start workflow ``name`` as ``workflow_id``, or join the one that has that id.

        A finished turn is joined too: its id is never run again.
        """
        client = self._require_client()
        if name not in self._bodies:
            raise UsageError(f"no durable workflow named {name!r} is registered in this engine")
        from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
        from temporalio.exceptions import WorkflowAlreadyStartedError

        from ._temporal_workflow import TURN_WORKFLOW

        with self._server_errors(workflow_id), contextlib.suppress(WorkflowAlreadyStartedError):
            await client.start_workflow(
                TURN_WORKFLOW,
                args=[name, payload, self._options],
                id=workflow_id,
                task_queue=self.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        if not self._run_worker and not self._polled:
            with self._server_errors(workflow_id):
                await self._warn_if_unpolled(client)

    async def _warn_if_unpolled(self, client: Client) -> None:
        """Log a warning when no worker polls the task queue (a typo in its name, say).

        A turn on such a queue waits until a worker of that queue starts, which is not an
        error; but a caller waiting for it would see nothing happen. Checked once per engine.
        """
        from temporalio.api.enums.v1 import TaskQueueType
        from temporalio.api.taskqueue.v1 import TaskQueue
        from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

        request = DescribeTaskQueueRequest(
            namespace=self.namespace,
            task_queue=TaskQueue(name=self.task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
        answer = await client.workflow_service.describe_task_queue(request)
        self._polled = bool(answer.pollers)
        if not self._polled:
            logger.warning(
                "no worker polls the task queue %r at %s: its turns wait until one does "
                "(is the queue's name the workers' --task-queue?)",
                self.task_queue,
                self.address,
            )

    async def result(self, workflow_id: str, key: str = "") -> str:
        """Wait for the turn (its part ``key``) to end or to wait for approval; its output.

        ``key``: ``""`` for the turn's first part, a resume's turn id for the part that
        runs its decisions (see :meth:`decide`).

        Raises:
            ChatCancelledError: The turn was cancelled (:meth:`cancel`) or terminated.
            UsageError: The decisions of ``key`` came when no call waited.
        """
        from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
        from temporalio.exceptions import ApplicationError
        from temporalio.service import RPCError

        from ._temporal_workflow import ENDED, NOT_WAITING, OUTCOME

        handle = self._require_client().get_workflow_handle(workflow_id)
        try:
            with self._server_errors(workflow_id):
                try:
                    output: object = await handle.execute_update(OUTCOME, key, result_type=str)
                except WorkflowUpdateFailedError as exc:
                    cause = exc.cause
                    if not isinstance(cause, ApplicationError) or cause.type == ENDED:
                        output = await handle.result()  # how the turn ended says why
                    elif cause.type == NOT_WAITING:
                        raise UsageError(cause.message) from None
                    else:
                        raise _turn_error(workflow_id, cause) from None
                except RPCError:
                    output = await handle.result()  # a turn that has ended (or none)
        except WorkflowFailureError as exc:
            raise _turn_error(workflow_id, exc.cause) from None
        if not isinstance(output, str):
            reason = f"a {type(output).__name__}, not JSON text"
            raise DurableRecordError(workflow_id=workflow_id, step="output", reason=reason)
        return output

    async def decide(self, prefix: str, key: str, payload: str) -> str | None:
        """Send decisions to the session's turn that waits for approval; its workflow id.

        ``prefix``: the session's workflow ids (``workflow_id(session, "")``); ``key``: the
        resume's turn id (sent again, it is the same resume); ``payload``: the decisions as
        a turn's input. The signal goes to the session's earliest running turn (the one a
        later turn would wait for), whether or not a worker runs: the turn takes the
        decisions if it waits for them, and refuses them otherwise, which :meth:`result`
        with ``key`` raises. ``None`` when no turn of the session runs (the one that waited
        was cancelled, say): the decisions are then a turn of their own.
        """
        from temporalio.service import RPCError, RPCStatusCode

        from ._temporal_workflow import DECIDE

        client = self._require_client()
        with self._server_errors(prefix):
            for _, wid in sorted(await _running_turns(client, prefix)):
                try:
                    await client.get_workflow_handle(wid).signal(DECIDE, args=[key, payload])
                except RPCError as exc:
                    # Visibility lags: a turn that ended a moment ago (cancelled, say) is
                    # still listed as running, and the server refuses its signal.
                    if exc.status != RPCStatusCode.NOT_FOUND:
                        raise
                else:
                    return wid
        return None

    async def cancel(self, workflow_id: str) -> None:
        """Cancel the turn: its running call is cancelled, its waiters get ``ChatCancelledError``.

        What the turn committed to its session stays.
        """
        handle = self._require_client().get_workflow_handle(workflow_id)
        with self._server_errors(workflow_id):
            await handle.cancel()

    @contextlib.contextmanager
    def _server_errors(self, workflow_id: str) -> Iterator[None]:
        """The server's refusals as :class:`StoreError`: unreachable, or the turn unknown."""
        from temporalio.service import RPCError, RPCStatusCode

        try:
            yield
        except RPCError as exc:
            if exc.status == RPCStatusCode.NOT_FOUND:
                reason = (
                    f"it has no durable turn {workflow_id!r} (never started, or the server "
                    "lost its state: a dev server in memory that restarted)"
                )
            else:
                reason = error_line(exc)
                if "size exceeds limit" in reason and self._payloads is None:
                    reason += (
                        " (a payload over the server's limit: give TemporalEngine(payloads=) "
                        "the session store, which then keeps the payloads over 256 KiB)"
                    )
            raise StoreError(
                f"the Temporal server at {self.address} cannot be used: {reason}",
                store=self.address,
            ) from None

    async def step(self, name: str, body: Callable[[], Awaitable[str]]) -> str:
        """Run ``body`` as the turn's next step, or return that step's recorded output.

        In an activity, a step that is recorded gives back its record; the activity's own
        call runs (with the steps before it in the same activity); at the step after, the
        activity ends, returning the records it made.

        Raises:
            DurableRecordError: The record at this place is another step's.
            UsageError: Not called from inside a turn's activity.
        """
        run = _running.get()
        if run is None:
            raise UsageError("step() is only known inside a durable turn's activity")
        if run.stopped:
            raise _Stop
        index = run.index
        if index < len(run.records):
            record = run.records[index]
            if record[0] != name:
                reason = f"step {index} is recorded as {record[0]!r}"
                raise DurableRecordError(workflow_id=run.workflow_id, step=name, reason=reason)
            run.index += 1
            if len(record) == 3:  # what its body raised, raised again
                raise _unpickled(record[1], run.workflow_id, name)
            return record[1]
        kind = _KIND.get(name)
        if kind is not None and kind != run.kind:  # the next call is another activity's
            raise run.stop(kind)
        run.index += 1
        if name in _PRELUDES and run.crashed:  # it ran in the attempt that died
            run.new.append((name, ""))
            return ""
        try:
            output = await body()
        except StoreError:  # not the call's outcome: the activity runs again later
            raise
        except Exception as exc:
            if run.stopped:
                raise _Stop from None
            # Recorded, as DBOS records it: the next activity raises it again in its place,
            # so what the turn does with it (its answers, on_chat_error) happens once.
            run.new.append((name, _pickled(exc), True))
            raise run.stop(_FINISH) from None
        if run.stopped:  # the worker stopped meanwhile: the call runs again elsewhere
            raise _Stop
        run.new.append((name, output))
        if name in (MODEL_STEP, TOOL_STEP):
            raise run.stop(_next_kind([*run.records, *run.new]))
        return output

    def caught_up(self) -> bool:
        """Whether the running activity has given back all its records (a first attempt).

        The turn's code from there on never ran before: it is not a replay. After a crash
        (a second attempt) it may have, and the turn tells it as on DBOS.
        """
        run = _running.get()
        return run is not None and not run.crashed and run.index >= len(run.records)

    def workflow_id(self) -> str:
        """The id of the turn whose activity runs now.

        Raises:
            UsageError: Not called from inside a turn's activity.
        """
        run = _running.get()
        if run is None:
            raise UsageError("workflow_id() is only known inside a durable turn's activity")
        return run.workflow_id

    async def wait_earlier(self, prefix: str) -> None:
        """In a turn's first activity: wait for the running turns of ``prefix`` started earlier.

        Those whose workflow ids start with ``prefix``, running, and started before this one
        (by start time, then id), whichever worker runs them: so two turns of a session do
        not mix their messages. Found through Temporal's visibility, which is updated within
        moments of a start: two turns of one session started at the same instant may still
        both run (the session's conflict check then fails the later writer).
        """
        run = _running.get()
        if run is None or run.records:  # later activities: the earlier turns have ended
            return
        from temporalio import activity

        from ._temporal_workflow import SETTLED

        client = activity.client()
        own = await client.get_workflow_handle(run.workflow_id).describe()
        mine = (own.start_time, own.id)
        earlier = sorted(turn for turn in await _running_turns(client, prefix) if turn < mine)
        for _, workflow_id in earlier:
            with contextlib.suppress(Exception):  # its own caller gets its error
                # Ended, or waiting for approval (then this turn is refused, as a chat is).
                await client.get_workflow_handle(workflow_id).execute_update(SETTLED)

    def _require_client(self) -> Client:
        if self._client is None:
            raise UsageError("launch the engine first: await engine.launch()")
        return self._client

    def _activity(self, kind: str) -> Callable[[str], Awaitable[str]]:
        activity, _, _ = _temporal_modules()

        async def run(task: str) -> str:
            return await self._run_activity(kind, task)

        run.__name__ = run.__qualname__ = kind.replace(".", "_")
        defined: Callable[[str], Awaitable[str]] = activity.defn(name=kind)(run)
        return defined

    async def _run_activity(self, kind: str, task: str) -> str:
        """One activity: the turn replayed from its records up to its call, which runs."""
        from temporalio import activity
        from temporalio.exceptions import ApplicationError, ApplicationErrorCategory

        benign = ApplicationErrorCategory.BENIGN  # an outcome of the turn, not the worker's

        info = activity.info()
        data = json.loads(task)
        run = _Activity(
            kind=kind,
            workflow_id=info.workflow_id or "",
            records=[_record(r) for r in data["records"]],
            crashed=info.attempt > 1,
        )
        body = self._bodies.get(data["workflow"])
        if body is None:
            raise ApplicationError(
                f"no durable workflow named {data['workflow']!r} is registered in this worker",
                "[]",
                type=_RETRY_LATER,
                non_retryable=True,
                category=benign,
            )
        token = _running.set(run)
        turn = asyncio.ensure_future(body(data["payload"]))  # it sees ``run``
        _running.reset(token)
        beating = asyncio.ensure_future(self._beat(activity.heartbeat))
        try:
            output: str | None = await _outcome(turn, run, activity.is_worker_shutdown)
        except _Stop:
            output = None
        except StoreError as exc:
            logger.warning("durable turn %s: %s; running it again later", run.workflow_id, exc)
            raise ApplicationError(
                error_line(exc),
                json.dumps(run.new),
                type=_RETRY_LATER,
                non_retryable=True,
                category=benign,
            ) from None
        except Exception as exc:
            raise ApplicationError(
                error_line(exc),
                _pickled(exc),
                type=_TURN_FAILED,
                non_retryable=True,
                category=benign,
            ) from None
        finally:
            beating.cancel()
        return json.dumps({"records": run.new, "next": run.next, "output": output})

    async def _beat(self, heartbeat: Callable[..., None]) -> None:
        while True:
            heartbeat()
            await asyncio.sleep(self._heartbeat / 4)


async def _outcome(turn: asyncio.Future[str], run: _Activity, stopping: Callable[[], bool]) -> str:
    """The turn's output; when the activity is cancelled, what the cancellation means.

    Cancelled because the turn is (:meth:`TemporalEngine.cancel`), the turn is cancelled
    too: its open calls are answered "cancelled" in its session. Cancelled because this
    worker stops (its grace is over), the turn is left to end by itself, recording nothing
    more: its call finishes (a tool's effect happens once) and the activity runs again on
    another worker, as after a crash (a tool that is not idempotent is answered "result
    lost"), without the answers a cancellation would write into the session.
    """
    try:
        return await asyncio.shield(turn)
    except asyncio.CancelledError:
        if stopping():
            run.stopped = True
            turn.add_done_callback(_retrieve)
        else:
            turn.cancel()
            await asyncio.wait((turn,))
            _retrieve(turn)
        raise


def _retrieve(turn: asyncio.Future[str]) -> None:
    """Mark the ending of a turn nobody awaits as seen (no "never retrieved" warning)."""
    if not turn.cancelled():
        turn.exception()


def workflow_runner() -> WorkflowRunner:
    """Temporal's sandbox for the turn's workflow, hookloop passed through (not reloaded).

    The workflow module imports nothing of hookloop's, but its package's ``__init__`` does:
    passed through, it is imported once, not again for each turn.
    """
    from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

    restrictions = SandboxRestrictions.default.with_passthrough_modules("hookloop")
    return SandboxedWorkflowRunner(restrictions=restrictions)


def _record(item: list[object]) -> Record:
    """A record as JSON gives it back."""
    if len(item) == 3:
        return (str(item[0]), str(item[1]), True)
    return (str(item[0]), str(item[1]))


def _next_kind(records: list[Record]) -> str:
    """The activity of the call that likely comes next (an activity told wrong says so)."""
    last = max(
        (i for i, r in enumerate(records) if r[0] == MODEL_STEP and len(r) == 2), default=None
    )
    if last is None:
        return _MODEL
    calls = json.loads(records[last][1])["message"].get("tool_calls") or []
    answered = sum(1 for r in records[last + 1 :] if r[0] == TOOL_STEP)
    if answered < len(calls):
        return _TOOL
    return _FINISH if not calls else _MODEL


async def _when_ready(connect: Callable[[], Awaitable[Client]]) -> Client:
    """``connect()``, asked again while the server answers that it is still starting.

    A server that has just started accepts connections before its frontend is ready, and
    refuses them meanwhile ("Frontend is not healthy yet"); any other failure is raised.
    """
    pause = 0.05
    while True:
        try:
            return await connect()
        except RuntimeError as exc:
            if "not healthy yet" not in str(exc):
                raise
        await asyncio.sleep(pause)
        pause = min(2 * pause, 1.0)


async def _running_turns(client: Client, prefix: str) -> list[tuple[Any, str]]:
    """The running turns whose workflow ids start with ``prefix``: (start time, id) each.

    Found through Temporal's visibility, updated within moments of a start.
    """
    from ._temporal_workflow import TURN_WORKFLOW

    query = (
        f'WorkflowType = "{TURN_WORKFLOW}" AND ExecutionStatus = "Running" '
        f'AND WorkflowId STARTS_WITH "{_query_prefix(prefix)}"'
    )
    return [
        (w.start_time, w.id) async for w in client.list_workflows(query) if w.id.startswith(prefix)
    ]


def _query_prefix(prefix: str) -> str:
    """``prefix`` up to its first ``"`` or backslash, which a visibility query cannot match.

    The caller filters what the query finds by the whole prefix.
    """
    return re.split(r'["\\]', prefix, maxsplit=1)[0]


def _pickled(exc: Exception) -> str:
    """``exc`` pickled, in base64; one that cannot be pickled becomes a ``RunError`` of its text."""
    try:
        data = pickle.dumps(exc)
        pickle.loads(data)  # one whose __init__ takes other arguments fails only here
    except Exception:
        data = pickle.dumps(RunError(f"{type(exc).__name__}: {error_line(exc)}"))
    return base64.b64encode(data).decode()


def _unpickled(text: str, workflow_id: str, step: str) -> Exception:
    """The exception a step's record holds.

    Raises:
        DurableRecordError: The record cannot be read (not an exception hookloop pickled).
    """
    try:
        error = pickle.loads(base64.b64decode(text, validate=True))
    except Exception as exc:
        reason = f"its recorded exception cannot be read: {error_line(exc)}"
        raise DurableRecordError(workflow_id=workflow_id, step=step, reason=reason) from None
    if not isinstance(error, Exception):
        reason = f"its record holds a {type(error).__name__}, not an exception"
        raise DurableRecordError(workflow_id=workflow_id, step=step, reason=reason)
    return error


def _turn_error(workflow_id: str, cause: BaseException | None) -> Exception:
    """The exception a caller of a failed or cancelled turn gets."""
    from temporalio.exceptions import ApplicationError, CancelledError, TerminatedError

    if isinstance(cause, CancelledError | TerminatedError):
        return ChatCancelledError(f"durable turn {workflow_id!r} was cancelled")
    if isinstance(cause, ApplicationError) and cause.type == _TURN_FAILED and cause.details:
        with contextlib.suppress(Exception):  # unreadable: the message stands for it
            error = pickle.loads(base64.b64decode(str(cause.details[0])))
            if isinstance(error, Exception):
                return error
    return RunError(f"durable turn {workflow_id!r} failed: {cause}")
