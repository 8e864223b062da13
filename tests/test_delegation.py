"""Delegation: sub-agents as tools and ``agent.delegate()`` (DESIGN.md section 6, seed 004).

Layout of this module:
    round trip     as_tool and delegate: the task goes in, the answer comes back
    events         the sub-agent's events reach the parent tagged with the agent path;
                   nothing is registered when nobody listens
    usage          tokens roll up into the parent's response, failures included
    limits         a sub-agent's slice, and what the parent's limits have left
    cancellation   cancelling the parent cancels the running sub-agent
    errors         a failing sub-agent is a tool error the parent's model sees
    on_delegation  fires on the parent with (task, result, agent_name, metadata)
    background     the sub-agent's async memory hooks: not awaited by the delegation,
                   awaited by the parent's aclose()
    turns          parallel calls of one sub-agent take turns
"""

from __future__ import annotations

import asyncio
import gc
import weakref
from pathlib import Path
from typing import Any

import pytest

from hookloop import (
    Agent,
    ChatCancelledError,
    ServerError,
    ToolCall,
    ToolMessage,
    Usage,
    UsageError,
    UsageLimitExceeded,
    UsageLimits,
)
from hookloop.hooks import DelegationContext, SubAgentEventContext
from hookloop.memory import MemoryHooksPlugin
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import FunctionModel, ScriptedModel, text_response, tool_call

CHAT_EVENTS = ["on_chat_start", "on_message", "pre_request", "on_response", "on_chat_done"]


def agent(name: str, script: list[Any], **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(script, name=f"{name}-model"), name=name, retry=None, **kwargs)


def with_tool(parent: Agent, *subs: Agent) -> Agent:
    from hookloop import Scope

    parent.scopes.register(Scope("team", tools=[s.as_tool() for s in subs]))
    return parent


def used(input_tokens: int, output_tokens: int, text: str = "ok") -> ProviderResponse:
    return text_response(text, usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens))


# --- round trip -----------------------------------------------------------------------------


async def test_a_sub_agent_as_a_tool_answers_the_parent_model() -> None:
    researcher = agent("researcher", ["The boiling point is 100 C."])
    boss = with_tool(
        agent(
            "boss",
            [tool_call("researcher", {"task": "Find the boiling point of water"}), "It is 100 C."],
        ),
        researcher,
    )

    response = await boss.chat("At what temperature does water boil?")

    assert response.text == "It is 100 C."
    tool_message = boss.messages[2]
    assert isinstance(tool_message, ToolMessage)
    assert (tool_message.tool_name, tool_message.content) == (
        "researcher",
        "The boiling point is 100 C.",
    )
    assert not tool_message.is_error
    assert [m.role for m in researcher.messages] == ["user", "assistant"]
    assert researcher.messages[0].content == "Find the boiling point of water"
    assert not researcher.is_running


def test_as_tool_describes_a_task_parameter_and_takes_a_name_and_description() -> None:
    researcher = agent("researcher", [])
    default = researcher.as_tool()
    assert default.name == "researcher"
    assert default.definition.parameters["required"] == ["task"]
    assert "researcher" in default.description
    named = researcher.as_tool(name="ask_expert", description="Ask the chemistry expert.")
    assert (named.name, named.description) == ("ask_expert", "Ask the chemistry expert.")


async def test_delegate_returns_the_sub_agent_response() -> None:
    boss = agent("boss", [])
    helper = agent("helper", [used(3, 4, "done: 2 + 2 = 4")])

    response = await boss.delegate("add 2 and 2", to=helper)

    assert response.text == "done: 2 + 2 = 4"
    assert response.usage == Usage(input_tokens=3, output_tokens=4)
    assert boss.messages == ()  # the parent's own conversation is untouched


async def test_delegation_refuses_itself_and_an_empty_task() -> None:
    boss = agent("boss", [])
    with pytest.raises(UsageError, match="itself"):
        await boss.delegate("anything", to=boss)
    with pytest.raises(UsageError, match="non-empty"):
        await boss.delegate("  ", to=agent("helper", []))


# --- events ---------------------------------------------------------------------------------


