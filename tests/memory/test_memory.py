"""Memory through the agent: every rule of seed 004 (PraisonAI memory lifecycle hooks).

Layout of this module:
    store_memory     actions, refusals write nothing and fire nothing, the seed's remove form
    on_memory_write  after every successful write from every path (API, tool), never after a
                     failed one; add_hook handlers and MemoryHooks alike
    twins            only one runs: sync under *_sync(), async as a background task under
                     await, drained by aclose(); lone twins
    failures         a failing hook is logged at WARNING and never breaks anything
    no cost          a hook the object lacks registers no handler
    on_pre_compress  the text is kept in the compaction summary
    sessions         switch_session and on_session_switch
    providers        the seed's method-name convention plugs in unchanged
    memory tool      the model's writes take the same path
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from hookloop import (
    Agent,
    ConcurrentChatError,
    MemoryNotFoundError,
    MemoryRequestError,
    Scope,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.context import SUMMARY_HEADER, Compaction
from hookloop.hooks import MemoryWriteContext, SessionSwitchContext
from hookloop.memory import (
    MemoryEntry,
    MemoryHooks,
    MemoryHooksPlugin,
    MemoryStore,
    MemoryTarget,
    ProviderMemoryStore,
    SQLiteMemoryStore,
)
from hookloop.testing import ScriptedModel, tool_call

HOOKS_LOGGER = "hookloop.memory._hooks"


@pytest.fixture
def store(tmp_path: Path) -> SQLiteMemoryStore:
    return SQLiteMemoryStore(tmp_path / "memory.db")


def make_agent(memory: object = None, script: list[Any] | None = None, **kwargs: Any) -> Agent:
    return Agent(ScriptedModel(script or []), memory=memory, retry=None, **kwargs)


def writes(agent: Agent) -> list[MemoryWriteContext]:
    seen: list[MemoryWriteContext] = []
    agent.add_hook("on_memory_write", seen.append)
    return seen


class AddOnlyStore(MemoryStore):
    """A store that can only add (it does not override replace / remove)."""

    def __init__(self) -> None:
        self.added: list[str] = []

    async def add(self, content: str, memory_type: Any, metadata: Any = None) -> MemoryEntry:
        self.added.append(content)
        return MemoryEntry(
            id=f"m{len(self.added)}",
            memory_type=memory_type,
            content=content,
            created_at=_now(),
            updated_at=_now(),
        )

    async def search(self, query: str, *, memory_type: Any = None, limit: int = 10) -> list[Any]:
        return []

    async def get(self, memory_id: str) -> MemoryEntry | None:
        return None

    async def entries(self, *, memory_type: Any = None, limit: int | None = None) -> list[Any]:
        return []


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 1, 1, tzinfo=UTC)


# --- store_memory ---------------------------------------------------------------------------


async def test_add_replace_remove_through_the_agent(store: SQLiteMemoryStore) -> None:
    agent = make_agent(store)
    added = await agent.store_memory("Ann prefers tea", metadata={"from": "chat"})
    assert added.memory_type == "long_term"  # the default type
    assert await store.get(added.id) == added

    replaced = await agent.store_memory("Ann prefers coffee", action="replace", match="prefers tea")
    assert replaced.id == added.id
    assert replaced.content == "Ann prefers coffee"
    assert replaced.metadata == {"from": "chat"}

    removed = await agent.store_memory("", action="remove", memory_id=added.id)
    assert removed == replaced
    assert await store.entries() == []


async def test_remove_takes_the_content_as_the_text_to_find_as_in_the_seed(
    store: SQLiteMemoryStore,
) -> None:
    agent = make_agent(store)
    keep = await agent.store_memory("Bob lives in Oslo", memory_type="entity")
    await agent.store_memory("Bob's dog is Rex", memory_type="entity")

    removed = await agent.store_memory("dog is rex", memory_type="entity", action="remove")

    assert removed.content == "Bob's dog is Rex"
    assert [e.id for e in await store.entries()] == [keep.id]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"memory_type": "semantic"}, MemoryRequestError),  # unknown type
        ({"action": "upsert"}, MemoryRequestError),  # unknown action
        ({"metadata": {"when": object()}}, MemoryRequestError),  # not JSON
        ({"memory_id": "mem_x"}, MemoryRequestError),  # an add names no entry
        ({"action": "replace"}, MemoryRequestError),  # replace needs an id or a match
        ({"action": "replace", "memory_id": "a", "match": "b"}, MemoryRequestError),
        ({"action": "replace", "match": "nowhere"}, MemoryNotFoundError),
        ({"action": "remove", "memory_id": "mem_nope"}, MemoryNotFoundError),
        ({"action": "replace", "match": "fact"}, MemoryRequestError),  # two entries match
    ],
)
async def test_a_refused_write_raises_writes_nothing_and_fires_no_hook(
    store: SQLiteMemoryStore, kwargs: dict[str, Any], error: type[Exception]
) -> None:
    agent = make_agent(store)
    first = await agent.store_memory("first fact")
    second = await agent.store_memory("second fact")
    seen = writes(agent)

    with pytest.raises(error):
        await agent.store_memory("new text", **kwargs)

    assert await store.entries() == [second, first]
    assert seen == []


async def test_unknown_type_and_unsupported_action_are_value_errors_before_any_write() -> None:
    add_only = AddOnlyStore()
    agent = make_agent(add_only)
    seen = writes(agent)

    for kwargs in (
        {"memory_type": "procedural"},
        {"action": "replace", "memory_id": "m1"},
        {"action": "remove", "memory_id": "m1"},
    ):
        with pytest.raises(ValueError, match=r"procedural|cannot replace|cannot remove"):
            await agent.store_memory("x", **kwargs)
    assert add_only.added == []
    assert seen == []
    assert add_only.supports("add", "entity")
    assert not add_only.supports("replace", "entity")


async def test_store_memory_without_a_store_is_refused() -> None:
    with pytest.raises(MemoryRequestError, match="has no memory"):
        await make_agent().store_memory("x")
    with pytest.raises(MemoryRequestError, match="has no memory"):
        await make_agent().search_memory("x")


async def test_search_memory_searches_the_agent_store(store: SQLiteMemoryStore) -> None:
    agent = make_agent(store)
    tea = await agent.store_memory("likes jasmine tea")
    await agent.store_memory("has a bike")
    assert [h.id for h in await agent.search_memory("jasmine")] == [tea.id]


def test_store_memory_sync_works_without_a_loop_and_refuses_inside_one(
    store: SQLiteMemoryStore,
) -> None:
    agent = make_agent(store)
    entry = agent.store_memory_sync("a fact from sync code", memory_type="episodic")
    assert entry.memory_type == "episodic"

    async def inside() -> None:
        with pytest.raises(UsageError, match="running event loop"):
            agent.store_memory_sync("nope")

    asyncio.run(inside())
    assert len(asyncio.run(store.entries())) == 1


def test_agent_memory_must_be_a_store_a_provider_or_hooks() -> None:
    with pytest.raises(UsageError, match="memory must be"):
        make_agent(object())
    with pytest.raises(UsageError, match="memory must be"):
        make_agent("memory.db")


# --- on_memory_write ------------------------------------------------------------------------


async def test_on_memory_write_fires_after_each_successful_api_write(
    store: SQLiteMemoryStore,
) -> None:
    agent = make_agent(store)
    seen = writes(agent)
    order: list[str] = []

    def check_written(ctx: MemoryWriteContext) -> None:  # the write is visible to the hook
        order.append(f"{ctx.action}:{ctx.entry.id}")

    agent.add_hook("on_memory_write", check_written)

    added = await agent.store_memory("Cleo is a cat", memory_type="entity", metadata={"a": 1})
    replaced = await agent.store_memory(
        "Cleo is a black cat", memory_type="entity", action="replace", memory_id=added.id
    )
    removed = await agent.store_memory("black cat", memory_type="entity", action="remove")

    assert [(c.action, c.memory_type, c.content, dict(c.metadata), c.source) for c in seen] == [
        ("add", "entity", "Cleo is a cat", {"a": 1}, "api"),
        ("replace", "entity", "Cleo is a black cat", {"a": 1}, "api"),
        ("remove", "entity", "Cleo is a black cat", {"a": 1}, "api"),
    ]
    assert [c.entry for c in seen] == [added, replaced, removed]
    assert order == [f"add:{added.id}", f"replace:{added.id}", f"remove:{added.id}"]


async def test_on_memory_write_does_not_fire_when_the_store_fails(store: SQLiteMemoryStore) -> None:
    class Broken(SQLiteMemoryStore):
        async def add(self, *args: Any, **kwargs: Any) -> MemoryEntry:
            raise OSError("disk full")

    agent = make_agent(Broken(store.path))
    seen = writes(agent)
    with pytest.raises(OSError, match="disk full"):
        await agent.store_memory("x")
    assert seen == []


def test_memory_hooks_object_sees_every_write_with_the_seed_arguments(
    store: SQLiteMemoryStore,
) -> None:
    calls: list[tuple[Any, ...]] = []

    class Mirror:
        def on_memory_write(
            self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
        ) -> None:
            calls.append((action, target, content, metadata))

    agent = make_agent(store)
    agent.use(MemoryHooksPlugin(Mirror()))
    entry = agent.store_memory_sync("fact one", metadata={"k": "v"})
    agent.store_memory_sync("fact two", action="replace", memory_id=entry.id)
    with pytest.raises(MemoryNotFoundError):
        agent.store_memory_sync("", action="remove", memory_id="mem_missing")
    agent.store_memory_sync("", action="remove", match="two")

    assert calls == [
        ("add", "long_term", "fact one", {"k": "v"}),
        ("replace", "long_term", "fact two", {"k": "v"}),
        ("remove", "long_term", "fact two", {"k": "v"}),
    ]


# --- twins ----------------------------------------------------------------------------------


class Twins:
    """Both twins of on_memory_write; the async one waits until it is released."""

    def __init__(self) -> None:
        self.sync_calls: list[str] = []
        self.async_calls: list[str] = []
        self.release = asyncio.Event()

    def on_memory_write(self, action: str, target: str, content: str, metadata: Any = None) -> None:
        self.sync_calls.append(content)

    async def aon_memory_write(
        self, action: str, target: str, content: str, metadata: Any = None
    ) -> None:
        await self.release.wait()
        self.async_calls.append(content)


async def test_inside_a_running_loop_only_the_async_twin_runs_in_the_background(
    store: SQLiteMemoryStore,
) -> None:
    hooks = Twins()
    agent = make_agent(store)
    agent.use(MemoryHooksPlugin(hooks))

    await agent.store_memory("remember this")  # returns although the hook is still waiting

    assert len(agent.background) == 1
    assert hooks.async_calls == []
    hooks.release.set()
    await agent.aclose()
    assert hooks.async_calls == ["remember this"]
    assert hooks.sync_calls == []
    assert len(agent.background) == 0


async def test_async_with_agent_drains_the_background_hooks(store: SQLiteMemoryStore) -> None:
    hooks = Twins()
    hooks.release.set()
    async with make_agent(store) as agent:
        agent.use(MemoryHooksPlugin(hooks))
        await agent.store_memory("one")
        await agent.store_memory("two")
    assert sorted(hooks.async_calls) == ["one", "two"]
    assert hooks.sync_calls == []


def test_under_a_sync_entry_point_only_the_sync_twin_runs(store: SQLiteMemoryStore) -> None:
    hooks = Twins()
    agent = make_agent(store)
    agent.use(MemoryHooksPlugin(hooks))

    agent.store_memory_sync("from sync code")

    assert hooks.sync_calls == ["from sync code"]
    assert hooks.async_calls == []
    assert len(agent.background) == 0


def test_a_lone_async_twin_is_awaited_in_line_under_a_sync_entry_point(
    store: SQLiteMemoryStore,
) -> None:
    calls: list[str] = []

    class AsyncOnly:
        async def aon_memory_write(
            self, action: str, target: str, content: str, metadata: Any
        ) -> None:
            await asyncio.sleep(0)
            calls.append(content)

    agent = make_agent(store)
    agent.use(MemoryHooksPlugin(AsyncOnly()))
    agent.store_memory_sync("done before the call returns")
    assert calls == ["done before the call returns"]


async def test_a_lone_sync_twin_runs_in_line_inside_a_loop(store: SQLiteMemoryStore) -> None:
    calls: list[str] = []

    class SyncOnly:
        def on_memory_write(self, action: str, target: str, content: str, metadata: Any) -> None:
            calls.append(content)

    agent = make_agent(store)
    agent.use(MemoryHooksPlugin(SyncOnly()))
    await agent.store_memory("at once")
    assert calls == ["at once"]
    assert len(agent.background) == 0


async def test_chat_picks_the_async_twin_and_chat_sync_the_sync_twin(
    store: SQLiteMemoryStore,
) -> None:
    hooks = Twins()
    hooks.release.set()

    def script() -> list[Any]:
        return [tool_call("memory", {"action": "add", "content": "a fact"}), "noted"]

    agent = make_agent(store, script())
    agent.use(MemoryHooksPlugin(hooks))
    agent.scopes.register(Scope("memory", tools=[agent.memory_tool()]))
    await agent.chat("remember a fact")
    await agent.aclose()
    assert (hooks.async_calls, hooks.sync_calls) == (["a fact"], [])

    def in_sync_code() -> None:
        agent.model = ScriptedModel(script())
        agent.chat_sync("remember it again")

    await asyncio.to_thread(in_sync_code)
    assert (hooks.async_calls, hooks.sync_calls) == (["a fact"], ["a fact"])


# --- failures -------------------------------------------------------------------------------


async def test_a_failing_memory_hook_is_logged_at_warning_and_the_loop_goes_on(
    store: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    class Failing:
        def on_memory_write(self, *args: Any) -> None:
            raise RuntimeError("mirror is down")

        async def aon_session_switch(self, *args: Any, **kwargs: Any) -> None:
            raise RuntimeError("async mirror is down")

    script = [tool_call("memory", {"action": "add", "content": "a fact"}), "noted"]
    agent = make_agent(store, script)
    agent.use(MemoryHooksPlugin(Failing()))
    agent.scopes.register(Scope("memory", tools=[agent.memory_tool()]))

    with caplog.at_level(logging.WARNING):
        assert (await agent.chat("remember")).text == "noted"
        entry = await agent.store_memory("written anyway")
        await agent.switch_session("s2")
        await agent.aclose()

    assert agent.messages[2].is_error is False  # type: ignore[union-attr]  # the tool succeeded
    assert await store.get(entry.id) == entry
    failures = [r for r in caplog.records if r.name == HOOKS_LOGGER]
    assert [r.levelno for r in failures] == [logging.WARNING] * 3
    assert "Failing.on_memory_write" in failures[0].getMessage()
    assert "Failing.aon_session_switch" in failures[2].getMessage()
    assert failures[2].exc_info is not None
    assert str(failures[2].exc_info[1]) == "async mirror is down"


async def test_a_failing_add_hook_handler_of_a_report_event_is_logged_not_raised(
    store: SQLiteMemoryStore, caplog: pytest.LogCaptureFixture
) -> None:
    agent = make_agent(store)
    later: list[str] = []

    def boom(ctx: MemoryWriteContext) -> None:
        raise RuntimeError("boom")

    agent.add_hook("on_memory_write", boom)
    agent.add_hook("on_memory_write", lambda ctx: later.append(ctx.content))
    with caplog.at_level(logging.WARNING, logger="hookloop.hooks"):
        await agent.store_memory("still stored")

    assert later == ["still stored"]  # the next handler still ran
    (record,) = [r for r in caplog.records if r.name == "hookloop.hooks._dispatch"]
    assert record.levelno == logging.WARNING
    assert "boom" in record.getMessage() or "boom" in str(record.exc_info)


async def test_a_non_str_from_on_pre_compress_is_logged_and_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Odd:
        def on_pre_compress(self, messages: list[dict[str, Any]]) -> Any:
            return 42

    agent, _ = compacting_agent(Odd())
    with caplog.at_level(logging.WARNING, logger=HOOKS_LOGGER):
        for i in range(CHATS):
            await agent.chat(f"question {i}: {TEXT}")
    assert any("returned int" in r.getMessage() for r in caplog.records)
    summary = agent.messages[0]
    assert isinstance(summary, UserMessage)
    assert "42" not in summary.text


# --- no cost --------------------------------------------------------------------------------


def test_a_hook_the_object_does_not_implement_registers_no_handler(
    store: SQLiteMemoryStore,
) -> None:
    class OnlyWrites:
        def on_memory_write(self, *args: Any) -> None: ...

    agent = make_agent(store)
    before = dict(agent.hooks.handlers)
    agent.use(MemoryHooksPlugin(OnlyWrites()))
    added = {k: len(v) - len(before.get(k, ())) for k, v in agent.hooks.handlers.items()}
    assert {k: n for k, n in added.items() if n} == {"on_memory_write": 1}
    for event in ("on_pre_compress", "on_delegation", "on_session_switch"):
        assert event not in agent.hooks.handlers


def test_memory_hooks_is_runtime_checkable_with_every_method_optional() -> None:
    class One:
        def on_delegation(self, task: str, result: str, **kwargs: Any) -> None: ...

    class AsyncOne:
        async def aon_pre_compress(self, messages: Any) -> str:
            return ""

    assert isinstance(One(), MemoryHooks)
    assert isinstance(AsyncOne(), MemoryHooks)
    assert not isinstance(object(), MemoryHooks)
    assert not isinstance("on_memory_write", MemoryHooks)
    with pytest.raises(UsageError, match="no memory hook"):
        MemoryHooksPlugin(object())


async def test_agent_memory_registers_the_hooks_of_the_object_it_is_given(
    store: SQLiteMemoryStore,
) -> None:
    seen: list[str] = []

    class StoreWithHooks(SQLiteMemoryStore):
        def on_memory_write(self, action: str, target: str, content: str, metadata: Any) -> None:
            seen.append(content)

    agent = make_agent(StoreWithHooks(store.path), context=None)
    await agent.store_memory("hooked")
    assert seen == ["hooked"]
    assert [p.name for p in agent.plugins] == ["memory-hooks"]

    class HooksOnly:
        def on_session_switch(self, new_session_id: str, **kwargs: Any) -> None:
            seen.append(new_session_id)

    hooks_only = make_agent(HooksOnly())
    assert hooks_only.memory is None
    await hooks_only.switch_session("s9")
    assert seen == ["hooked", "s9"]


async def test_the_same_hooks_object_given_twice_runs_each_hook_once(
    store: SQLiteMemoryStore,
) -> None:
    seen: list[str] = []

    class StoreWithHooks(SQLiteMemoryStore):
        def on_memory_write(self, action: str, target: str, content: str, metadata: Any) -> None:
            seen.append(content)

    both = StoreWithHooks(store.path)
    agent = make_agent(both)
    agent.use(MemoryHooksPlugin(both))  # as well as Agent(memory=both)
    await agent.store_memory("once")
    assert seen == ["once"]
    other = make_agent(store)
    other.use(MemoryHooksPlugin(both))
    other.use(MemoryHooksPlugin(both))
    await other.store_memory("again")
    assert seen == ["once", "again"]


# --- on_pre_compress ------------------------------------------------------------------------

TEXT = "lorem ipsum dolor sit amet consectetur adipiscing elit " * 8
CHATS = 6


def compacting_agent(hooks: object) -> tuple[Agent, Compaction]:
    summarizer = ScriptedModel(["Summary of the old turns."] * 10, name="summarizer")
    compaction = Compaction(compact_threshold=0.6, keep_recent=0.3, summarizer=summarizer)
    model = ScriptedModel([f"reply {i}" for i in range(10)], context_window=1_000)
    agent = Agent(model, retry=None, plugins=[compaction], memory=hooks)
    return agent, compaction


class KeepFacts:
    def __init__(self) -> None:
        self.sync_seen: list[list[dict[str, Any]]] = []
        self.async_seen: list[list[dict[str, Any]]] = []

    def on_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        self.sync_seen.append(messages)
        return "Kept by the sync hook: order #4521."

    async def aon_pre_compress(self, messages: list[dict[str, Any]]) -> str:
        self.async_seen.append(messages)
        return "Kept by the async hook: order #4521."


async def test_on_pre_compress_text_is_kept_in_the_summary_and_the_async_twin_is_awaited() -> None:
    hooks = KeepFacts()
    agent, compaction = compacting_agent(hooks)
    for i in range(CHATS):
        await agent.chat(f"question {i}: {TEXT}")

    assert compaction.compactions >= 1
    summary = agent.messages[0]
    assert isinstance(summary, UserMessage)
    assert summary.text.startswith(SUMMARY_HEADER)
    assert "Kept by the async hook: order #4521." in summary.text
    assert "sync hook" not in summary.text.replace("async hook", "")
    assert hooks.sync_seen == []
    discarded = hooks.async_seen[0]
    assert discarded[0]["role"] == "user"  # the seed's form: plain dicts
    assert discarded[0]["content"].startswith("question 0")
    assert len(agent.background) == 0  # awaited, not backgrounded: its text was needed


def test_on_pre_compress_under_chat_sync_uses_the_sync_twin() -> None:
    hooks = KeepFacts()
    agent, compaction = compacting_agent(hooks)
    for i in range(CHATS):
        agent.chat_sync(f"question {i}: {TEXT}")

    assert compaction.compactions >= 1
    summary = agent.messages[0]
    assert isinstance(summary, UserMessage)
    assert "Kept by the sync hook: order #4521." in summary.text
    assert hooks.async_seen == []


async def test_a_failing_on_pre_compress_does_not_stop_compaction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Failing:
        def on_pre_compress(self, messages: Any) -> str:
            raise RuntimeError("vector store down")

    agent, compaction = compacting_agent(Failing())
    with caplog.at_level(logging.WARNING, logger=HOOKS_LOGGER):
        for i in range(CHATS):
            await agent.chat(f"question {i}: {TEXT}")
    assert compaction.compactions >= 1
    assert any("Failing.on_pre_compress" in r.getMessage() for r in caplog.records)


# --- sessions -------------------------------------------------------------------------------


async def test_switch_session_sets_the_id_and_fires_with_every_argument() -> None:
    calls: list[tuple[Any, ...]] = []

    class Sessions:
        def on_session_switch(
            self, new_session_id: str, *, parent_session_id: str = "", reset: bool = False
        ) -> None:
            calls.append((new_session_id, parent_session_id, reset))

    agent = make_agent(Sessions(), ["hi"], session_id="s1")
    contexts: list[SessionSwitchContext] = []
    agent.add_hook("on_session_switch", contexts.append)
    await agent.chat("hello")

    await agent.switch_session("s2", parent_session_id="s1")
    assert agent.session_id == "s2"
    assert len(agent.messages) == 2  # no reset: the conversation goes on
    await agent.switch_session("s3", reset=True)
    assert agent.session_id == "s3"
    assert agent.messages == ()

    assert calls == [("s2", "s1", False), ("s3", "", True)]
    assert [
        (c.new_session_id, c.parent_session_id, c.reset, c.previous_session_id) for c in contexts
    ] == [("s2", "s1", False, "s1"), ("s3", None, True, "s2")]


async def test_a_continuation_names_the_session_it_continues_from_as_its_parent() -> None:
    calls: list[tuple[Any, ...]] = []

    class Sessions:
        def on_session_switch(
            self, new_session_id: str, *, parent_session_id: str = "", reset: bool = False
        ) -> None:
            calls.append((new_session_id, parent_session_id, reset))

    agent = make_agent(Sessions(), session_id="s1")
    contexts: list[SessionSwitchContext] = []
    agent.add_hook("on_session_switch", contexts.append)
    await agent.switch_session("s2")  # no reset: the conversation goes on from s1
    await agent.switch_session("s2")  # the same session: it continues from nothing new
    await agent.switch_session("s3", reset=True)  # a fresh start has no parent
    await agent.switch_session("s4", parent_session_id="s1")  # the caller's choice stays

    assert calls == [
        ("s2", "s1", False),
        ("s2", "", False),
        ("s3", "", True),
        ("s4", "s1", False),
    ]
    assert [(c.new_session_id, c.parent_session_id, c.previous_session_id) for c in contexts] == [
        ("s2", "s1", "s1"),
        ("s2", None, "s2"),
        ("s3", None, "s2"),
        ("s4", "s1", "s3"),
    ]


def test_switch_session_sync_and_a_generated_first_session_id() -> None:
    agent = make_agent()
    first = agent.session_id
    assert first.startswith("session_")
    assert make_agent().session_id != first
    agent.switch_session_sync("next")
    assert agent.session_id == "next"


async def test_switch_session_refuses_bad_ids_and_a_running_chat() -> None:
    agent = make_agent()
    for bad in ("", None, 3):
        with pytest.raises(UsageError, match="session id"):
            await agent.switch_session(bad)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        Agent(ScriptedModel([]), session_id="")

    errors: list[Exception] = []

    @tool
    async def switch() -> str:
        """Try to switch sessions in the middle of a chat."""
        try:
            await agent.switch_session("elsewhere")
        except ConcurrentChatError as exc:
            errors.append(exc)
        return "tried"

    agent.model = ScriptedModel([tool_call("switch", {}), "ok"])
    agent.scopes.register(Scope("s", tools=[switch]))
    before = agent.session_id
    await agent.chat("go")
    assert len(errors) == 1
    assert agent.session_id == before


# --- providers ------------------------------------------------------------------------------


class NotesProvider:
    """A user's own provider written to the seed's method names, some sync, some async."""

    def __init__(self) -> None:
        self.long_term: dict[str, str] = {}
        self.meta: dict[str, Any] = {}
        self.calls: list[tuple[Any, ...]] = []

    def store_long_term(self, text: str, metadata: dict[str, Any] | None = None) -> str:
        key = f"lt{len(self.long_term) + 1}"
        self.long_term[key] = text
        self.meta[key] = metadata
        self.calls.append(("store_long_term", text, metadata))
        return key

    async def update_long_term(self, target: str, text: str) -> None:
        self.calls.append(("update_long_term", target, text))
        key = target if target in self.long_term else self._find(target)
        self.long_term[key] = text

    def delete_long_term(self, target: str) -> None:
        self.calls.append(("delete_long_term", target))
        self.long_term.pop(target if target in self.long_term else self._find(target))

    async def store_short_term(self, text: str) -> None:
        self.calls.append(("store_short_term", text))

    def search_long_term(self, query: str, limit: int = 5) -> list[dict[str, Any]]:
        return [
            {"id": k, "content": v, "score": 1.0}
            for k, v in self.long_term.items()
            if query.lower() in v.lower()
        ][:limit]

    def _find(self, text: str) -> str:
        return next(k for k, v in self.long_term.items() if text in v)


async def test_a_provider_with_the_seed_method_names_plugs_in_unchanged() -> None:
    provider = NotesProvider()
    agent = make_agent(provider)
    seen = writes(agent)
    assert isinstance(agent.memory, ProviderMemoryStore)

    added = await agent.store_memory("Ann likes tea", metadata={"src": "chat"})
    assert added.id == "lt1"  # the str the provider returned
    await agent.store_memory("Ann likes coffee", action="replace", memory_id="lt1")
    await agent.store_memory("short note", memory_type="short_term", metadata={"dropped": 1})
    hits = await agent.search_memory("coffee")
    await agent.store_memory("likes coffee", action="remove")

    assert provider.calls == [
        ("store_long_term", "Ann likes tea", {"src": "chat"}),
        ("update_long_term", "lt1", "Ann likes coffee"),
        ("store_short_term", "short note"),  # it takes no metadata, so none is passed
        ("delete_long_term", "likes coffee"),
    ]
    assert [(h.id, h.content) for h in hits] == [("lt1", "Ann likes coffee")]
    assert provider.long_term == {}
    assert [(c.action, c.memory_type) for c in seen] == [
        ("add", "long_term"),
        ("replace", "long_term"),
        ("add", "short_term"),
        ("remove", "long_term"),
    ]


async def test_a_provider_refuses_what_it_has_no_method_for_before_calling_anything() -> None:
    provider = NotesProvider()
    agent = make_agent(provider)
    seen = writes(agent)

    for kwargs in (
        {"memory_type": "entity"},  # no store_entity
        {"memory_type": "short_term", "action": "replace", "match": "x"},  # no replace_short_term
        {"memory_type": "short_term", "action": "remove", "match": "x"},
    ):
        with pytest.raises(ValueError, match="cannot"):
            await agent.store_memory("x", **kwargs)
    assert provider.calls == []
    assert seen == []
    store = agent.memory
    assert store is not None
    assert store.memory_types == ("short_term", "long_term")
    assert store.supports("replace", "long_term")
    assert not store.supports("replace", "short_term")
    with pytest.raises(MemoryRequestError):
        await store.replace(MemoryTarget(memory_type="short_term", match="x"), "y")


async def test_a_provider_returning_false_on_replace_or_remove_found_nothing() -> None:
    class Picky:
        def store_long_term(self, text: str) -> None:
            pass

        def replace_long_term(self, target: str, text: str) -> bool:
            return False

        async def remove_long_term(self, target: str) -> bool:
            return False

    agent = make_agent(Picky())
    seen = writes(agent)
    with pytest.raises(MemoryNotFoundError, match="no long_term memory for 'x'"):
        await agent.store_memory("y", action="replace", match="x")
    with pytest.raises(MemoryNotFoundError, match="no long_term memory for 'x'"):
        await agent.store_memory("", action="remove", match="x")
    assert seen == []  # on_memory_write fires for writes that happened only


def test_provider_store_needs_store_methods() -> None:
    with pytest.raises(UsageError, match="not a memory provider"):
        ProviderMemoryStore(object())


# --- the memory tool ------------------------------------------------------------------------


async def test_the_memory_tool_writes_through_the_same_path(store: SQLiteMemoryStore) -> None:
    existing = await store.add("The office is in Leeds", "long_term")
    script = [
        tool_call(
            "memory", {"action": "add", "content": "User's name is Kim", "memory_type": "entity"}
        ),
        tool_call(
            "memory",
            {
                "action": "replace",
                "old_text": "office is in leeds",
                "content": "The office is in York",
            },
        ),
        tool_call("memory", {"action": "search", "query": "office"}),
        tool_call("memory", {"action": "remove", "old_text": existing.id}),
        "All done.",
    ]
    agent = make_agent(store, script)
    seen = writes(agent)
    agent.scopes.register(Scope("memory", tools=[agent.memory_tool()]))

    response = await agent.chat("remember my name; the office moved to York")

    assert response.text == "All done."
    assert [(c.action, c.memory_type, c.content, c.source) for c in seen] == [
        ("add", "entity", "User's name is Kim", "tool"),
        ("replace", "long_term", "The office is in York", "tool"),
        ("remove", "long_term", "The office is in York", "tool"),
    ]
    results = [m.content for m in agent.messages if m.role == "tool"]
    assert results[0].startswith("stored entity memory mem_")
    assert results[1] == f"replaced long_term memory {existing.id}: The office is in York"
    assert json.loads(results[2]) == [
        {"id": existing.id, "memory_type": "long_term", "content": "The office is in York"}
    ]
    assert results[3] == f"removed long_term memory {existing.id}: The office is in York"
    assert [e.content for e in await store.entries()] == ["User's name is Kim"]


async def test_a_failed_tool_write_is_an_error_the_model_sees_and_fires_nothing(
    store: SQLiteMemoryStore,
) -> None:
    script = [
        tool_call("memory", {"action": "remove", "old_text": "never stored"}),
        tool_call("memory", {"action": "add", "content": "x", "memory_type": "semantic"}),
        "Sorry.",
    ]
    agent = make_agent(store, script)
    seen = writes(agent)
    agent.scopes.register(Scope("memory", tools=[agent.memory_tool()]))

    assert (await agent.chat("forget something")).text == "Sorry."
    errors = [m for m in agent.messages if m.role == "tool"]
    assert all(m.is_error for m in errors)  # type: ignore[union-attr]
    assert "MemoryNotFoundError" in errors[0].content
    assert "memory_type" in errors[1].content  # rejected by the schema's enum
    assert seen == []
    assert await store.entries() == []


def test_the_memory_tool_offers_only_what_the_store_supports() -> None:
    agent = make_agent(NotesProvider())
    schema = agent.memory_tool().definition.parameters
    assert schema["properties"]["action"]["enum"] == ["search", "add", "replace", "remove"]
    add_only = make_agent(AddOnlyStore()).memory_tool(name="remember")
    assert add_only.name == "remember"
    assert add_only.definition.parameters["properties"]["action"]["enum"] == ["search", "add"]
    with pytest.raises(UsageError, match="has no memory"):
        make_agent().memory_tool()


# --- the public surface ---------------------------------------------------------------------


def test_the_memory_package_exports_every_public_name_documented() -> None:
    import dataclasses
    import inspect

    import hookloop.memory

    names = hookloop.memory.__all__
    assert names == sorted(names, key=lambda n: (not n.isupper(), n))  # ruff's order
    public = {
        name
        for name, value in vars(hookloop.memory).items()
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
    }
    assert public <= set(names)
    for name in names:
        obj = getattr(hookloop.memory, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        assert inspect.getdoc(obj), name
        for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
            if not attr.startswith("_") and inspect.isfunction(member):
                assert inspect.getdoc(member), f"{name}.{attr}"
        if dataclasses.is_dataclass(obj):
            params = inspect.signature(obj).parameters.values()
            assert all(p.kind is p.KEYWORD_ONLY for p in params), name


def test_importing_the_memory_package_needs_no_database_driver() -> None:
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['asyncpg'] = None; sys.modules['redis'] = None\n"
        "import hookloop.memory\n"
        "try:\n"
        "    import asyncio; asyncio.run(hookloop.memory.PostgresMemoryStore('postgresql://x').get('m'))\n"
        "except ImportError as e: print(e)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'hookloop[postgres]'" in done.stdout


class Misshapen:
    """A provider whose update method is shaped like its store method."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def store_long_term(self, content: str, metadata: dict[str, Any] | None = None) -> None:
        self.calls.append(("store", content, metadata))

    def update_long_term(self, content: str, metadata: dict[str, Any] | None = None) -> None:
        self.calls.append(("update", content, metadata))


