"""One resource per event loop (``hookloop._loopbound.LoopBound``), also across threads.

The unit tests use a fake resource that records where it was made, closed and abandoned;
the store tests share one PostgreSQL or Redis memory store between two threads, each with
its own event loop, and between a sync tool's worker thread and the chat's loop. Those run
in daemon threads joined with a timeout, so a regression (a loop waiting on connections
another loop tore down) fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import pytest

from hookloop import Agent, Scope
from hookloop._loopbound import LoopBound
from hookloop.memory import MemoryStore, PostgresMemoryStore, RedisMemoryStore
from hookloop.testing import ScriptedModel, tool_call
from tests._threads import TIMEOUT, run_in_threads


@dataclass
class Resource:
    loop: asyncio.AbstractEventLoop
    thread: int
    closed_in: asyncio.AbstractEventLoop | None = None
    abandoned_in: int | None = None


@dataclass
class Ledger:
    made: list[Resource] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def bound(self) -> LoopBound[Resource]:
        async def factory() -> Resource:
            await asyncio.sleep(0.01)  # give another thread time to come in meanwhile
            res = Resource(asyncio.get_running_loop(), threading.get_ident())
            with self.lock:
                self.made.append(res)
            return res

        async def closer(res: Resource) -> None:
            res.closed_in = asyncio.get_running_loop()

        def abandon(res: Resource) -> None:
            res.abandoned_in = threading.get_ident()

        return LoopBound(factory, closer, abandon)


def test_two_loops_in_two_threads_each_get_and_close_their_own_resource() -> None:
    ledger = Ledger()
    bound = ledger.bound()
    both_have_one = threading.Barrier(2, timeout=TIMEOUT)

    async def job() -> None:
        first = await bound.get()
        await asyncio.to_thread(both_have_one.wait)
        for _ in range(20):  # the other loop using the object meanwhile changes nothing
            assert await bound.get() is first
            assert first.closed_in is None
            assert first.abandoned_in is None
            await asyncio.sleep(0.001)
        await asyncio.to_thread(both_have_one.wait)
        await bound.close()
        assert first.closed_in is asyncio.get_running_loop()

    run_in_threads(job, job)
    assert len(ledger.made) == 2
    assert ledger.made[0].loop is not ledger.made[1].loop
    for res in ledger.made:
        assert res.closed_in is res.loop
        assert res.abandoned_in is None


async def test_close_leaves_a_live_loop_s_resource_alone() -> None:
    ledger = Ledger()
    bound = ledger.bound()
    mine = await bound.get()
    other_made = threading.Event()
    release = threading.Event()

    async def other() -> None:
        theirs = await bound.get()
        other_made.set()
        await asyncio.to_thread(release.wait, TIMEOUT)
        assert theirs.closed_in is None
        assert theirs.abandoned_in is None
        await bound.close()

    thread = threading.Thread(target=asyncio.run, args=(other(),), daemon=True)
    thread.start()
    assert await asyncio.to_thread(other_made.wait, TIMEOUT)
    await bound.close()  # closes this loop's resource only
    assert mine.closed_in is asyncio.get_running_loop()
    theirs = next(r for r in ledger.made if r is not mine)
    assert theirs.closed_in is None
    assert theirs.abandoned_in is None
    release.set()
    await asyncio.to_thread(thread.join, TIMEOUT)
    assert not thread.is_alive()
    assert theirs.closed_in is theirs.loop


def test_a_closed_loop_s_resource_is_abandoned_on_next_use() -> None:
    ledger = Ledger()
    bound = ledger.bound()
    first = asyncio.run(bound.get())  # the loop ends without closing it
    assert first.abandoned_in is None
    second = asyncio.run(bound.get())
    assert second is not first
    assert first.abandoned_in == threading.get_ident()
    assert first.closed_in is None


def test_a_failed_factory_is_retried_in_the_same_loop() -> None:
    calls = 0

    async def factory() -> int:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise ConnectionError("first attempt")
        return calls

    async def closer(_: int) -> None:
        pass

    bound: LoopBound[int] = LoopBound(factory, closer, lambda _: None)

    async def main() -> None:
        with pytest.raises(ConnectionError):
            await bound.get()
        assert await bound.get() == 2

    asyncio.run(main())


# -- real stores ------------------------------------------------------------------------------


@pytest.fixture(params=["postgres", "redis"])
def shared_store(request: pytest.FixtureRequest) -> MemoryStore:
    if request.param == "postgres":
        return PostgresMemoryStore(request.getfixturevalue("postgres_isolated_dsn"))
    return RedisMemoryStore(
        request.getfixturevalue("redis_url"), prefix=request.getfixturevalue("redis_namespace")
    )


def test_a_store_shared_by_two_threads_with_their_own_loops(shared_store: MemoryStore) -> None:
    store = shared_store

    def job(n: int) -> Callable[[], Coroutine[Any, Any, None]]:
        async def go() -> None:
            try:
                for i in range(25):
                    await store.add(f"fact thread{n} number{i}", "long_term")
                    await store.search(f"thread{n}")
                    await asyncio.sleep(0.002)
            finally:
                await store.close()

        return go

    run_in_threads(job(0), job(1))

    async def count() -> int:
        try:
            return len(await store.entries(limit=1000))
        finally:
            await store.close()

    assert asyncio.run(count()) == 50


def test_a_sync_tool_writes_memory_while_the_chat_s_loop_searches_the_store(
    shared_store: MemoryStore,
) -> None:
    store = shared_store
    notes = 12
    agent = Agent(
        ScriptedModel([tool_call("note", {"text": f"fact {i}"}) for i in range(notes)] + ["done"]),
        memory=store,
        max_iterations=notes + 2,
    )

    def note(text: str) -> str:
        """Remember a note."""
        agent.store_memory_sync(text)  # its own loop, in the tool's worker thread
        return "ok"

    agent.scopes.register(Scope("t", tools=[note]))

    async def scenario() -> None:
        stop = asyncio.Event()
        searches = 0

        async def other_requests() -> None:
            nonlocal searches
            while not stop.is_set():
                await store.search("fact")
                searches += 1
                await asyncio.sleep(0.002)

        background = asyncio.create_task(other_requests())
        try:
            response = await agent.chat("take notes")
        finally:
            stop.set()
        await background
        assert not [m for m in response.messages if m.role == "tool" and m.is_error]
        assert searches > 0
        assert len(await store.search("fact", limit=100)) == notes
        await store.close()

    run_in_threads(lambda: scenario())
