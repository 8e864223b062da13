"""A tool's run context: the chat's dependencies and where the call stands (issue 15, item 2).

Layout of this module:
    schema       the run-context parameter is left out of the tool's JSON schema
    values       sync and async tools receive the whole context (deps, agent, usage,
                 session id, call id, tool name, attempt)
    deps         per chat beats the agent's default; chat_sync and chat_stream pass them;
                 a tool that needs deps in a chat without any ends it with MissingDepsError
    delegation   a sub-agent without deps of its own gets the delegating chat's
    typing       mypy checks what a tool does with ``ctx.deps``
"""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path
from typing import Annotated, Any, Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    MissingDepsError,
    RunContext,
    ToolCall,
    ToolDefinitionError,
    ToolErrorContext,
    ToolMessage,
    Usage,
    UsageError,
    tool,
)
from hookloop.models import ProviderResponse
from hookloop.testing import ScriptedModel, tool_call
from tests._typecheck import mypy


@dataclasses.dataclass(frozen=True)
class Deps:
    user: str
    limit: int


def _lookup_tools(seen: list[RunContext[Any]]) -> tuple[Any, Any]:
    @tool
    def sync_lookup(ctx: RunContext[Deps], key: str) -> str:
        """Look a key up.

        Args:
            key: The key.
        """
        seen.append(ctx)
        return f"{ctx.deps.user}:{key}"

    @tool
    async def async_lookup(key: str, ctx: RunContext[Deps]) -> str:
        """Look a key up, asynchronously.

        Args:
            key: The key.
        """
        seen.append(ctx)
        return f"{ctx.deps.user}:{key}!"

    return sync_lookup, async_lookup


# --- schema ------------------------------------------------------------------------------


def test_the_run_context_is_left_out_of_the_schema() -> None:
    sync_lookup, async_lookup = _lookup_tools([])
    expected = {
        "additionalProperties": False,
        "properties": {"key": {"description": "The key.", "type": "string"}},
        "required": ["key"],
        "type": "object",
    }
    assert sync_lookup.definition.parameters == expected
    assert async_lookup.definition.parameters == expected
    assert (sync_lookup.context_parameter, sync_lookup.needs_deps) == ("ctx", True)
    assert (async_lookup.context_parameter, async_lookup.needs_deps) == ("ctx", True)


def test_the_model_cannot_fill_the_run_context() -> None:
    sync_lookup, _ = _lookup_tools([])
    with pytest.raises(Exception, match="ctx"):
        sync_lookup.validate("c1", '{"key": "a", "ctx": {}}')


def test_two_run_contexts_are_refused() -> None:
    def twice(a: RunContext[None], b: RunContext[None]) -> str:
        """Twice."""
        return ""

    with pytest.raises(ToolDefinitionError, match="'a' and 'b' both take a RunContext"):
        tool(twice)


async def test_an_annotated_run_context_is_a_run_context() -> None:
    def annotated(ctx: Annotated[RunContext[str], "the chat"], x: int) -> str:
        """Annotated.

        Args:
            x: A number.
        """
        return f"{ctx.deps}:{x}"

    made = tool(annotated)
    assert (made.context_parameter, made.needs_deps) == ("ctx", True)
    assert list(made.definition.parameters["properties"]) == ["x"]
    agent = Agent(ScriptedModel([tool_call("annotated", {"x": 1}, id="c1"), "ok"]), tools=[made])
    response = await agent.chat("go", deps="D")
    assert [m.content for m in response.messages if isinstance(m, ToolMessage)] == ["D:1"]


def test_a_run_context_in_a_union_is_refused() -> None:
    def optional(ctx: Optional[RunContext[str]], x: int) -> str:  # noqa: UP045
        """Optional."""
        return ""

    def union(ctx: RunContext[str] | int, x: int) -> str:
        """Union."""
        return ""

    for function in (optional, union):
        with pytest.raises(ToolDefinitionError, match="'ctx' is a union with a RunContext"):
            tool(function)


def test_a_plain_or_none_run_context_needs_no_deps() -> None:
    def plain(ctx: RunContext) -> str:  # type: ignore[type-arg]
        """Plain."""
        return ""

    def none(ctx: RunContext[None]) -> str:
        """None."""
        return ""

    assert (tool(plain).context_parameter, tool(plain).needs_deps) == ("ctx", False)
    assert (tool(none).context_parameter, tool(none).needs_deps) == ("ctx", False)
    assert tool(none).definition.parameters == {
        "additionalProperties": False,
        "properties": {},
        "type": "object",
    }


