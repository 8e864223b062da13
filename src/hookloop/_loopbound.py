"""A connection pool or client per event loop.

asyncpg pools and redis-py clients only work in the loop they were created in. A store
used from ``asyncio.run()`` twice (``store_memory_sync`` does that), or from two threads
each running its own loop at the same time (a sync tool calling ``store_memory_sync`` in a
worker thread while the app's loop uses the same store), needs one per loop: here each loop
gets its own, made on first use, and no loop ever touches another live loop's resource.

Under the agent's sync methods a loop's resource is closed before that loop ends. A
resource whose loop was closed without closing it is abandoned (released without awaiting)
the next time the object is used, from any loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from ._background import at_sync_exit

_T = TypeVar("_T")


class LoopBound(Generic[_T]):
    """Makes a resource per running loop, once, and keeps each loop's apart.

    Safe to share between threads, each running its own event loop.

    Args:
        factory: Makes the resource, in the running loop.
        closer: Closes it, in its own loop (used by :meth:`close`).
        abandon: Releases a resource whose loop is closed, without awaiting.
    """

    def __init__(
        self,
        factory: Callable[[], Awaitable[_T]],
        closer: Callable[[_T], Awaitable[None]],
        abandon: Callable[[_T], None],
    ) -> None:
        self._factory = factory
        self._closer = closer
        self._abandon = abandon
        # Keyed by the loop itself, not weakly: the task (and the resource) refer to their
        # loop, so a weak key would never be freed anyway. Entries of closed loops are
        # swept on every get() and close().
        self._tasks: dict[asyncio.AbstractEventLoop, asyncio.Task[_T]] = {}
        self._lock = threading.Lock()

    async def get(self) -> _T:
        """The resource for the running loop, made now if needed."""
        loop = asyncio.get_running_loop()
        with self._lock:
            dead = self._sweep()
            task = self._tasks.get(loop)
            if task is None:
                task = self._tasks[loop] = loop.create_task(self._make())
        self._release(dead)
        try:
            return await asyncio.shield(task)
        except BaseException:
            if task.done() and not task.cancelled() and task.exception() is not None:
                with self._lock:  # a failed connection attempt is retried on the next call
                    if self._tasks.get(loop) is task:
                        del self._tasks[loop]
            raise

    async def _make(self) -> _T:
        resource = await self._factory()
        at_sync_exit(self.close)  # under agent.*_sync(), the loop ends with the call
        return resource

    def _sweep(self) -> list[asyncio.Task[_T]]:
        """Take out the tasks of closed loops (the caller holds the lock)."""
        dead = [loop for loop in self._tasks if loop.is_closed()]
        return [self._tasks.pop(loop) for loop in dead]

    def _release(self, tasks: list[asyncio.Task[_T]]) -> None:
        for task in tasks:
            if task.done() and not task.cancelled() and task.exception() is None:
                self._abandon(task.result())

    async def close(self) -> None:
        """Close the running loop's resource; the next :meth:`get` in this loop makes another.

        Resources of other loops that are still open are left alone: each is closed in its
        own loop (or abandoned once that loop is closed).
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            dead = self._sweep()
            task = self._tasks.pop(loop, None)
        self._release(dead)
        if task is None:
            return
        try:
            resource = await task
        except Exception:
            return
        await self._closer(resource)
