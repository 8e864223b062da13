"""``run_worker`` called as a library: python -m tests.durable._library_worker URL ID.

It prints ``ready ID`` once the worker takes turns; a ``WorkerFencedError`` is caught here, is
reported as ``caught ID`` and ends the process with status 3 (its turns run elsewhere now).
"""

from __future__ import annotations

import asyncio
import os
import sys

from hookloop import WorkerFencedError
from hookloop.durable import Worker, WorkerTimings, run_worker
from tests.durable._workers_support import AGENT


def ready(worker: Worker) -> None:
    print("ready", worker.executor_id, flush=True)


async def main() -> None:
    url, executor_id = sys.argv[1:3]
    timings = WorkerTimings(heartbeat=0.2, dead_after=1.5)
    try:
        await run_worker(url, AGENT, executor_id=executor_id, timings=timings, on_ready=ready)
    except WorkerFencedError as exc:
        print("caught", exc.executor_id, flush=True)
        os._exit(3)


if __name__ == "__main__":
    asyncio.run(main())