# --- values ------------------------------------------------------------------------------


async def test_sync_and_async_tools_receive_the_whole_context() -> None:
    seen: list[RunContext[Any]] = []
    sync_lookup, async_lookup = _lookup_tools(seen)
    usage = Usage(input_tokens=10, output_tokens=3)
    model = ScriptedModel(
        [
            ProviderResponse(
                tool_calls=(
                    ToolCall(name="sync_lookup", arguments='{"key": "a"}', id="c1"),
                    ToolCall(name="async_lookup", arguments='{"key": "b"}', id="c2"),
                ),
                finish_reason="tool_calls",
                usage=usage,
            ),
            "done",
        ]
    )
    deps = Deps(user="ann", limit=3)
    agent = Agent(model, tools=[sync_lookup, async_lookup], session_id="s-1")
    response = await agent.chat("look", deps=deps)
    common = {"deps": deps, "agent": agent, "usage": usage, "session_id": "s-1", "attempt": 1}
    assert sorted(seen, key=lambda c: c.call_id) == [
        RunContext(call_id="c1", tool_name="sync_lookup", **common),
        RunContext(call_id="c2", tool_name="async_lookup", **common),
    ]
    results = [(m.tool_call_id, m.content) for m in response.messages if isinstance(m, ToolMessage)]
    assert results == [("c1", "ann:a"), ("c2", "ann:b!")]


async def test_attempt_counts_the_runs_of_a_retried_call() -> None:
    attempts: list[int] = []

    @tool
    def flaky(ctx: RunContext[None]) -> str:
        """Fail twice."""
        attempts.append(ctx.attempt)
        if ctx.attempt < 3:
            raise RuntimeError("not yet")
        return "ok"

    agent = Agent(ScriptedModel([tool_call("flaky", {}), "done"]), tools=[flaky])

    def again(ctx: ToolErrorContext) -> None:
        ctx.retry = True

    agent.add_hook("on_tool_call_error", again)
    await agent.chat("go")
    assert attempts == [1, 2, 3]


@settings(max_examples=25, deadline=None)
@given(key=st.text(min_size=0, max_size=20), user=st.text(max_size=10))
def test_the_context_never_changes_the_models_arguments(key: str, user: str) -> None:
    seen: list[RunContext[Any]] = []
    sync_lookup, _ = _lookup_tools(seen)
    model = ScriptedModel([tool_call("sync_lookup", {"key": key}, id="c1"), "done"])
    agent = Agent(model, tools=[sync_lookup])
    response = agent.chat_sync("go", deps=Deps(user=user, limit=0))
    assert [m.content for m in response.messages if isinstance(m, ToolMessage)] == [f"{user}:{key}"]
    assert (
        response.messages[1].tool_calls[0].arguments
        == ToolCall.create(  # type: ignore[union-attr]
            "sync_lookup", {"key": key}
        ).arguments
    )


# --- deps --------------------------------------------------------------------------------


async def test_the_chats_deps_beat_the_agents_and_the_agents_are_the_default() -> None:
    seen: list[RunContext[Any]] = []
    sync_lookup, _ = _lookup_tools(seen)
    script = [tool_call("sync_lookup", {"key": "k"}), "done"]
    agent = Agent(ScriptedModel(script * 3), tools=[sync_lookup], deps=Deps(user="dflt", limit=1))
    await agent.chat("one")
    await agent.chat("two", deps=Deps(user="chat", limit=2))
    async with agent.chat_stream("three", deps=Deps(user="stream", limit=3)) as events:
        async for _ in events:
            pass
    assert [c.deps.user for c in seen] == ["dflt", "chat", "stream"]


def test_chat_sync_passes_deps() -> None:
    seen: list[RunContext[Any]] = []
    sync_lookup, _ = _lookup_tools(seen)
    agent = Agent(
        ScriptedModel([tool_call("sync_lookup", {"key": "k"}), "done"]), tools=[sync_lookup]
    )
    assert agent.chat_sync("go", deps=Deps(user="sync", limit=0)).text == "done"
    assert [c.deps for c in seen] == [Deps(user="sync", limit=0)]


