"""A durable turn that stops on a store error: a typed error, and the same turn_id finishes it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from hookloop import Message, RunError, StoreError
from hookloop.durable import DBOSEngine, DurableChats, SessionQueue, WorkerTimings, run_worker
from hookloop.sessions import PostgresSessionStore, SQLiteSessionStore
from tests.durable import _agents
from tests.durable._workers_support import GUARD


class Flaky:
    """Mixed into a session store: its appends of ``down``'s role fail (a lost database)."""

    down: str | None = None

    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        if message.role == self.down:
            raise StoreError("the session store cannot be reached (test)", store="flaky")
        return await super()._append_message(session_id, message, expected_seq)  # type: ignore[misc]


class FlakyStore(Flaky, SQLiteSessionStore):
    """A flaky SQLite session store."""


async def test_a_turn_stopped_by_a_store_error_is_finished_by_a_retry_with_its_turn_id(
    engine: DBOSEngine, tmp_path: Path
) -> None:
    store = FlakyStore(tmp_path / "sessions.db")
    chats = DurableChats(engine, _agents.echo_agent, sessions=store)
    await engine.launch()
    store.down = "tool"  # the tool ran (its step is recorded); its message cannot be kept
    with pytest.raises(RunError) as caught:
        await chats.chat("s", "say hi", turn_id="t-1")
    assert isinstance(caught.value, StoreError)
    assert _agents.calls == ["model", "echo hookloop-turn:s:t-1:call-1"]
    store.down = None

    response = await chats.chat("s", "say hi", turn_id="t-1")  # the caller's retry
    assert response.text == "said hi"
    log = await store.load("s")
    assert [(m.role, m.content) for m in log] == [
        ("user", "say hi"),
        ("assistant", ""),
        ("tool", "hi"),
        ("assistant", "said hi"),
    ]
    # The calls made before the error are not made again: their records stand.
    assert _agents.calls == ["model", "echo hookloop-turn:s:t-1:call-1", "model"]
    await store.close()


class FlakyPostgres(Flaky, PostgresSessionStore):
    """A flaky PostgreSQL session store."""


async def test_a_queued_turn_stopped_by_a_store_error_is_resumed_by_a_retry(
    database_url: str,
) -> None:
    store = FlakyPostgres(database_url, max_connections=2)
    store.down = "tool"
    stop, ready = asyncio.Event(), asyncio.Event()
    _agents.calls.clear()
    worker = asyncio.ensure_future(
        run_worker(
            database_url,
            "tests.durable._agents:echo_agent",
            sessions=store,
            executor_id="w",
            timings=WorkerTimings(heartbeat=0.2, dead_after=0.6),
            grace=1,
            pool_size=4,
            stop=stop,
            on_ready=lambda _: ready.set(),
        )
    )
    try:
        await asyncio.wait_for(ready.wait(), GUARD)
        async with SessionQueue(database_url) as queue:
            chats = DurableChats(queue, "tests.durable._agents:echo_agent", sessions=store)
            with pytest.raises(StoreError, match="start it again with the same turn_id"):
                await asyncio.wait_for(chats.chat("s", "say hi", turn_id="t-1"), GUARD)
            store.down = None
            response = await asyncio.wait_for(chats.chat("s", "say hi", turn_id="t-1"), GUARD)
        assert response.text == "said hi"
        assert _agents.calls == ["model", "echo hookloop-turn:s:t-1:call-1", "model"]
        assert [m.role for m in await store.load("s")] == ["user", "assistant", "tool", "assistant"]
    finally:
        stop.set()
        assert await asyncio.wait_for(worker, GUARD) == 0
        await store.close()
