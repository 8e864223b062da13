"""The hook contract: tool failures.

Unknown / disabled / invalid arguments / raising tool, and on_tool_call_error.

Part of DESIGN.md sections 2 and 3 (seed 002 "AG2B hooks").
"""

import dataclasses

import pytest

from hookloop import (
    Scope,
    ToolCall,
    ToolDisabledError,
    ToolErrorContext,
    ToolExecutionError,
    ToolValidationError,
    UnknownToolError,
    tool,
)
from hookloop.testing import tool_call
from tests.hooks._support import (
    fail,
    make_add,
    make_agent,
    summary,
)

# --- tool failures and on_tool_call_error ------------------------------------------------


async def test_unknown_tool_fires_on_tool_call_error_without_tool_or_scope() -> None:
    agent, model, rec = make_agent(
        [tool_call("nope", {"x": 1}, id="c1"), "done"], tools=[make_add()]
    )

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert ctx.tool is None
    assert ctx.scope is None
    assert ctx.call == ToolCall.create("nope", {"x": 1}, id="c1")
    assert isinstance(ctx.error, UnknownToolError)
    assert (ctx.error.tool_name, ctx.error.call_id) == ("nope", "c1")
    assert response.text == "done"
    assert rec.terminal == ["on_chat_done"]
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "nope")]),
        ("tool", "c1", str(ctx.error), True),
        ("assistant", "done", []),
    ]
    assert len(model.requests) == 2


async def test_disabled_tool_fires_on_tool_call_error() -> None:
    @tool(enabled=False)
    async def secret() -> str:
        """Disabled."""
        raise AssertionError("a disabled tool must not run")

    agent, _, rec = make_agent([tool_call("secret", {}, id="c1"), "done"], tools=[secret])

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolDisabledError)
    assert ctx.tool is secret
    assert ctx.scope.name == "default"
    assert response.text == "done"
    assert "'secret'" in str(ctx.error)
    assert summary(agent.messages)[2] == ("tool", "c1", str(ctx.error), True)


async def test_tool_of_a_disabled_scope_fires_on_tool_call_error() -> None:
    add = make_add()
    agent, _, rec = make_agent([tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"])
    off = Scope("off", tools=[add], enabled=False)
    agent.scopes.register(off)

    await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolDisabledError)
    assert (ctx.tool, ctx.scope) == (add, off)
    assert summary(agent.messages)[2] == ("tool", "c1", str(ctx.error), True)


@pytest.mark.parametrize(
    "arguments",
    [{"a": "one", "b": 2}, "{not json", {"a": 1}, "[1, 2]"],
    ids=["wrong-type", "invalid-json", "missing-field", "not-an-object"],
)
async def test_invalid_arguments_fire_on_tool_call_error(
    arguments: dict[str, object] | str,
) -> None:
    calls: list[tuple[int, int]] = []
    agent, _, rec = make_agent(
        [tool_call("add", arguments, id="c1"), "done"], tools=[make_add(calls)]
    )

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolValidationError)
    assert (ctx.error.tool_name, ctx.error.call_id) == ("add", "c1")
    assert ctx.tool.name == "add"
    assert calls == []
    assert response.text == "done"
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", str(ctx.error), True),
        ("assistant", "done", []),
    ]


async def test_raising_tool_becomes_a_tool_execution_error_with_its_cause() -> None:
    agent, _, rec = make_agent([tool_call("fail", {}, id="c1"), "done"], tools=[fail])

    response = await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolExecutionError)
    assert isinstance(ctx.error.__cause__, ValueError)
    assert str(ctx.error.__cause__) == "kaput"
    assert ctx.tool is fail
    assert response.text == "done"
    assert rec.terminal == ["on_chat_done"]
    assert "kaput" in str(ctx.error)  # the model is told what went wrong
    assert summary(agent.messages)[2] == ("tool", "c1", str(ctx.error), True)


async def test_on_tool_call_error_handlers_all_run_and_compose() -> None:
    agent, model, _ = make_agent([tool_call("fail", {}, id="c1"), "done"], tools=[fail])
    seen: list[str] = []

    def classify(ctx: ToolErrorContext) -> Exception:
        seen.append(f"classify saw {type(ctx.error).__name__}")
        return RuntimeError("the tool is broken")

    def observe(ctx: ToolErrorContext) -> None:
        seen.append(f"observe saw {ctx.error}")

    def prefix(ctx: ToolErrorContext) -> Exception:
        seen.append(f"prefix saw {ctx.error}")
        return RuntimeError(f"error: {ctx.error}")

    agent.add_hook("on_tool_call_error", classify)
    agent.add_hook("on_tool_call_error", observe)
    agent.add_hook("on_tool_call_error", prefix)
    agent.add_hook("on_tool_call_error", observe)
    await agent.chat("hi")

    assert seen == [
        "classify saw ToolExecutionError",
        "observe saw the tool is broken",
        "prefix saw the tool is broken",
        "observe saw error: the tool is broken",
    ]
    assert summary(agent.messages)[2] == ("tool", "c1", "error: the tool is broken", True)
    assert summary(model.requests[1].messages)[-1] == (
        "tool",
        "c1",
        "error: the tool is broken",
        True,
    )


async def test_on_tool_call_error_sees_the_call_as_pre_tool_call_left_it() -> None:
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )
    agent.add_hook(
        "pre_tool_call", lambda ctx: dataclasses.replace(ctx.call, arguments='{"a": "x"}')
    )

    await agent.chat("hi")

    (ctx,) = rec.contexts["on_tool_call_error"]
    assert isinstance(ctx.error, ToolValidationError)
    assert ctx.call.arguments == '{"a": "x"}'
    assert agent.messages[2].tool_call_id == "c1"  # type: ignore[union-attr]