def test_a_provider_whose_replace_takes_no_target_is_refused_when_attached() -> None:
    with pytest.raises(UsageError) as caught:
        make_agent(Misshapen())
    assert str(caught.value) == (
        "memory provider method update_long_term must take (target, content) as its first "
        "positional parameters, then optional ones (metadata and limit are passed by name); "
        "its signature is (content, metadata=None)"
    )
    with pytest.raises(UsageError, match="update_long_term"):
        ProviderMemoryStore(Misshapen())


class NeedsMetadata:
    """Seed-shaped, with a ``metadata`` that has no default in every method."""

    def __init__(self) -> None:
        self.calls: list[tuple[object, ...]] = []

    def store_long_term(self, content: str, metadata: dict[str, Any]) -> str:
        self.calls.append(("store", content, metadata))
        return "m1"

    def replace_long_term(self, target: str, content: str, metadata: dict[str, Any]) -> bool:
        self.calls.append(("replace", target, content, metadata))
        return True

    def remove_long_term(self, target: str, metadata: dict[str, Any]) -> bool:
        self.calls.append(("remove", target, metadata))
        return True


async def test_a_provider_whose_methods_require_metadata_always_gets_it() -> None:
    provider = NeedsMetadata()
    agent = make_agent(provider)
    await agent.store_memory("Ann likes tea")
    await agent.store_memory("Ann likes coffee", action="replace", match="Ann likes tea")
    await agent.store_memory("Ann likes coffee", action="remove", metadata={"why": "asked"})
    assert provider.calls == [
        ("store", "Ann likes tea", {}),
        ("replace", "Ann likes tea", "Ann likes coffee", {}),
        ("remove", "Ann likes coffee", {}),
    ]


