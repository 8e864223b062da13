"""``hookloop worker``: the process that runs durable chat turns, on DBOS or on Temporal.

On DBOS (the default) it runs the turns of a PostgreSQL queue; with ``--engine temporal`` the
turns of a Temporal task queue. Its options and its life: SIGTERM or Ctrl-C gives running turns
``--grace`` seconds, a second one ends the process at once; turns left running move to a live
worker (see docs/durable.md).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Callable
from typing import NoReturn

from ._errors import WorkerFencedError

__all__ = ["add_worker_command"]


def add_worker_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worker = commands.add_parser(
        "worker",
        help="run a worker for durable chat turns (hookloop[dbos] on PostgreSQL, or "
        "hookloop[temporal])",
        description="Run the durable chat turns submitted to the session queue of a PostgreSQL "
        "database, one turn of a session at a time, and take over the turns of workers that "
        "died; or, with --engine temporal, the turns of a Temporal task queue. SIGTERM or "
        "Ctrl-C stops it: running turns get --grace seconds to finish, and a live worker "
        "resumes those still running at once.",
    )
    worker.add_argument(
        "--engine",
        choices=("dbos", "temporal"),
        default="dbos",
        help="the durable engine (dbos: --database; temporal: --address, --task-queue, --sessions)",
    )
    worker.add_argument(
        "--database", metavar="URL", help="DBOS: the workers' postgresql:// database"
    )
    worker.add_argument(
        "--address", metavar="HOST:PORT", help="Temporal: the server (localhost:7233)"
    )
    worker.add_argument(
        "--task-queue", metavar="QUEUE", default="hookloop", help="Temporal: the task queue"
    )
    worker.add_argument(
        "--namespace", metavar="NAME", default="default", help="Temporal: the namespace"
    )
    worker.add_argument(
        "--sessions",
        metavar="URL",
        help="Temporal: the session store, postgresql://, redis:// or a SQLite file (the same "
        "in every worker)",
    )
    worker.add_argument(
        "--agent",
        required=True,
        metavar="MODULE:FUNCTION",
        help="the function that builds each turn's Agent (modules in the current directory "
        "included)",
    )
    worker.add_argument(
        "--executor-id",
        metavar="ID",
        help="this worker's id, unique among live workers (default: HOST-PID; a live "
        "worker's id is refused); a worker restarted with its old id resumes its own turns",
    )
    worker.add_argument(
        "--heartbeat", type=float, default=1.0, metavar="S", help="seconds between beats (1)"
    )
    worker.add_argument(
        "--dead-after",
        type=float,
        default=5.0,
        metavar="S",
        help="seconds of silence after which a worker is dead and its turns move (5; on "
        "Temporal, the heartbeat timeout of a call)",
    )
    worker.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds running turns get to finish when the worker stops (30)",
    )
    worker.add_argument(
        "--app-name",
        default="hookloop",
        metavar="NAME",
        help="the DBOS application name, the same in all workers and submitters (hookloop)",
    )
    worker.add_argument(
        "--application-version",
        metavar="VERSION",
        help="the pinned DBOS application version, the same in all workers and submitters "
        "(default: hookloop's own, see docs/durable.md)",
    )
    worker.add_argument(
        "--pool-size",
        type=int,
        metavar="N",
        help="the most connections DBOS opens to the database (20); see docs/scaling.md",
    )
    worker.add_argument(
        "--sessions-pool",
        type=int,
        metavar="N",
        help="the most connections the session store opens to the database (10)",
    )
    worker.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure, not one line"
    )
    worker.set_defaults(handler=_worker)


def _stop_on_signals(grace: float, again: Callable[[], None]) -> asyncio.Event:
    """An event SIGTERM or Ctrl-C sets (saying so); a second one calls ``again``."""
    stop = asyncio.Event()

    def on_signal() -> None:
        if stop.is_set():
            again()
            return
        stop.set()
        print(
            f"hookloop worker: stopping, running turns get {grace} s to finish "
            "(SIGTERM or Ctrl-C again: at once)",
            file=sys.stderr,
            flush=True,
        )

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, on_signal)
    return stop


def _end_process(message: str, status: int) -> NoReturn:
    """Print ``message`` and end the process now: no exit handler shuts DBOS down under turns."""
    print(message, file=sys.stderr, flush=True)
    sys.stdout.flush()
    os._exit(status)


async def _worker(args: argparse.Namespace) -> int:
    from ._errors import UsageError

    if args.engine == "temporal":
        return await _temporal_worker(args)
    if not args.database:
        raise UsageError("hookloop worker needs --database (or --engine temporal)")
    return await _dbos_worker(args)


async def _temporal_worker(args: argparse.Namespace) -> int:
    from ._cli import EXIT_OK  # here: the command imports this module
    from ._errors import UsageError
    from .durable._temporal import TemporalEngine
    from .durable._temporal_worker import run_temporal_worker, sessions_at

    if not args.sessions:
        raise UsageError("hookloop worker --engine temporal needs --sessions URL")
    # The second signal ends the process at once: a call still running runs again elsewhere.
    stop = _stop_on_signals(args.grace, lambda: _end_process("hookloop worker: stopped", EXIT_OK))

    def ready(engine: TemporalEngine) -> None:
        print(
            f"hookloop worker: taking turns from task queue {engine.task_queue!r} at "
            f"{engine.address}; SIGTERM or Ctrl-C stops it, a second one at once",
            file=sys.stderr,
            flush=True,
        )

    sessions = sessions_at(args.sessions)
    try:
        await run_temporal_worker(
            args.address or "localhost:7233",
            args.agent,
            sessions=sessions,
            task_queue=args.task_queue,
            namespace=args.namespace,
            heartbeat=args.dead_after,
            grace=args.grace,
            stop=stop,
            on_ready=ready,
        )
    finally:
        await sessions.close()
    # Ended here on purpose: the Temporal SDK can abort at interpreter exit (docs/durable.md).
    _end_process("hookloop worker: stopped", EXIT_OK)


async def _dbos_worker(args: argparse.Namespace) -> int:
    from ._cli import EXIT_FAILED, EXIT_OK  # here: the command imports this module
    from .durable._dbos import APPLICATION_VERSION
    from .durable._workers import Worker, WorkerTimings, run_worker

    timings = WorkerTimings(heartbeat=args.heartbeat, dead_after=args.dead_after)
    hurry = asyncio.Event()
    stop = _stop_on_signals(args.grace, hurry.set)  # the second one cuts the grace short

    def ready(worker: Worker) -> None:
        print(
            f"hookloop worker {worker.executor_id}: taking turns "
            f"(heartbeat {timings.heartbeat} s, dead after {timings.dead_after} s); "
            "SIGTERM or Ctrl-C stops it, a second one at once",
            file=sys.stderr,
            flush=True,
        )

    # Turns still running at the end of --grace, or all of them when another worker took this
    # one for dead, run elsewhere now: the process ends at once, as a kill would end it.
    try:
        left = await run_worker(
            args.database,
            args.agent,
            executor_id=args.executor_id,
            app_name=args.app_name,
            application_version=args.application_version or APPLICATION_VERSION,
            timings=timings,
            grace=args.grace,
            pool_size=args.pool_size,
            sessions_pool=args.sessions_pool,
            stop=stop,
            hurry=hurry,
            on_ready=ready,
        )
    except WorkerFencedError as exc:
        _end_process(f"hookloop: WorkerFencedError: {exc}", EXIT_FAILED)
    if left:
        _end_process(f"hookloop worker: left {left} running turns to a live worker", EXIT_OK)
    print("hookloop worker: stopped", file=sys.stderr, flush=True)
    return EXIT_OK
