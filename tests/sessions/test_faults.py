"""SessionRecorder and the stores under faults: cancellation, failing stores and hooks, races."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

import hookloop.sessions._postgres as pg_store
from hookloop import Agent, AssistantMessage, ChatCancelledError
from hookloop._messages import Message, UserMessage
from hookloop.sessions import (
    PostgresSessionStore,
    RedisSessionStore,
    Retention,
    SessionStore,
    SQLiteSessionStore,
)
from hookloop.testing import FakeClock, ScriptedModel
from tests.sessions._backends import POSIX_START, Backend, backend_for


def slow_appends(store: SessionStore) -> tuple[asyncio.Event, list[bool]]:
    """Make the store's appends wait a while when ``slow[0]`` is set; the event says one began."""
    started = asyncio.Event()
    slow = [False]
    append = store.append

    async def slow_append(session_id: str, message: Message, **kwargs: Any) -> int:
        if slow[0]:
            started.set()
            await asyncio.sleep(0.2)  # e.g. waiting for a lock another worker holds
        return await append(session_id, message, **kwargs)

    store.append = slow_append  # type: ignore[method-assign]
    return started, slow


async def test_a_chat_cancelled_while_a_message_is_stored_keeps_it(backend: Backend) -> None:
    async with backend.store() as store:
        started, slow = slow_appends(store)
        agent = Agent(ScriptedModel(["one", "two", "three"]), plugins=[store.session("s")])
        await agent.chat("hello")
        slow[0] = True
        chat = asyncio.create_task(agent.chat("second"))
        await started.wait()
        agent.cancel("stop")  # lands while the user message is being stored
        with pytest.raises(ChatCancelledError):
            await chat
        slow[0] = False
        assert await store.load("s") == list(agent.messages)
        await agent.chat("third")
        assert await store.load("s") == list(agent.messages)
        roles = ["user", "assistant", "user", "user", "assistant"]  # "second" got no answer
        assert [m.role for m in agent.messages] == roles


async def test_a_sqlite_append_committed_after_the_cancel_is_counted(tmp_path: Path) -> None:
    class SlowStore(SQLiteSessionStore):
        slow = False
        started = threading.Event()
        release = threading.Event()

        def _append(self, conn: Any, args: Any) -> int:  # on the store's thread
            if self.slow:
                self.started.set()
                # Held until the cancel has landed: a timer could run out first on a
                # loaded machine, and the chat would end before the cancel.
                self.release.wait(timeout=60)
            return super()._append(conn, args)

    async with SlowStore(tmp_path / "s.db", synchronous="full") as store:
        agent = Agent(ScriptedModel(["one", "two", "three"]), plugins=[store.session("s")])
        await agent.chat("hello")
        store.slow = True
        chat = asyncio.create_task(agent.chat("second"))
        await asyncio.to_thread(store.started.wait)
        assert agent.cancel("stop")  # while the append waits on the store's thread
        store.release.set()
        with pytest.raises(ChatCancelledError):
            await chat
        store.slow = False
        await agent.chat("third")  # no SessionConflictError: the recorder knows its seq
        assert await store.load("s") == list(agent.messages)


async def test_an_on_message_handler_that_raises_does_not_keep_a_message_from_the_store(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        agent = Agent(ScriptedModel(["one", "two"]))
        seen: list[str] = []

        def audit(ctx: Any) -> None:  # registered before the recorder, hiccups once
            seen.append(ctx.message.role)
            if len(seen) == 2:
                raise RuntimeError("audit sink down")

        agent.add_hook("on_message", audit)
        agent.use(store.session("s"))
        with pytest.raises(RuntimeError, match="audit sink down"):
            await agent.chat("hello")
        assert await store.load("s") == list(agent.messages)
        await agent.chat("again")
        assert await store.load("s") == list(agent.messages)


async def lock_waiters(holder: Any, count: int) -> None:
    """Wait until ``count`` sessions wait for ``holder``, or for one that waits for it."""
    for _ in range(6000):  # a minute, then the test fails instead of hanging
        await holder.execute("SELECT pg_stat_clear_snapshot()")  # inside a transaction, too
        waiting = await holder.fetchval(
            "WITH first AS (SELECT pid FROM pg_stat_activity "
            "WHERE $1::int = ANY(pg_blocking_pids(pid))) "
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE pg_blocking_pids(pid) && (ARRAY(SELECT pid FROM first) || $1::int)",
            holder.get_server_pid(),
        )
        if waiting >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} sessions came to wait for the lock")


