"""Background work an agent owns, and whether the caller came through a sync entry point.

Memory hooks' async twins (``aon_*``) run as tasks next to the chat, so a slow hook never
delays it; the agent keeps them here, and ``await agent.aclose()`` waits for them. Inside
``chat_sync()`` and the other sync entry points the event loop lives only as long as the
call, so there the sync twin runs instead: :func:`in_sync_entry` tells which case applies.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any, TypeVar

from ._errors import UsageError

__all__ = ["BackgroundTasks", "at_sync_exit", "in_sync_entry", "run_sync"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

_Cleanup = Callable[[], Awaitable[None]]

# Inside asyncio.run() started by one of the agent's *_sync methods: the clean-ups to run
# before that loop closes; None elsewhere. A ContextVar, so tasks and worker threads started
# inside the call see the same list, and nothing else does.
_SYNC_ENTRY: ContextVar[list[_Cleanup] | None] = ContextVar("hookloop_sync_entry", default=None)


def in_sync_entry() -> bool:
    """Whether the code runs under a sync entry point such as ``agent.chat_sync()``."""
    return _SYNC_ENTRY.get() is not None


def at_sync_exit(cleanup: _Cleanup) -> None:
    """Under a sync entry point, await ``cleanup`` before its event loop closes.

    Connection pools made in that loop die with it; this lets them close cleanly. Outside a
    sync entry point it does nothing.
    """
    cleanups = _SYNC_ENTRY.get()
    if cleanups is not None:
        cleanups.append(cleanup)


def run_sync(coro: Coroutine[Any, Any, _T], name: str) -> _T:
    """Run ``coro`` to completion in a new event loop, as the sync entry point ``name``.

    Raises:
        UsageError: Called while an event loop is running in this thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        coro.close()
        raise UsageError(f"{name}() cannot run inside a running event loop; await the async method")
    cleanups: list[_Cleanup] = []
    token = _SYNC_ENTRY.set(cleanups)
    try:
        return asyncio.run(_then_clean_up(coro, cleanups))
    finally:
        _SYNC_ENTRY.reset(token)


async def _then_clean_up(coro: Coroutine[Any, Any, _T], cleanups: list[_Cleanup]) -> _T:
    try:
        return await coro
    finally:
        for cleanup in cleanups:
            try:
                await cleanup()
            except Exception:
                logger.warning(
                    "clean-up %r at the end of a sync call failed", cleanup, exc_info=True
                )


class BackgroundTasks:
    """Tasks started for an agent and not awaited by anyone else; :meth:`drain` awaits them.

    A task's exception is logged at WARNING (logger ``hookloop._background``), never
    raised: background work must not break the chat that started it.
    """

    __slots__ = ("_tasks",)  # one per agent: an idle agent is smaller

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[None]] | None = None  # made on the first spawn

    def __len__(self) -> int:
        return len(self._tasks) if self._tasks is not None else 0

    def spawn(self, coro: Coroutine[Any, Any, object], label: str) -> asyncio.Task[None]:
        """Start ``coro`` as a task in the running loop and keep track of it."""
        task = asyncio.get_running_loop().create_task(self._guard(coro, label))
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @staticmethod
    async def _guard(coro: Coroutine[Any, Any, object], label: str) -> None:
        try:
            await coro
        except Exception:
            logger.warning("%s raised; ignored", label, exc_info=True)

    async def drain(self) -> None:
        """Wait until every task of the running loop has finished, including ones they start.

        Tasks of another (finished) event loop cannot be awaited here; they are dropped.
        """
        loop = asyncio.get_running_loop()
        tasks = self._tasks
        if tasks is None:
            return
        while True:
            mine = [t for t in tasks if t.get_loop() is loop]
            for task in tasks.difference(mine):
                tasks.discard(task)
            if not mine:
                return
            await asyncio.wait(mine)
