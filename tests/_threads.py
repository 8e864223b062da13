"""Jobs run at once in threads of their own, each in its own event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

TIMEOUT = 60.0  # seconds: only a failure guard


def run_in_threads(*jobs: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run each job in ``asyncio.run`` in a daemon thread of its own, all starting together.

    The threads are joined with a timeout, so a job that hangs (a loop waiting on connections
    another loop tore down) fails the test instead of hanging it. The first error is raised.
    """
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(jobs))

    def target(job: Callable[[], Coroutine[Any, Any, None]]) -> None:
        try:
            barrier.wait(TIMEOUT)
            asyncio.run(job())
        except BaseException as exc:  # handed to the test below
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(job,), daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
