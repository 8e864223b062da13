"""A streamed chat runs in its consumer's task: no task, queue or event-loop pass per event.

Cancellation keeps the semantics of a chat in a task of its own: ``agent.cancel()`` while
the consumer holds an event never cancels the consumer's own work, the chat's context
variables stay the chat's, and a cancelled consumer still leaves a valid history.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from hookloop import (
    Agent,
    AssistantMessage,
    ChatAbortContext,
    ChatCancelledError,
    ChatDone,
    ChatStartContext,
    ConcurrentChatError,
    MessageCommitted,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolMessage,
    tool,
)
from hookloop._chat_slot import current_slot
from hookloop._stream import STREAM_CLOSED
from hookloop.context import repair
from hookloop.models import Model, ProviderRequest, ProviderResponse, StreamEnd, StreamPart
from hookloop.testing import ScriptedModel, tool_calls


@tool
async def double(n: int) -> int:
    """Double a number."""
    return 2 * n


def two_calls_agent() -> Agent:
    model = ScriptedModel(
        [
            tool_calls(ToolCall.create("double", {"n": 1}, id="c1")),
            tool_calls(ToolCall.create("double", {"n": 2}, id="c2")),
            "done",
        ]
    )
    return Agent(model, tools=[double], retry=None)


async def test_the_chat_runs_in_the_consumers_task() -> None:
    agent = two_calls_agent()
    tasks: list[asyncio.Task[object] | None] = []
    agent.add_hook("on_chat_start", lambda ctx: tasks.append(asyncio.current_task()))
    async for _ in agent.chat_stream("go"):
        pass
    assert tasks == [asyncio.current_task()]


async def test_a_whole_stream_takes_no_pass_of_the_event_loop() -> None:
    # Nothing in this chat waits (scripted model, a tool that returns at once): events are
    # handed over without a task or queue between chat and consumer, so no callback runs.
    agent = two_calls_agent()
    passes: list[int] = []
    loop = asyncio.get_running_loop()
    loop.call_soon(passes.append, 1)
    kinds = [type(event).__name__ async for event in agent.chat_stream("go")]
    assert passes == []
    assert kinds == [
        MessageCommitted.__name__,
        *(
            [
                ToolCallDelta.__name__,
                MessageCommitted.__name__,
                ToolCallStarted.__name__,
                ToolCallFinished.__name__,
                MessageCommitted.__name__,
            ]
            * 2
        ),
        "TextDelta",
        MessageCommitted.__name__,
        ChatDone.__name__,
    ]
    await asyncio.sleep(0)
    assert passes == [1]


async def test_agent_cancel_while_the_consumer_holds_an_event_leaves_its_work_alone() -> None:
    agent = two_calls_agent()
    reasons: list[object] = []
    agent.add_hook("on_chat_abort", lambda ctx: reasons.append(ctx.reason))
    go_on = asyncio.Event()

    async def canceller() -> None:
        agent.cancel("enough")
        go_on.set()

    seen: list[str] = []
    with pytest.raises(ChatCancelledError):
        async with agent.chat_stream("go") as stream:
            async for event in stream:
                seen.append(type(event).__name__)
                if isinstance(event, ToolCallStarted):
                    helper = asyncio.create_task(canceller())
                    await go_on.wait()  # the consumer's own wait: not cancelled
                    await helper
    # The cancellation took effect where the chat waited, right after ToolCallStarted: the
    # call got its "cancelled" answer, which the stream still shows.
    assert seen[-3:] == [
        ToolCallStarted.__name__,
        ToolCallFinished.__name__,
        MessageCommitted.__name__,
    ]
    assert reasons == ["enough"]
    last = agent.messages[-1]
    assert isinstance(last, ToolMessage)
    assert (last.tool_call_id, last.is_error) == ("c1", True)
    messages = agent.messages
    assert repair(messages) is messages  # every call answered
    assert not agent.is_running


async def test_the_chats_context_variables_stay_the_chats() -> None:
    agent = two_calls_agent()
    inside: list[object] = []
    agent.add_hook("on_chat_start", lambda ctx: inside.append(current_slot()))
    between: list[object] = []
    async for _ in agent.chat_stream("go"):
        between.append(current_slot())
    assert inside == [agent._slot]
    assert set(between) == {None}


async def test_a_cancelled_consumer_gets_its_cancellation_and_the_history_stays_valid() -> None:
    started = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait forever."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    model = ScriptedModel([tool_calls(ToolCall.create("wait", {}, id="w1")), "unused"])
    agent = Agent(model, tools=[wait], retry=None)
    aborted: list[ChatAbortContext] = []
    agent.add_hook("on_chat_abort", aborted.append)
    starts: list[ChatStartContext] = []
    agent.add_hook("on_chat_start", starts.append)

    async def consume() -> None:
        async for _ in agent.chat_stream("go"):
            pass

    task = asyncio.create_task(consume())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The chat saw the task's cancellation, as chat() would (no reason given).
    assert [ctx.reason for ctx in aborted] == [None]
    last = agent.messages[-1]
    assert isinstance(last, ToolMessage)
    assert (last.tool_call_id, last.is_error) == ("w1", True)
    assert not agent.is_running
    assert len(starts) == 1


async def test_a_consumer_waiting_for_the_chats_progress_does_not_stall_it() -> None:
    # The consumer holds the first event and waits for the tool, three events later: the
    # chat goes on meanwhile (as in a task of its own), and every event still arrives, in
    # order, once the consumer asks again.
    ran = asyncio.Event()

    @tool
    async def note() -> str:
        """Note that the tool ran."""
        ran.set()
        return "noted"

    model = ScriptedModel([tool_calls(ToolCall.create("note", {}, id="n1")), "done"])
    agent = Agent(model, tools=[note], retry=None)
    kinds: list[str] = []
    async with asyncio.timeout(60):  # a guard against a hang, not a measurement
        async for event in agent.chat_stream("go"):
            kinds.append(type(event).__name__)
            if len(kinds) == 1:
                await ran.wait()
    assert kinds == [
        MessageCommitted.__name__,
        ToolCallDelta.__name__,
        MessageCommitted.__name__,
        ToolCallStarted.__name__,
        ToolCallFinished.__name__,
        MessageCommitted.__name__,
        "TextDelta",
        MessageCommitted.__name__,
        ChatDone.__name__,
    ]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Piece(TextDelta):
    """A model's own kind of text part."""

    source: str = "pieces"


