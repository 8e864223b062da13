"""Messages are never lost or stuck: cancellations anywhere, interrupted and broken tools.

Every message the loop commits to the history reaches ``on_message`` exactly once and the
session store, wherever a cancellation lands (a second one during the closing included);
every tool call is answered, whatever its tool raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from hookloop import (
    Agent,
    AssistantMessage,
    ChatCancelledError,
    Message,
    MessageContext,
    ToolCall,
    ToolCallFinished,
    ToolMessage,
    tool,
)
from hookloop.context import repair
from hookloop.models import ProviderRequest
from hookloop.sessions import SessionStore, SQLiteSessionStore
from hookloop.testing import (
    FunctionModel,
    ScriptedModel,
    text_response,
    tool_call,
    tool_calls,
)
from tests.sessions._backends import Backend

# Long enough that the seeds explore every step boundary of a chat; bounded by count, so the
# run time does not depend on the machine's load, only its duration does (about a minute on
# two busy cores). The runs on SQLite are four tests of a quarter each (seed SEED + 10 * part),
# so that pytest-xdist's workers share them.
STRESS_RUNS = 20_000
STRESS_PARTS = 4
STRESS_RUNS_PER_BACKEND = 5_000
STRESS_BLOCK = 50
STRESS_SEED = 20261124


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    await asyncio.sleep(0)
    return a + b


class Seen:
    """An on_message handler that counts what it was given, by message id."""

    def __init__(self) -> None:
        self.ids: list[str] = []

    def __call__(self, ctx: MessageContext) -> None:
        self.ids.append(ctx.message.id)


def every_call_answered(messages: tuple[Message, ...]) -> bool:
    return repair(messages) is messages


async def assert_nothing_lost(agent: Agent, seen: Seen, store: SessionStore) -> None:
    ids = [m.id for m in agent.messages]
    assert seen.ids == ids  # each committed message dispatched exactly once, in order
    assert [m.id for m in await store.load(agent.session_id)] == ids
    assert every_call_answered(agent.messages)


# --- item 7: a committed message always reaches on_message and the store --------------------


async def test_a_stream_left_at_a_tool_result_still_records_the_result(tmp_path: Path) -> None:
    # Leaving the stream at ToolCallFinished cancels the chat exactly between the tool
    # message's commit and its on_message: it was in the history and never in the store.
    model = ScriptedModel([tool_calls(ToolCall.create("add", {"a": 1, "b": 2}, id="c1")), "3"])
    seen = Seen()
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        agent = Agent(model, tools=[add], session_id="s", plugins=[store.session()])
        agent.add_hook("on_message", seen)
        async with agent.chat_stream("1 + 2?") as stream:
            async for event in stream:
                if isinstance(event, ToolCallFinished):
                    break
        assert [m.role for m in agent.messages] == ["user", "assistant", "tool"]
        await assert_nothing_lost(agent, seen, store)
        assert (await agent.chat("again")).text == "3"
        await assert_nothing_lost(agent, seen, store)


async def test_a_second_cancel_while_closing_still_records_every_answer(tmp_path: Path) -> None:
    # Cancelled during two parallel tools, then again while the "cancelled" answers are
    # being recorded: each answer is dispatched and stored all the same.
    started = asyncio.Event()

    @tool
    async def wait(n: int) -> int:
        """Wait forever."""
        started.set()
        await asyncio.Event().wait()
        return n

    calls = [ToolCall.create("wait", {"n": i}, id=f"c{i}") for i in range(2)]
    model = ScriptedModel([tool_calls(*calls), "done"])
    seen = Seen()
    recording = asyncio.Event()

    async def slow_observer(ctx: MessageContext) -> None:
        if isinstance(ctx.message, ToolMessage):
            recording.set()
            await asyncio.sleep(0)
            await asyncio.sleep(0)

    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        agent = Agent(model, tools=[wait], session_id="s", plugins=[store.session()])
        agent.add_hook("on_message", seen)
        agent.add_hook("on_message", slow_observer)
        chat = asyncio.create_task(agent.chat("go"))
        await started.wait()
        chat.cancel()
        await recording.wait()
        chat.cancel()  # the second cancellation, while the first answer is dispatched
        with pytest.raises(asyncio.CancelledError):
            await chat
        assert [m.role for m in agent.messages] == ["user", "assistant", "tool", "tool"]
        assert not agent.is_running
        await agent.chat("again")
        await assert_nothing_lost(agent, seen, store)


async def test_a_cancel_during_on_message_still_reaches_the_later_handlers() -> None:
    agent = Agent(ScriptedModel(["hello"]))
    later = Seen()

    async def first(ctx: MessageContext) -> None:
        agent.cancel("stop")
        asyncio.current_task().cancel()  # type: ignore[union-attr]
        await asyncio.sleep(0)

    agent.add_hook("on_message", first)
    agent.add_hook("on_message", later, order=1)
    with pytest.raises((ChatCancelledError, asyncio.CancelledError)):
        await agent.chat("hi")
    assert later.ids == [m.id for m in agent.messages]


class Plan:
    """How one stress run ends: where it is cancelled (in scheduler steps), and how."""

    def __init__(self, rng: random.Random) -> None:
        self.mode = rng.choice(("chat", "stream", "leave"))  # leave: break out of the stream
        self.via_agent = rng.random() < 0.5  # agent.cancel() rather than task.cancel()
        self.first = rng.randrange(40)  # steps before the cancel, or events before leaving
        self.second = rng.randrange(12) if rng.random() < 0.5 else None
        self.parallel = rng.random() < 0.5


async def _steps(count: int) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


def _stress_model(parallel: bool) -> Callable[[ProviderRequest], object]:
    async def answer(request: ProviderRequest) -> object:
        await asyncio.sleep(0)
        last = request.messages[-1]
        if isinstance(last, ToolMessage):
            return text_response("done")
        count = 2 if parallel else 1
        return tool_calls(*(ToolCall.create("add", {"a": i, "b": 1}) for i in range(count)))

    return answer


async def _run_once(agent: Agent, plan: Plan) -> None:
    async def consume() -> None:
        if plan.mode == "chat":
            await agent.chat("go")
            return
        async with agent.chat_stream("go") as stream:
            events = 0
            async for _ in stream:
                events += 1
                if plan.mode == "leave" and events > plan.first:
                    break

    task = asyncio.create_task(consume())
    if plan.mode != "leave":
        await _steps(plan.first)
        if plan.via_agent:
            agent.cancel("stress")
        else:
            task.cancel()
    if plan.second is not None:
        await _steps(plan.second)
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, ChatCancelledError):
        await task


@pytest.mark.parametrize("part", range(STRESS_PARTS))
async def test_no_committed_message_is_lost_wherever_cancellations_land(
    tmp_path: Path, part: int
) -> None:
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        await _stress(store, STRESS_RUNS // STRESS_PARTS, STRESS_SEED + 10 * part)


async def test_no_committed_message_is_lost_under_cancellations_with_every_store(
    backend: Backend,
) -> None:
    # Fewer runs: PostgreSQL cancels a statement whose task is cancelled, and Redis and
    # PostgreSQL appends are network round trips, so cancellations land in other places.
    async with backend.store() as store:
        await _stress(store, STRESS_RUNS_PER_BACKEND, STRESS_SEED + 1)


async def _stress(store: SessionStore, runs: int, seed: int) -> None:
    rng = random.Random(seed)
    for block in range(runs // STRESS_BLOCK):
        # A new agent and session per block: a long history would make each check slower.
        seen = Seen()
        agent = Agent(
            FunctionModel(_stress_model(False)),  # type: ignore[arg-type]
            tools=[add],
            session_id=f"stress-{block}",
            plugins=[store.session()],
        )
        agent.add_hook("on_message", seen)
        for run in range(STRESS_BLOCK):
            plan = Plan(rng)
            where = f"block {block} run {run}: {vars(plan)}"
            agent.model = FunctionModel(_stress_model(plan.parallel))  # type: ignore[arg-type]
            await _run_once(agent, plan)
            assert not agent.is_running, f"{where}: the chat outlived its caller"
            assert seen.ids == [m.id for m in agent.messages], where
            assert every_call_answered(agent.messages), where
        await agent.chat("last")  # stores what a cut-short append left unsaved
        await assert_nothing_lost(agent, seen, store)


def unanswered(messages: Sequence[Message]) -> list[str]:
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    return [
        c.id
        for m in messages
        if isinstance(m, AssistantMessage)
        for c in m.tool_calls
        if c.id not in answered
    ]


# Regression: a cancel after reused call ids resurrected an old result (no terminal event).
async def test_cancel_after_call_ids_were_reused_still_ends_cleanly() -> None:
    """A provider reusing call ids across turns must not resurrect an old result on cancel."""
    started = asyncio.Event()

    @tool
    async def slow(x: int) -> str:
        """Slow when x is 99."""
        if x == 99:
            started.set()
            await asyncio.Event().wait()
        return f"done {x}"

    model = ScriptedModel(
        [
            tool_calls(
                ToolCall(name="slow", arguments='{"x": 1}', id="call_0"),
                ToolCall(name="slow", arguments='{"x": 2}', id="call_1"),
            ),
            tool_call("slow", {"x": 99}, id="call_0"),
            "next",
        ]
    )
    agent = Agent(model, tools=[slow], retry=None)
    terminal: list[str] = []
    agent.add_hook("on_chat_abort", lambda ctx: terminal.append("abort"))
    agent.add_hook("on_chat_error", lambda ctx: terminal.append("error"))
    chat = asyncio.create_task(agent.chat("go"))
    await started.wait()
    agent.cancel("stop")
    with pytest.raises(ChatCancelledError):
        await chat
    assert terminal == ["abort"]
    last = agent.messages[-1]
    assert isinstance(last, ToolMessage)
    assert (last.tool_call_id, last.is_error) == ("call_0", True)
    assert "cancelled" in last.content


# Regression: cancel() from a hook of the chat ran on until the next iteration.
@pytest.mark.parametrize("where", ["on_response", "pre_tool_call"])
async def test_cancel_from_a_hook_in_the_chat_task_ends_the_chat_at_the_next_step(
    where: str,
) -> None:
    ran: list[str] = []

    @tool
    async def act() -> str:
        """Acts."""
        ran.append("act")
        return "acted"

    model = ScriptedModel([tool_call("act", {}), "final"])
    agent = Agent(model, tools=[act], retry=None)

    def stop(ctx: object) -> None:
        agent.cancel("stop")

    agent.add_hook(where, stop)  # type: ignore[call-overload]
    done: list[str] = []
    agent.add_hook("on_chat_done", lambda ctx: done.append("done"))
    with pytest.raises(ChatCancelledError):
        await agent.chat("go")
    assert ran == []
    assert done == []
    assert unanswered(agent.messages) == []


# --- item 8: a tool that raises KeyboardInterrupt or SystemExit ---------------------------


def _interrupting(exc: BaseException) -> Callable[[], object]:
    def stop() -> object:
        """Stop the process."""
        raise exc

    return stop


@pytest.mark.parametrize("exc", [KeyboardInterrupt(), SystemExit(3)], ids=type)
def test_a_tool_that_interrupts_propagates_with_its_call_answered(
    exc: BaseException, tmp_path: Path
) -> None:
    calls = tool_calls(ToolCall.create("stop", {}, id="c1"))
    model = ScriptedModel([calls, "after"])
    seen = Seen()
    stop = tool(name="stop")(_interrupting(exc))

    async def first() -> None:
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            agent.use(store.session())
            await agent.chat("go")

    async def second() -> None:
        async with SQLiteSessionStore(tmp_path / "s.db") as store:
            again = Agent(model, tools=[stop], session_id="s", plugins=[store.session()])
            assert (await again.chat("again")).text == "after"
            assert again.messages == agent.messages + again.messages[len(agent.messages) :]

    agent = Agent(model, tools=[stop], session_id="s")
    agent.add_hook("on_message", seen)
    reasons: list[object] = []
    agent.add_hook("on_chat_abort", lambda ctx: reasons.append(ctx.reason))
    with pytest.raises(type(exc)):
        asyncio.run(first())
    assert [m.role for m in agent.messages] == ["user", "assistant", "tool"]
    answer = agent.messages[-1]
    assert isinstance(answer, ToolMessage)
    assert (answer.tool_call_id, answer.is_error) == ("c1", True)
    assert answer.content == f"not run: the chat was interrupted ({type(exc).__name__})"
    assert seen.ids == [m.id for m in agent.messages]
    assert reasons == [exc]  # one terminal event, the interruption its reason
    asyncio.run(second())
    assert model.requests[-1].messages[: len(agent.messages)] == agent.messages


def test_an_interrupt_in_one_of_parallel_tools_leaves_every_call_answered() -> None:
    # The interrupted tool runs in a task of its own: the interrupt leaves the event loop
    # at once, and asyncio.run cancels the chat, which answers both calls.
    @tool
    async def slow(n: int) -> int:
        """Take a while."""
        await asyncio.sleep(0)
        return n

    @tool
    async def stop(n: int) -> int:
        """Stop the process."""
        raise KeyboardInterrupt

    calls = [ToolCall.create("slow", {"n": 1}, id="a"), ToolCall.create("stop", {"n": 1}, id="b")]
    model = ScriptedModel([tool_calls(*calls), "after"])
    agent = Agent(model, tools=[slow, stop])
    seen = Seen()
    agent.add_hook("on_message", seen)
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(agent.chat("go"))
    messages = agent.messages
    assert [(m.role, getattr(m, "tool_call_id", None)) for m in messages] == [
        ("user", None),
        ("assistant", None),
        ("tool", "a"),
        ("tool", "b"),
    ]
    assert every_call_answered(messages)
    assert seen.ids == [m.id for m in messages]
    assert asyncio.run(agent.chat("again")).text == "after"
    assert model.requests[-1].messages[:4] == messages


# --- item 10: a tool whose exception cannot be shown ---------------------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("str() of this exception fails")


class Unshowable:
    def __repr__(self) -> str:
        raise RuntimeError("repr() of this value fails")


async def _agent_with(function: Callable[[], object]) -> tuple[Agent, ToolMessage]:
    broken = tool(name="broken")(function)
    model = ScriptedModel([tool_calls(ToolCall.create("broken", {}, id="c1")), "ok"])
    agent = Agent(model, tools=[broken])
    response = await agent.chat("go")
    assert response.text == "ok"
    result = agent.messages[2]
    assert isinstance(result, ToolMessage)
    return agent, result


async def test_a_tool_exception_whose_str_raises_is_a_tool_error_the_model_sees() -> None:
    def broken() -> None:
        """Fail unprintably."""
        raise Unprintable

    _, result = await _agent_with(broken)
    assert result.is_error
    assert result.content == "tool 'broken' failed: Unprintable"


async def test_a_tool_error_hook_returning_an_unprintable_error_does_not_end_the_chat() -> None:
    def broken() -> None:
        """Fail."""
        raise ValueError("no")

    broken_tool = tool(name="broken")(broken)
    model = ScriptedModel([tool_calls(ToolCall.create("broken", {}, id="c1")), "ok"])
    agent = Agent(model, tools=[broken_tool])
    agent.add_hook("on_tool_call_error", lambda ctx: Unprintable())
    assert (await agent.chat("go")).text == "ok"
    result = agent.messages[2]
    assert isinstance(result, ToolMessage)
    assert (result.is_error, result.content) == (True, "Unprintable")


async def test_a_tool_result_whose_repr_raises_is_shown_by_its_type() -> None:
    def unshowable() -> Unshowable:
        """Return a value nobody can print."""
        return Unshowable()

    _, result = await _agent_with(unshowable)
    assert (result.is_error, result.content) == (False, "<Unshowable object that cannot be shown>")
