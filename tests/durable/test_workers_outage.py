"""A database outage longer than ``dead_after`` under live workers: nobody is taken for dead.

Two ``hookloop worker`` processes on a PostgreSQL server of the test's own, which the test
stops and starts again while a turn is inside a tool that is not idempotent. When the server is
back, every worker's last beat is older than ``dead_after``; none may claim another: no worker
is fenced, and the turn is answered by its tool's real result, never "result lost".
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psycopg
import pytest

from hookloop.durable import DurableChats, SessionQueue
from hookloop.durable._lease import TABLE
from hookloop.sessions import PostgresSessionStore
from tests.durable._workers_support import (
    AGENT,
    DEAD_AFTER,
    GUARD,
    HEARTBEAT,
    OwnPostgres,
    hookloop_workers,
    wait_for,
)

OUTAGE = DEAD_AFTER + 1.0  # seconds without a database: every worker's last beat goes stale


def beats_since(url: str, moment: float) -> list[tuple[str, bool, object]]:
    """Each executor, whether it beat after the POSIX time ``moment``, and its claimer."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT executor_id, heartbeat_at > to_timestamp(%s), claimed_by FROM {TABLE} "
            "ORDER BY 1",
            (moment,),
        )
        return [(row[0], row[1], row[2]) for row in rows.fetchall()]


async def test_an_outage_longer_than_dead_after_fences_no_worker_and_loses_no_result(
    own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    url = own_postgres.url
    pools = ("--pool-size", "4", "--sessions-pool", "2")
    workers = hookloop_workers(url, tmp_path, *pools, "--grace", "1")
    store = PostgresSessionStore(url, max_connections=2)
    try:
        workers.start("w1", "w2")
        async with SessionQueue(url) as queue:
            chats = DurableChats(queue, AGENT, sessions=store)
            hold = workers.hold("tool", "s1")
            handle = await chats.submit("s1", "s1 1")
            await asyncio.to_thread(wait_for, "the tool", lambda: workers.ran("tool", "s1", 1))

            own_postgres.stop()
            await asyncio.sleep(OUTAGE)  # the outage itself, not a wait for something
            own_postgres.start()
            back = time.time()
            hold.unlink()

            response = await asyncio.wait_for(handle.result(), GUARD)
            assert response.text == "charged 1: ok"  # the tool's own result, not "result lost"
            assert len(workers.ran("tool", "s1", 1)) == 1

        # Each worker may claim a stale peer once its own beats have succeeded for dead_after:
        # wait until both have beaten well past that, then nobody may have been claimed.
        settled = back + DEAD_AFTER + 3 * HEARTBEAT
        await asyncio.to_thread(
            wait_for,
            "both workers beating past their wait",
            lambda: all(fresh for _, fresh, _ in beats_since(url, settled)),
        )
        assert beats_since(url, settled) == [("w1", True, None), ("w2", True, None)]
        assert [proc.poll() for proc in workers.procs.values()] == [None, None]  # not fenced
    finally:
        await store.close()
        workers.close()


async def test_the_session_store_reconnects_after_a_restart_and_says_store_error_when_down(
    own_postgres: OwnPostgres,
) -> None:
    from hookloop import RunError, StoreError, UserMessage

    store = PostgresSessionStore(own_postgres.url, max_connections=1)
    try:
        await store.append("s1", UserMessage(content="before"))
        own_postgres.stop()
        own_postgres.start()
        # The pool's connection died with the server: the call is made again on a new one.
        await store.append("s1", UserMessage(content="after"))
        assert [m.content for m in await store.load("s1")] == ["before", "after"]
        own_postgres.stop()
        with pytest.raises(StoreError) as caught:
            await store.load("s1")
        assert isinstance(caught.value, RunError)  # `except RunError` catches it
        assert str(caught.value).startswith("the session store postgresql://postgres@127.0.0.1:")
        assert "cannot be reached" in str(caught.value)
        own_postgres.start()
        assert len(await store.load("s1")) == 2
    finally:
        await store.close()
