"""A durable turn that stops on a store error: a typed error, and the same turn_id finishes it."""

from __future__ import annotations

from pathlib import Path

import pytest

from hookloop import Message, RunError, StoreError
from hookloop.durable import DBOSEngine, DurableChats
from hookloop.sessions import SQLiteSessionStore
from tests.durable import _agents


class FlakyStore(SQLiteSessionStore):
    """A SQLite session store whose appends of ``down``'s role fail (a lost database)."""

    down: str | None = None

    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        if message.role == self.down:
            raise StoreError("the session store cannot be reached (test)", store="flaky")
        return await super()._append_message(session_id, message, expected_seq)


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
