"""The hook contract: throws, terminal events.

A throw in any handler ends the chat (the two exceptions to that rule); exactly one of
on_chat_done / on_chat_abort / on_chat_error per chat.

Part of DESIGN.md sections 2 and 3 (seed 002 "AG2B hooks").
"""

import asyncio
import logging
from typing import Any

import pytest

import hookloop._loop
from hookloop import (
    ChatAbortContext,
    ChatCancelledError,
    ChatDone,
    ChatDoneContext,
    ChatErrorContext,
    MaxIterationsError,
    MessageCommitted,
    MessageContext,
    PreToolCallContext,
    ResponseContext,
    ServerError,
    ToolCall,
    ToolMessage,
    tool,
)
from hookloop.models import ProviderRequest
from hookloop.testing import (
    FunctionModel,
    ScriptedModel,
    tool_call,
    tool_calls,
)
from tests.hooks._support import (
    Recorder,
    add_call,
    bare_agent,
    make_add,
    make_agent,
    summary,
)

# --- throws -------------------------------------------------------------------------------

# event, model calls made before the throw ends the chat
THROWING = [
    ("on_chat_start", 0),
    ("on_message", 0),
    ("pre_request", 0),
    ("after_model_call", 1),
    ("on_response", 1),
    ("pre_tool_call", 1),
    ("on_tool_call_result", 1),
    ("on_tool_call_error", 1),
]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize(("event", "model_calls"), THROWING)
async def test_throw_in_a_handler_ends_the_chat_and_reaches_the_caller(
    event: str, model_calls: int, is_async: bool
) -> None:
    agent, model, rec = make_agent(
        [tool_calls(add_call("c1"), ToolCall.create("nope", {}, id="c2")), "never"],
        tools=[make_add()],
    )
    boom = RuntimeError(f"boom in {event}")
    later: list[str] = []

    def explode(ctx: object) -> None:
        raise boom

    async def explode_async(ctx: object) -> None:
        await asyncio.sleep(0)
        raise boom

    agent.add_hook(event, explode_async if is_async else explode)  # type: ignore[call-overload]
    agent.add_hook(event, lambda ctx: later.append(event))  # type: ignore[call-overload]

    with pytest.raises(RuntimeError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    assert later == []  # the rest of the chain does not run
    assert rec.terminal == ["on_chat_error"]
    assert rec.events[-1] == "on_chat_error"
    assert rec.contexts["on_chat_error"][0].error is boom
    handler_name = "explode_async" if is_async else "explode"
    assert any(f"{event!r}" in note and handler_name in note for note in boom.__notes__)
    assert len(model.requests) == model_calls  # the model never sees what went wrong


async def test_throw_in_on_message_for_a_later_message_ends_the_chat() -> None:
    agent, model, rec = make_agent(["answer", "never"])
    boom = RuntimeError("no assistant messages")

    def reject_assistant(ctx: MessageContext) -> None:
        if ctx.message.role == "assistant":
            raise boom

    agent.add_hook("on_message", reject_assistant)

    with pytest.raises(RuntimeError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    assert rec.events[-3:] == ["on_response:0", "on_message:assistant", "on_chat_error"]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "answer", [])]
    assert model.remaining == 1


async def test_history_stays_valid_after_a_throw_during_tool_calls() -> None:
    agent, model, rec = make_agent(
        [tool_calls(add_call("c1"), add_call("c2", 3, 4)), "second chat"],
        tools=[make_add()],
    )

    def explode_on_c1(ctx: PreToolCallContext) -> None:
        if ctx.call.id == "c1":
            raise RuntimeError("boom")

    dispose = agent.add_hook("pre_tool_call", explode_on_c1)
    with pytest.raises(RuntimeError):
        await agent.chat("hi")
    dispose()

    # Every call of the assistant message is answered once, in call order; c1 never ran.
    answers = agent.messages[2:]
    assert [m.tool_call_id for m in answers] == ["c1", "c2"]  # type: ignore[union-attr]
    assert isinstance(answers[0], ToolMessage)
    assert answers[0].is_error is True
    # ... and on_message reported each of those commits.
    assert [ctx.message for ctx in rec.contexts["on_message"]] == list(agent.messages)
    assert rec.terminal == ["on_chat_error"]
    # The next chat sends a valid history.
    response = await agent.chat("again")
    assert response.text == "second chat"
    assert summary(model.requests[-1].messages)[:4] == summary(agent.messages)[:4]


