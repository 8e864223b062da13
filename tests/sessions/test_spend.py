"""A session's spend in its log: restored by a new process, kept under retention, never faked."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hookloop import (
    Agent,
    CorruptSessionError,
    Usage,
    UsageLimitExceeded,
    UsageLimits,
    UserMessage,
    tool,
)
from hookloop._approval_log import approval_session_id
from hookloop.limits import Spend
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
    # Retention keeps a side session whole; each record holds the session's totals anyway.
    path = tmp_path / "s.db"
    async with SQLiteSessionStore(path, retention=Retention(max_messages=1)) as store:
        first = await first_process(store)
        assert len(await store.load("s")) == 1  # the conversation is trimmed
        side = await store.load(approval_session_id("s"))
        assert len(side) == 2  # its side records are kept whole
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


# --- a session's limits ------------------------------------------------------------------------


async def test_a_session_limit_holds_after_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    limits = UsageLimits(requests=3)
    async with SQLiteSessionStore(path) as store:
        agent = Agent(ScriptedModel(script()), tools=[look], session_limits=limits)
        agent.use(store.session("s"))
        await agent.chat("price of tea?")  # two requests
    async with SQLiteSessionStore(path) as store:  # a new process, in effect
        model = ScriptedModel(script())
        agent = Agent(model, tools=[look], session_limits=limits)
        recorder = store.session("s")
        agent.use(recorder)
        with pytest.raises(UsageLimitExceeded) as raised:
            await agent.chat("and again?")
        assert (raised.value.limit, raised.value.maximum, raised.value.used) == ("requests", 3, 4)
        assert raised.value.when == "before the call"
        assert len(model.requests) == 1  # the third request of the session went, not the fourth
        # The history is valid: the call of the third answer is answered, and stored.
        log = await store.load("s")
        assert [m.role for m in log[-3:]] == ["user", "assistant", "tool"]
        spent = await recorder.spent()
        assert (spent.requests, spent.tool_calls, spent.usage.total_tokens) == (3, 2, 345)


async def test_the_limit_of_a_session_counts_a_chat_without_limits_before_it(
    tmp_path: Path,
) -> None:
    # Recorded spend is counted in every chat with a recorder, not only in chats with limits.
    path = tmp_path / "s.db"
    async with SQLiteSessionStore(path) as store:
        agent = Agent(ScriptedModel(script()), tools=[look])
        agent.use(store.session("s"))
        await agent.chat("price of tea?")
    async with SQLiteSessionStore(path) as store:
        limits = UsageLimits(total_tokens=300)
        model = ScriptedModel(script())
        agent = Agent(model, tools=[look], session_limits=limits)
        agent.use(store.session("s"))
        with pytest.raises(UsageLimitExceeded) as raised:
            await agent.chat("and again?")
        # 235 spent before, and the request's estimate on top: not sent.
        assert (raised.value.limit, raised.value.when) == ("total_tokens", "before the call")
        assert isinstance(raised.value.used, int)
        assert raised.value.used > 300
        assert model.requests == []


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount; needs approval."""
    return f"paid {amount}"


async def test_a_session_limit_holds_across_an_approval_resumed_in_another_process(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.db"
    limits = UsageLimits(requests=1)
    async with SQLiteSessionStore(path) as store:
        model = ScriptedModel([tool_call("pay", {"amount": 5}, id="c1"), "paid"])
        agent = Agent(model, tools=[pay], session_limits=limits)
        agent.use(store.session("s"))
        (pending,) = (await agent.chat("pay 5")).pending_approvals
    async with SQLiteSessionStore(path) as store:  # another process resumes
        model = ScriptedModel(["paid"])
        agent = Agent(model, tools=[pay], session_limits=limits)
        agent.use(store.session("s"))
        with pytest.raises(UsageLimitExceeded) as raised:
            await agent.resume([pending.approve()])
        assert (raised.value.limit, raised.value.used) == ("requests", 2)
        assert model.requests == []  # the approved call ran; the next request did not go
        assert [(m.role, m.content) for m in (await store.load("s"))[-1:]] == [("tool", "paid 5")]