async def test_postgres_delete_racing_an_append_leaves_no_orphan(
    postgres_isolated_dsn: str,
) -> None:
    import asyncpg

    dsn = postgres_isolated_dsn
    async with PostgresSessionStore(dsn) as store:
        for i in range(3):
            await store.append("s", UserMessage(content=f"m{i}"))
        # Another worker holds the session row: the append waits for it, the delete comes next.
        holder = await asyncpg.connect(dsn)
        try:
            async with holder.transaction():
                await holder.execute(
                    "SELECT 1 FROM hookloop_sessions WHERE session_id = 's' FOR UPDATE"
                )
                append = asyncio.create_task(store.append("s", UserMessage(content="late")))
                await lock_waiters(holder, 1)  # not a timer: a loaded machine may be slower
                delete = asyncio.create_task(store.delete("s"))
                await lock_waiters(holder, 2)
        finally:
            await holder.close()
        assert await append == 4
        assert await delete
        assert await store.info("s") is None
        assert await store.records("s") == []  # the late message went with its session
        assert await store.append("s", UserMessage(content="again")) == 1
        assert [m.text for m in await store.load("s")] == ["again"]


@pytest.fixture(params=["postgres", "redis"])
def server_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """The backends that many workers share."""
    return backend_for(request.param, request, tmp_path)


