"""A worker for durable turns on Temporal: what ``hookloop worker --engine temporal`` runs."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .._chat_slot import ChatHost
from .._errors import UsageError
from ..sessions._base import SessionStore
from ._temporal import TemporalEngine
from ._turn import DurableChats

__all__ = ["run_temporal_worker", "sessions_at"]


async def run_temporal_worker(
    address: str,
    agent: str | Callable[[], ChatHost],
    *,
    sessions: SessionStore,
    task_queue: str = "hookloop",
    namespace: str = "default",
    heartbeat: float = 10.0,
    grace: float = 30.0,
    stop: asyncio.Event | None = None,
    on_ready: Callable[[TemporalEngine], None] | None = None,
) -> None:
    """Run the turns of ``task_queue`` until ``stop`` is set (what ``hookloop worker`` runs).

    When ``stop`` is set the worker takes no new call and gives the running ones ``grace``
    seconds; a call still running then is left to end by itself, unrecorded, and runs again
    on another worker (a tool that is not idempotent is answered "result lost" there). Any
    number of workers may poll one task queue; a turn moves between them call by call.

    Args:
        address: The Temporal server, ``"host:port"``.
        agent: The turns' agent factory, ``"module:function"`` (see ``DurableChats``).
        sessions: Where the sessions are kept (every worker of the queue uses the same),
            and the payloads over 256 KiB (see ``TemporalEngine(payloads=)``).
        task_queue: The task queue, the same in every worker and submitter.
        namespace: The Temporal namespace.
        heartbeat: Seconds after which a silent worker's call runs elsewhere.
        grace: Seconds the running calls get to finish once ``stop`` is set.
        stop: Set it to stop the worker (default: runs until cancelled).
        on_ready: Called once the worker polls the task queue.

    Raises:
        StoreError: The Temporal server cannot be reached.
        UsageError: A bad ``agent`` or argument.
    """
    engine = TemporalEngine(
        address,
        task_queue=task_queue,
        namespace=namespace,
        heartbeat=heartbeat,
        grace=grace,
        payloads=sessions,
    )
    DurableChats(engine, agent, sessions=sessions)
    await engine.launch()
    try:
        if on_ready is not None:
            on_ready(engine)
        await (stop or asyncio.Event()).wait()
    finally:
        await engine.shutdown()


def sessions_at(url: str) -> SessionStore:
    """The session store at ``url``: ``postgresql://...``, ``redis://...`` or a SQLite file.

    A SQLite file (``sqlite:///path`` or a plain path) suits workers of one machine only.

    Raises:
        UsageError: An empty ``url``.
        MissingExtraError: The store's extra is not installed.
    """
    from ..sessions import PostgresSessionStore, RedisSessionStore, SQLiteSessionStore

    if not url:
        raise UsageError("the session store's URL is empty")
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresSessionStore(url)
    if url.startswith(("redis://", "rediss://", "unix://")):
        return RedisSessionStore(url)
    return SQLiteSessionStore(url.removeprefix("sqlite:///"))
