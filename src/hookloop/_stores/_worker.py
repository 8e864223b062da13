"""One thread that runs blocking calls, in order, for coroutines that await their results."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["Worker"]

_T = TypeVar("_T")

_Job = tuple[asyncio.AbstractEventLoop | None, "asyncio.Future[Any] | None", Callable[[], Any]]

logger = logging.getLogger(__name__)


class Worker:
    """A thread of its own that runs submitted calls one at a time, in submission order.

    Lighter than ``run_in_executor`` on the hot path (one queue put, one
    ``call_soon_threadsafe``), which matters when every append is a round trip to it. A call
    whose awaiting task was cancelled still runs to its end (a started transaction commits
    or rolls back as a whole); its result is dropped.
    """

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        # A daemon thread: a store nobody closed must not keep the interpreter alive.
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    async def run(self, fn: Callable[[], _T]) -> _T:
        """Run ``fn()`` on the thread and return (or raise) what it did."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[_T] = loop.create_future()
        self._jobs.put((loop, future, fn))
        return await future

    def post(self, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on the thread later, without waiting; a failure is logged."""
        self._jobs.put((None, None, fn))

    def stop(self) -> None:
        """Let the thread end after the calls already submitted."""
        self._jobs.put(None)

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            loop, future, fn = job
            if loop is None or future is None:  # posted: nobody waits for it
                try:
                    fn()
                except Exception:
                    logger.warning(
                        "%s: background call %r failed", self._thread.name, fn, exc_info=True
                    )
                continue
            try:
                result = fn()
            except BaseException as exc:  # handed to the awaiting coroutine, never lost
                _deliver(loop, future, None, exc)
            else:
                _deliver(loop, future, result, None)


def _deliver(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: object,
    error: BaseException | None,
) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop: nobody is waiting any more
        loop.call_soon_threadsafe(_settle, future, result, error)


def _settle(future: asyncio.Future[Any], result: object, error: BaseException | None) -> None:
    if future.done():  # cancelled while the call ran
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
