"""A store whose database cannot be used raises StoreError, naming where it is.

The driver's own errors (``sqlite3.OperationalError``, redis-py's ``ConnectionError``,
asyncpg's or ``OSError``) stay the cause; the caller catches one class of hookloop's tree for
every session and memory store. A PostgreSQL connection lost once and tried again is in
tests/durable/test_workers_outage.py.
"""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from hookloop import StoreError, UserMessage
from hookloop.memory import PostgresMemoryStore, RedisMemoryStore, SQLiteMemoryStore
from hookloop.sessions import PostgresSessionStore, RedisSessionStore, SQLiteSessionStore


def _closed_port() -> int:
    """A loopback port nothing listens on (bound once, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_redis_server_that_cannot_be_reached_is_a_store_error() -> None:
    pytest.importorskip("redis")
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    store = RedisSessionStore(url)
    try:
        with pytest.raises(StoreError, match="cannot be reached") as caught:
            await store.append("s1", UserMessage(content="hello"))
        assert url in caught.value.store
        assert type(caught.value.__cause__).__module__.startswith("redis")
        with pytest.raises(StoreError):
            await store.load("s1")
        with pytest.raises(StoreError):
            await store.list_sessions()
    finally:
        await store.close()


async def test_a_reachable_redis_server_gets_every_call_through_as_before(redis_url: str) -> None:
    # The wrapper that names an unreachable server hands back what each call returns.
    store = RedisSessionStore(redis_url, prefix=f"unreachable-{_closed_port()}:")
    try:
        await store.append("s1", UserMessage(content="hello"))
        assert [m.text for m in await store.load("s1")] == ["hello"]
        assert await store.delete("s1")
    finally:
        await store.close()


@pytest.mark.parametrize("where", ["missing-folder", "a-folder"])
async def test_a_sqlite_file_that_cannot_be_opened_is_a_store_error(
    tmp_path: Path, where: str
) -> None:
    path = tmp_path / "nowhere" / "s.db" if where == "missing-folder" else tmp_path
    store = SQLiteSessionStore(path)
    try:
        with pytest.raises(StoreError, match="cannot be used") as caught:
            await store.append("s1", UserMessage(content="hello"))
        assert caught.value.store == str(path)
        with pytest.raises(StoreError):
            await store.load("s1")
    finally:
        await store.close()


async def test_a_sqlite_store_used_again_after_its_folder_appears_keeps_every_message(
    tmp_path: Path,
) -> None:
    path = tmp_path / "later" / "s.db"
    store = SQLiteSessionStore(path)
    try:
        with pytest.raises(StoreError):
            await store.append("s1", UserMessage(content="lost?"))
        path.parent.mkdir()
        await store.append("s1", UserMessage(content="hello"))
        assert [m.text for m in await store.load("s1")] == ["hello"]
    finally:
        await store.close()


async def test_a_sqlite_memory_file_that_cannot_be_opened_is_a_store_error(tmp_path: Path) -> None:
    store = SQLiteMemoryStore(tmp_path / "nowhere" / "m.db")
    try:
        with pytest.raises(StoreError, match="cannot be used"):
            await store.add("the user likes tea", "long_term")
    finally:
        await store.close()


async def test_a_sqlite_file_locked_longer_than_the_busy_timeout_is_a_store_error(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    store = SQLiteSessionStore(path, busy_timeout=0.05)
    await store.append("s1", UserMessage(content="first"))
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")  # another writer that keeps the file
    try:
        with pytest.raises(StoreError, match="database is locked") as caught:
            await store.append("s1", UserMessage(content="second"))
        assert caught.value.store == str(path)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    await store.append("s1", UserMessage(content="second"))
    assert [m.content for m in await store.load("s1")] == ["first", "second"]
    await store.close()


@pytest.mark.parametrize("kind", ["redis-memory", "postgres-memory", "postgres-sessions"])
async def test_every_server_store_that_cannot_be_reached_is_a_store_error(kind: str) -> None:
    pytest.importorskip("redis" if kind.startswith("redis") else "asyncpg")
    port = _closed_port()
    if kind == "redis-memory":
        store: object = RedisMemoryStore(f"redis://:s3cret@127.0.0.1:{port}/0")
    elif kind == "postgres-memory":
        store = PostgresMemoryStore(f"postgresql://app:s3cret@127.0.0.1:{port}/db")
    else:
        store = PostgresSessionStore(f"postgresql://app:s3cret@127.0.0.1:{port}/db")
    try:
        with pytest.raises(StoreError, match="cannot be reached") as caught:
            if isinstance(store, PostgresSessionStore):
                await store.append("s1", UserMessage(content="hello"))
            else:
                assert isinstance(store, (RedisMemoryStore, PostgresMemoryStore))
                await store.add("the user likes tea", "long_term")
        assert f"127.0.0.1:{port}" in caught.value.store
        assert "s3cret" not in str(caught.value)
        assert "s3cret" not in caught.value.store
    finally:
        await store.close()  # type: ignore[attr-defined]
