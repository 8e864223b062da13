"""The turn loop: iterations, streaming, one chat at a time, cancellation, valid history."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookloop import (
    AfterModelCallContext,
    Agent,
    AssistantMessage,
    ChatAbortContext,
    ChatCancelledError,
    ChatDone,
    ConcurrentChatError,
    InvalidMessageError,
    InvalidResponseError,
    MaxIterationsError,
    Message,
    MessageCommitted,
    ModelRetry,
    ModelSettings,
    ServerError,
    TextDelta,
    TextPart,
    ToolCall,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
    ToolMessage,
    Usage,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.limits import ModelPrice
from hookloop.models import Model, ProviderRequest, ProviderResponse, StreamEnd, StreamPart
from hookloop.testing import (
    FunctionModel,
    ScriptedModel,
    ScriptStep,
    text_response,
    tool_call,
    tool_calls,
)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def assert_valid_history(messages: Sequence[Message]) -> None:
    """Every tool call is answered exactly once, after it, and every result has its call."""
    open_calls: dict[str, int] = {}
    answered: set[str] = set()
    for index, message in enumerate(messages):
        if isinstance(message, AssistantMessage):
            assert not open_calls, f"message {index}: new assistant turn with calls still open"
            open_calls = {call.id: index for call in message.tool_calls}
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"message {index}: orphaned tool result"
            del open_calls[message.tool_call_id]
            answered.add(message.tool_call_id)
        elif open_calls:
            pytest.fail(f"message {index}: {message.role} message while tool calls are open")
    assert not open_calls, f"unanswered tool calls: {sorted(open_calls)}"


def roles(messages: Sequence[Message]) -> list[str]:
    return [m.role for m in messages]


class BlockingModel(Model):
    """Streams the parts it is given, then blocks until released (or forever)."""

    name = "blocking"

    def __init__(self, parts: Sequence[StreamPart] = (), answer: str = "done") -> None:
        self.parts = list(parts)
        self.answer = answer
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        self.calls += 1
        self.started.set()
        await self.release.wait()
        return text_response(self.answer)

    async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        self.calls += 1
        for part in self.parts:
            yield part
        self.started.set()
        await self.release.wait()
        yield TextDelta(text=self.answer)
        yield StreamEnd(finish_reason="stop")


# --- iterations ------------------------------------------------------------------------


async def test_tool_loop_commits_every_message_and_returns_the_final_answer() -> None:
    model = ScriptedModel(
        [
            tool_call("add", {"a": 2, "b": 3}, id="c1"),
            text_response("5", usage=Usage(input_tokens=7, output_tokens=1)),
        ]
    )
    agent = Agent(model, tools=[add], system_prompt="Be brief.")

    response = await agent.chat("what is 2+3?")

    assert response.text == "5"
    assert response.iterations == 2
    assert response.finish_reason == "stop"
    assert response.usage == Usage(input_tokens=7, output_tokens=1)
    assert roles(agent.messages) == ["user", "assistant", "tool", "assistant"]
    assert response.messages == agent.messages
    tool_message = agent.messages[2]
    assert isinstance(tool_message, ToolMessage)
    assert (tool_message.tool_call_id, tool_message.content, tool_message.is_error) == (
        "c1",
        "5",
        False,
    )
    first, second = model.requests
    assert first.system == "Be brief."
    assert first.model == "scripted"
    assert [t.name for t in first.tools] == ["add"]
    assert first.messages == agent.messages[:1]
    assert second.messages == agent.messages[:3]


async def test_usage_adds_up_over_iterations() -> None:
    first = tool_call("add", {"a": 1, "b": 1})
    first = ProviderResponse(
        tool_calls=first.tool_calls, finish_reason="tool_calls", usage=Usage(input_tokens=10)
    )
    model = ScriptedModel([first, text_response("2", usage=Usage(input_tokens=5, output_tokens=3))])
    response = await Agent(model, tools=[add]).chat("1+1")
    assert response.usage == Usage(input_tokens=15, output_tokens=3)


async def test_settings_reach_every_request() -> None:
    settings = ModelSettings(temperature=0.2, max_tokens=50, tool_choice="required")
    model = ScriptedModel(["ok"])
    await Agent(model, settings=settings).chat("hi")
    assert model.requests[0].settings is settings


async def test_a_second_chat_continues_the_same_conversation() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model)
    await agent.chat("first")
    await agent.chat("second")
    assert roles(model.requests[1].messages) == ["user", "assistant", "user"]
    assert [m.content for m in agent.messages] == ["first", "one", "second", "two"]


async def test_user_message_may_be_parts_or_a_message() -> None:
    model = ScriptedModel(["a", "b"])
    agent = Agent(model)
    await agent.chat([TextPart(text="look"), TextPart(text="here")])
    mine = UserMessage(content="explicit")
    await agent.chat(mine)
    assert agent.messages[0].content == (TextPart(text="look"), TextPart(text="here"))
    assert agent.messages[2] is mine


@pytest.mark.parametrize("bad", ["", "   ", 42, None, [], ["not a part"]])
async def test_invalid_user_input_is_rejected_before_anything_happens(bad: object) -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model)
    started: list[object] = []
    agent.add_hook("on_chat_start", started.append)
    with pytest.raises(InvalidMessageError):
        await agent.chat(bad)  # type: ignore[arg-type]
    assert (started, agent.messages, model.requests, agent.is_running) == ([], (), [], False)


async def test_max_iterations_raises_and_leaves_every_call_answered() -> None:
    model = ScriptedModel([tool_call("add", {"a": i, "b": 1}) for i in range(3)])
    agent = Agent(model, tools=[add], max_iterations=3)
    with pytest.raises(MaxIterationsError) as caught:
        await agent.chat("loop forever")
    assert caught.value.max_iterations == 3
    assert len(model.requests) == 3
    assert roles(agent.messages) == ["user"] + ["assistant", "tool"] * 3
    assert_valid_history(agent.messages)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "3"])
def test_max_iterations_must_be_a_positive_int(bad: object) -> None:
    with pytest.raises(UsageError):
        Agent(ScriptedModel([]), max_iterations=bad)  # type: ignore[arg-type]


def test_agent_requires_a_model() -> None:
    with pytest.raises(UsageError, match="Model"):
        Agent("gpt-4")  # type: ignore[arg-type]


# Agent() defaults run each model call through its steps (the window's and the retry
# strategy's handlers); without hooks, limits or a stream the loop awaits the model itself.
_CALL_PATHS = pytest.mark.parametrize(
    "extra", [{}, {"context": None, "retry": None}], ids=["defaults", "unhooked"]
)


@_CALL_PATHS
async def test_a_model_returning_garbage_is_a_typed_error(extra: dict[str, Any]) -> None:
    model = FunctionModel(lambda request: {"content": "hi"})  # type: ignore[arg-type,return-value]
    agent = Agent(model, **extra)
    with pytest.raises(InvalidResponseError, match=r"^the model returned dict, not a Provider"):
        await agent.chat("hi")
    assert roles(agent.messages) == ["user"]


@_CALL_PATHS
async def test_duplicate_tool_call_ids_are_a_typed_error(extra: dict[str, Any]) -> None:
    calls = (ToolCall(name="add", arguments="{}", id="x"), ToolCall(name="add", id="x"))
    agent = Agent(ScriptedModel([tool_calls(*calls)]), tools=[add], **extra)
    with pytest.raises(InvalidResponseError, match="same id"):
        await agent.chat("hi")
    assert roles(agent.messages) == ["user"]


async def test_a_response_an_on_response_handler_returns_is_checked_too() -> None:
    calls = (ToolCall(name="add", arguments="{}", id="x"), ToolCall(name="add", id="x"))
    agent = Agent(ScriptedModel(["fine"]), tools=[add])
    agent.add_hook("on_response", lambda ctx: tool_calls(*calls))
    with pytest.raises(InvalidResponseError, match="same id"):
        await agent.chat("hi")
    assert roles(agent.messages) == ["user"]


@pytest.mark.parametrize("on_response", [False, True])
async def test_an_answer_a_pre_request_handler_supplies_is_checked(on_response: bool) -> None:
    calls = (ToolCall(name="add", arguments="{}", id="x"), ToolCall(name="add", id="x"))
    agent = Agent(ScriptedModel([]), tools=[add])
    agent.add_hook("pre_request", lambda ctx: tool_calls(*calls))  # a cache of answers, say
    if on_response:
        agent.add_hook("on_response", lambda ctx: None)
    with pytest.raises(InvalidResponseError, match="same id"):
        await agent.chat("hi")
    assert roles(agent.messages) == ["user"]


@_CALL_PATHS
async def test_each_answer_is_priced_and_counted(extra: dict[str, Any]) -> None:
    usage = Usage(input_tokens=1_000_000, output_tokens=2_000_000)
    call = ProviderResponse(tool_calls=(ToolCall(name="add", arguments='{"a": 1, "b": 2}'),))
    model = ScriptedModel([dataclasses.replace(call, usage=usage), text_response("3", usage=usage)])
    prices = {"scripted": ModelPrice(input_per_mtok=1, output_per_mtok=3)}
    agent = Agent(model, tools=[add], prices=prices, **extra)
    response = await agent.chat("add 1 and 2")
    assert response.usage == Usage(
        input_tokens=2_000_000, output_tokens=4_000_000, cost=Decimal(14)
    )


async def test_provider_error_ends_the_chat_with_that_error() -> None:
    error = ServerError("boom", status=500)
    agent = Agent(ScriptedModel([error]), retry=None)
    with pytest.raises(ServerError) as caught:
        await agent.chat("hi")
    assert caught.value is error
    assert not agent.is_running


async def test_an_error_during_tools_still_answers_every_call() -> None:
    model = ScriptedModel([tool_calls(ToolCall(name="add", id="a"), ToolCall(name="add", id="b"))])
    agent = Agent(model, tools=[add])

    def refuse(ctx: object) -> None:
        raise RuntimeError("policy engine down")

    agent.add_hook("pre_tool_call", refuse)
    with pytest.raises(RuntimeError, match="policy engine down"):
        await agent.chat("hi")
    assert_valid_history(agent.messages)
    assert [m.content for m in agent.messages if isinstance(m, ToolMessage)] == [
        "not run: the chat ended with an error"
    ] * 2


# --- one chat at a time; the sync entry point -------------------------------------------


async def test_a_second_concurrent_chat_is_refused_without_disturbing_the_first() -> None:
    model = BlockingModel()
    agent = Agent(model)
    starts: list[str] = []
    agent.add_hook("on_chat_start", lambda ctx: starts.append(ctx.message.text))
    first = asyncio.create_task(agent.chat("first"))
    await model.started.wait()
    with pytest.raises(ConcurrentChatError):
        await agent.chat("second")
    with pytest.raises(ConcurrentChatError):
        async for _ in agent.chat_stream("third"):
            pass
    model.release.set()
    assert (await first).text == "done"
    assert starts == ["first"]
    assert [m.content for m in agent.messages] == ["first", "done"]


HOLDERS = ("chat", "stream", "delegation")


async def start_chat(how: str, worker: Agent, text: str) -> None:
    """One chat of ``worker``, started the way ``how`` names."""
    if how == "chat":
        await worker.chat(text)
    elif how == "stream":
        async with worker.chat_stream(text) as events:
            async for _ in events:
                pass
    elif how == "delegation":
        await Agent(ScriptedModel([]), name=f"boss-{text}").delegate(text, to=worker)
    else:
        await worker.switch_session(f"session-{text}")


@pytest.mark.parametrize(
    ("holder", "intruder"),
    [
        (holder, intruder)
        for holder in HOLDERS
        for intruder in (*HOLDERS, "switch_session")
        # Delegations to one sub-agent take turns instead (test_delegation.py, turns).
        if (holder, intruder) != ("delegation", "delegation")
    ],
)
async def test_chat_stream_and_delegation_share_one_chat_slot(holder: str, intruder: str) -> None:
    model = BlockingModel()
    worker = Agent(model, name="worker")
    starts: list[str] = []
    worker.add_hook("on_chat_start", lambda ctx: starts.append(ctx.message.text))
    first = asyncio.ensure_future(start_chat(holder, worker, "first"))
    await model.started.wait()
    assert worker.is_running

    with pytest.raises(ConcurrentChatError, match="'worker'"):
        await start_chat(intruder, worker, "second")

    assert (worker.is_running, first.done(), starts) == (True, False, ["first"])
    assert worker.cancel("enough") is True
    with pytest.raises(ChatCancelledError, match="enough"):
        await first
    assert (worker.is_running, worker.cancel(), roles(worker.messages)) == (False, False, ["user"])
    worker.model = ScriptedModel(["again"])
    assert (await worker.chat("third")).text == "again"
    assert not worker.is_running


def gated_model(*, fail: bool) -> tuple[Model, asyncio.Event, asyncio.Event]:
    """A model that says when it is called, then answers (or fails) once the gate opens."""
    called, gate = asyncio.Event(), asyncio.Event()

    async def answer(request: ProviderRequest) -> str:
        called.set()
        await gate.wait()
        if fail:
            raise ServerError("boom", status=500)
        return "ok"

    return FunctionModel(answer), called, gate


ENDINGS: dict[str, type[BaseException] | None] = {
    "answer": None,
    "error": ServerError,
    "agent.cancel": ChatCancelledError,
    "task.cancel": asyncio.CancelledError,
}


@settings(max_examples=40)
@given(
    chats=st.lists(
        st.tuples(st.sampled_from(HOLDERS), st.sampled_from(sorted(ENDINGS))),
        min_size=1,
        max_size=5,
    )
)
async def test_the_slot_is_held_exactly_while_each_chat_runs(chats: list[tuple[str, str]]) -> None:
    """However a chat starts and ends, the agent is busy until it has ended, then free."""
    worker = Agent(ScriptedModel([]), name="worker", retry=None)
    for how, ending in chats:
        worker.model, called, gate = gated_model(fail=ending == "error")
        chat = asyncio.ensure_future(start_chat(how, worker, "go"))
        await called.wait()
        assert worker.is_running
        with pytest.raises(ConcurrentChatError):
            await worker.chat("intruder")
        if ending == "agent.cancel":
            worker.cancel("stop")
        elif ending == "task.cancel":
            chat.cancel()
        else:
            gate.set()
        [outcome] = await asyncio.gather(chat, return_exceptions=True)
        expected = ENDINGS[ending]
        assert outcome is None if expected is None else isinstance(outcome, expected)
        assert not worker.is_running
        assert_valid_history(worker.messages)


async def test_a_chat_runs_with_the_model_and_settings_it_started_with() -> None:
    first_model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "done"])
    agent = Agent(first_model, tools=[add], settings=ModelSettings(temperature=0.1))
    later_model = ScriptedModel(["later"])

    @agent.hook("on_tool_call_result")
    def swap(ctx: object) -> None:
        agent.model = later_model
        agent.settings = ModelSettings(temperature=0.9)

    assert (await agent.chat("add")).text == "done"
    assert [r.settings.temperature for r in first_model.requests] == [0.1, 0.1]
    assert later_model.requests == []
    assert (await agent.chat("again")).text == "later"
    assert [r.settings.temperature for r in later_model.requests] == [0.9]


def test_chat_sync_runs_a_chat_without_an_event_loop() -> None:
    agent = Agent(ScriptedModel(["hello"]))
    assert agent.chat_sync("hi").text == "hello"


async def test_chat_sync_inside_a_running_loop_is_a_usage_error() -> None:
    agent = Agent(ScriptedModel(["hello"]))
    with pytest.raises(UsageError, match="running event loop"):
        agent.chat_sync("hi")
    assert agent.messages == ()


# --- streaming ---------------------------------------------------------------------------


async def test_stream_yields_every_step_in_order() -> None:
    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}, id="c1"), "sum is 3"], chunk_size=4)
    agent = Agent(model, tools=[add])
    async with agent.chat_stream("1+2?") as stream:
        events = [event async for event in stream]

    kinds = [event.type for event in events]
    assert kinds == [
        "message",
        *["tool_call_delta"] * 4,  # '{"a": 1, "b": 2}' in pieces of 4
        "message",
        "tool_call_started",
        "tool_call_finished",
        "message",
        *["text_delta"] * 2,  # "sum is 3" in pieces of 4
        "message",
        "chat_done",
    ]
    deltas = [e for e in events if isinstance(e, ToolCallDelta)]
    assert "".join(d.arguments for d in deltas) == '{"a": 1, "b": 2}'
    assert (deltas[0].id, deltas[0].name) == ("c1", "add")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "sum is 3"
    committed = [e.message for e in events if isinstance(e, MessageCommitted)]
    assert tuple(committed) == agent.messages
    started = next(e for e in events if isinstance(e, ToolCallStarted))
    finished = next(e for e in events if isinstance(e, ToolCallFinished))
    assert (started.call.id, started.iteration) == ("c1", 0)
    assert (finished.message.content, finished.iteration) == ("3", 0)
    done = events[-1]
    assert isinstance(done, ChatDone)
    assert stream.response is done.response
    assert done.response.text == "sum is 3"


async def test_stream_and_chat_commit_the_same_history() -> None:
    script = [tool_call("add", {"a": 4, "b": 4}, id="c1"), "8"]
    plain = Agent(ScriptedModel(script), tools=[add])
    streamed = Agent(ScriptedModel(script, chunk_size=1), tools=[add])
    await plain.chat("4+4")
    async for _ in streamed.chat_stream("4+4"):
        pass

    def strip(messages: Sequence[Message]) -> list[tuple[object, ...]]:
        return [
            (m.role, getattr(m, "content", None), getattr(m, "tool_calls", ())) for m in messages
        ]

    assert strip(plain.messages) == strip(streamed.messages)


async def test_stream_tells_the_consumer_to_discard_deltas_of_a_retried_attempt() -> None:
    failing = ScriptStep(
        response=text_response("partial answer that will be dropped"),
        error=ServerError("stream cut", status=502),
        chunk_size=8,
        fail_after=2,
    )
    model = ScriptedModel([failing, ScriptStep(response=text_response("clean"), chunk_size=8)])
    agent = Agent(model, retry=None)  # this test's own hook is the only retry

    def retry_once(ctx: AfterModelCallContext) -> None:
        ctx.retry = ctx.error is not None and ctx.attempt == 1

    agent.add_hook("after_model_call", retry_once)
    events = [event async for event in agent.chat_stream("hi")]

    shown: list[str] = []
    for event in events:
        if isinstance(event, TextDelta):
            shown.append(event.text)
        elif isinstance(event, ModelRetry):
            assert (event.iteration, event.attempt) == (0, 1)
            assert isinstance(event.error, ServerError)
            shown.clear()
    assert "".join(shown) == "clean"
    assert [m.content for m in agent.messages] == ["hi", "clean"]


async def test_stream_raises_the_chat_error_to_the_consumer() -> None:
    agent = Agent(ScriptedModel([ServerError("down", status=503)]), retry=None)
    seen: list[str] = []
    with pytest.raises(ServerError, match="down"):
        async for event in agent.chat_stream("hi"):
            seen.append(event.type)
    assert seen == ["message"]
    assert not agent.is_running


# --- cancellation ----------------------------------------------------------------------


def abort_recorder(agent: Agent) -> list[object]:
    reasons: list[object] = []

    def record(ctx: ChatAbortContext) -> None:
        reasons.append(ctx.reason)

    agent.add_hook("on_chat_abort", record)
    agent.add_hook("on_chat_done", lambda ctx: reasons.append("DONE"))
    agent.add_hook("on_chat_error", lambda ctx: reasons.append("ERROR"))
    return reasons


async def test_cancel_during_a_model_call() -> None:
    model = BlockingModel()
    agent = Agent(model)
    terminal = abort_recorder(agent)
    chat = asyncio.create_task(agent.chat("hi"))
    await model.started.wait()

    assert agent.cancel("user pressed stop") is True
    with pytest.raises(ChatCancelledError) as caught:
        await chat
    assert caught.value.reason == "user pressed stop"
    assert terminal == ["user pressed stop"]
    assert roles(agent.messages) == ["user"]
    assert not agent.is_running
    assert agent.cancel() is False

    agent.model = ScriptedModel(["back again"])
    assert (await agent.chat("hello?")).text == "back again"
    assert roles(agent.messages) == ["user", "user", "assistant"]


async def test_cancel_from_the_chat_task_does_not_leave_it_cancelling() -> None:
    model = BlockingModel()
    agent = Agent(model)

    async def chat_then_report() -> int:
        with pytest.raises(ChatCancelledError):
            await agent.chat("hi")
        task = asyncio.current_task()
        assert task is not None
        await asyncio.sleep(0)  # a pending cancellation would be delivered here
        return task.cancelling()

    runner = asyncio.create_task(chat_then_report())
    await model.started.wait()
    agent.cancel()
    assert await runner == 0


async def test_task_cancellation_propagates_as_cancelled_error() -> None:
    model = BlockingModel()
    agent = Agent(model)
    terminal = abort_recorder(agent)
    chat = asyncio.create_task(agent.chat("hi"))
    await model.started.wait()
    chat.cancel()
    with pytest.raises(asyncio.CancelledError):
        await chat
    assert len(terminal) == 1
    assert terminal[0] not in ("DONE", "ERROR")
    assert not agent.is_running


async def test_cancel_during_a_tool_answers_the_open_call_and_the_next_chat_works() -> None:
    entered = asyncio.Event()
    cancelled_inside_tool = asyncio.Event()

    @tool
    async def slow_search(query: str) -> str:
        """Search slowly."""
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled_inside_tool.set()
            raise
        return "unreachable"

    model = ScriptedModel([tool_call("slow_search", {"query": "x"}, id="s1"), "recovered"])
    agent = Agent(model, tools=[slow_search])
    terminal = abort_recorder(agent)
    committed: list[str] = []
    agent.add_hook("on_message", lambda ctx: committed.append(ctx.message.role))
    chat = asyncio.create_task(agent.chat("search"))
    await entered.wait()
    agent.cancel("timeout")

    with pytest.raises(ChatCancelledError):
        await chat
    assert cancelled_inside_tool.is_set()
    assert terminal == ["timeout"]
    assert roles(agent.messages) == ["user", "assistant", "tool"]
    assert committed == ["user", "assistant", "tool"]
    result = agent.messages[2]
    assert isinstance(result, ToolMessage)
    assert (result.tool_call_id, result.is_error) == ("s1", True)
    assert "cancelled" in result.content
    assert_valid_history(agent.messages)

    assert (await agent.chat("and now?")).text == "recovered"
    assert_valid_history(model.requests[-1].messages)


async def test_cancel_during_parallel_tools_keeps_results_that_finished() -> None:
    fast_done = asyncio.Event()

    @tool
    async def fast() -> str:
        """Answer at once."""
        fast_done.set()
        return "fast result"

    @tool
    async def stuck() -> str:
        """Never answer."""
        await asyncio.Event().wait()
        return "unreachable"

    calls = tool_calls(ToolCall(name="stuck", id="first"), ToolCall(name="fast", id="second"))
    agent = Agent(ScriptedModel([calls]), tools=[fast, stuck])
    chat = asyncio.create_task(agent.chat("go"))
    await fast_done.wait()
    await asyncio.sleep(0)
    agent.cancel()
    with pytest.raises(ChatCancelledError):
        await chat
    results = [m for m in agent.messages if isinstance(m, ToolMessage)]
    assert [(m.tool_call_id, m.is_error) for m in results] == [("first", True), ("second", False)]
    assert results[1].content == "fast result"
    assert_valid_history(agent.messages)


async def test_cancel_during_a_stream() -> None:
    model = BlockingModel(parts=[TextDelta(text="Hel")])
    agent = Agent(model)
    terminal = abort_recorder(agent)
    seen: list[str] = []
    with pytest.raises(ChatCancelledError):
        async with agent.chat_stream("hi") as stream:
            async for event in stream:
                seen.append(event.type)
                if isinstance(event, TextDelta):
                    await model.started.wait()
                    agent.cancel("stop streaming")
    assert seen == ["message", "text_delta"]
    assert terminal == ["stop streaming"]
    assert roles(agent.messages) == ["user"]
    assert not agent.is_running

    agent.model = ScriptedModel(["fine"])
    assert (await agent.chat("again")).text == "fine"


async def test_leaving_a_stream_early_cancels_the_chat() -> None:
    model = BlockingModel(parts=[TextDelta(text="Hel")])
    agent = Agent(model)
    terminal = abort_recorder(agent)
    async with agent.chat_stream("hi") as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                break
    assert terminal == ["the stream was closed before the chat finished"]
    assert not agent.is_running
    assert roles(agent.messages) == ["user"]


async def test_cancelling_the_stream_consumer_cancels_the_chat() -> None:
    model = BlockingModel(parts=[TextDelta(text="Hel")])
    agent = Agent(model)
    terminal = abort_recorder(agent)

    async def consume() -> None:
        async with agent.chat_stream("hi") as stream:
            async for _ in stream:
                pass

    consumer = asyncio.create_task(consume())
    await model.started.wait()
    consumer.cancel()
    with pytest.raises(asyncio.CancelledError):
        await consumer
    assert len(terminal) == 1
    assert terminal[0] not in ("DONE", "ERROR")
    assert not agent.is_running


async def test_cancel_before_the_first_model_call() -> None:
    model = ScriptedModel(["never sent"])
    agent = Agent(model)
    agent.add_hook("on_chat_start", lambda ctx: agent.cancel("changed my mind"))
    with pytest.raises(ChatCancelledError, match="changed my mind"):
        await agent.chat("hi")
    assert model.requests == []


async def test_cancel_from_a_worker_thread() -> None:
    agent: Agent

    @tool
    def give_up() -> str:
        """Runs in a worker thread and cancels the chat from there."""
        assert agent.cancel("from a thread") is True
        return "cancelling"

    agent = Agent(ScriptedModel([tool_call("give_up", {}), "never"]), tools=[give_up])
    with pytest.raises(ChatCancelledError, match="from a thread"):
        await agent.chat("hi")
    assert_valid_history(agent.messages)
    assert not agent.is_running


async def test_the_model_stream_is_closed_when_the_chat_is_cancelled() -> None:
    closed: list[str] = []

    class HoldsAConnection(Model):
        name = "connection"

        async def request(self, request: ProviderRequest) -> ProviderResponse:
            raise AssertionError("streaming only")

        async def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
            try:
                yield TextDelta(text="first")
                await asyncio.Event().wait()
                yield StreamEnd()
            finally:
                closed.append("closed")

    agent = Agent(HoldsAConnection())
    with pytest.raises(ChatCancelledError):
        async for event in agent.chat_stream("hi"):
            if isinstance(event, TextDelta):
                agent.cancel()
    assert closed == ["closed"]


async def test_a_result_json_cannot_hold_still_reaches_the_model() -> None:
    @tool
    async def loop_back() -> object:
        """Return a list that contains itself."""
        circular: list[object] = []
        circular.append(circular)
        return circular

    model = ScriptedModel([tool_call("loop_back", {}), "ok"])
    agent = Agent(model, tools=[loop_back])
    assert (await agent.chat("go")).text == "ok"
    result = agent.messages[2]
    assert isinstance(result, ToolMessage)
    assert (result.content, result.is_error) == ("[[...]]", False)


async def test_an_empty_history_given_to_the_agent_is_the_one_it_uses() -> None:
    from hookloop import ChatHistory

    history = ChatHistory(max_context_tokens=500)
    agent = Agent(ScriptedModel(["hi"]), history=history, system_prompt="Be kind.")
    assert agent.history is history
    await agent.chat("hello")
    assert [m.role for m in history.messages] == ["user", "assistant"]
    assert history.system_message is not None
    assert history.system_message.content == "Be kind."
    with pytest.raises(UsageError, match="ChatHistory"):
        Agent(ScriptedModel([]), history=[])  # type: ignore[arg-type]


async def test_a_stream_shows_an_answer_supplied_by_pre_request() -> None:
    model = ScriptedModel([])
    agent = Agent(model, retry=None)
    agent.add_hook("pre_request", lambda ctx: ProviderResponse(content="from the cache"))
    events = [event async for event in agent.chat_stream("hi")]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "from the cache"
    assert model.requests == []


@pytest.mark.parametrize("forced", ["required", "add"])
async def test_a_forcing_tool_choice_holds_for_the_first_call_of_each_chat(forced: str) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3", "again"])
    agent = Agent(model, tools=[add], settings=ModelSettings(tool_choice=forced))
    await agent.chat("1 + 2?")
    await agent.chat("And now?")
    assert [r.settings.tool_choice for r in model.requests] == [forced, "auto", forced]


async def test_without_reset_every_call_is_forced() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "3"])
    settings = ModelSettings(tool_choice="required")
    agent = Agent(model, tools=[add], settings=settings, reset_tool_choice=False)
    await agent.chat("1 + 2?")
    assert [r.settings for r in model.requests] == [settings, settings]
