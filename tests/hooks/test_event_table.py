"""The event table is the one source of the hook catalogue.

Every event is one row of ``hookloop.hooks.EVENT_TABLE``; the ``HookEvent`` type and the event
name constants, the typed ``add_hook`` overloads, registration, dispatch, sub-agent forwarding,
``TracePlugin`` and the table in ``docs/hooks.md`` follow it. Adding an event is adding its
context class and its row; then run this file as a script, which writes the generated parts
(the names in ``hooks/_events.py``, the overloads in ``hooks/_host.py``, the docs table):
``python tests/hooks/test_event_table.py``. The tests below fail until it was run.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_overloads, get_type_hints

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hookloop.hooks._events as events_module
import hookloop.hooks._host as host_module
from hookloop import (
    Agent,
    AssistantMessage,
    HookEvent,
    HookRegistrationError,
    HookReturnError,
    PreRequestContext,
    ResponseContext,
    TracePlugin,
    UsageError,
    UserMessage,
)
from hookloop._delegation import _FORWARDED
from hookloop.context import Compaction, ContextHooks, SlidingWindow
from hookloop.hooks import (
    EVENT_TABLE,
    EventSpec,
    HistoryReplacement,
    HookHost,
    Phase,
    PreCompressContext,
    attach_once,
)
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.retry import DefaultRetryStrategy, FallbackStrategy, ToolRetryStrategy
from hookloop.sessions import SessionRecorder, SQLiteSessionStore
from hookloop.testing import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "hooks.md"
BEGIN = "<!-- the event table: generated from hookloop.hooks.EVENT_TABLE -->"
END = "<!-- end of the event table -->"


# --- the table drives the types --------------------------------------------------------------


def test_the_hook_event_type_lists_exactly_the_rows_in_order() -> None:
    assert get_args(HookEvent) == tuple(EVENT_TABLE)
    assert all(name == spec.name for name, spec in EVENT_TABLE.items())


def test_every_event_has_exactly_one_typed_overload_with_its_context_type() -> None:
    namespace = vars(host_module)
    contexts: dict[str, list[type]] = {name: [] for name in EVENT_TABLE}
    for overload in get_overloads(HookHost.add_hook):
        hints = get_type_hints(overload, globalns=namespace)
        handler_args = get_args(hints["handler"])[0]  # Callable[[Context], ...]
        for event in get_args(hints["event"]):
            contexts[event].append(handler_args[0])
    assert contexts == {name: [spec.context] for name, spec in EVENT_TABLE.items()}


def test_the_event_constants_name_rows() -> None:
    constants = {
        value
        for key, value in vars(events_module).items()
        if key.isupper() and key.startswith(("ON_", "PRE_", "AFTER_")) and isinstance(value, str)
    }
    assert constants == set(EVENT_TABLE)


def test_interceptor_rows_say_which_field_a_return_replaces() -> None:
    for spec in EVENT_TABLE.values():
        if spec.kind == "interceptor":
            assert spec.accept
            assert spec.field in {f.name for f in dataclasses.fields(spec.context)}
        else:
            assert (spec.field, spec.accept, spec.stop) == ("", (), ())
        for name in spec.settable:
            assert name in {f.name for f in dataclasses.fields(spec.context)}


# --- the table drives registration, forwarding and the trace -------------------------------------


@pytest.mark.parametrize("event", [n for n, s in EVENT_TABLE.items() if s.sync_only])
def test_sync_only_rows_refuse_async_handlers(event: str) -> None:
    agent = Agent(ScriptedModel([]), retry=None, context=None)

    async def handler(ctx: object) -> None: ...

    with pytest.raises(HookRegistrationError, match="plain functions"):
        agent.hooks.add(event, handler)
    assert agent.hooks.handlers == {}


def test_a_sub_agent_forwards_exactly_the_forwarded_rows() -> None:
    assert tuple(sorted(n for n, s in EVENT_TABLE.items() if s.forwarded)) == _FORWARDED
    assert {"on_scope_register", "on_scope_unregister", "on_subagent_event"}.isdisjoint(_FORWARDED)


def test_the_trace_registers_one_handler_per_row() -> None:
    agent = Agent(ScriptedModel([]), retry=None, context=None)
    agent.use(TracePlugin(write=lambda line: None))
    assert set(agent.hooks.handlers) == set(EVENT_TABLE)
    for handlers in agent.hooks.handlers.values():
        assert [h.order for h in handlers] == [Phase.OBSERVE]


# --- the generated code is in step with the rows ------------------------------------------------

HOOKS = ROOT / "src" / "hookloop" / "hooks"
SCRIPT = "python tests/hooks/test_event_table.py"
GENERATED = f"    # --- generated from EVENT_TABLE by `{SCRIPT}`; do not edit ---"


def _returns(spec: EventSpec) -> str:
    """What a handler of the row may return, as a type."""
    if spec.kind == "interceptor":
        return " | ".join(t.__name__ for t in (*spec.accept, *spec.stop)) + " | None"
    if spec.kind == "guard":
        return "Verdict | None"
    return "str | None" if spec.kind == "collector" else "object"


def names_source() -> str:
    """The event name constants and the ``HookEvent`` type, one entry per row."""
    constants = [f'{name.upper()}: Final = "{name}"' for name in EVENT_TABLE]
    literal = "\n".join(f'    "{name}",' for name in EVENT_TABLE)
    return "\n".join(
        [
            *constants,
            "",
            f"HookEvent: TypeAlias = Literal[\n{literal}\n]",
            '"""Every event\'s name, one per row of :data:`EVENT_TABLE`."""',
            "",
            "EVENTS: Final[frozenset[str]] = frozenset(EVENT_TABLE)",
            '"""Every event\'s name."""',
        ]
    )