class _PieceModel(Model):
    """Streams its answer as ``_Piece`` parts, waiting for the event loop between them."""

    name = "pieces"

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        raise AssertionError("the chat streams")

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(0)  # a bare yield to the event loop
        yield _Piece(text="Hel")
        ready = loop.create_future()
        loop.call_soon(ready.set_result, None)
        await ready  # a future
        yield _Piece(text="lo")
        yield StreamEnd(finish_reason="stop")


async def test_a_models_own_parts_reach_the_consumer_and_its_waits_the_event_loop() -> None:
    # The chat hands its events over by yielding them; what it waits for (a future, a bare
    # yield) goes to the consumer's task. A part of a model's own type is an event too.
    agent = Agent(_PieceModel(), retry=None)
    events = [event async for event in agent.chat_stream("hi")]
    assert events[1:3] == [_Piece(text="Hel"), _Piece(text="lo")]
    assert [type(event) for event in events] == [
        MessageCommitted,
        _Piece,
        _Piece,
        MessageCommitted,
        ChatDone,
    ]
    assert agent.messages[-1] == AssistantMessage(content="Hello", id=agent.messages[-1].id)


# The stream's iterator is no async generator, yet behaves as one where a user can tell:
# closed when dropped or when asyncio.run() ends, refused to a second reader, ended once
# it raised or was closed.


def aborts(agent: Agent) -> list[object]:
    reasons: list[object] = []
    agent.add_hook("on_chat_abort", lambda ctx: reasons.append(ctx.reason))
    return reasons


