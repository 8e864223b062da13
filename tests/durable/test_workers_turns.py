"""Durable chat turns across ``hookloop worker`` processes on PostgreSQL.

Two real workers (the CLI, ``tests.durable._workers_turn:build`` as the agent); turns are
submitted from this process through the session queue. A worker is killed with SIGKILL inside
a model call or inside a tool that is not idempotent, and the other one finishes the turn:
finished steps are not repeated, the tool is not run twice (its result is reported lost), and
the session log is an uninterrupted run's, message for message, but for that answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from hookloop import AssistantMessage, Message, ToolMessage, UserMessage
from hookloop.durable import DurableChats, SessionQueue
from hookloop.sessions import PostgresSessionStore
from tests.durable._workers_support import AGENT, GUARD, Workers, hookloop_workers, wait_for


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Iterator[Workers]:
    workers = hookloop_workers(database_url, tmp_path, "--grace", "1")
    try:
        yield workers
    finally:
        workers.close()


@pytest.fixture
async def chats(database_url: str) -> AsyncIterator[DurableChats]:
    store = PostgresSessionStore(database_url)
    async with SessionQueue(database_url) as queue:
        yield DurableChats(queue, AGENT, sessions=store)
    await store.close()


async def answer(chats: DurableChats, handle: Any) -> str:
    response = await asyncio.wait_for(handle.result(), GUARD)
    return str(response.text)


def shape(messages: list[Message]) -> list[tuple[str, str]]:
    """Each message's kind and text (a tool call as its name and arguments)."""
    found = []
    for message in messages:
        if isinstance(message, AssistantMessage) and message.tool_calls:
            found += [("call", f"{call.name} {call.arguments}") for call in message.tool_calls]
        elif isinstance(message, (UserMessage, AssistantMessage, ToolMessage)):
            found.append((type(message).__name__, str(message.content)))
    return found


async def test_a_turn_killed_in_a_model_call_is_finished_by_the_other_worker(
    workers: Workers, chats: DurableChats
) -> None:
    workers.start("w1", "w2")
    assert await answer(chats, await chats.submit("calm", "calm 1")) == "charged 1: ok"
    hold = workers.hold("model", "s1")
    handle = await chats.submit("s1", "s1 1")
    victim = workers.by_pid(wait_for("a model call", lambda: workers.ran("model", "s1", 1))[0].pid)
    workers.kill(victim)
    hold.unlink()

    assert await answer(chats, handle) == "charged 1: ok"
    survivor = workers.pid(next(eid for eid in ("w1", "w2") if eid != victim))
    assert [(run.step, run.pid) for run in workers.runs() if run.session_id == "s1"] == [
        ("model", workers.pid(victim)),
        ("model", survivor),  # the call in flight is made again, elsewhere
        ("model-done", survivor),
        ("tool", survivor),
        ("tool-done", survivor),
        ("model", survivor),
        ("model-done", survivor),
    ]
    log = await chats.sessions.load("s1")
    calm = await chats.sessions.load("calm")
    assert len({message.id for message in log}) == len(log) == 4
    assert shape(log) == [(kind, text.replace("calm", "s1")) for kind, text in shape(calm)]


async def test_a_tool_that_is_not_idempotent_is_never_run_twice_across_workers(
    workers: Workers, chats: DurableChats
) -> None:
    workers.start("w1", "w2")
    hold = workers.hold("tool", "s1")
    handle = await chats.submit("s1", "s1 1")
    victim = workers.by_pid(wait_for("the tool", lambda: workers.ran("tool", "s1", 1))[0].pid)
    workers.kill(victim)
    hold.unlink()

    text = await answer(chats, handle)
    assert text.startswith("charged 1: ")
    assert text != "charged 1: ok"
    assert [run.pid for run in workers.ran("tool", "s1", 1)] == [workers.pid(victim)]
    assert workers.ran("tool-done", "s1", 1) == []
    log = await chats.sessions.load("s1")
    assert len({message.id for message in log}) == len(log) == 4
    kinds = [kind for kind, _ in shape(log)]
    assert kinds == ["UserMessage", "call", "ToolMessage", "AssistantMessage"]
    assert isinstance(log[2], ToolMessage)
    assert log[2].content == text.removeprefix("charged 1: ")


async def test_two_turns_of_one_session_submitted_together_run_one_after_the_other(
    workers: Workers, chats: DurableChats
) -> None:
    workers.start("w1", "w2")
    handles = [await chats.submit("s1", f"s1 {turn}") for turn in (1, 2, 3)]
    assert [await answer(chats, handle) for handle in handles] == [
        f"charged {turn}: ok" for turn in (1, 2, 3)
    ]
    turns = [run.turn for run in workers.runs() if run.session_id == "s1"]
    assert turns == sorted(turns)  # never interleaved
    log = await chats.sessions.load("s1")
    assert [text for kind, text in shape(log) if kind == "UserMessage"] == ["s1 1", "s1 2", "s1 3"]
    assert len(log) == 12
    again = await chats.submit("s1", "s1 1", turn_id=handles[0].turn_id)  # a retried request
    assert again.workflow_id == handles[0].workflow_id
    assert await answer(chats, again) == "charged 1: ok"
    assert await chats.sessions.load("s1") == log  # the same turn: nothing ran again


async def test_a_worker_stopped_with_sigterm_hands_its_turn_over_without_running_the_tool_twice(
    workers: Workers, chats: DurableChats
) -> None:
    workers.start("w1", "w2")
    hold = workers.hold("tool", "s1")
    handle = await chats.submit("s1", "s1 1")
    leaver = workers.by_pid(wait_for("the tool", lambda: workers.ran("tool", "s1", 1))[0].pid)
    assert workers.terminate(leaver) == 0  # after --grace 1: the tool still runs, left behind
    hold.unlink()

    text = await answer(chats, handle)
    assert text.startswith("charged 1: ")
    assert text != "charged 1: ok"  # its result is reported lost, not made up by a second run
    assert [run.pid for run in workers.ran("tool", "s1", 1)] == [workers.pid(leaver)]
    stayer = next(eid for eid in ("w1", "w2") if eid != leaver)
    assert [run.pid for run in workers.ran("model-done", "s1", 1)] == [
        workers.pid(leaver),
        workers.pid(stayer),
    ]
    assert len(await chats.sessions.load("s1")) == 4


async def test_a_worker_writes_the_events_of_published_turns_only(
    chats: DurableChats, workers: Workers, database_url: str
) -> None:
    # A turn no server follows runs without a stream and leaves no rows in the events
    # table; one `hookloop serve --durable` submits (publish=True) has its events there.
    import psycopg

    workers.start("w1")
    assert await answer(chats, await chats.submit("quiet", "quiet 1", turn_id="t-1")) == (
        "charged 1: ok"
    )
    handle = await chats.submit("loud", "loud 1", turn_id="t-1", publish=True)
    assert await answer(chats, handle) == "charged 1: ok"
    with psycopg.connect(database_url) as conn:
        rows = dict(
            conn.execute("SELECT turn, count(*) FROM hookloop_turn_events GROUP BY turn").fetchall()
        )
    assert set(rows) == {handle.workflow_id}
    assert rows[handle.workflow_id] > 3