def overloads_source() -> str:
    """One typed ``add_hook`` overload per row: the handler takes the row's context type."""
    out = []
    for spec in EVENT_TABLE.values():
        context = spec.context.__name__
        handler = (
            f"Callable[[{context}], {_returns(spec)}]"
            if spec.sync_only  # called inside a synchronous call: no awaitable
            else f"_Fn[{context}, {_returns(spec)}]"
        )
        out.append(
            "    @overload\n"
            "    def add_hook(\n"
            "        self,\n"
            f'        event: Literal["{spec.name}"],\n'
            f"        handler: {handler},\n"
            "        *,\n"
            "        order: int = 0,\n"
            "    ) -> Disposer: ..."
        )
    return "\n".join(out)


def _with_block(source: str, block: str) -> str:
    """``source`` with the generated block (between its two marker lines) replaced."""
    head, rest = source.split(GENERATED.strip(), 1)
    first, tail = rest.split("\n", 1)
    indent = head[len(head.rstrip(" ")) :]
    end = tail.index(f"{indent}# --- end of the generated")
    return f"{head}{GENERATED.strip()}{first}\n{block}\n{tail[end:]}"


GENERATED_FILES = {
    HOOKS / "_events.py": names_source,
    HOOKS / "_host.py": overloads_source,
}


