"""A session's spend in its log: restored by a new process, kept under retention, never faked."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hookloop import Agent, CorruptSessionError, Usage, UserMessage, tool
from hookloop._approval_log import approval_session_id
from hookloop._limits import Spend
from hookloop.sessions import Retention, SessionRecorder, SQLiteSessionStore
from hookloop.testing import ScriptedModel, text_response, tool_call
from tests.sessions._backends import Backend


@tool
def look(item: str) -> str:
    """Look an item up."""
    return f"{item}: 5"


def script() -> list[object]:
    """Two model calls with usage: a tool call, then the answer."""
    call = dataclasses.replace(
        tool_call("look", {"item": "tea"}), usage=Usage(input_tokens=100, output_tokens=10)
    )
    return [call, text_response("tea is 5", usage=Usage(input_tokens=120, output_tokens=5))]


async def first_process(store: SQLiteSessionStore | object, session: str = "s") -> Usage:
    agent = Agent(ScriptedModel(script()), tools=[look])
    agent.use(store.session(session))  # type: ignore[attr-defined]
    return (await agent.chat("price of tea?")).usage


async def test_a_new_process_reads_what_the_session_spent(backend: Backend) -> None:
    async with backend.store() as store:
        used = await first_process(store)
        assert used.total_tokens == 235
    async with backend.store() as store:  # a new process, in effect
        recorder = SessionRecorder(store, "s")
        Agent(ScriptedModel([]), plugins=[recorder])
        spent = await recorder.spent()
        assert spent.usage == used  # tokens, and the cost: unknown (not priced), not 0
        assert spent.usage.cost is None


async def test_spend_adds_up_over_chats_and_processes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    async with SQLiteSessionStore(path) as store:
        first = await first_process(store)
    async with SQLiteSessionStore(path) as store:
        agent = Agent(ScriptedModel(script()), tools=[look])
        recorder = store.session("s")
        agent.use(recorder)
        second = (await agent.chat("and again?")).usage
        assert (await recorder.spent()).usage == first + second


async def test_a_session_with_no_spend_has_spent_nothing(tmp_path: Path) -> None:
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        recorder = SessionRecorder(store, "new")
        Agent(ScriptedModel([]), plugins=[recorder])
        assert await recorder.spent() == Spend()


async def test_the_spend_survives_retention_of_the_newest_messages(tmp_path: Path) -> None:
    # Each record holds the session's totals, so the newest alone says what was spent.
    path = tmp_path / "s.db"
    async with SQLiteSessionStore(path, retention=Retention(max_messages=1)) as store:
        first = await first_process(store)
        side = await store.load(approval_session_id("s"))
        assert len(side) == 1
    async with SQLiteSessionStore(path, retention=Retention(max_messages=1)) as store:
        agent = Agent(ScriptedModel(script()), tools=[look])
        recorder = store.session("s")
        agent.use(recorder)
        second = (await agent.chat("and again?")).usage
    async with SQLiteSessionStore(path) as store:
        recorder = SessionRecorder(store, "s")
        Agent(ScriptedModel([]), plugins=[recorder])
        assert (await recorder.spent()).usage == first + second


async def test_each_answer_s_spend_is_stored_before_the_answer(tmp_path: Path) -> None:
    # A process that dies between the two has counted a call it made, never the reverse.
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        agent = Agent(ScriptedModel(script()), tools=[look])
        seen: list[int] = []

        async def spend_records_stored(ctx: object) -> None:
            side = await store.load(approval_session_id("s"))
            seen.append(len(side))

        agent.use(store.session("s"))
        agent.add_hook("on_message", spend_records_stored)
        await agent.chat("price of tea?")
        # user, assistant (1 record before it), tool, assistant (2 before it)
        assert seen == [0, 1, 1, 2]


async def test_a_damaged_spend_record_is_a_corrupt_session_error_until_repaired(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        await first_process(store)
        side = approval_session_id("s")
        forged = json.dumps({"record": "hookloop.usage", "chat": "c", "base": {}, "total": 7})
        seq = await store.append(side, UserMessage(content=forged))
    async with backend.store() as store:
        recorder = SessionRecorder(store, "s")
        agent = Agent(ScriptedModel(script()), tools=[look], plugins=[recorder])
        with pytest.raises(CorruptSessionError) as raised:
            await recorder.spent()
        assert (raised.value.session_id, raised.value.seq) == (side, seq)
        assert "spend record" in raised.value.reason
        before = await store.load("s")
        with pytest.raises(CorruptSessionError):  # a chat needs the spend to record its own
            await agent.chat("again?")
        assert await store.load("s") == before  # refused at its start: nothing was sent
    async with backend.store() as store:
        recorder = SessionRecorder(store, "s")
        agent = Agent(ScriptedModel(script()), tools=[look], plugins=[recorder])
        assert await recorder.repair_approvals() == ()
        # The damaged record is set aside; the good ones before it still count.
        assert (await recorder.spent()).usage.total_tokens == 235
        await agent.chat("again?")
        assert (await recorder.spent()).usage.total_tokens == 470