async def test_sub_agent_events_reach_the_parent_tagged_with_the_path_in_order() -> None:
    researcher = agent("researcher", ["found it"])
    boss = with_tool(
        agent("boss", [tool_call("researcher", {"task": "look"}), "thanks"]), researcher
    )
    seen: list[tuple[tuple[str, ...], str]] = []
    own: list[str] = []

    def on_sub(ctx: SubAgentEventContext) -> None:
        seen.append((ctx.path, ctx.event))

    boss.add_hook("on_subagent_event", on_sub)
    boss.add_hook("on_chat_done", lambda ctx: own.append(ctx.response.text))

    await boss.chat("go")

    path = ("boss", "researcher")
    chat_events = [event for p, event in seen if p == path]
    assert {p for p, _ in seen} == {path}
    assert chat_events == [
        "on_chat_start",
        "on_message",  # the task
        "pre_request",
        "after_model_call",
        "on_response",
        "on_message",  # the answer
        "on_chat_done",
    ]
    assert own == ["thanks"]  # the parent's own events stay its own


async def test_the_context_forwarded_is_the_sub_agent_object_after_its_handlers() -> None:
    researcher = agent("researcher", ["raw answer"])
    researcher.add_hook(
        "on_response",
        lambda ctx: text_response(ctx.response.content.upper()),
    )
    boss = with_tool(agent("boss", [tool_call("researcher", {"task": "x"}), "ok"]), researcher)
    responses: list[str] = []

    def on_sub(ctx: SubAgentEventContext) -> None:
        if ctx.event == "on_response":
            responses.append(ctx.context.response.content)  # type: ignore[attr-defined]

    boss.add_hook("on_subagent_event", on_sub)
    await boss.chat("go")
    assert responses == ["RAW ANSWER"]


async def test_nested_delegation_tags_events_with_the_whole_path() -> None:
    searcher = agent("searcher", ["three results"])
    researcher = with_tool(
        agent("researcher", [tool_call("searcher", {"task": "search"}), "summary"]), searcher
    )
    boss = with_tool(
        agent("boss", [tool_call("researcher", {"task": "research"}), "done"]), researcher
    )
    seen: list[tuple[tuple[str, ...], str]] = []
    boss.add_hook("on_subagent_event", lambda ctx: seen.append((ctx.path, ctx.event)))
    middle: list[tuple[str, ...]] = []
    researcher.add_hook("on_subagent_event", lambda ctx: middle.append(ctx.path))

    await boss.chat("go")

    paths = {p for p, _ in seen}
    assert paths == {("boss", "researcher"), ("boss", "researcher", "searcher")}
    assert (("boss", "researcher", "searcher"), "on_chat_done") in seen
    assert (("boss", "researcher"), "on_delegation") in seen  # the researcher's own event
    assert set(middle) == {("researcher", "searcher")}
    # The searcher's chat happens inside the researcher's tool call, so its events come
    # between the researcher's call and the researcher's answer.
    order = [e for e in seen if e[1] == "on_chat_done"]
    assert [p for p, _ in order] == [("boss", "researcher", "searcher"), ("boss", "researcher")]


async def test_without_a_listener_nothing_is_registered_on_the_sub_agent() -> None:
    handlers_during: list[set[str]] = []
    researcher = agent("researcher", ["fine"], context=None)
    researcher.add_hook(
        "on_chat_start", lambda ctx: handlers_during.append(set(researcher.hooks.handlers))
    )
    boss = with_tool(agent("boss", [tool_call("researcher", {"task": "x"}), "ok"]), researcher)

    await boss.chat("go")
    assert handlers_during == [{"on_chat_start"}]

    boss.add_hook("on_subagent_event", lambda ctx: None)
    boss.model = ScriptedModel([tool_call("researcher", {"task": "y"}), "ok"])
    researcher.model = ScriptedModel(["fine"])
    await boss.chat("again")
    assert "on_message" in handlers_during[1]  # forwarders while a listener exists
    assert set(researcher.hooks.handlers) == {"on_chat_start"}  # and removed afterwards


