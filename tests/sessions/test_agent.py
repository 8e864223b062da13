"""SessionRecorder: an agent whose conversation survives restarts, on all three backends."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest

from hookloop import (
    Agent,
    AssistantMessage,
    ChatCancelledError,
    ChatHistory,
    ConcurrentChatError,
    SessionConflictError,
    ToolMessage,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.context import MISSING_RESULT_TEXT
from hookloop.sessions import Retention, SessionRecorder, SessionStore
from hookloop.testing import ScriptedModel, tool_call
from tests.sessions._backends import Backend, kill, start_worker


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def first_agent(store: SessionStore) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel([tool_call("multiply", {"a": 17, "b": 23}), "17 x 23 = 391"])
    agent = Agent(model, system_prompt="You calculate.", tools=[multiply])
    agent.use(store.session("chat"))
    return agent, model


async def test_a_restarted_agent_goes_on_with_the_identical_history(backend: Backend) -> None:
    async with backend.store() as store:
        agent, _ = first_agent(store)
        await agent.chat("What is 17 * 23?")
        before = agent.messages
        assert [m.role for m in before] == ["user", "assistant", "tool", "assistant"]
        assert await store.load("chat") == list(before)

    async with backend.store() as store:  # a new process, in effect
        model = ScriptedModel(["It was 391."])
        agent = Agent(model, system_prompt="You calculate.", tools=[multiply])
        recorder = SessionRecorder(store, "chat")
        agent.use(recorder)
        assert await recorder.restore() == list(before)
        assert agent.messages == before
        assert recorder.last_seq == 4
        await agent.chat("What was it again?")
        sent = model.requests[0]
        assert sent.system == "You calculate."
        assert sent.messages[:4] == before
        assert sent.messages[4] == agent.messages[4]
        assert agent.messages[4] == UserMessage(
            content="What was it again?", id=sent.messages[4].id
        )
        assert await store.load("chat") == list(agent.messages)
        assert [r.seq for r in await store.records("chat")] == [1, 2, 3, 4, 5, 6]


async def test_the_session_is_restored_before_the_first_chat_without_being_asked(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        agent, _ = first_agent(store)
        await agent.chat("What is 17 * 23?")
        before = agent.messages
        model = ScriptedModel(["Still 391."])
        again = Agent(model, tools=[multiply], plugins=[store.session("chat")])
        assert again.messages == ()
        await again.chat("And now?")
        assert model.requests[0].messages[:4] == before
        assert again.messages[:4] == before
        assert len(await store.load("chat")) == 6


def start_agent_process(backend: Backend, session_id: str) -> subprocess.Popen[str]:
    return start_worker(backend, session_id, "agent", "0", "-")


async def test_a_tool_call_left_open_by_a_killed_process_is_repaired(backend: Backend) -> None:
    worker = start_agent_process(backend, "crashed")
    assert worker.stdout is not None
    line = await asyncio.to_thread(worker.stdout.readline)
    _, errors = await asyncio.to_thread(kill, worker)
    assert line == "tool started\n", errors

    async with backend.store() as store:
        stored = await store.load("crashed")
        assert [m.role for m in stored] == ["user", "assistant"]
        assert isinstance(stored[1], AssistantMessage)
        assert stored[1].tool_calls[0].id == "call-wait"
        model = ScriptedModel(["I am back."])
        agent = Agent(model, plugins=[store.session("crashed")])
        await agent.chat("Are you there?")
        sent = model.requests[0].messages
        assert [m.role for m in sent] == ["user", "assistant", "tool", "user"]
        answer = sent[2]
        assert isinstance(answer, ToolMessage)
        assert answer.tool_call_id == "call-wait"
        assert answer.is_error
        assert answer.content == MISSING_RESULT_TEXT
        # The log stays exactly what was committed; every later request is repaired again.
        assert [m.role for m in await store.load("crashed")] == [
            "user",
            "assistant",
            "user",
            "assistant",
        ]


async def test_the_cancelled_tool_result_the_loop_commits_is_recorded(backend: Backend) -> None:
    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Take a long time."""
        started.set()
        await asyncio.sleep(3600)
        return "late"

    async with backend.store() as store:
        model = ScriptedModel([tool_call("slow", {}), "never"])
        agent = Agent(model, tools=[slow], plugins=[store.session("c")])
        chat = asyncio.create_task(agent.chat("Go slowly."))
        await started.wait()
        agent.cancel("enough")
        with pytest.raises(ChatCancelledError):
            await chat
        stored = await store.load("c")
        assert stored == list(agent.messages)
        last = stored[-1]
        assert isinstance(last, ToolMessage)
        assert last.is_error
        assert last.content.startswith("cancelled")