async def test_concurrent_throws_in_tool_hooks_leave_no_unretrieved_task_exception() -> None:
    loop = asyncio.get_running_loop()
    created: list[asyncio.Task[Any]] = []

    def recording_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> Any:
        task = asyncio.Task(coro, loop=loop, **kwargs)
        created.append(task)
        return task

    agent = bare_agent(
        ScriptedModel([tool_calls(add_call("c1"), add_call("c2", 3, 4))]), tools=[make_add()]
    )

    def explode(ctx: PreToolCallContext) -> None:
        raise RuntimeError(f"boom {ctx.call.id}")

    agent.add_hook("pre_tool_call", explode)
    previous = loop.get_task_factory()
    loop.set_task_factory(recording_factory)
    try:
        with pytest.raises(RuntimeError, match="boom c1"):  # the first in call order wins
            await agent.chat("hi")
    finally:
        loop.set_task_factory(previous)

    # asyncio logs "Task exception was never retrieved" for a task whose exception nobody
    # looked at; _log_traceback is the flag it checks.
    never_retrieved = [
        str(task.exception())
        for task in created
        if task.done() and not task.cancelled() and task._log_traceback  # type: ignore[attr-defined]
    ]
    assert never_retrieved == []


async def test_throw_in_on_chat_error_is_logged_and_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    boom = ServerError("boom", status=500)
    agent, _, rec = make_agent([boom])
    seen: list[Exception] = []

    def broken_reporter(ctx: ChatErrorContext) -> None:
        raise ValueError("reporter is broken")

    agent.add_hook("on_chat_error", broken_reporter)
    agent.add_hook("on_chat_error", lambda ctx: seen.append(ctx.error))

    with caplog.at_level(logging.ERROR, logger="hookloop"), pytest.raises(ServerError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    assert not getattr(boom, "__notes__", [])  # not blamed on a hook
    assert seen == [boom]  # later handlers still run
    assert rec.terminal == ["on_chat_error"]
    (record,) = caplog.records
    assert record.levelno == logging.ERROR
    assert "on_chat_error" in record.getMessage()
    assert "broken_reporter" in record.getMessage()
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "reporter is broken"


async def test_throw_in_on_chat_done_reaches_the_caller_without_on_chat_error() -> None:
    agent, _, rec = make_agent(["answer"])
    boom = RuntimeError("done handler broke")

    def explode(ctx: ChatDoneContext) -> None:
        raise boom

    agent.add_hook("on_chat_done", explode)

    with pytest.raises(RuntimeError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    assert any("'on_chat_done'" in note and "explode" in note for note in boom.__notes__)
    assert rec.terminal == ["on_chat_done"]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "answer", [])]


async def test_chat_stream_reraises_a_hook_throw_after_on_chat_error() -> None:
    agent, _, rec = make_agent(["answer"])
    boom = RuntimeError("boom")

    def explode(ctx: ResponseContext) -> None:
        raise boom

    agent.add_hook("on_response", explode)

    received: list[object] = []
    with pytest.raises(RuntimeError) as raised:
        async with agent.chat_stream("hi") as stream:
            async for event in stream:
                received.append(event)

    assert raised.value is boom
    assert rec.terminal == ["on_chat_error"]
    assert not any(isinstance(e, ChatDone) for e in received)
    assert [e.message.role for e in received if isinstance(e, MessageCommitted)] == ["user"]


# --- terminal events ----------------------------------------------------------------------


def blocking_model(started: asyncio.Event) -> FunctionModel:
    """A model whose first call blocks until the chat is cancelled."""

    async def answer(request: ProviderRequest) -> str:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return FunctionModel(answer)


async def test_success_fires_only_on_chat_done() -> None:
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )

    await agent.chat("hi")

    assert rec.terminal == ["on_chat_done"]


async def test_provider_error_fires_only_on_chat_error() -> None:
    boom = ServerError("boom", status=500)
    agent, _, rec = make_agent([boom])

    with pytest.raises(ServerError):
        await agent.chat("hi")

    assert rec.terminal == ["on_chat_error"]
    assert rec.contexts["on_chat_error"][0].error is boom


async def test_hook_throw_fires_only_on_chat_error() -> None:
    agent, _, rec = make_agent(["answer"])
    agent.add_hook("on_response", lambda ctx: 1 / 0)

    with pytest.raises(ZeroDivisionError):
        await agent.chat("hi")

    assert rec.terminal == ["on_chat_error"]
    assert isinstance(rec.contexts["on_chat_error"][0].error, ZeroDivisionError)