@pytest.mark.parametrize(
    ("source", "refused"),
    [
        ("def store_long_term(self, content): pass", False),
        ("def store_long_term(self, content, metadata=None): pass", False),
        ("def store_long_term(self, *args, **kwargs): pass", False),
        ("def store_long_term(self): pass", True),  # nowhere to put the content
        ("def store_long_term(self, metadata, content): pass", True),  # metadata first
        ("def store_long_term(self, content, source): pass", True),  # a second required one
        ("def store_long_term(self, content, *, tag): pass", True),  # a required keyword
        ("def remove_long_term(self, target, reason=''): pass", False),
        ("def remove_long_term(self): pass", True),
        ("def replace_long_term(self, target, content, metadata=None): pass", False),
        ("def replace_long_term(self, target, metadata, content): pass", True),
        ("def search_long_term(self, query, limit=5): pass", False),
        ("def search_long_term(self, limit=5): pass", True),
    ],
)
def test_every_provider_method_is_checked_for_what_it_is_passed(source: str, refused: bool) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # a method of a given shape, written out
    members = {k: v for k, v in namespace.items() if k != "__builtins__"}
    if "store_long_term" not in members:
        members["store_long_term"] = lambda self, content: None
    provider = type("Provider", (), members)()
    (name,) = namespace.keys() - {"__builtins__"}
    if refused:
        with pytest.raises(UsageError, match=f"method {name} must take"):
            ProviderMemoryStore(provider)
    else:
        ProviderMemoryStore(provider)


async def test_remove_passes_the_callers_metadata_to_on_memory_write(
    store: SQLiteMemoryStore,
) -> None:
    calls: list[tuple[Any, ...]] = []

    class Mirror:
        def on_memory_write(
            self, action: str, target: str, content: str, metadata: dict[str, Any] | None = None
        ) -> None:
            calls.append((action, target, content, metadata))

    for memory in (store, NotesProvider()):
        calls.clear()
        agent = make_agent(memory)
        agent.use(MemoryHooksPlugin(Mirror()))
        seen = writes(agent)
        await agent.store_memory("Ann likes tea", metadata={"src": "chat"})
        await agent.store_memory(
            "likes tea", action="remove", metadata={"reason": "user asked", "src": "gdpr"}
        )
        await agent.aclose()
        expected = {"src": "gdpr", "reason": "user asked"}  # the caller's keys win
        assert dict(seen[-1].metadata) == expected
        assert calls[-1] == ("remove", "long_term", seen[-1].content, expected)