async def test_a_second_writer_on_the_session_gets_a_conflict(backend: Backend) -> None:
    async with backend.store() as store:
        one = Agent(ScriptedModel(["one"]), plugins=[store.session("shared")])
        two_recorder = store.session("shared")
        two = Agent(ScriptedModel(["two", "two again"]), plugins=[two_recorder])
        await two_recorder.restore()  # both start from the same, empty session
        await one.chat("from one")
        with pytest.raises(SessionConflictError) as caught:
            await two.chat("from two")
        assert caught.value.session_id == "shared"
        assert caught.value.actual_seq == 2
        assert [m.text for m in await store.load("shared") if isinstance(m, UserMessage)] == [
            "from one"
        ]
        await two_recorder.restore()  # take the session as it is now, and go on
        await two.chat("from two, again")
        assert [m.role for m in await store.load("shared")] == ["user", "assistant"] * 2


async def test_an_empty_session_starts_from_the_conversation_the_agent_has(
    backend: Backend,
) -> None:
    history = ChatHistory(max_context_tokens=10_000)
    history.import_history([UserMessage(content="earlier"), AssistantMessage(content="yes")])
    async with backend.store() as store:
        agent = Agent(ScriptedModel(["now"]), history=history, plugins=[store.session("s")])
        await agent.chat("later")
        assert await store.load("s") == list(agent.messages)
        assert len(agent.messages) == 4


async def test_the_recorder_follows_switch_session(backend: Backend) -> None:
    async with backend.store() as store:
        model = ScriptedModel(["first", "second", "third", "fourth"])
        agent = Agent(model, session_id="main", plugins=[store.session()])
        await agent.chat("one")
        main_log = await store.load("main")
        assert main_log == list(agent.messages)

        # Go on in a new session that continues this one.
        await agent.switch_session("branch", parent_session_id="main")
        branch = await store.info("branch")
        assert branch is not None
        assert branch.parent_id == "main"
        assert await store.load("branch") == main_log
        await agent.chat("two")
        assert await store.load("branch") == list(agent.messages)
        assert await store.load("main") == main_log

        # A fresh start: nothing carried over.
        await agent.switch_session("fresh", reset=True)
        assert agent.messages == ()
        await agent.chat("three")
        assert [m.role for m in await store.load("fresh")] == ["user", "assistant"]

        # Back to a session the store has: it is restored.
        await agent.switch_session("branch")
        assert list(agent.messages) == await store.load("branch")
        await agent.chat("four")
        assert len(await store.load("branch")) == 6
        assert len(await store.load("main")) == 2


