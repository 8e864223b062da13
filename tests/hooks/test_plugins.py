"""The hook contract: plugins.

Agent.use(plugin).

Part of DESIGN.md sections 2 and 3 (seed 002 "AG2B hooks").
"""

import pytest

from hookloop import (
    Agent,
    ChatDoneContext,
    UsageError,
)
from hookloop.testing import ScriptedModel
from tests.hooks._support import (
    bare_agent,
    make_agent,
)

# --- plugins ------------------------------------------------------------------------------


class AuditPlugin:
    """Registers three hooks on two events, one of them with the decorator."""

    def __init__(self, name: str = "audit") -> None:
        self.name = name
        self.log: list[str] = []

    def init_agent(self, agent: Agent) -> None:
        agent.add_hook("on_chat_start", lambda ctx: self.log.append("start"))
        agent.add_hook("on_message", lambda ctx: self.log.append(ctx.message.role))

        @agent.hook("on_chat_done", order=5)
        def done(ctx: ChatDoneContext) -> None:
            self.log.append("done")


class BrokenPlugin:
    name = "broken"

    def init_agent(self, agent: Agent) -> None:
        agent.add_hook("on_message", lambda ctx: None)
        agent.add_hook("pre_request", lambda ctx: None)
        raise RuntimeError("plugin setup failed")


async def test_use_registers_the_plugin_hooks_and_its_disposer_removes_them_all() -> None:
    agent, _, _ = make_agent(["one", "two"])
    before = dict(agent.hooks.handlers)
    plugin = AuditPlugin()

    dispose = agent.use(plugin)
    await agent.chat("a")

    assert plugin.log == ["start", "user", "assistant", "done"]
    assert agent.plugins == (plugin,)

    dispose()
    dispose()
    await agent.chat("b")

    assert plugin.log == ["start", "user", "assistant", "done"]
    assert agent.hooks.handlers == before  # the recorder's own hooks are untouched
    assert agent.plugins == ()


async def test_plugins_passed_to_the_constructor_are_used() -> None:
    plugin = AuditPlugin()
    agent = bare_agent(ScriptedModel(["one"]), plugins=[plugin])

    await agent.chat("a")

    assert agent.plugins == (plugin,)
    assert plugin.log == ["start", "user", "assistant", "done"]


def test_using_the_same_plugin_twice_raises_usage_error() -> None:
    agent = bare_agent(ScriptedModel([]))
    plugin = AuditPlugin()
    agent.use(plugin)
    registered = dict(agent.hooks.handlers)

    with pytest.raises(UsageError, match="already used"):
        agent.use(plugin)

    assert agent.hooks.handlers == registered
    assert agent.plugins == (plugin,)


def test_a_disposed_plugin_can_be_used_again() -> None:
    agent = bare_agent(ScriptedModel([]))
    plugin = AuditPlugin()
    agent.use(plugin)()

    agent.use(plugin)

    assert agent.plugins == (plugin,)
    assert sorted(agent.hooks.handlers) == ["on_chat_done", "on_chat_start", "on_message"]


def test_two_plugin_instances_are_separate_plugins() -> None:
    agent = bare_agent(ScriptedModel([]))
    first, second = AuditPlugin("a"), AuditPlugin("b")

    dispose_first = agent.use(first)
    agent.use(second)
    dispose_first()

    assert agent.plugins == (second,)
    assert {event: len(hs) for event, hs in agent.hooks.handlers.items()} == {
        "on_chat_start": 1,
        "on_message": 1,
        "on_chat_done": 1,
    }


def test_a_plugin_whose_init_agent_raises_leaves_no_hooks_behind() -> None:
    agent = bare_agent(ScriptedModel([]))
    agent.add_hook("on_message", lambda ctx: None)
    before = dict(agent.hooks.handlers)

    with pytest.raises(RuntimeError, match="plugin setup failed"):
        agent.use(BrokenPlugin())

    assert agent.hooks.handlers == before
    assert agent.plugins == ()


class CompositePlugin:
    """Uses a sub-plugin from its own init_agent, then optionally fails."""

    name = "composite"

    def __init__(self, *, fail: bool = False) -> None:
        self.sub = AuditPlugin("sub")
        self.fail = fail

    def init_agent(self, agent: Agent) -> None:
        agent.add_hook("pre_request", lambda ctx: None)
        agent.use(self.sub)
        if self.fail:
            raise RuntimeError("composite setup failed")


def test_a_failed_composite_plugin_leaves_neither_hooks_nor_plugins_behind() -> None:
    agent = bare_agent(ScriptedModel([]))
    plugin = CompositePlugin(fail=True)

    with pytest.raises(RuntimeError, match="composite setup failed"):
        agent.use(plugin)

    assert agent.hooks.handlers == {}
    assert agent.plugins == ()  # the sub-plugin's hooks are gone, so it is not in use either


def test_disposing_a_composite_plugin_removes_its_sub_plugin_too() -> None:
    agent = bare_agent(ScriptedModel([]))
    plugin = CompositePlugin()
    dispose = agent.use(plugin)
    assert agent.plugins == (plugin.sub, plugin)

    dispose()

    assert agent.hooks.handlers == {}
    assert agent.plugins == ()
    agent.use(plugin.sub)  # and it can be used on its own again
    assert agent.plugins == (plugin.sub,)


@pytest.mark.parametrize("not_a_plugin", [object(), "plugin", lambda agent: None])
def test_use_rejects_an_object_that_is_not_a_plugin(not_a_plugin: object) -> None:
    agent = bare_agent(ScriptedModel([]))

    with pytest.raises(UsageError, match="not a plugin"):
        agent.use(not_a_plugin)  # type: ignore[arg-type]


class _NoInit:
    name = "half"


class _InitNone:
    name = "off"
    init_agent = None


class _NoName:
    def init_agent(self, agent: Agent) -> None:
        pass


class _NameProperty:
    @property
    def name(self) -> str:
        return "computed"

    def init_agent(self, agent: Agent) -> None:
        pass


@pytest.mark.parametrize(
    "candidate",
    [AuditPlugin(), _NameProperty(), _NoInit(), _InitNone(), _NoName(), object(), None, "audit"],
)
def test_agent_tells_a_plugin_as_the_plugin_protocol_does(candidate: object) -> None:
    from hookloop import Plugin

    agent = bare_agent(ScriptedModel([]))
    if isinstance(candidate, Plugin):
        agent.use(candidate)
        assert candidate in agent.plugins
    else:
        with pytest.raises(UsageError, match="is not a plugin"):
            agent.use(candidate)  # type: ignore[arg-type]
        if candidate is not None:  # (context=None: no policy)
            with pytest.raises(UsageError, match="context policy plugin or None"):
                Agent(ScriptedModel([]), context=candidate)  # type: ignore[arg-type]