def gated_agent(gate: asyncio.Event) -> Agent:
    @tool
    async def wait() -> str:
        """Wait for the gate."""
        await gate.wait()
        return "open"

    model = ScriptedModel([tool_calls(ToolCall.create("wait", {}, id="w1")), "done"])
    return Agent(model, tools=[wait], retry=None)


async def test_a_stream_dropped_unclosed_is_closed_in_a_task_of_its_own() -> None:
    agent = gated_agent(asyncio.Event())  # a gate that stays shut: only closing ends it
    reasons = aborts(agent)
    aborted = asyncio.Event()
    agent.add_hook("on_chat_abort", lambda ctx: aborted.set())
    stream = agent.chat_stream("go")
    async for event in stream:
        if isinstance(event, ToolCallStarted):
            break
    del stream
    assert agent.is_running
    async with asyncio.timeout(60):  # a guard against a hang, not a measurement
        await aborted.wait()  # the close runs in a task of its own
    assert not agent.is_running
    assert reasons == [STREAM_CLOSED]
    last = agent.messages[-1]
    assert isinstance(last, ToolMessage)
    assert (last.tool_call_id, last.is_error) == ("w1", True)


def test_a_stream_left_open_is_closed_when_asyncio_run_ends() -> None:
    agent = gated_agent(asyncio.Event())
    reasons = aborts(agent)
    kept: list[AsyncIterator[object]] = []

    async def main() -> None:
        events = aiter(agent.chat_stream("go"))
        kept.append(events)
        while not isinstance(await anext(events), ToolCallStarted):
            pass

    asyncio.run(main())
    assert reasons == [STREAM_CLOSED]
    assert not agent.is_running
    last = agent.messages[-1]
    assert isinstance(last, ToolMessage)
    assert (last.tool_call_id, last.is_error) == ("w1", True)


@pytest.mark.parametrize("holding", [True, False], ids=["helper", "reader"])
async def test_a_second_reader_is_refused_while_the_first_waits_for_the_chat(
    holding: bool,
) -> None:
    # holding: this task holds ToolCallStarted while the first reader starts, so the helper
    # runs the chat meanwhile; otherwise the first reader reads every event up to the tool
    # itself, and then waits for the tool.
    gate = asyncio.Event()
    agent = gated_agent(gate)
    events = aiter(agent.chat_stream("go"))
    async with asyncio.timeout(60):  # a guard against a hang, not a measurement
        if holding:
            while not isinstance(await anext(events), ToolCallStarted):
                pass

        async def next_event() -> object:
            while not holding and not isinstance(await anext(events), ToolCallStarted):
                pass
            return await anext(events)

        first = asyncio.create_task(next_event())  # runs the tool, which waits
        await asyncio.sleep(0)
        with pytest.raises(RuntimeError, match=r"^anext\(\): the stream is already being read$"):
            await anext(events)
        with pytest.raises(RuntimeError, match=r"^aclose\(\): the stream is already being read$"):
            await events.aclose()  # type: ignore[attr-defined]
        gate.set()
        finished = await first
        rest = [type(event) async for event in events]
    assert isinstance(finished, ToolCallFinished)
    assert finished.message.content == "open"
    assert rest == [MessageCommitted, TextDelta, MessageCommitted, ChatDone]


async def test_a_stream_closed_before_it_is_read_never_starts_its_chat() -> None:
    agent = two_calls_agent()
    stream = agent.chat_stream("go")
    events = aiter(stream)
    await stream.aclose()
    assert [event async for event in events] == []
    assert [event async for event in stream] == []
    assert agent.messages == ()
    assert stream.response is None
    assert (await agent.chat("now")).text == "done"


async def test_a_stream_that_cannot_start_ends() -> None:
    agent = two_calls_agent()
    async with agent.chat_stream("first") as first:
        await anext(aiter(first))
        second = aiter(agent.chat_stream("second"))
        with pytest.raises(ConcurrentChatError):
            await anext(second)
        with pytest.raises(StopAsyncIteration):
            await anext(second)
    assert not agent.is_running