async def test_a_continuation_without_a_parent_records_the_session_it_came_from(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        agent = Agent(ScriptedModel(["first"]), session_id="main", plugins=[store.session()])
        await agent.chat("one")
        await agent.switch_session("next")  # no reset: it goes on from main
        info = await store.info("next")
        assert info is not None
        assert (info.parent_id, info.message_count) == ("main", 2)
        assert await store.load("next") == await store.load("main")


def test_chat_sync_twice_uses_the_store_from_two_event_loops(backend: Backend) -> None:
    store = backend.store()
    agent = Agent(ScriptedModel(["a", "b"]), plugins=[store.session("sync")])
    agent.chat_sync("first")
    agent.chat_sync("second")

    async def stored() -> int:
        async with backend.store() as fresh:
            return len(await fresh.load("sync"))

    assert asyncio.run(stored()) == 4
    asyncio.run(store.close())


async def test_recorder_misuse_is_a_usage_error(tmp_path: Path) -> None:
    from hookloop.sessions import SQLiteSessionStore

    store = SQLiteSessionStore(tmp_path / "s.db")
    with pytest.raises(UsageError):
        SessionRecorder(object(), "x")  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        SessionRecorder(store, "")
    recorder = store.session("x")
    assert recorder.name == "session"
    assert recorder.session_id == "x"
    with pytest.raises(UsageError):
        await recorder.restore()  # not used by an agent yet
    Agent(ScriptedModel([]), plugins=[recorder])
    with pytest.raises(UsageError):
        Agent(ScriptedModel([]), plugins=[recorder])  # one agent per recorder
    await store.close()


async def test_a_history_cut_by_retention_is_repaired_in_the_request(backend: Backend) -> None:
    async with backend.store(retention=Retention(max_messages=2)) as store:
        agent, _ = first_agent(store)
        await agent.chat("What is 17 * 23?")  # user, call, result, answer: two are kept
        kept = await store.load("chat")
        assert [m.role for m in kept] == ["tool", "assistant"]
        model = ScriptedModel(["Yes."])
        again = Agent(model, tools=[multiply], plugins=[store.session("chat")])
        await again.chat("Still there?")
        assert list(again.messages[:2]) == kept  # the history is the log...
        sent = model.requests[0].messages  # ...and the request has no orphan result
        assert [m.role for m in sent] == ["assistant", "user"]


async def test_without_conflict_checks_two_agents_share_one_log(backend: Backend) -> None:
    async with backend.store() as store:
        one = Agent(ScriptedModel(["one"]), plugins=[store.session("log", check_conflicts=False)])
        recorder = store.session("log", check_conflicts=False)
        two = Agent(ScriptedModel(["two"]), plugins=[recorder])
        await recorder.restore()  # both start from the same, empty session
        await one.chat("from one")
        await two.chat("from two")  # no conflict: its messages go after one's
        stored = await store.load("log")
        assert [m.role for m in stored] == ["user", "assistant"] * 2
        assert stored[2:] == list(two.messages)
        assert len(two.messages) == 2  # two's own history never saw one's messages


@pytest.mark.parametrize("second", ["chat", "chat_stream", "resume", "switch_session"])
async def test_a_second_start_while_the_first_restores_is_refused_and_changes_nothing(
    backend: Backend, second: str
) -> None:
    # The first chat of a restored agent awaits its session's restore before it claims the
    # slot: a second start in that gap used to restore again, under the running chat.
    store = backend.store()
    await store.append("s", UserMessage(content="old question"))
    await store.append("s", AssistantMessage(content="old answer"))
    agent = Agent(ScriptedModel(["A answer", "B answer"]))
    agent.use(store.session("s"))
    session_id = agent.session_id

    async def other() -> object:
        if second == "chat":
            return await agent.chat("B")
        if second == "chat_stream":
            async with agent.chat_stream("B") as events:
                return [event async for event in events]
        if second == "resume":
            return await agent.resume([])
        return await agent.switch_session("elsewhere")

    try:
        first, refused = await asyncio.gather(agent.chat("A"), other(), return_exceptions=True)
        assert not isinstance(first, BaseException), first
        assert first.text == "A answer"
        assert isinstance(refused, ConcurrentChatError)
        texts = ["old question", "old answer", "A", "A answer"]
        assert [m.content for m in agent.history.messages] == texts
        assert [m.content for m in await store.load("s")] == texts
        assert agent.session_id == session_id
    finally:
        await agent.aclose()
        await store.close()