@pytest.mark.parametrize("path", list(GENERATED_FILES), ids=lambda p: p.name)
def test_the_generated_code_is_the_table(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    expected = _with_block(source, GENERATED_FILES[path]())
    assert source == expected, "run: python tests/hooks/test_event_table.py"


# --- the docs table is generated from the rows --------------------------------------------------


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def event_table_markdown() -> str:
    """The docs table, one line per row of the event table."""
    lines = [
        "| event | kind | context | a handler may return | stops the chain | may set "
        "| sync only | forwarded |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for spec in EVENT_TABLE.values():
        fields = ", ".join(f.name for f in dataclasses.fields(spec.context))
        settable = ", ".join(f"`{name}`" for name in spec.settable) or "-"
        lines.append(
            f"| `{spec.name}` | {spec.kind} | `{spec.context.__name__}({fields})` "
            f"| {_cell(spec.returns)} | {_cell(spec.stops)} | {settable} "
            f"| {'yes' if spec.sync_only else 'no'} | {'yes' if spec.forwarded else 'no'} |"
        )
    return "\n".join(lines)


def _with_table(page: str) -> str:
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{event_table_markdown()}\n{END}{tail}"


def test_the_docs_table_is_the_event_table() -> None:
    page = DOCS.read_text(encoding="utf-8")
    assert page == _with_table(page), "run: python tests/hooks/test_event_table.py"


# --- named phases keep the built-ins' order --------------------------------------------------


def _labels(agent: Agent, event: str) -> list[str]:
    return [h.label for h in agent.hooks.handlers[event]]


async def test_built_in_plugins_sit_in_their_phases_in_the_documented_order(
    tmp_path: Path,
) -> None:
    model = ScriptedModel([])
    agent = Agent(model, retry=None, context=None)

    def user(ctx: object) -> None: ...

    # Registered in the reverse of the firing order: only the phases put them in place.
    agent.use(TracePlugin(write=lambda line: None))
    agent.add_hook("pre_request", user)
    agent.add_hook("after_model_call", user)
    agent.add_hook("on_message", user)
    agent.use(ContextHooks(before_request=lambda **kw: None, on_error=lambda **kw: None))
    agent.use(SlidingWindow())
    agent.use(FallbackStrategy([ScriptedModel([], name="backup")]))
    agent.use(Compaction())
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        agent.use(SessionRecorder(store))
        assert _labels(agent, "on_message")[:2] == [
            "SessionRecorder._on_message",
            "test_built_in_plugins_sit_in_their_phases_in_the_documented_order.<locals>.user",
        ]
    assert _labels(agent, "pre_request") == [
        "Compaction._proactive",
        "FallbackStrategy._choose_model",
        "test_built_in_plugins_sit_in_their_phases_in_the_documented_order.<locals>.user",
        "TracePlugin.pre_request",
        "SlidingWindow._trim",
        "ContextHooks._before",
    ]
    assert _labels(agent, "after_model_call") == [
        "Compaction._after",
        "ContextHooks._after",
        "SlidingWindow._recover",
        "test_built_in_plugins_sit_in_their_phases_in_the_documented_order.<locals>.user",
        "ModelRetryStrategy.retry_model",
        "TracePlugin.after_model_call",
        "FallbackStrategy._record_success",
    ]


def test_phases_are_ordered_as_drawn() -> None:
    assert list(Phase) == sorted(Phase)  # declared in firing order
    assert Phase.USER == 0


# --- the attach guard, once ---------------------------------------------------------------------


def _plugins(tmp_path: Path) -> list[Callable[[], Any]]:
    return [
        SlidingWindow,
        Compaction,
        DefaultRetryStrategy,
        ToolRetryStrategy,
        lambda: SessionRecorder(SQLiteSessionStore(tmp_path / "s.db")),
    ]


@pytest.mark.parametrize("index", range(5))
def test_a_plugin_instance_serves_one_agent(tmp_path: Path, index: int) -> None:
    plugin = _plugins(tmp_path)[index]()
    first = Agent(ScriptedModel([]), retry=None, context=None, name="first")
    second = Agent(ScriptedModel([]), retry=None, context=None, name="second")
    first.use(plugin)

    with pytest.raises(UsageError, match=r"is already attached to agent 'first'; .* its own"):
        second.use(plugin)
    assert second.plugins == ()


def test_attach_once_keeps_the_same_agent() -> None:
    agent = Agent(ScriptedModel([]), retry=None, context=None)
    assert attach_once("x", None, agent, "why") is agent
    assert attach_once("x", agent, agent, "why") is agent


# --- a history change is committed by the loop ---------------------------------------------------


class _ReplaceOnce:
    """A context policy of the user's own: summarises everything before the new question."""

    name = "replace-once"

    def init_agent(self, agent: Agent) -> None:
        self.agent = agent
        agent.add_hook("pre_request", self.pre_request, order=Phase.COMPACT)

    def pre_request(self, ctx: PreRequestContext) -> ProviderRequest | None:
        messages = self.agent.history.messages
        if len(messages) < 3:
            return None
        summary = UserMessage(content="[summary] two earlier turns")
        ctx.replace_history = HistoryReplacement(
            removed=tuple(messages[:-1]), summary=summary, kept=(messages[-1],)
        )
        return dataclasses.replace(ctx.request, messages=(summary, messages[-1]))


async def test_the_loop_commits_a_replacement_and_fires_on_pre_compress_first() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model, retry=None, context=None)
    policy = _ReplaceOnce()
    agent.use(policy)
    seen: list[tuple[tuple[str, ...], int]] = []

    def keep(ctx: PreCompressContext) -> str:
        seen.append((tuple(m.id for m in ctx.messages), len(agent.history.messages)))
        return "  keep: order #7  "

    agent.add_hook("on_pre_compress", keep)
    await agent.chat("first")
    first_turn = agent.history.messages
    await agent.chat("second")

    # on_pre_compress saw the messages that go, while the history still held them.
    assert seen == [(tuple(m.id for m in first_turn), 3)]
    summary = agent.history.messages[0]
    assert summary == UserMessage(
        content="[summary] two earlier turns\n\nkeep: order #7", id=summary.id
    )
    assert [type(m) for m in agent.history.messages] == [UserMessage, UserMessage, AssistantMessage]
    assert agent.history.messages[1] == UserMessage(content="second", id=agent.messages[1].id)
    # The request sent is built from the amended summary too.
    assert model.requests[1].messages[0] == summary


async def test_a_replacement_of_another_type_is_a_hook_return_error() -> None:
    agent = Agent(ScriptedModel(["unused"]), retry=None, context=None)

    def bad(ctx: PreRequestContext) -> None:
        ctx.replace_history = ["not", "a", "replacement"]  # type: ignore[assignment]

    agent.add_hook("pre_request", bad)
    with pytest.raises(HookReturnError, match="replace_history must be a HistoryReplacement"):
        await agent.chat("hi")
    assert [m.role for m in agent.history.messages] == ["user"]  # the history is untouched


# --- dispatch order, for any orders ------------------------------------------------------------

_ORDERS = st.one_of(st.sampled_from(list(Phase)), st.integers(min_value=-(2**40), max_value=2**40))


@settings(max_examples=60, deadline=None)
@given(orders=st.lists(_ORDERS, max_size=12), returns=st.lists(st.booleans(), max_size=12))
async def test_handlers_fire_by_order_then_registration_and_a_chain_passes_values_on(
    orders: list[int], returns: list[bool]
) -> None:
    """Whatever the orders: handlers run sorted by (order, registration); in a chain every
    handler sees what the ones before it returned."""
    agent = Agent(ScriptedModel(["done"]), retry=None, context=None)
    fired: list[tuple[int, int, int]] = []

    def handler(index: int, order: int) -> Callable[[ResponseContext], object]:
        def run(ctx: ResponseContext) -> ProviderResponse | None:
            fired.append((order, index, len(ctx.response.content)))
            if index < len(returns) and returns[index]:
                return dataclasses.replace(ctx.response, content=ctx.response.content + "+")
            return None

        return run

    for index, order in enumerate(orders):
        agent.add_hook("on_response", handler(index, order), order=order)
    response = await agent.chat("hi")

    assert [(o, i) for o, i, _ in fired] == sorted((o, i) for i, o in enumerate(orders))
    grown = 0
    for _, index, seen in fired:
        assert seen == len("done") + grown
        grown += index < len(returns) and returns[index]
    assert response.text == "done" + "+" * grown


if __name__ == "__main__":
    # The names first: the overloads and the docs table are written from the table as the
    # module defines it, and a new row's name is a string until its constant exists.
    for path, make in GENERATED_FILES.items():
        path.write_text(_with_block(path.read_text(encoding="utf-8"), make()), encoding="utf-8")
    DOCS.write_text(_with_table(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    sys.exit(0)


class _Inner:
    name = "inner"

    def init_agent(self, agent: Agent) -> None:
        agent.add_hook("on_chat_start", lambda ctx: None)


class _Outer:
    """Uses another plugin before it registers a hook of its own."""

    name = "outer"

    def init_agent(self, agent: Agent) -> None:
        agent.use(_Inner())
        agent.add_hook("on_chat_done", lambda ctx: None)


def test_a_plugin_that_uses_another_before_its_own_hooks_is_disposed_whole() -> None:
    agent = Agent(ScriptedModel([]), retry=None, context=None)
    dispose = agent.use(_Outer())
    assert set(agent.hooks.handlers) == {"on_chat_start", "on_chat_done"}
    dispose()
    assert agent.hooks.handlers == {}