async def test_a_throw_in_the_parent_listener_fails_the_delegation_not_the_parent() -> None:
    researcher = agent("researcher", ["fine"])
    boss = with_tool(
        agent("boss", [tool_call("researcher", {"task": "x"}), "recovered"]), researcher
    )

    def strict(ctx: SubAgentEventContext) -> None:
        if ctx.event == "on_response":
            raise RuntimeError("not allowed")

    boss.add_hook("on_subagent_event", strict)
    assert (await boss.chat("go")).text == "recovered"
    tool_message = boss.messages[2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.is_error
    assert "not allowed" in tool_message.content


# --- usage ----------------------------------------------------------------------------------


async def test_sub_agent_usage_rolls_up_into_the_parent_response() -> None:
    researcher = agent(
        "researcher",
        [
            ProviderResponse(
                tool_calls=(ToolCall(name="noop", arguments="{}", id="c1"),),
                finish_reason="tool_calls",
                usage=Usage(input_tokens=10, output_tokens=1),
            ),
            used(20, 2, "found"),
        ],
    )
    from hookloop import Scope, tool

    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    researcher.scopes.register(Scope("tools", tools=[noop]))
    boss = with_tool(
        agent(
            "boss",
            [
                ProviderResponse(
                    tool_calls=(ToolCall.create("researcher", {"task": "t"}),),
                    finish_reason="tool_calls",
                    usage=Usage(input_tokens=100, output_tokens=10),
                ),
                used(200, 20, "answer"),
            ],
        ),
        researcher,
    )

    response = await boss.chat("go")

    assert response.usage == Usage(input_tokens=330, output_tokens=33)


async def test_usage_of_a_failed_sub_agent_still_rolls_up() -> None:
    researcher = agent(
        "researcher",
        [
            ProviderResponse(
                tool_calls=(ToolCall(name="missing", arguments="{}", id="c1"),),
                finish_reason="tool_calls",
                usage=Usage(input_tokens=7, output_tokens=3),
            ),
            ServerError("down", status=500),
        ],
    )
    boss = with_tool(
        agent("boss", [tool_call("researcher", {"task": "t"}), used(1, 1, "sorry")]), researcher
    )

    response = await boss.chat("go")

    assert response.usage == Usage(input_tokens=8, output_tokens=4)


async def test_delegate_from_inside_a_parent_tool_rolls_up_too() -> None:
    from hookloop import Scope, tool

    helper = agent("helper", [used(5, 5, "helped")])
    boss = agent("boss", [tool_call("ask", {}), used(1, 1, "done")])

    @tool
    async def ask() -> str:
        """Ask the helper."""
        return (await boss.delegate("help me", to=helper)).text

    boss.scopes.register(Scope("s", tools=[ask]))
    response = await boss.chat("go")
    assert response.usage == Usage(input_tokens=6, output_tokens=6)
    assert boss.messages[2].content == "helped"


# --- limits ---------------------------------------------------------------------------------


def busy_researcher(calls: int, **kwargs: Any) -> Agent:
    """A sub-agent that calls ``noop`` ``calls`` times (one model request each), then answers."""
    from hookloop import Scope, tool

    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    script: list[Any] = [tool_call("noop", {}, id=f"n{i}") for i in range(calls)]
    researcher = agent("researcher", [*script, used(1, 1, "found")], **kwargs)
    researcher.scopes.register(Scope("tools", tools=[noop]))
    return researcher


async def test_a_sub_agent_given_a_slice_stops_at_it_and_the_parent_goes_on(
    tmp_path: Path,
) -> None:
    from hookloop import Scope

    researcher = busy_researcher(5)
    boss = agent("boss", [tool_call("researcher", {"task": "t"}, id="d1"), used(1, 1, "sorry")])
    slice_ = UsageLimits(requests=2)
    boss.scopes.register(Scope("team", tools=[researcher.as_tool(limits=slice_)]))
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        recorder = store.session("s")
        boss.use(recorder)
        response = await boss.chat("go")
        assert response.text == "sorry"
        result = response.messages[2]
        assert isinstance(result, ToolMessage)
        assert result.is_error
        assert "UsageLimitExceeded" in result.content
        assert "requests=2" in result.content
        assert len(researcher.model.requests) == 2  # type: ignore[attr-defined]
        # The sub-agent's spend is the parent's, in its session's spend too.
        spent = await recorder.spent()
        assert (spent.requests, spent.tool_calls) == (2 + 2, 1 + 2)


async def test_a_sub_agent_may_spend_only_what_the_parent_has_left() -> None:
    # The parent may make 3 requests: it made 1, so the sub-agent may make 2; with them,
    # the parent's own next request is one too many and its chat ends.
    researcher = busy_researcher(5)
    boss = with_tool(
        agent(
            "boss",
            [tool_call("researcher", {"task": "t"}, id="d1"), used(1, 1, "done")],
            limits=UsageLimits(requests=3),
        ),
        researcher,
    )
    with pytest.raises(UsageLimitExceeded) as raised:
        await boss.chat("go")
    assert (raised.value.limit, raised.value.maximum, raised.value.used) == ("requests", 3, 4)
    assert len(researcher.model.requests) == 2  # type: ignore[attr-defined]
    assert len(boss.model.requests) == 1  # type: ignore[attr-defined]
    # The history stays valid: the delegating call has its (error) result.
    roles = [m.role for m in boss.messages]
    assert roles == ["user", "assistant", "tool"]
    assert "requests=" in boss.messages[2].content


async def test_delegate_takes_a_slice_too() -> None:
    researcher = busy_researcher(5)
    boss = agent("boss", [])
    with pytest.raises(UsageLimitExceeded) as raised:
        await boss.delegate("t", to=researcher, limits=UsageLimits(tool_calls=1))
    assert (raised.value.limit, raised.value.used) == ("tool_calls", 2)


def test_a_slice_must_be_usage_limits() -> None:
    with pytest.raises(UsageError, match="limits must be UsageLimits"):
        busy_researcher(1).as_tool(limits={"requests": 1})  # type: ignore[arg-type]


# --- cancellation ---------------------------------------------------------------------------


def blocking_model(started: asyncio.Event) -> FunctionModel:
    async def answer(request: ProviderRequest) -> str:
        started.set()
        await asyncio.Event().wait()  # never answers
        return "unreachable"

    return FunctionModel(answer, name="slow")


async def test_cancelling_the_parent_task_cancels_the_running_sub_agent() -> None:
    started = asyncio.Event()
    researcher = Agent(blocking_model(started), name="researcher", retry=None)
    aborted: list[object] = []
    researcher.add_hook("on_chat_abort", lambda ctx: aborted.append(ctx.reason))
    boss = with_tool(agent("boss", [tool_call("researcher", {"task": "slow work"})]), researcher)

    chat = asyncio.ensure_future(boss.chat("go"))
    await started.wait()
    assert researcher.is_running
    chat.cancel()
    with pytest.raises(asyncio.CancelledError):
        await chat

    assert len(aborted) == 1
    assert not researcher.is_running
    assert [m.role for m in researcher.messages] == ["user"]
    assert [m.role for m in boss.messages] == ["user", "assistant", "tool"]  # answered


async def test_agent_cancel_on_the_parent_reaches_the_sub_agent() -> None:
    started = asyncio.Event()
    researcher = Agent(blocking_model(started), name="researcher", retry=None)
    aborted: list[object] = []
    researcher.add_hook("on_chat_abort", lambda ctx: aborted.append(ctx.reason))
    boss = with_tool(agent("boss", [tool_call("researcher", {"task": "slow work"})]), researcher)

    chat = asyncio.ensure_future(boss.chat("go"))
    await started.wait()
    assert boss.cancel("user pressed stop")
    with pytest.raises(ChatCancelledError, match="user pressed stop"):
        await chat

    assert len(aborted) == 1
    assert not researcher.is_running
    researcher.model = ScriptedModel(["back to work"])
    assert (await researcher.chat("again")).text == "back to work"  # usable again


async def test_cancelling_the_sub_agent_alone_is_a_tool_error_for_the_parent() -> None:
    started = asyncio.Event()
    researcher = Agent(blocking_model(started), name="researcher", retry=None)
    boss = with_tool(
        agent("boss", [tool_call("researcher", {"task": "slow"}), "gave up"]), researcher
    )

    chat = asyncio.ensure_future(boss.chat("go"))
    await started.wait()
    researcher.cancel("too slow")
    assert (await chat).text == "gave up"
    tool_message = boss.messages[2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.is_error
    assert "ChatCancelledError" in tool_message.content


# --- errors ---------------------------------------------------------------------------------


async def test_a_failing_sub_agent_is_a_tool_error_and_the_parent_goes_on() -> None:
    researcher = agent("researcher", [ServerError("provider down", status=503)])
    errors: list[Exception] = []
    researcher.add_hook("on_chat_error", lambda ctx: errors.append(ctx.error))
    delegations: list[DelegationContext] = []
    boss = with_tool(
        agent("boss", [tool_call("researcher", {"task": "x"}), "I could not find out."]),
        researcher,
    )
    boss.add_hook("on_delegation", delegations.append)

    response = await boss.chat("go")

    assert response.text == "I could not find out."
    tool_message = boss.messages[2]
    assert isinstance(tool_message, ToolMessage)
    assert tool_message.is_error
    assert "ServerError" in tool_message.content
    assert "provider down" in tool_message.content
    assert [type(e) for e in errors] == [ServerError]
    assert delegations == []  # only a finished delegation fires on_delegation


async def test_delegate_raises_what_the_sub_agent_raised() -> None:
    boss = agent("boss", [])
    helper = agent("helper", [ServerError("down", status=500)])
    with pytest.raises(ServerError, match="down"):
        await boss.delegate("x", to=helper)
    assert not helper.is_running


# --- on_delegation --------------------------------------------------------------------------


async def test_on_delegation_fires_on_the_parent_with_the_seed_arguments() -> None:
    calls: list[tuple[Any, ...]] = []

    class Remember:
        def on_delegation(
            self,
            task: str,
            result: str,
            *,
            agent_name: str = "",
            metadata: dict[str, Any] | None = None,
        ) -> None:
            calls.append((task, result, agent_name, metadata))

    boss = agent("boss", [])
    boss.use(MemoryHooksPlugin(Remember()))
    contexts: list[DelegationContext] = []
    boss.add_hook("on_delegation", contexts.append)
    helper = agent("helper", ["the summary"])
    helper_events: list[DelegationContext] = []
    helper.add_hook("on_delegation", helper_events.append)

    await boss.delegate("summarise the report", to=helper, metadata={"ticket": 7})

    assert calls == [("summarise the report", "the summary", "helper", {"ticket": 7})]
    (ctx,) = contexts
    assert (ctx.task, ctx.result, ctx.agent_name, dict(ctx.metadata), ctx.path) == (
        "summarise the report",
        "the summary",
        "helper",
        {"ticket": 7},
        ("boss", "helper"),
    )
    assert ctx.response.text == "the summary"
    assert helper_events == []  # it fires on the parent only


async def test_on_delegation_fires_for_a_sub_agent_tool_with_its_metadata() -> None:
    from hookloop import Scope

    researcher = agent("researcher", ["42"])
    boss = agent("boss", [tool_call("ask", {"task": "the answer?"}), "It is 42."])
    boss.scopes.register(
        Scope("s", tools=[researcher.as_tool(name="ask", metadata={"via": "tool"})])
    )
    contexts: list[DelegationContext] = []
    boss.add_hook("on_delegation", contexts.append)

    await boss.chat("go")

    assert [(c.task, c.result, c.agent_name, dict(c.metadata)) for c in contexts] == [
        ("the answer?", "42", "researcher", {"via": "tool"})
    ]


# --- background work of the sub-agent -------------------------------------------------------


class SlowWrites:
    """Async memory hooks that wait for a gate, then record the write."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.seen: list[str] = []

    async def aon_memory_write(
        self, action: str, target: str, content: str, metadata: Any = None
    ) -> None:
        await self.gate.wait()
        await asyncio.sleep(0.05)  # done only if someone waits for it
        self.seen.append(content)


def remembering_sub(name: str, hooks: SlowWrites) -> Agent:
    from hookloop import Scope
    from hookloop.memory import SQLiteMemoryStore

    sub = agent(
        name,
        [tool_call("memory", {"action": "add", "content": f"{name} fact"}), "noted"],
        memory=SQLiteMemoryStore(":memory:"),
    )
    sub.use(MemoryHooksPlugin(hooks))
    sub.scopes.register(Scope("m", tools=[sub.memory_tool()]))
    return sub


async def test_the_parent_s_aclose_waits_for_the_sub_agent_s_async_hooks() -> None:
    hooks = SlowWrites()
    sub = remembering_sub("sub", hooks)
    boss = with_tool(agent("boss", [tool_call("sub", {"task": "remember"}), "done"]), sub)
    async with boss:
        # The delegation does not wait for the hook (it is held at the gate)...
        response = await asyncio.wait_for(boss.chat("go"), 10)
        assert response.text == "done"
        assert hooks.seen == []
        hooks.gate.set()
    # ...leaving the parent's `async with` does.
    assert hooks.seen == ["sub fact"]
    assert len(sub.background) == 0
    assert len(boss.background) == 0


async def test_nested_sub_agents_background_work_reaches_the_top_agent() -> None:
    hooks = SlowWrites()
    leaf = remembering_sub("leaf", hooks)
    middle = with_tool(agent("middle", [tool_call("leaf", {"task": "remember"}), "ok"]), leaf)
    boss = agent("boss", [])
    await asyncio.wait_for(boss.delegate("pass it on", to=middle), 10)
    hooks.gate.set()
    await asyncio.wait_for(boss.aclose(), 10)
    assert hooks.seen == ["leaf fact"]
    assert len(leaf.background) == 0


# --- turns ----------------------------------------------------------------------------------


async def test_parallel_calls_of_one_sub_agent_take_turns() -> None:
    active = 0
    most = 0

    async def answer(request: ProviderRequest) -> str:
        nonlocal active, most
        active += 1
        most = max(most, active)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        active -= 1
        return f"answer to {request.messages[-1].content}"

    researcher = Agent(FunctionModel(answer), name="researcher", retry=None)
    from hookloop.testing import tool_calls

    boss = with_tool(
        agent(
            "boss",
            [
                tool_calls(
                    ToolCall.create("researcher", {"task": "first"}),
                    ToolCall.create("researcher", {"task": "second"}),
                ),
                "both done",
            ],
        ),
        researcher,
    )

    assert (await boss.chat("go")).text == "both done"
    assert most == 1
    results = [m.content for m in boss.messages if isinstance(m, ToolMessage)]
    assert results == ["answer to first", "answer to second"]
    assert [m.role for m in researcher.messages] == ["user", "assistant"] * 2


async def test_as_tool_outside_a_chat_just_runs_the_sub_agent() -> None:
    researcher = agent("researcher", ["direct"])
    result = await researcher.as_tool().invoke({"task": "hello"})
    assert result == "direct"


async def test_delegating_to_a_sub_agent_that_is_chatting_fails_and_leaves_no_trace() -> None:
    from hookloop import ConcurrentChatError

    started = asyncio.Event()
    busy = Agent(blocking_model(started), name="busy", retry=None, context=None)
    boss = agent("boss", [])
    seen: list[tuple[tuple[str, ...], str]] = []
    boss.add_hook("on_subagent_event", lambda ctx: seen.append((ctx.path, ctx.event)))
    own_chat = asyncio.ensure_future(busy.chat("working"))
    await started.wait()

    with pytest.raises(ConcurrentChatError):
        await boss.delegate("more work", to=busy)

    assert busy.hooks.handlers == {}  # no forwarder left behind
    own_chat.cancel()
    with pytest.raises(asyncio.CancelledError):
        await own_chat
    # busy does not work for boss: what it delegates itself does not reach boss.
    await busy.delegate("a task of its own", to=agent("helper", ["done"]))
    assert seen == []


async def test_what_delegation_keeps_about_a_sub_agent_goes_with_it() -> None:
    boss = agent("boss", [])
    boss.add_hook("on_subagent_event", lambda ctx: None)
    helper = agent("helper", ["done"])
    assert (await boss.delegate("a task", to=helper)).text == "done"
    gone = weakref.ref(helper)
    del helper
    gc.collect()
    assert gone() is None
