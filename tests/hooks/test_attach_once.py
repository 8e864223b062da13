"""One plugin instance serves one agent at a time: disposed from one, it can serve another.

``attach_once`` is the shared guard; with ``owner=`` it puts the release on the disposer
``agent.use()`` returns, so no plugin writes its own.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hookloop import Agent, Plugin, UsageError
from hookloop.context import Compaction, SlidingWindow
from hookloop.hooks import HookRegistry, attach_once
from hookloop.mcp import MCPToolset
from hookloop.observe import JsonLinesTracePlugin, OpenTelemetryPlugin
from hookloop.retry import DefaultRetryStrategy, FallbackStrategy, ToolRetryStrategy
from hookloop.sessions import SessionRecorder, SQLiteSessionStore
from hookloop.testing import ScriptedModel

PLUGINS: dict[str, Callable[[Path], Plugin]] = {
    "SlidingWindow": lambda _: SlidingWindow(),
    "Compaction": lambda _: Compaction(),
    "ToolRetryStrategy": lambda _: ToolRetryStrategy(),
    "DefaultRetryStrategy": lambda _: DefaultRetryStrategy(),
    "FallbackStrategy": lambda _: FallbackStrategy([ScriptedModel([])]),
    "SessionRecorder": lambda tmp: SessionRecorder(SQLiteSessionStore(tmp / "s.db"), "s1"),
    "JsonLinesTracePlugin": lambda _: JsonLinesTracePlugin(io.StringIO()),
    "OpenTelemetryPlugin": lambda _: OpenTelemetryPlugin(),
    "MCPToolset": lambda _: MCPToolset("http://127.0.0.1:9/mcp", name="srv"),
}


def _agent(name: str) -> Agent:
    return Agent(ScriptedModel(["ok"]), name=name, retry=None, context=None)


@pytest.mark.parametrize("make", PLUGINS.values(), ids=PLUGINS.keys())
def test_a_plugin_disposed_from_one_agent_can_serve_another(
    make: Callable[[Path], Plugin], tmp_path: Path
) -> None:
    plugin = make(tmp_path)
    first, second, third = _agent("first"), _agent("second"), _agent("third")
    dispose = first.use(plugin)
    with pytest.raises(UsageError, match="is already attached to agent 'first'; "):
        second.use(plugin)

    dispose()
    second.use(plugin)

    assert list(second.plugins) == [plugin]
    with pytest.raises(UsageError, match="is already attached to agent 'second'; "):
        third.use(plugin)  # the guard still guards the agent it serves now


@pytest.mark.parametrize("make", PLUGINS.values(), ids=PLUGINS.keys())
def test_a_plugin_whose_use_failed_is_free_again(
    make: Callable[[Path], Plugin], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin = make(tmp_path)
    first, second = _agent("first"), _agent("second")

    # A failure after the guard: the first agent's registry refuses every registration
    # (patched on the class: the registry has slots).
    real_add = HookRegistry.add

    def refuse(registry: HookRegistry, *args: Any, **kwargs: Any) -> Any:
        if registry is first.hooks:
            raise UsageError("no more hooks")
        return real_add(registry, *args, **kwargs)

    monkeypatch.setattr(HookRegistry, "add", refuse)
    with pytest.raises(UsageError, match="no more hooks"):
        first.use(plugin)
    monkeypatch.undo()

    second.use(plugin)
    assert list(second.plugins) == [plugin]


def test_without_an_owner_the_guard_only_checks() -> None:
    first, second = _agent("first"), _agent("second")
    with first.hooks.collect() as disposers:
        assert attach_once("x", None, first, "why") is first
    assert disposers == []
    with pytest.raises(UsageError, match=r"^x is already attached to agent 'first'; why, so"):
        attach_once("x", first, second, "why")
