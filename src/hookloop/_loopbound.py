"""A connection pool or client that belongs to the event loop that made it.

asyncpg pools and redis-py clients only work in the loop they were created in. A store
used from ``asyncio.run()`` twice (``store_memory_sync`` does that) would otherwise hand
the second loop a dead pool; here each loop gets its own, made on first use. Under the
agent's sync methods it is closed before their loop ends; a loop the store was not closed
in leaves its connections to the garbage collector.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

from ._background import at_sync_exit

_T = TypeVar("_T")


class LoopBound(Generic[_T]):
    """Makes a resource per running loop, once, and drops the previous loop's resource.

    Args:
        factory: Makes the resource, in the running loop.
        closer: Closes it, in its own loop (used by :meth:`close`).
        abandon: Releases a resource whose loop is no longer the running one, without
            awaiting (its loop may be closed).
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
        self._loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[_T] | None = None

    async def get(self) -> _T:
        """The resource for the running loop, made now if needed."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop or self._task is None:
            self._forget()
            self._loop = loop
            self._task = loop.create_task(self._make())
        task = self._task
        try:
            return await asyncio.shield(task)
        except BaseException:
            if task.done() and not task.cancelled() and task.exception() is not None:
                self._task = None  # a failed connection attempt is retried on the next call
            raise

    async def _make(self) -> _T:
        resource = await self._factory()
        at_sync_exit(self.close)  # under agent.*_sync(), the loop ends with the call
        return resource

    def _forget(self) -> None:
        task, self._task, self._loop = self._task, None, None
        if task is not None and task.done() and not task.cancelled() and not task.exception():
            self._abandon(task.result())

    async def close(self) -> None:
        """Close the resource if it belongs to the running loop; forget it otherwise."""
        task = self._task
        if task is None:
            return
        if self._loop is asyncio.get_running_loop():
            self._task, self._loop = None, None
            try:
                resource = await task
            except Exception:
                return
            await self._closer(resource)
        else:
            self._forget()
