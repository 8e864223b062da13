"""The memory store contract, run against every backend on a real server (no mocks).

SQLite is a file under ``tmp_path``; PostgreSQL gets a fresh schema per test
(``postgres_isolated_dsn``) and Redis a fresh key prefix (``redis_namespace``), both from
``tests/conftest.py``.

Layout of this module:
    writes        add / get / entries, metadata and timestamps, refused writes write nothing
    search        word matching, ranking basics, type filter, limit
    replace       by id and by text; created_at kept, updated_at moved, index follows
    remove        by id and by text
    sharing       a second store object sees the same data; concurrent writers lose nothing
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hookloop import Agent, CorruptStoreError, MemoryNotFoundError, MemoryRequestError
from hookloop.memory import (
    MEMORY_ACTIONS,
    MEMORY_TYPES,
    MemoryStore,
    MemoryTarget,
    PostgresMemoryStore,
    RedisMemoryStore,
    SQLiteMemoryStore,
)
from hookloop.testing import ScriptedModel
from tests.stores._damaged import DAMAGES, check_damaged_file_error, damage_file

BACKENDS = ["sqlite", "postgres", "redis"]


class Clock:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 2, 3, 4, 5, 123456, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now


StoreFactory = Callable[[], MemoryStore]


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> StoreFactory:
    """Makes store objects that all see one isolated namespace of the backend."""
    backend = request.param
    if backend == "sqlite":
        return lambda: SQLiteMemoryStore(tmp_path / "memory.db", clock=clock)
    if backend == "postgres":
        dsn = request.getfixturevalue("postgres_isolated_dsn")
        return lambda: PostgresMemoryStore(dsn, clock=clock, max_size=4)
    url = request.getfixturevalue("redis_url")
    prefix = request.getfixturevalue("redis_namespace")
    return lambda: RedisMemoryStore(url, prefix=prefix, clock=clock)


@pytest.fixture
async def store(make_store: StoreFactory) -> AsyncIterator[MemoryStore]:
    async with make_store() as opened:
        yield opened


# --- writes ---------------------------------------------------------------------------------


async def test_add_returns_the_entry_and_get_reads_back_the_same(
    store: MemoryStore, clock: Clock
) -> None:
    metadata = {"user": "ann", "tags": ["tea", "☕"], "nested": {"n": 1, "ok": True, "x": None}}
    entry = await store.add("Ann drinks green tea", "long_term", metadata)

    assert entry.id.startswith("mem_")
    assert entry.memory_type == "long_term"
    assert entry.content == "Ann drinks green tea"
    assert entry.metadata == metadata
    assert entry.created_at == entry.updated_at == clock.now
    assert entry.created_at.tzinfo is not None
    assert entry.score is None
    assert await store.get(entry.id) == entry
    assert await store.get("mem_nope") is None


async def test_entries_are_newest_first_filtered_by_type_and_limited(store: MemoryStore) -> None:
    first = await store.add("one", "long_term")
    second = await store.add("two", "entity")
    third = await store.add("three", "long_term")

    assert [e.id for e in await store.entries()] == [third.id, second.id, first.id]
    assert [e.id for e in await store.entries(memory_type="long_term")] == [third.id, first.id]
    assert [e.id for e in await store.entries(limit=2)] == [third.id, second.id]
    assert await store.entries(memory_type="episodic") == []


@pytest.mark.parametrize("memory_type", MEMORY_TYPES)
async def test_every_memory_type_is_kept(store: MemoryStore, memory_type: str) -> None:
    entry = await store.add(f"a {memory_type} memory", memory_type)  # type: ignore[arg-type]
    assert (await store.entries(memory_type=memory_type))[0] == entry  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("content", "memory_type", "metadata"),
    [
        ("fine", "semantic", None),  # unknown type
        ("fine", "LONG_TERM", None),
        ("", "long_term", None),  # empty content
        ("   ", "long_term", None),
        ("fine", "long_term", {"when": datetime(2026, 1, 1)}),  # not JSON
        ("fine", "long_term", {"x": float("nan")}),
        ("fine", "long_term", {1: "int key"}),
        ("fine", "long_term", ["not", "a", "mapping"]),
    ],
)
async def test_a_refused_add_raises_a_value_error_and_writes_nothing(
    store: MemoryStore, content: str, memory_type: str, metadata: object
) -> None:
    with pytest.raises(MemoryRequestError) as caught:
        await store.add(content, memory_type, metadata)  # type: ignore[arg-type]
    assert isinstance(caught.value, ValueError)
    assert await store.entries() == []


async def test_every_action_is_supported_for_every_type(store: MemoryStore) -> None:
    for action in MEMORY_ACTIONS:
        for memory_type in MEMORY_TYPES:
            assert store.supports(action, memory_type)
    assert not store.supports("add", "semantic")  # type: ignore[arg-type]


# --- search ---------------------------------------------------------------------------------


async def test_search_matches_words_case_insensitively_and_ignores_punctuation(
    store: MemoryStore,
) -> None:
    paris = await store.add("The user lives in PARIS, France!", "long_term")
    await store.add("The user's cat is called Tom.", "long_term")

    hits = await store.search("paris")
    assert [h.id for h in hits] == [paris.id]
    assert hits[0].content == paris.content
    assert hits[0].metadata == paris.metadata
    assert hits[0].score is not None
    assert await store.search("Paris?!") == hits
    assert await store.search("london") == []
    assert await store.search("  ...  ") == []  # no words, nothing found


async def test_search_finds_unicode_words_whatever_their_case(store: MemoryStore) -> None:
    entry = await store.add("Rendez-vous au Café Zürich à 9h", "episodic")
    assert [h.id for h in await store.search("café")] == [entry.id]
    assert [h.id for h in await store.search("ZÜRICH")] == [entry.id]


async def test_search_ranks_entries_with_more_of_the_query_words_first(store: MemoryStore) -> None:
    for filler in ("budget review meeting", "quarterly budget plan", "team lunch"):
        await store.add(filler, "long_term")
    only_python = await store.add("python tips for beginners", "long_term")
    both = await store.add("async python tips for experts", "long_term")
    only_async = await store.add("async meeting notes", "long_term")

    hits = await store.search("async python")
    assert hits[0].id == both.id
    assert {h.id for h in hits} == {both.id, only_python.id, only_async.id}
    scores = [h.score for h in hits]
    assert all(s is not None for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]


async def test_search_ranks_an_entry_that_repeats_the_word_higher(store: MemoryStore) -> None:
    for filler in ("apples and pears", "plums and figs", "oranges and limes"):
        await store.add(filler, "long_term")
    once = await store.add("tea coffee juice water", "long_term")
    thrice = await store.add("tea tea tea water", "long_term")

    assert [h.id for h in await store.search("tea")] == [thrice.id, once.id]


async def test_search_filters_by_type_and_respects_the_limit(store: MemoryStore) -> None:
    kept = [await store.add(f"project atlas note {i}", "entity") for i in range(4)]
    await store.add("project atlas diary", "episodic")

    entity_hits = await store.search("atlas", memory_type="entity")
    assert {h.id for h in entity_hits} == {e.id for e in kept}
    assert all(h.memory_type == "entity" for h in entity_hits)
    assert len(await store.search("atlas", limit=2)) == 2
    assert len(await store.search("atlas")) == 5
    with pytest.raises(MemoryRequestError):
        await store.search("atlas", memory_type="semantic")  # type: ignore[arg-type]
    with pytest.raises(MemoryRequestError):
        await store.search("atlas", limit=0)


# --- replace --------------------------------------------------------------------------------


async def test_replace_by_id_changes_text_keeps_created_at_and_moves_updated_at(
    store: MemoryStore, clock: Clock
) -> None:
    entry = await store.add("Ann likes green tea", "long_term", {"source": "chat"})
    other = await store.add("Bob likes coffee", "long_term")

    changed = await store.replace(
        MemoryTarget(memory_type="long_term", memory_id=entry.id), "Ann likes oolong tea"
    )

    assert changed.id == entry.id
    assert changed.content == "Ann likes oolong tea"
    assert changed.metadata == {"source": "chat"}  # None keeps the metadata
    assert changed.created_at == entry.created_at
    assert changed.updated_at == clock.now > entry.updated_at
    assert await store.get(entry.id) == changed
    assert await store.get(other.id) == other
    assert [h.id for h in await store.search("oolong")] == [entry.id]
    assert await store.search("green") == []  # the old words left the index


async def test_replace_by_text_is_case_insensitive_and_can_change_metadata(
    store: MemoryStore,
) -> None:
    entry = await store.add("Meeting with Dana on Friday", "episodic", {"v": 1})
    await store.add("Meeting with Eve on Monday", "episodic")

    changed = await store.replace(
        MemoryTarget(memory_type="episodic", match="dana ON friday"),
        "Meeting with Dana moved to Saturday",
        {"v": 2},
    )

    assert changed.id == entry.id
    assert changed.metadata == {"v": 2}
    assert (await store.get(entry.id)) == changed


async def test_a_text_target_matches_by_casefold_on_every_backend(store: MemoryStore) -> None:
    entry = await store.add("Kim isst gern ÄPFEL aus der Straße", "entity")
    for match in ("äpfel", "STRASSE", "straße"):
        target = MemoryTarget(memory_type="entity", match=match)
        assert (await store.resolve(target)).id == entry.id


async def test_replace_of_text_in_several_entries_is_refused_and_changes_nothing(
    store: MemoryStore,
) -> None:
    first = await store.add("likes tea", "long_term")
    second = await store.add("likes tea a lot", "long_term")

    with pytest.raises(MemoryRequestError, match="2 long_term memories contain"):
        await store.replace(MemoryTarget(memory_type="long_term", match="tea"), "x")
    assert await store.get(first.id) == first
    assert await store.get(second.id) == second


async def test_replace_of_something_missing_raises_not_found(store: MemoryStore) -> None:
    entry = await store.add("a long-term fact", "long_term")

    with pytest.raises(MemoryNotFoundError) as caught:
        await store.replace(MemoryTarget(memory_type="long_term", match="nowhere"), "x")
    assert isinstance(caught.value, LookupError)
    assert caught.value.target == "nowhere"
    with pytest.raises(MemoryNotFoundError):  # the id exists, but with another type
        await store.replace(MemoryTarget(memory_type="entity", memory_id=entry.id), "x")
    with pytest.raises(MemoryRequestError):  # a refused text writes nothing either
        await store.replace(MemoryTarget(memory_type="long_term", memory_id=entry.id), " ")
    assert await store.get(entry.id) == entry


# --- remove ---------------------------------------------------------------------------------


async def test_remove_by_id_and_by_text_deletes_the_entry_everywhere(store: MemoryStore) -> None:
    a = await store.add("Carol works at Initech", "entity")
    b = await store.add("Dave works at Globex", "entity")
    c = await store.add("Erin works at Hooli", "entity")

    removed = await store.remove(MemoryTarget(memory_type="entity", memory_id=a.id))
    assert removed == a
    removed = await store.remove(MemoryTarget(memory_type="entity", match="GLOBEX"))
    assert removed == b

    assert await store.get(a.id) is None
    assert await store.get(b.id) is None
    assert [e.id for e in await store.entries()] == [c.id]
    assert [h.id for h in await store.search("works")] == [c.id]
    with pytest.raises(MemoryNotFoundError):
        await store.remove(MemoryTarget(memory_type="entity", memory_id=a.id))


# --- sharing --------------------------------------------------------------------------------


async def test_a_second_store_object_sees_the_same_memories(make_store: StoreFactory) -> None:
    async with make_store() as writer:
        entry = await writer.add("shared fact about zebras", "long_term", {"k": "v"})
    async with make_store() as reader:
        assert await reader.get(entry.id) == entry
        assert [h.id for h in await reader.search("zebras")] == [entry.id]


async def test_concurrent_writers_lose_nothing(make_store: StoreFactory) -> None:
    async with make_store() as one, make_store() as two:
        added = await asyncio.gather(
            *(
                (one if i % 2 else two).add(f"concurrent note number{i} shared", "short_term")
                for i in range(20)
            )
        )
        assert {e.id for e in await one.entries()} == {e.id for e in added}
        assert len(await two.search("shared", limit=50)) == 20
        assert [h.id for h in await one.search("number7")] == [added[7].id]


async def test_concurrent_replaces_of_one_entry_leave_the_index_matching_the_text(
    make_store: StoreFactory,
) -> None:
    async with make_store() as one, make_store() as two:
        entry = await one.add("original wording", "long_term")
        target = MemoryTarget(memory_type="long_term", memory_id=entry.id)
        await asyncio.gather(
            *((one if i % 2 else two).replace(target, f"version{i} wording") for i in range(8))
        )
        final = await one.get(entry.id)
        assert final is not None
        word = final.content.split()[0]
        assert [h.id for h in await two.search(word)] == [entry.id]
        assert [h.id for h in await two.search("wording")] == [entry.id]
        for i in range(8):  # no other version is still in the index
            if f"version{i}" != word:
                assert await one.search(f"version{i}") == []
        assert await one.search("original") == []


def test_the_sync_api_uses_a_store_in_one_event_loop_after_another(
    make_store: StoreFactory,
) -> None:
    # Each *_sync call runs its own event loop; connections made in one are closed before it
    # ends, and the next call opens new ones (warnings are errors here, so a leak fails).
    agent = Agent(ScriptedModel([]), memory=make_store())
    first = agent.store_memory_sync("made in the first loop")
    second = agent.store_memory_sync("made in the second loop", memory_type="entity")
    agent.store_memory_sync("third loop", action="replace", memory_id=first.id)
    assert agent.store_memory_sync("", memory_type="entity", action="remove", match="second") == (
        second
    )


# -- SQLite: an entry and its index row commit together ----------------------------------------


async def _deny_writes_to(store: SQLiteMemoryStore, table: str) -> None:
    """Make every write to ``table`` fail, as if the process died right before it."""
    import sqlite3

    writes = {sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE, sqlite3.SQLITE_DELETE}

    def authorizer(action: int, arg1: str | None, *_: object) -> int:
        return sqlite3.SQLITE_DENY if action in writes and arg1 == table else sqlite3.SQLITE_OK

    await store._thread.run(lambda conn: conn.set_authorizer(authorizer))


async def test_sqlite_writes_are_atomic_when_the_index_write_fails(tmp_path: Path) -> None:
    path = str(tmp_path / "m.db")
    async with SQLiteMemoryStore(path) as store:
        kept = await store.add("Kim prefers green tea", "entity")
        await _deny_writes_to(store, f"{store.table}_fts")
        with pytest.raises(Exception, match="not authorized"):
            await store.add("Sam likes black coffee", "entity")
        with pytest.raises(Exception, match="not authorized"):
            await store.replace(
                MemoryTarget(memory_type="entity", memory_id=kept.id), "Kim prefers oolong"
            )
        with pytest.raises(Exception, match="not authorized"):
            await store.remove(MemoryTarget(memory_type="entity", memory_id=kept.id))
    async with SQLiteMemoryStore(path) as store:  # a new connection sees what was committed
        assert [e.content for e in await store.entries()] == ["Kim prefers green tea"]
        assert [e.id for e in await store.search("tea")] == [kept.id]
        assert await store.search("coffee") == []
        assert await store.search("oolong") == []


def test_sqlite_add_killed_before_the_index_write_leaves_no_entry(tmp_path: Path) -> None:
    # The process dies (os._exit) right before the index INSERT: nothing of the entry stays.
    import subprocess
    import sys
    import textwrap

    path = str(tmp_path / "m.db")
    child = textwrap.dedent(
        f"""
        import asyncio, os
        from hookloop.memory import SQLiteMemoryStore

        async def main():
            store = SQLiteMemoryStore({path!r})
            await store.add("warm up entry", "long_term")
            await store._thread.run(lambda conn: conn.set_trace_callback(
                lambda sql: os._exit(9) if sql.startswith("INSERT") and "_fts" in sql else None
            ))
            await store.add("Kim prefers green tea", "entity")

        asyncio.run(main())
        """
    )
    assert subprocess.run([sys.executable, "-c", child], timeout=60).returncode == 9

    async def check() -> None:
        async with SQLiteMemoryStore(path) as store:
            assert [e.content for e in await store.entries()] == ["warm up entry"]
            assert await store.search("tea") == []

    asyncio.run(check())


# -- PostgreSQL: text it cannot hold is a MemoryRequestError -----------------------------------


async def test_postgres_refuses_a_nul_character_with_a_memory_request_error(
    postgres_isolated_dsn: str,
) -> None:
    async with PostgresMemoryStore(postgres_isolated_dsn) as store:
        kept = await store.add("a clean entry", "long_term", {"k": "v"})
        with pytest.raises(MemoryRequestError, match="NUL"):
            await store.add("nul\x00in text", "long_term")
        with pytest.raises(MemoryRequestError, match="NUL"):
            await store.add("ok text", "long_term", {"k": ["a\x00b"]})
        with pytest.raises(MemoryRequestError, match="NUL"):
            await store.add("ok text", "long_term", {"k\x00": 1})
        target = MemoryTarget(memory_type="long_term", memory_id=kept.id)
        with pytest.raises(MemoryRequestError, match="NUL"):
            await store.replace(target, "changed\x00")
        with pytest.raises(MemoryRequestError, match="NUL"):
            await store.replace(target, "changed", {"k": {"deep": "\x00"}})
        assert await store.get("mem_\x00") is None
        with pytest.raises(MemoryNotFoundError):
            await store.remove(MemoryTarget(memory_type="long_term", memory_id="mem_\x00"))
        assert await store.entries() == [kept]


# -- Redis: a write that never gets through is a hookloop error --------------------------------


async def test_redis_gives_up_on_an_entry_that_keeps_changing_with_a_memory_request_error(
    redis_url: str, redis_namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from redis.asyncio.client import Pipeline
    from redis.exceptions import WatchError

    async with RedisMemoryStore(redis_url, prefix=redis_namespace) as store:
        entry = await store.add("a busy entry", "long_term")

        execute = Pipeline.execute

        async def always_changed(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
            if self.watching:  # a transaction under WATCH: another writer got in first
                raise WatchError("changed meanwhile")
            return await execute(self, raise_on_error)

        monkeypatch.setattr(Pipeline, "execute", always_changed)
        target = MemoryTarget(memory_type="long_term", memory_id=entry.id)
        with pytest.raises(MemoryRequestError, match="kept changing"):
            await store.replace(target, "new text")
        with pytest.raises(MemoryRequestError, match="kept changing"):
            await store.remove(target)
        monkeypatch.undo()
        assert await store.entries() == [entry]


@pytest.mark.parametrize("how", DAMAGES)
async def test_a_damaged_sqlite_memory_file_is_a_typed_error_naming_it(
    tmp_path: Path, how: str
) -> None:
    path = tmp_path / "memory.db"
    store = SQLiteMemoryStore(path)
    for n in range(300):
        await store.add(f"fact number {n} " * 20, "long_term")
    await store.close()
    assert not (tmp_path / "memory.db-wal").exists()  # all in the file itself
    damage_file(path, how)
    agent = Agent(ScriptedModel([]), memory=SQLiteMemoryStore(path))
    for call in (
        lambda: agent.search_memory("fact"),
        lambda: agent.store_memory("one more fact"),
        lambda: agent.store_memory("fact number 3", action="remove"),
    ):
        with pytest.raises(CorruptStoreError) as caught:
            await call()
        check_damaged_file_error(caught.value, path)
