"""Scopes: registration, duplicate names, context injection, enabling, changes mid-chat."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from hookloop import (
    Agent,
    DuplicateNameError,
    ImagePart,
    Scope,
    ScopeNotFoundError,
    TextPart,
    Tool,
    ToolDefinitionError,
    ToolMessage,
    UsageError,
    UserMessage,
    tool,
)
from hookloop._agent import DEFAULT_SCOPE
from hookloop.hooks import ScopeContext
from hookloop.testing import ScriptedModel, tool_call

# --- helpers ------------------------------------------------------------------------------


def lookup(a: str) -> str:
    """Look something up.

    Args:
        a: What to look up.
    """
    return a


def weather(city: str) -> str:
    """Weather for a city."""
    return f"sunny in {city}"


def _tool_named(name: str) -> Tool:
    def fn() -> str:
        return name

    return Tool(name=name, description=f"{name} tool", parameters={}, function=fn)


def _agent(script: list[Any], **kwargs: Any) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel(script)
    return Agent(model, **kwargs), model


# --- construction -------------------------------------------------------------------------


def test_scope_wraps_plain_functions_as_tools() -> None:
    prebuilt = tool(weather)
    scope = Scope("docs", tools=[lookup, prebuilt], context="ctx")

    assert scope.name == "docs"
    assert scope.tools[1] is prebuilt
    wrapped = scope.tools[0]
    assert isinstance(wrapped, Tool)
    assert wrapped.name == "lookup"
    assert wrapped.description == "Look something up."
    assert wrapped.definition.parameters["properties"] == {
        "a": {"type": "string", "description": "What to look up."}
    }
    assert scope.context == "ctx"
    assert scope.context_placement == "system"
    assert scope.enabled is True


def test_scope_defaults() -> None:
    scope = Scope("empty")
    assert scope.tools == ()
    assert scope.context is None
    assert scope.render_context() is None
    assert scope.is_enabled() is True


def test_scope_with_two_tools_of_one_name_is_rejected() -> None:
    with pytest.raises(DuplicateNameError, match="'lookup'"):
        Scope("s", tools=[lookup, _tool_named("lookup")])


@pytest.mark.parametrize("name", ["", "has space", "x" * 65, 7])
def test_scope_name_is_checked(name: Any) -> None:
    with pytest.raises(ToolDefinitionError, match="name"):
        Scope(name)


def test_scope_context_placement_is_checked() -> None:
    with pytest.raises(ToolDefinitionError, match="context_placement"):
        Scope("s", context="x", context_placement="first_user")  # type: ignore[arg-type]


# --- the registry -------------------------------------------------------------------------


def test_register_returns_idempotent_disposer() -> None:
    agent, _ = _agent([])
    unregistered: list[str] = []
    agent.add_hook("on_scope_unregister", lambda ctx: unregistered.append(ctx.scope.name))
    scope = Scope("s", tools=[lookup])

    dispose = agent.scopes.register(scope)
    assert "s" in agent.scopes
    assert agent.scopes.get("s") is scope
    assert agent.scopes.lookup("lookup") == (scope.tools[0], scope)
    assert len(agent.scopes) == 1
    assert dispose.disposed is False

    dispose()
    assert "s" not in agent.scopes
    assert agent.scopes.get("s") is None
    assert agent.scopes.lookup("lookup") is None
    assert list(agent.scopes.tool_names) == []
    assert dispose.disposed is True
    dispose()
    assert unregistered == ["s"]


def test_disposer_after_manual_unregister_does_nothing() -> None:
    agent, _ = _agent([])
    dispose = agent.scopes.register(Scope("s"))
    agent.scopes.unregister("s")
    dispose()  # must not raise ScopeNotFoundError
    assert len(agent.scopes) == 0


def test_disposer_does_not_remove_a_later_scope_with_the_same_name() -> None:
    agent, _ = _agent([])
    old = Scope("s", tools=[lookup])
    new = Scope("s", tools=[weather])
    dispose_old = agent.scopes.register(old)
    agent.scopes.unregister("s")
    agent.scopes.register(new)

    dispose_old()

    assert agent.scopes.get("s") is new
    assert agent.scopes.lookup("weather") == (new.tools[0], new)
    assert agent.scopes.lookup("lookup") is None


def test_unregister_returns_the_scope_and_unknown_name_raises() -> None:
    agent, _ = _agent([])
    scope = Scope("s", tools=[lookup])
    agent.scopes.register(scope)

    assert agent.scopes.unregister("s") is scope
    assert agent.scopes.lookup("lookup") is None
    with pytest.raises(ScopeNotFoundError, match="'s'") as info:
        agent.scopes.unregister("s")
    assert isinstance(info.value, LookupError)
    assert isinstance(info.value, UsageError)
    with pytest.raises(LookupError):
        agent.scopes.unregister("never-registered")


def test_scope_events_fire_after_commit() -> None:
    agent, _ = _agent([])
    seen: list[tuple[str, str, bool]] = []

    def on_register(ctx: ScopeContext) -> None:
        seen.append(("register", ctx.scope.name, ctx.scope.name in agent.scopes))

    def on_unregister(ctx: ScopeContext) -> None:
        seen.append(("unregister", ctx.scope.name, ctx.scope.name in agent.scopes))

    agent.add_hook("on_scope_register", on_register)
    agent.add_hook("on_scope_unregister", on_unregister)
    agent.scopes.register(Scope("s"))
    agent.scopes.unregister("s")
    assert seen == [("register", "s", True), ("unregister", "s", False)]


def test_scope_hook_that_raises_propagates_after_the_change_is_committed() -> None:
    agent, _ = _agent([])

    def boom(ctx: ScopeContext) -> None:
        raise RuntimeError(f"hook saw {ctx.scope.name}")

    agent.add_hook("on_scope_register", boom)
    agent.add_hook("on_scope_unregister", boom)
    with pytest.raises(RuntimeError, match="hook saw s"):
        agent.scopes.register(Scope("s", tools=[lookup]))
    assert "s" in agent.scopes
    assert agent.scopes.lookup("lookup") is not None
    with pytest.raises(RuntimeError, match="hook saw s"):
        agent.scopes.unregister("s")
    assert "s" not in agent.scopes
    assert agent.scopes.lookup("lookup") is None


def _snapshot(agent: Agent) -> tuple[list[str], list[str]]:
    return [s.name for s in agent.scopes], sorted(agent.scopes.tool_names)


def test_duplicate_scope_name_is_rejected_and_changes_nothing() -> None:
    agent, _ = _agent([])
    first = Scope("s", tools=[lookup])
    agent.scopes.register(first)
    before = _snapshot(agent)

    with pytest.raises(DuplicateNameError, match="'s'"):
        agent.scopes.register(Scope("s", tools=[weather]))

    assert _snapshot(agent) == before
    assert agent.scopes.get("s") is first
    assert agent.scopes.lookup("weather") is None


def test_duplicate_tool_name_across_scopes_is_rejected_and_changes_nothing() -> None:
    agent, _ = _agent([])
    owner = Scope("a", tools=[lookup])
    agent.scopes.register(owner)
    registered: list[str] = []
    agent.add_hook("on_scope_register", lambda ctx: registered.append(ctx.scope.name))
    before = _snapshot(agent)

    # weather is new, lookup clashes: nothing of scope b may be left behind.
    with pytest.raises(DuplicateNameError, match=r"'lookup'.*'a'"):
        agent.scopes.register(Scope("b", tools=[weather, _tool_named("lookup")]))

    assert _snapshot(agent) == before
    assert "b" not in agent.scopes
    assert agent.scopes.lookup("weather") is None
    assert agent.scopes.lookup("lookup") == (owner.tools[0], owner)
    assert registered == []


def test_agent_tools_form_the_default_scope_and_clash_with_scopes() -> None:
    agent, _ = _agent([], tools=[lookup])
    default = agent.scopes.get(DEFAULT_SCOPE)
    assert DEFAULT_SCOPE == "default"
    assert default is not None
    assert [t.name for t in default.tools] == ["lookup"]
    before = _snapshot(agent)

    with pytest.raises(DuplicateNameError):
        agent.scopes.register(Scope("other", tools=[lookup]))
    with pytest.raises(DuplicateNameError):
        agent.scopes.register(Scope(DEFAULT_SCOPE, tools=[weather]))
    assert _snapshot(agent) == before


def test_the_tool_map_is_made_by_the_first_lookup_and_follows_every_change() -> None:
    # An idle agent holds no map of its tool names; whenever it is first made (before or
    # after scopes come and go), lookups, clashes and the names see every scope there is.
    agent, _ = _agent([], tools=[lookup])
    assert agent.scopes._tools is None  # idle: made when first needed
    names = agent.scopes.tool_names  # a live view: made now, kept up to date
    assert list(names) == ["lookup"]
    other = Scope("other", tools=[weather])
    agent.scopes.register(other)
    assert sorted(names) == ["lookup", "weather"]
    agent.scopes.unregister(DEFAULT_SCOPE)
    assert list(names) == ["weather"]

    fresh, _ = _agent([], tools=[lookup])
    second = Scope("second", tools=[weather])
    fresh.scopes.register(second)  # checked against the first scope's tools without a map
    with pytest.raises(DuplicateNameError, match=r"'weather'.*'second'"):
        fresh.scopes.register(Scope("third", tools=[_tool_named("weather")]))
    fresh.scopes.unregister(DEFAULT_SCOPE)  # before any lookup
    assert fresh.scopes.lookup("lookup") is None
    assert fresh.scopes.lookup("weather") == (second.tools[0], second)
    assert [s.name for s in fresh.scopes] == ["second"]
    assert len(fresh.scopes) == 1
    assert "second" in fresh.scopes
    assert DEFAULT_SCOPE not in fresh.scopes


def test_agent_with_two_tools_of_one_name_is_rejected() -> None:
    with pytest.raises(DuplicateNameError):
        Agent(ScriptedModel([]), tools=[lookup, _tool_named("lookup")])


def test_enabled_lists_scopes_in_registration_order() -> None:
    agent, _ = _agent([])
    agent.scopes.register(Scope("z"))
    agent.scopes.register(Scope("off", enabled=False))
    agent.scopes.register(Scope("a"))
    assert [s.name for s in agent.scopes.enabled()] == ["z", "a"]
    assert [s.name for s in agent.scopes] == ["z", "off", "a"]


# --- context injection --------------------------------------------------------------------


async def test_system_context_is_appended_to_the_system_prompt() -> None:
    agent, model = _agent(["ok"], system_prompt="Be brief.")
    agent.scopes.register(Scope("one", context="Context one."))
    agent.scopes.register(Scope("two", context=lambda: "Context two."))

    await agent.chat("hi")

    request = model.requests[0]
    assert request.system == "Be brief.\n\nContext one.\n\nContext two."
    assert request.messages == agent.messages[:1]
    assert agent.system_prompt == "Be brief."


async def test_system_context_without_a_system_prompt() -> None:
    agent, model = _agent(["ok"])
    agent.scopes.register(Scope("one", context="Only context."))
    await agent.chat("hi")
    assert model.requests[0].system == "Only context."


async def test_no_context_and_no_prompt_gives_no_system() -> None:
    agent, model = _agent(["ok"])
    agent.scopes.register(Scope("quiet", context=lambda: None))
    agent.scopes.register(Scope("empty", context=""))
    await agent.chat("hi")
    assert model.requests[0].system is None


async def test_last_user_context_goes_into_the_last_user_message_of_the_request_only() -> None:
    agent, model = _agent(["first answer", "second answer"], system_prompt="Sys.")
    agent.scopes.register(
        Scope("memo", context="Remember: user likes tea.", context_placement="last_user")
    )

    await agent.chat("first question")
    stored_after_first = agent.messages
    await agent.chat("second question")

    request = model.requests[1]
    assert request.system == "Sys."
    first_user, first_answer, second_user = request.messages
    assert first_user == stored_after_first[0]
    assert first_user.content == "first question"  # type: ignore[union-attr]
    assert first_answer == stored_after_first[1]
    assert isinstance(second_user, UserMessage)
    assert second_user.content == "second question\n\nRemember: user likes tea."
    # Stored history is untouched, ids included.
    stored = agent.messages
    assert stored[:2] == stored_after_first
    assert isinstance(stored[2], UserMessage)
    assert stored[2].content == "second question"
    assert second_user.id == stored[2].id
    first_request_user = model.requests[0].messages[0]
    assert first_request_user.content == "first question\n\nRemember: user likes tea."  # type: ignore[union-attr]


async def test_last_user_context_after_tool_messages_and_with_parts() -> None:
    agent, model = _agent(
        [tool_call("weather", {"city": "Oslo"}, id="c1"), "done"], tools=[weather]
    )
    agent.scopes.register(Scope("memo", context="CTX", context_placement="last_user"))
    image = ImagePart(url="https://example.com/cat.png")

    await agent.chat([TextPart(text="look"), image])

    second = model.requests[1]
    user, assistant, tool_message = second.messages
    assert isinstance(user, UserMessage)
    assert user.content == (TextPart(text="look"), image, TextPart(text="CTX"))
    assert assistant == agent.messages[1]
    assert tool_message == agent.messages[2]
    assert isinstance(tool_message, ToolMessage)
    stored_user = agent.messages[0]
    assert isinstance(stored_user, UserMessage)
    assert stored_user.content == (TextPart(text="look"), image)


async def test_mixed_placements_and_multiple_last_user_contexts() -> None:
    agent, model = _agent(["ok"], system_prompt="P")
    agent.scopes.register(Scope("s1", context="S1"))
    agent.scopes.register(Scope("u1", context="U1", context_placement="last_user"))
    agent.scopes.register(Scope("u2", context=lambda: "U2", context_placement="last_user"))

    await agent.chat("q")

    request = model.requests[0]
    assert request.system == "P\n\nS1"
    assert request.messages[0].content == "q\n\nU1\n\nU2"  # type: ignore[union-attr]


async def test_context_callable_is_evaluated_on_every_model_call() -> None:
    counter = {"n": 0}

    def context() -> str:
        counter["n"] += 1
        return f"call number {counter['n']}"

    agent, model = _agent(
        [tool_call("lookup", {"a": "x"}), tool_call("lookup", {"a": "y"}), "done"],
        tools=[lookup],
    )
    agent.scopes.register(Scope("live", context=context))
    agent.scopes.register(Scope("live_user", context=context, context_placement="last_user"))

    await agent.chat("go")

    assert [r.system for r in model.requests] == [
        "call number 1",
        "call number 3",
        "call number 5",
    ]
    assert [r.messages[0].content for r in model.requests] == [  # type: ignore[union-attr]
        "go\n\ncall number 2",
        "go\n\ncall number 4",
        "go\n\ncall number 6",
    ]


async def test_context_callable_that_raises_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    def broken() -> str:
        raise RuntimeError("context service down")

    agent, model = _agent(["ok"], system_prompt="P")
    agent.scopes.register(Scope("broken", context=broken, tools=[lookup]))
    agent.scopes.register(Scope("fine", context="F"))

    with caplog.at_level(logging.WARNING, logger="hookloop"):
        response = await agent.chat("hi")

    assert response.text == "ok"
    assert model.requests[0].system == "P\n\nF"
    # Only the context is skipped: the scope's tools stay available.
    assert [t.name for t in model.requests[0].tools] == ["lookup"]
    assert any("broken" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


# Regression: a scope context that is not a str crashed the chat.
async def test_a_scope_context_that_is_not_text_is_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(model, system_prompt="base", retry=None)
    agent.scopes.register(Scope("profile", context=lambda: {"name": "Ann"}))  # type: ignore[arg-type,return-value]
    with caplog.at_level(logging.WARNING):
        assert (await agent.chat("hi")).text == "ok"
    assert model.requests[0].system == "base"
    assert "not a str" in caplog.text


@pytest.mark.parametrize("enabled", [False, lambda: False])
async def test_disabled_scope_hides_tools_and_context(enabled: Any) -> None:
    agent, model = _agent([tool_call("lookup", {"a": "x"}, id="c1"), "ok"], system_prompt="P")
    agent.scopes.register(Scope("off", tools=[lookup], context="SECRET", enabled=enabled))
    agent.scopes.register(
        Scope("off_user", context="SECRET2", context_placement="last_user", enabled=enabled)
    )
    agent.scopes.register(Scope("on", tools=[weather], context="VISIBLE"))

    await agent.chat("hi")

    first = model.requests[0]
    assert first.system == "P\n\nVISIBLE"
    assert [t.name for t in first.tools] == ["weather"]
    assert first.messages[0].content == "hi"  # type: ignore[union-attr]
    # Calling a tool of a disabled scope fails as disabled.
    msg = model.requests[1].messages[-1]
    assert isinstance(msg, ToolMessage)
    assert msg.is_error is True
    assert msg.content == "tool 'lookup' is disabled: its scope 'off' is disabled"


async def test_scope_enabled_callable_that_raises_counts_as_disabled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> bool:
        raise RuntimeError("nope")

    agent, model = _agent(["ok"])
    scope = Scope("flaky", tools=[lookup], context="HIDDEN", enabled=broken)
    agent.scopes.register(scope)

    with caplog.at_level(logging.WARNING, logger="hookloop"):
        await agent.chat("hi")

    assert model.requests[0].tools == ()
    assert model.requests[0].system is None
    assert scope.is_enabled() is False
    assert any("flaky" in r.getMessage() for r in caplog.records if r.levelno == logging.WARNING)


async def test_scope_enabled_callable_is_asked_every_iteration() -> None:
    state = {"on": False}

    async def switch_on() -> str:
        """Enable the gated scope."""
        state["on"] = True
        return "on"

    agent, model = _agent([tool_call("switch_on", {}), "done"], tools=[switch_on])
    agent.scopes.register(
        Scope("gated", tools=[lookup], context="GATED", enabled=lambda: state["on"])
    )

    await agent.chat("go")

    assert [r.system for r in model.requests] == [None, "GATED"]
    assert [[t.name for t in r.tools] for r in model.requests] == [
        ["switch_on"],
        ["switch_on", "lookup"],
    ]


# --- changes during a chat ----------------------------------------------------------------


async def test_scope_registered_from_a_tool_takes_effect_next_iteration() -> None:
    agent_ref: list[Agent] = []

    async def load_skill() -> str:
        """Load the weather skill."""
        agent_ref[0].scopes.register(
            Scope("weather_skill", tools=[weather], context="Weather skill loaded.")
        )
        return "loaded"

    agent, model = _agent(
        [
            tool_call("load_skill", {}),
            tool_call("weather", {"city": "Rome"}, id="w1"),
            "It is sunny.",
        ],
        tools=[load_skill],
        system_prompt="P",
    )
    agent_ref.append(agent)

    response = await agent.chat("weather in Rome?")

    assert response.text == "It is sunny."
    assert [r.system for r in model.requests] == [
        "P",
        "P\n\nWeather skill loaded.",
        "P\n\nWeather skill loaded.",
    ]
    assert [[t.name for t in r.tools] for r in model.requests] == [
        ["load_skill"],
        ["load_skill", "weather"],
        ["load_skill", "weather"],
    ]
    result = model.requests[2].messages[-1]
    assert isinstance(result, ToolMessage)
    assert (result.content, result.is_error) == ("sunny in Rome", False)


async def test_scope_unregistered_from_a_tool_takes_effect_next_iteration() -> None:
    disposers: list[Any] = []

    async def unload() -> str:
        """Unload the extra scope."""
        disposers[0]()
        return "unloaded"

    agent, model = _agent(
        [tool_call("unload", {}), tool_call("lookup", {"a": "x"}, id="l1"), "done"],
        tools=[unload],
    )
    disposers.append(agent.scopes.register(Scope("extra", tools=[lookup], context="EXTRA")))

    await agent.chat("go")

    assert [r.system for r in model.requests] == ["EXTRA", None, None]
    assert [[t.name for t in r.tools] for r in model.requests] == [
        ["unload", "lookup"],
        ["unload"],
        ["unload"],
    ]
    result = model.requests[2].messages[-1]
    assert isinstance(result, ToolMessage)
    assert result.is_error is True
    assert "unknown tool 'lookup'" in result.content
    assert "extra" not in agent.scopes
