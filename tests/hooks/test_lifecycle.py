"""The hook contract: lifecycle.

The whole event sequence of a chat, on_chat_start / on_message / on_chat_done.

Part of DESIGN.md sections 2 and 3 (seed 002 "AG2B hooks").
"""

import asyncio
import dataclasses

from hookloop import (
    AgentResponse,
    Message,
    ToolCall,
    UserMessage,
    tool,
)
from hookloop.testing import (
    text_response,
    tool_call,
    tool_calls,
)
from tests.hooks._support import (
    add_call,
    make_add,
    make_agent,
    summary,
)

# --- lifecycle ----------------------------------------------------------------------------


async def test_full_event_order_of_a_chat_with_tool_calls() -> None:
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), tool_call("nope", {}, id="c2"), "three"],
        tools=[make_add()],
    )

    await agent.chat("what is 1 + 2?")

    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "after_model_call:0:1",
        "on_response:0",
        "on_message:assistant",
        "pre_tool_call:c1",
        "on_tool_call_result:c1",
        "on_message:tool",
        "pre_request:1",
        "after_model_call:1:1",
        "on_response:1",
        "on_message:assistant",
        "on_tool_call_error:c2",
        "on_message:tool",
        "pre_request:2",
        "after_model_call:2:1",
        "on_response:2",
        "on_message:assistant",
        "on_chat_done",
    ]


async def test_on_chat_start_fires_before_the_user_message_is_committed() -> None:
    agent, _, rec = make_agent(["hello"])
    history_at_start: list[tuple[Message, ...]] = []
    agent.add_hook("on_chat_start", lambda ctx: history_at_start.append(agent.messages))

    await agent.chat("hi there")

    (ctx,) = rec.contexts["on_chat_start"]
    assert history_at_start == [()]
    assert isinstance(ctx.message, UserMessage)
    assert ctx.message.content == "hi there"
    assert ctx.message is agent.messages[0]


async def test_on_chat_done_receives_the_returned_response_with_the_answer_in_history() -> None:
    agent, _, rec = make_agent(["hello"])
    last_message: list[Message] = []
    agent.add_hook("on_chat_done", lambda ctx: last_message.append(agent.messages[-1]))

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_chat_done"]
    assert ctx.response is response
    assert isinstance(response, AgentResponse)
    assert last_message == [response.message]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "hello", [])]


async def test_on_message_fires_after_every_commit_with_the_committed_message() -> None:
    agent, _, rec = make_agent(
        [tool_calls(add_call("c1"), ToolCall.create("nope", {}, id="c2")), "three"],
        tools=[make_add()],
    )
    history_lengths: list[int] = []
    agent.add_hook("on_message", lambda ctx: history_lengths.append(len(agent.messages)))

    response = await agent.chat("hi")

    messages = [ctx.message for ctx in rec.contexts["on_message"]]
    unknown = rec.contexts["on_tool_call_error"][0].error
    assert summary(messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add"), ("c2", "nope")]),
        ("tool", "c1", "3", False),
        ("tool", "c2", str(unknown), True),
        ("assistant", "three", []),
    ]
    assert all(m is h for m, h in zip(messages, agent.messages, strict=True))
    assert history_lengths == [1, 2, 3, 4, 5]  # each fires after its message is in history
    assert list(response.messages) == messages


async def test_on_message_for_the_assistant_sees_the_on_response_rewrite() -> None:
    agent, _, rec = make_agent(["raw"])
    agent.add_hook(
        "on_response", lambda ctx: dataclasses.replace(ctx.response, content="rewritten")
    )

    await agent.chat("hi")

    assert summary([ctx.message for ctx in rec.contexts["on_message"]]) == [
        ("user", "hi"),
        ("assistant", "rewritten", []),
    ]


async def test_tool_messages_are_committed_in_call_order_when_a_later_call_finishes_first() -> None:
    second_done = asyncio.Event()
    finished: list[str] = []

    @tool
    async def slow() -> str:
        """Waits for ``quick``."""
        await second_done.wait()
        finished.append("slow")
        return "slow result"

    @tool
    async def quick() -> str:
        """Finishes at once."""
        finished.append("quick")
        second_done.set()
        return "quick result"

    agent, _, rec = make_agent(
        [tool_calls(ToolCall(name="slow", id="c1"), ToolCall(name="quick", id="c2")), "done"],
        tools=[slow, quick],
    )

    await agent.chat("hi")

    assert finished == ["quick", "slow"]
    assert summary([ctx.message for ctx in rec.contexts["on_message"]]) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "slow"), ("c2", "quick")]),
        ("tool", "c1", "slow result", False),
        ("tool", "c2", "quick result", False),
        ("assistant", "done", []),
    ]


async def test_interceptors_fire_before_their_step_runs_or_commits() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, _ = make_agent(
        [tool_calls(add_call("c1"), ToolCall.create("nope", {}, id="c2")), "done"],
        tools=[make_add(calls)],
    )
    seen: list[tuple[str, object, list[str]]] = []

    def roles() -> list[str]:
        return [m.role for m in agent.messages]

    agent.add_hook(
        "pre_request", lambda ctx: seen.append(("pre_request", len(model.requests), roles()))
    )
    agent.add_hook("on_response", lambda ctx: seen.append(("on_response", None, roles())))
    agent.add_hook(
        "pre_tool_call", lambda ctx: seen.append(("pre_tool_call", list(calls), roles()))
    )
    agent.add_hook(
        "on_tool_call_result",
        lambda ctx: seen.append(("on_tool_call_result", list(calls), roles())),
    )
    agent.add_hook(
        "on_tool_call_error", lambda ctx: seen.append(("on_tool_call_error", None, roles()))
    )

    await agent.chat("hi")

    after_call = ["user", "assistant"]
    assert seen[:2] == [("pre_request", 0, ["user"]), ("on_response", None, ["user"])]
    assert sorted(seen[2:5]) == [
        ("on_tool_call_error", None, after_call),
        ("on_tool_call_result", [(1, 2)], after_call),
        ("pre_tool_call", [], after_call),
    ]
    assert seen[5:] == [
        ("pre_request", 1, ["user", "assistant", "tool", "tool"]),
        ("on_response", None, ["user", "assistant", "tool", "tool"]),
    ]


async def test_observer_return_values_are_ignored() -> None:
    agent, _, _ = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )
    for event in ("on_chat_start", "on_message", "after_model_call", "on_chat_done"):
        agent.add_hook(event, lambda ctx: "ignored")  # type: ignore[call-overload]
        agent.add_hook(event, lambda ctx: text_response("ignored too"))  # type: ignore[call-overload]

    response = await agent.chat("hi")

    assert response.text == "done"
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "3", False),
        ("assistant", "done", []),
    ]


async def test_chat_stream_fires_the_same_hooks() -> None:
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )

    async with agent.chat_stream("hi") as stream:
        kinds = [event.type async for event in stream]

    assert kinds[-1] == "chat_done"
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "after_model_call:0:1",
        "on_response:0",
        "on_message:assistant",
        "pre_tool_call:c1",
        "on_tool_call_result:c1",
        "on_message:tool",
        "pre_request:1",
        "after_model_call:1:1",
        "on_response:1",
        "on_message:assistant",
        "on_chat_done",
    ]