async def test_prune_keeps_a_message_appended_while_it_deletes(
    server_backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another worker appends to a session prune chose, just before prune deletes it."""
    place = server_backend
    kind = place.kind
    clock = FakeClock(POSIX_START)
    async with (
        place.store(clock=clock, retention=Retention(max_sessions=1)) as store,
        place.store(clock=clock) as other,
    ):
        await store.list_sessions()  # opened (opening prunes too): only prune() is left
        await other.append("old", UserMessage(content="old chat"))
        clock.advance(1)
        await other.append("new", UserMessage(content="new chat"))
        clock.advance(1)
        appended: list[asyncio.Task[int]] = []

        def append_meanwhile() -> None:
            late = other.append("old", UserMessage(content="late"))
            appended.append(asyncio.create_task(late))

        if kind == "postgres":
            delete_rows = pg_store._delete_rows

            async def late_delete(conn: Any, session_id: str) -> bool:
                append_meanwhile()
                await asyncio.sleep(0.2)
                return await delete_rows(conn, session_id)

            monkeypatch.setattr(pg_store, "_delete_rows", late_delete)
        else:
            assert isinstance(store, RedisSessionStore)
            # Before the fix the choice and the delete were two steps; this is between them.
            delete = store._delete

            async def late_delete_redis(client: Any, ids: list[str]) -> int:
                append_meanwhile()
                await asyncio.sleep(0.2)
                return await delete(client, ids)

            monkeypatch.setattr(store, "_delete", late_delete_redis)
        await store.prune()
        if not appended:  # the choice and the delete are one step: append after it
            append_meanwhile()
        await asyncio.gather(*appended)
        assert "late" in [m.text for m in await other.load("old")]
        info = await other.info("old")
        assert info is not None
        assert info.message_count == len(await other.records("old"))


async def test_postgres_prune_skips_a_session_appended_to_after_the_choice(
    postgres_isolated_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = FakeClock(POSIX_START)
    retention = Retention(max_sessions=1)
    async with (
        PostgresSessionStore(postgres_isolated_dsn, clock=clock, retention=retention) as store,
        PostgresSessionStore(postgres_isolated_dsn, clock=clock) as other,
    ):
        await store.list_sessions()  # opened (opening prunes too): only prune() is left
        await other.append("old", UserMessage(content="old chat"))
        clock.advance(1)
        await other.append("new", UserMessage(content="new chat"))
        delete_unchanged = pg_store._delete_unchanged

        async def after_an_append(conn: Any, session_id: str, seen: Any) -> bool:
            await other.append(session_id, UserMessage(content="late"))  # same clock reading
            return await delete_unchanged(conn, session_id, seen)

        monkeypatch.setattr(pg_store, "_delete_unchanged", after_an_append)
        assert await store.prune() == 0
        assert [m.text for m in await other.load("old")] == ["old chat", "late"]


def failing_appends(store: SessionStore) -> list[int]:
    """Make the store's appends fail while ``fail[0]`` > 0, counting it down."""
    fail = [0]
    append = store.append

    async def flaky_append(session_id: str, message: Message, **kwargs: Any) -> int:
        if fail[0] > 0:
            fail[0] -= 1
            raise OSError("disk I/O error (transient)")
        return await append(session_id, message, **kwargs)

    store.append = flaky_append  # type: ignore[method-assign]
    return fail


async def test_a_switch_whose_copy_failed_halfway_is_completed_by_the_next_chat(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        fail = failing_appends(store)
        agent = Agent(ScriptedModel(["a1", "a2", "a3"]), session_id="old")
        agent.use(store.session())
        await agent.chat("q1")
        await agent.chat("q2")
        original = await store.load("old")
        stored = store.append

        failed: list[Message] = []

        async def fail_the_second(session_id: str, message: Message, **kwargs: Any) -> int:
            if session_id == "new" and message == original[1] and not failed:
                failed.append(message)
                fail[0] = 1
            return await stored(session_id, message, **kwargs)

        store.append = fail_the_second  # type: ignore[method-assign]
        await agent.switch_session("new", parent_session_id="old")  # logged, not raised
        assert await store.load("new") == original[:1]
        await agent.chat("q3")  # tries again first
        assert await store.load("new") == list(agent.messages)
        assert len(agent.messages) == 6


async def test_a_switch_whose_copy_keeps_failing_makes_the_next_chat_raise(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        fail = failing_appends(store)
        agent = Agent(ScriptedModel(["a1", "a2"]), session_id="old")
        agent.use(store.session())
        await agent.chat("q1")
        fail[0] = 1_000
        await agent.switch_session("new", parent_session_id="old")
        with pytest.raises(OSError, match="disk I/O"):
            await agent.chat("q2")
        assert len(agent.messages) == 2  # the chat ended before its message was committed
        fail[0] = 0
        await agent.chat("q2")
        assert await store.load("new") == list(agent.messages)


async def test_the_first_chat_copies_the_whole_conversation_into_an_empty_session(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        fail = failing_appends(store)
        agent = Agent(ScriptedModel(["a1", "a2"]))
        agent.history.import_history(
            [
                UserMessage(content="earlier"),
                AssistantMessage(content="yes"),
                UserMessage(content="and"),
            ]
        )
        recorder = store.session("s")
        agent.use(recorder)
        fail[0] = 1
        with pytest.raises(OSError, match="disk I/O"):
            await agent.chat("q1")
        await agent.chat("q2")
        assert await store.load("s") == list(agent.messages)


async def test_a_redis_index_of_the_wrong_type_is_a_session_error(
    redis_url: str, redis_namespace: str
) -> None:
    from redis.asyncio import Redis

    from hookloop import SessionError

    async with RedisSessionStore(redis_url, prefix=redis_namespace) as store:
        await store.list_sessions()  # opened
        client = Redis.from_url(redis_url)
        try:
            await client.set(f"{redis_namespace}sessions", "not a sorted set")
        finally:
            await client.aclose()
        with pytest.raises(SessionError, match="is not a sorted set") as caught:
            await store.list_sessions()
        assert caught.value.session_id is None
    retention = Retention(max_sessions=1)
    async with RedisSessionStore(redis_url, prefix=redis_namespace, retention=retention) as store:
        with pytest.raises(SessionError, match="is not a sorted set"):
            await store.prune()