async def test_max_iterations_fires_only_on_chat_error() -> None:
    model = FunctionModel(lambda request: tool_call("add", {"a": 1, "b": 2}))
    agent = bare_agent(model, tools=[make_add()], max_iterations=2)
    rec = Recorder(agent)

    with pytest.raises(MaxIterationsError) as raised:
        await agent.chat("hi")

    assert raised.value.max_iterations == 2
    assert rec.terminal == ["on_chat_error"]
    assert rec.contexts["on_chat_error"][0].error is raised.value
    assert len(model.requests) == 2


async def test_agent_cancel_during_the_model_call_fires_only_on_chat_abort() -> None:
    started = asyncio.Event()
    agent = bare_agent(blocking_model(started))
    rec = Recorder(agent)

    chat = asyncio.create_task(agent.chat("hi"))
    await started.wait()
    assert agent.cancel("user pressed stop") is True

    with pytest.raises(ChatCancelledError) as raised:
        await chat

    assert raised.value.reason == "user pressed stop"
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "on_chat_abort",
    ]
    assert rec.contexts["on_chat_abort"][0].reason == "user pressed stop"
    assert agent.cancel() is False  # nothing is running any more


async def test_agent_cancel_during_a_tool_closes_the_call_and_fires_only_on_chat_abort() -> None:
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Blocks until cancelled."""
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    agent, _, rec = make_agent([tool_call("wait_forever", {}, id="c1")], tools=[wait_forever])

    chat = asyncio.create_task(agent.chat("hi"))
    await started.wait()
    agent.cancel()
    with pytest.raises(ChatCancelledError):
        await chat

    assert rec.terminal == ["on_chat_abort"]
    assert summary([ctx.message for ctx in rec.contexts["on_message"]]) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "wait_forever")]),
        ("tool", "c1", hookloop._loop.CANCELLED_TOOL_TEXT, True),
    ]
    assert summary(agent.messages) == summary([c.message for c in rec.contexts["on_message"]])


async def test_task_cancellation_fires_only_on_chat_abort_and_stays_a_cancelled_error() -> None:
    started = asyncio.Event()
    agent = bare_agent(blocking_model(started))
    rec = Recorder(agent)

    chat = asyncio.create_task(agent.chat("hi"))
    await started.wait()
    chat.cancel("shutting down")

    with pytest.raises(asyncio.CancelledError):
        await chat

    assert rec.terminal == ["on_chat_abort"]
    assert rec.contexts["on_chat_abort"][0].reason == "shutting down"


async def test_throw_in_on_chat_abort_is_logged_and_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = asyncio.Event()
    agent = bare_agent(blocking_model(started))
    rec = Recorder(agent)
    seen: list[object] = []

    def broken(ctx: ChatAbortContext) -> None:
        raise ValueError("abort handler is broken")

    agent.add_hook("on_chat_abort", broken)
    agent.add_hook("on_chat_abort", lambda ctx: seen.append(ctx.reason))

    chat = asyncio.create_task(agent.chat("hi"))
    await started.wait()
    agent.cancel("stop")
    with caplog.at_level(logging.ERROR, logger="hookloop"), pytest.raises(ChatCancelledError):
        await chat

    assert seen == ["stop"]
    assert rec.terminal == ["on_chat_abort"]
    (record,) = caplog.records
    assert "on_chat_abort" in record.getMessage()
    assert "broken" in record.getMessage()
    assert record.exc_info is not None
    assert str(record.exc_info[1]) == "abort handler is broken"


async def test_cancel_from_inside_a_hook_fires_only_on_chat_abort() -> None:
    agent, model, rec = make_agent(["never"])

    def stop_after_user_message(ctx: MessageContext) -> None:
        agent.cancel("enough")

    agent.add_hook("on_message", stop_after_user_message)

    with pytest.raises(ChatCancelledError):
        await agent.chat("hi")
    await asyncio.sleep(0)  # no stray cancellation is left on the caller's task

    assert model.requests == []
    assert rec.terminal == ["on_chat_abort"]


async def test_each_chat_gets_exactly_one_terminal_event() -> None:
    agent, _, rec = make_agent(["one", ServerError("boom", status=500), "three"])

    await agent.chat("a")
    with pytest.raises(ServerError):
        await agent.chat("b")
    await agent.chat("c")

    assert rec.terminal == ["on_chat_done", "on_chat_error", "on_chat_done"]
