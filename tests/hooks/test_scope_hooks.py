"""The hook contract: scope hooks.

Synchronous, after the change is committed.

Part of DESIGN.md sections 2 and 3 (seed 002 "AG2B hooks").
"""

import pytest

from hookloop import Scope, ScopeNotFoundError, UsageError
from hookloop.hooks import ScopeContext
from hookloop.testing import ScriptedModel
from tests.hooks._support import (
    SCOPE_EVENTS,
    Recorder,
    bare_agent,
    make_add,
    make_agent,
)

# --- scope hooks --------------------------------------------------------------------------


def test_on_scope_register_fires_synchronously_after_the_scope_is_committed() -> None:
    agent = bare_agent(ScriptedModel([]))
    rec = Recorder(agent, SCOPE_EVENTS)
    seen: list[tuple[bool, bool]] = []
    add = make_add()
    scope = Scope("math", tools=[add])
    agent.add_hook(
        "on_scope_register",
        lambda ctx: seen.append(("math" in agent.scopes, agent.scopes.lookup("add") is not None)),
    )

    agent.scopes.register(scope)

    assert rec.events == ["on_scope_register:math"]  # already fired when register() returned
    assert rec.contexts["on_scope_register"][0].scope is scope
    assert seen == [(True, True)]


def test_on_scope_unregister_fires_synchronously_after_the_scope_is_removed() -> None:
    agent = bare_agent(ScriptedModel([]))
    rec = Recorder(agent, SCOPE_EVENTS)
    seen: list[tuple[bool, bool]] = []
    scope = Scope("math", tools=[make_add()])
    agent.add_hook(
        "on_scope_unregister",
        lambda ctx: seen.append(("math" in agent.scopes, agent.scopes.lookup("add") is not None)),
    )
    agent.scopes.register(scope)

    removed = agent.scopes.unregister("math")

    assert removed is scope
    assert rec.events == ["on_scope_register:math", "on_scope_unregister:math"]
    assert rec.contexts["on_scope_unregister"][0].scope is scope
    assert seen == [(False, False)]


def test_scope_disposer_fires_on_scope_unregister_once() -> None:
    agent = bare_agent(ScriptedModel([]))
    rec = Recorder(agent, SCOPE_EVENTS)

    dispose = agent.scopes.register(Scope("math"))
    dispose()
    dispose()

    assert rec.events == ["on_scope_register:math", "on_scope_unregister:math"]


def test_failed_scope_changes_fire_no_scope_hook() -> None:
    agent = bare_agent(ScriptedModel([]))
    agent.scopes.register(Scope("math"))
    rec = Recorder(agent, SCOPE_EVENTS)

    with pytest.raises(UsageError):
        agent.scopes.register(Scope("math"))
    with pytest.raises(ScopeNotFoundError):
        agent.scopes.unregister("nope")

    assert rec.events == []


def test_throw_in_on_scope_register_propagates_and_the_scope_stays_registered() -> None:
    agent = bare_agent(ScriptedModel([]))
    boom = RuntimeError("register hook broke")
    later: list[str] = []

    def explode(ctx: ScopeContext) -> None:
        raise boom

    agent.add_hook("on_scope_register", explode)
    agent.add_hook("on_scope_register", lambda ctx: later.append(ctx.scope.name))

    with pytest.raises(RuntimeError) as raised:
        agent.scopes.register(Scope("math", tools=[make_add()]))

    assert raised.value is boom
    assert any("'on_scope_register'" in note and "explode" in note for note in boom.__notes__)
    assert later == []
    assert "math" in agent.scopes
    assert agent.scopes.lookup("add") is not None


def test_throw_in_on_scope_unregister_propagates_and_the_scope_stays_removed() -> None:
    agent = bare_agent(ScriptedModel([]))
    agent.scopes.register(Scope("math", tools=[make_add()]))
    boom = RuntimeError("unregister hook broke")

    def explode(ctx: ScopeContext) -> None:
        raise boom

    agent.add_hook("on_scope_unregister", explode)

    with pytest.raises(RuntimeError) as raised:
        agent.scopes.unregister("math")

    assert raised.value is boom
    assert any("'on_scope_unregister'" in note and "explode" in note for note in boom.__notes__)
    assert "math" not in agent.scopes
    assert agent.scopes.lookup("add") is None


async def test_scope_hooks_fire_during_a_chat_and_do_not_end_it() -> None:
    agent, _, rec = make_agent(["done"])
    agent.add_hook("on_scope_register", rec._handler("on_scope_register"))
    agent.add_hook("on_chat_start", lambda ctx: agent.scopes.register(Scope("late")))

    await agent.chat("hi")

    assert rec.events[:3] == ["on_chat_start", "on_scope_register:late", "on_message:user"]
    assert rec.terminal == ["on_chat_done"]