async def test_a_tool_that_needs_deps_in_a_chat_without_any_ends_it() -> None:
    sync_lookup, _ = _lookup_tools([])
    agent = Agent(
        ScriptedModel([tool_call("sync_lookup", {"key": "k"}, id="c1"), "done"]),
        tools=[sync_lookup],
    )
    with pytest.raises(MissingDepsError) as raised:
        await agent.chat("go")
    assert isinstance(raised.value, UsageError)
    assert raised.value.tool_name == "sync_lookup"
    assert str(raised.value) == (
        "tool 'sync_lookup' takes RunContext with dependencies, but the chat has none: "
        "pass chat(..., deps=...) or Agent(deps=...)"
    )
    # The history stays valid: the open call is answered.
    last = agent.messages[-1]
    assert last == ToolMessage(
        tool_call_id="c1",
        tool_name="sync_lookup",
        content="not run: the chat ended with an error",
        is_error=True,
        id=last.id,
    )


async def test_a_plain_context_in_a_chat_without_deps_gets_none() -> None:
    seen: list[object] = []

    @tool
    def who(ctx: RunContext[None]) -> str:
        """Who."""
        seen.append(ctx.deps)
        return ctx.call_id

    agent = Agent(ScriptedModel([tool_call("who", {}, id="c9"), "done"]), tools=[who])
    response = await agent.chat("go")
    assert seen == [None]
    assert [m.content for m in response.messages if isinstance(m, ToolMessage)] == ["c9"]


async def test_none_is_a_dependency_when_given() -> None:
    seen: list[object] = []

    @tool
    def use(ctx: RunContext[object]) -> str:
        """Use."""
        seen.append(ctx.deps)
        return "ok"

    agent = Agent(ScriptedModel([tool_call("use", {}), "done"]), tools=[use])
    await agent.chat("go", deps=None)
    assert seen == [None]


# --- delegation ----------------------------------------------------------------------------


async def test_a_sub_agent_without_deps_gets_the_delegating_chats() -> None:
    seen: list[RunContext[Any]] = []
    sync_lookup, _ = _lookup_tools(seen)
    sub = Agent(
        ScriptedModel([tool_call("sync_lookup", {"key": "s"}), "sub done"] * 2),
        name="sub",
        tools=[sync_lookup],
    )
    own = Agent(
        ScriptedModel([tool_call("sync_lookup", {"key": "o"}), "own done"]),
        name="own",
        tools=[sync_lookup],
        deps=Deps(user="own", limit=0),
    )
    parent = Agent(
        ScriptedModel(
            [
                tool_call("sub", {"task": "do it"}),
                tool_call("own", {"task": "do it"}),
                "all done",
            ]
        ),
        name="parent",
        tools=[sub.as_tool(), own.as_tool()],
    )
    await parent.chat("go", deps=Deps(user="parent", limit=0))
    assert [(c.agent.name, c.deps.user) for c in seen] == [("sub", "parent"), ("own", "own")]


# --- typing ----------------------------------------------------------------------------------


def _docs_example() -> str:
    page = (Path(__file__).resolve().parent.parent / "docs" / "tools.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "RunContext[" in b]
    return block


def test_mypy_checks_what_a_tool_does_with_its_deps(tmp_path: Path) -> None:
    wrong = textwrap.dedent(
        """
        from dataclasses import dataclass
        from hookloop import RunContext, tool

        @dataclass
        class Deps:
            user: str

        @tool
        def greet(ctx: RunContext[Deps], greeting: str) -> str:
            '''Greet.'''
            name: str = ctx.deps.user
            email: str = ctx.deps.email
            return greeting + name + email
        """
    )
    (tmp_path / "docs_example.py").write_text(_docs_example(), encoding="utf-8")
    (tmp_path / "wrong_tool.py").write_text(wrong, encoding="utf-8")
    status, errors = mypy(tmp_path / "docs_example.py", tmp_path / "wrong_tool.py")
    assert status == 1
    # The example in docs/tools.md passes; the wrong use of ctx.deps is caught.
    assert [Path(line).name for line in errors] == [
        'wrong_tool.py:13: error: "Deps" has no attribute "email"  [attr-defined]'
    ]
