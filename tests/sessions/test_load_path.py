"""``load()`` decodes the rows into messages directly, without the records of ``records()``.

Building a :class:`StoredMessage` per row only to unwrap it again cost about 1.6 ms of a
10,000-message restore (bench/stores.py, restore_10k_ms). These tests make building the
records fail, so a ``load()`` that still went through them would show; a corrupt row is
still named by its sequence number.
"""

from __future__ import annotations

import pytest

from hookloop import UserMessage
from hookloop._errors import CorruptSessionError
from hookloop.sessions import SessionStore, StoredMessage, _codec
from tests.sessions._backends import Backend
from tests.sessions.test_stores import append_all, every_kind


@pytest.fixture
def no_records(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(rows: object, messages: object) -> list[StoredMessage]:
        raise AssertionError("load() built the records of records()")

    monkeypatch.setattr(_codec, "_records", refuse)


@pytest.mark.usefixtures("no_records")
async def test_load_gives_every_message_without_building_records(backend: Backend) -> None:
    messages = every_kind()
    async with backend.store() as store:
        await append_all(store, "s1", messages)
    async with backend.store() as store:  # a fresh store: a restarted process
        assert await store.load("s1") == messages
        assert await store.load("unknown") == []


@pytest.mark.usefixtures("no_records")
async def test_load_still_names_a_corrupt_row(backend: Backend) -> None:
    async with backend.store() as store:
        await store.append("bad", UserMessage(content="one", id="m1"))
        await store.append("bad", UserMessage(content="two", id="m2"))
    await backend.set_row("bad", 2, data="{not json")
    async with backend.store() as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("bad")
    assert (caught.value.session_id, caught.value.seq) == ("bad", 2)
    assert "not valid JSON" in caught.value.reason


async def test_a_store_without_its_own_load_path_unwraps_its_records(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A backend written before _read_messages existed: load() unwraps records() as before.
    async with backend.store() as store:
        messages = every_kind()
        await append_all(store, "s1", messages)
        monkeypatch.setattr(type(store), "_read_messages", SessionStore._read_messages)
        assert await store.load("s1") == messages
