"""Context policies end to end through the agent: sliding window, compaction, repair."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AssistantMessage,
    ChatHistory,
    ContextOverflowError,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    tool,
)
from hookloop.context import (
    SUMMARY_HEADER,
    Compaction,
    ContextHooks,
    ContextOnErrorResult,
    SlidingWindow,
    count_request,
)
from hookloop.hooks import PreCompressContext
from hookloop.models import ProviderRequest
from hookloop.testing import FunctionModel, ScriptedModel, tool_call
from tests.context.test_strategies import last_user, valid_histories

WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit "


def text(tokens: int) -> str:
    """Roughly ``tokens`` tokens of prose for the estimate counter (about 4 chars each)."""
    return (WORDS * (tokens * 4 // len(WORDS) + 1))[: tokens * 4]


def problems(messages: Sequence[Message]) -> list[str]:
    """Pairing problems a provider would reject (quadratic and obvious on purpose)."""
    found = []
    for i, m in enumerate(messages):
        if isinstance(m, ToolMessage):
            owner = next(
                (
                    j
                    for j in range(i - 1, -1, -1)
                    if isinstance(messages[j], AssistantMessage) and messages[j].tool_calls
                ),
                None,
            )
            between = messages[owner + 1 : i] if owner is not None else ()
            calls = messages[owner].tool_calls if owner is not None else ()  # type: ignore[union-attr]
            if (
                owner is None
                or any(not isinstance(x, ToolMessage) for x in between)
                or all(c.id != m.tool_call_id for c in calls)
            ):
                found.append(f"orphan result {m.tool_call_id}")
        if isinstance(m, AssistantMessage):
            after = []
            for x in messages[i + 1 :]:
                if not isinstance(x, ToolMessage):
                    break
                after.append(x.tool_call_id)
            found += [f"unanswered {c.id}" for c in m.tool_calls if c.id not in after]
    return found


def size(request: ProviderRequest, agent: Agent) -> int:
    return count_request(request, counter=agent.history.token_counter)


# --- sliding window -------------------------------------------------------------------------


async def test_sliding_window_keeps_requests_inside_the_window_and_history_whole() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(6)], context_window=600)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    for i in range(6):
        await agent.chat(f"question {i}: {text(150)}")

    assert len(agent.messages) == 12  # nothing was lost from the history
    for request in model.requests:
        assert size(request, agent) <= 600 - 100
        assert problems(request.messages) == []
    last = model.requests[-1]
    assert last.messages[-1] == agent.messages[-2]  # the last user message is always sent
    assert len(last.messages) < len(agent.messages) - 1  # old turns were left out


async def test_sliding_window_never_separates_a_tool_call_from_its_result() -> None:
    @tool
    async def fetch(n: int) -> str:
        """Return a long page."""
        return text(120)

    script: list[object] = []
    for _ in range(4):
        script += [tool_call("fetch", {"n": 1}), tool_call("fetch", {"n": 2}), "read"]
    model = ScriptedModel(script, context_window=1_000)
    agent = Agent(model, tools=[fetch], retry=None, context=SlidingWindow(reserve=50))
    for i in range(4):
        await agent.chat(f"read two pages, round {i}")
    for request in model.requests:
        assert problems(request.messages) == []
        assert size(request, agent) <= 1_000 - 50
    assert len(model.requests[-1].messages) < len(agent.messages) - 1  # old turns were left out


# --- compaction: proactive ------------------------------------------------------------------


async def test_proactive_compaction_summarises_old_turns_and_keeps_the_hook_text() -> None:
    summarizer = ScriptedModel(["The user asked about apples and pears."], name="summarizer")
    model = ScriptedModel([f"reply {i}" for i in range(5)], context_window=1_000)
    compaction = Compaction(compact_threshold=0.6, keep_recent=0.3, summarizer=summarizer)
    agent = Agent(model, retry=None, system_prompt="Be helpful.", context=compaction)
    seen: list[tuple[Message, ...]] = []

    def keep_fruit(ctx: PreCompressContext) -> str:
        seen.append(ctx.messages)
        return "Remember: order #4521 is pending."

    agent.add_hook("on_pre_compress", keep_fruit)
    for i in range(5):
        await agent.chat(f"fruit question {i}: {text(120)}")

    assert compaction.compactions >= 1
    summary = agent.messages[0]
    assert isinstance(summary, UserMessage)
    assert isinstance(summary.content, str)
    assert summary.content.startswith(SUMMARY_HEADER)
    assert "The user asked about apples and pears." in summary.content
    assert "Remember: order #4521 is pending." in summary.content
    discarded = seen[0]
    assert discarded
    assert all(m.id not in {x.id for x in agent.messages} for m in discarded)
    assert summarizer.requests[0].system is not None
    assert "fruit question 0" in str(summarizer.requests[0].messages[0].content)
    assert agent.messages[-1].content == "reply 4"
    assert agent.messages[-2].content.startswith("fruit question 4")  # type: ignore[union-attr]
    for request in model.requests:
        assert size(request, agent) < 1_000
        assert problems(request.messages) == []


async def test_compaction_keeps_the_task_in_a_long_single_turn() -> None:
    @tool
    async def step(n: int) -> str:
        """Do one step of a long task."""
        return f"step {n} output: {text(60)}"

    script = [tool_call("step", {"n": i}) for i in range(8)] + ["all steps done"]
    model = ScriptedModel(script, context_window=900)
    summarizer = ScriptedModel(["Steps 0 to 4 ran fine."] * 5, name="summarizer")
    compaction = Compaction(compact_threshold=0.5, summarizer=summarizer)
    agent = Agent(model, tools=[step], retry=None, context=compaction)

    assert (await agent.chat("run the eight steps of the migration")).text == "all steps done"
    assert compaction.compactions >= 1
    task = [m for m in agent.messages if isinstance(m, UserMessage)]
    assert task[0].content.startswith(SUMMARY_HEADER)  # type: ignore[union-attr]
    assert task[-1].content == "run the eight steps of the migration"
    assert problems(agent.messages) == []
    for request in model.requests:
        assert problems(request.messages) == []


# --- compaction: reactive ------------------------------------------------------------------


async def test_overflow_first_truncates_old_tool_results_and_retries() -> None:
    @tool
    async def dump() -> str:
        """Return a huge log."""
        return text(2_000)

    overflow = ContextOverflowError("prompt is too long: 9000 tokens > 8000 maximum", status=400)
    script = [tool_call("dump", {}), tool_call("dump", {}), overflow, "summarised the logs"]
    model = ScriptedModel(script)
    agent = Agent(model, tools=[dump], retry=None, context=Compaction(tool_result_chars=100))
    assert (await agent.chat("look at the logs")).text == "summarised the logs"

    failed, retried = model.requests[2], model.requests[3]
    assert size(retried, agent) < size(failed, agent)
    old_result = retried.messages[2]
    assert isinstance(old_result, ToolMessage)
    assert len(old_result.content) < 200
    assert "truncated" in old_result.content
    newest = retried.messages[4]
    assert isinstance(newest, ToolMessage)
    assert newest.content == failed.messages[4].content  # the newest result stays whole
    assert agent.messages[2].content == text(2_000)  # the history is untouched
    assert problems(retried.messages) == []


async def test_overflow_then_drops_old_turns_when_there_is_nothing_to_truncate() -> None:
    overflow = ContextOverflowError("This model's maximum context length is 500 tokens.")
    model = ScriptedModel(["a", "b", "c", overflow, "fits now"])
    agent = Agent(model, retry=None, context=Compaction())
    for i in range(3):
        await agent.chat(f"turn {i}: {text(100)}")
    assert (await agent.chat("the last question")).text == "fits now"
    failed, retried = model.requests[3], model.requests[4]
    assert size(retried, agent) < size(failed, agent)
    assert retried.messages[-1] == failed.messages[-1]
    assert len(retried.messages) < len(failed.messages)
    assert problems(retried.messages) == []


async def test_overflow_that_nothing_can_shrink_is_a_typed_error_with_numbers() -> None:
    overflow = ContextOverflowError("prompt is too long", status=400)
    model = ScriptedModel([overflow, overflow, overflow, overflow], context_window=100)
    agent = Agent(model, retry=None, context=Compaction())
    with pytest.raises(ContextOverflowError) as caught:
        await agent.chat("just one short question")
    error = caught.value
    assert error is not overflow
    assert error.__cause__ is overflow
    assert error.limit_tokens == 100
    assert error.request_tokens == size(model.requests[0], agent)
    assert "nothing in it can be made smaller" in str(error)
    assert len(model.requests) == 1


async def test_each_reactive_step_strictly_shrinks_the_request() -> None:
    @tool
    async def page() -> str:
        """A long page."""
        return text(400)

    overflow = ContextOverflowError("prompt is too long", status=400)
    summarizer = ScriptedModel(["short summary"], name="summarizer")
    script = [
        "first answer",
        tool_call("page", {}),
        tool_call("page", {}),
        overflow,
        overflow,
        overflow,
        "finally",
    ]
    model = ScriptedModel(script)
    agent = Agent(model, tools=[page], retry=None, context=Compaction(summarizer=summarizer))
    await agent.chat(f"intro: {text(300)}")
    assert (await agent.chat("read two pages")).text == "finally"
    sizes = [size(r, agent) for r in model.requests[3:]]
    assert sizes == sorted(sizes, reverse=True)
    assert len(set(sizes)) == len(sizes)  # strictly smaller every time


# Regression: reactive compaction rewrote the history even when it could not help.
async def test_reactive_compaction_leaves_the_history_alone_when_it_cannot_help() -> None:
    overflow = ContextOverflowError("prompt is too long")
    summarizer = FunctionModel(lambda request: "S" * 40_000, name="verbose")
    model = FunctionModel(lambda request: "never")
    agent = Agent(model, retry=None, plugins=[Compaction(summarizer=summarizer)])
    for i in range(6):
        agent.model = ScriptedModel([f"answer {i}"])
        await agent.chat(f"question {i}")
    before = agent.messages

    def always_too_long(request: ProviderRequest) -> str:
        raise overflow

    agent.model = FunctionModel(always_too_long)
    with pytest.raises(ContextOverflowError):
        await agent.chat("one more")
    assert agent.messages[: len(before)] == before


# --- repair before every request -----------------------------------------------------------


async def test_a_history_broken_by_hand_is_repaired_in_the_request_only() -> None:
    history = ChatHistory(max_context_tokens=10_000)
    call = ToolCall(name="lookup", arguments="{}", id="c1")
    history.import_history(
        [
            UserMessage(content="first"),
            AssistantMessage(tool_calls=(call,)),
            ToolMessage(tool_call_id="c1", tool_name="lookup", content="42"),
            AssistantMessage(content="It is 42."),
        ]
    )
    result_id = history.messages[2].id
    history.delete_message_range(result_id, result_id)  # the call loses its result
    history.add_message(ToolMessage(tool_call_id="gone", tool_name="x", content="orphan"))

    model = ScriptedModel(["repaired"])
    agent = Agent(model, history=history, retry=None)
    await agent.chat("next")

    sent = model.requests[0].messages
    assert problems(sent) == []
    assert [m.role for m in sent] == ["user", "assistant", "tool", "assistant", "user"]
    assert problems(agent.messages[:-1]) != []  # the stored history is as the user left it


async def test_a_hook_that_breaks_pairing_is_repaired_before_the_model_sees_it() -> None:
    @tool
    async def noop() -> str:
        """Nothing."""
        return "ok"

    model = ScriptedModel([tool_call("noop", {}), "done"])
    agent = Agent(model, tools=[noop], retry=None)

    def drop_tool_results(ctx: object) -> ProviderRequest:
        request = ctx.request  # type: ignore[attr-defined]
        kept = tuple(m for m in request.messages if not isinstance(m, ToolMessage))
        return ProviderRequest(
            model=request.model, system=request.system, messages=kept, tools=request.tools
        )

    agent.add_hook("pre_request", drop_tool_results)
    await agent.chat("go")
    assert problems(model.requests[1].messages) == []
    assert problems(agent.messages) == []


async def test_a_well_formed_history_is_sent_as_it_is() -> None:
    model = ScriptedModel(["one", "two"])
    agent = Agent(model, retry=None)
    await agent.chat("a")
    await agent.chat("b")
    assert model.requests[1].messages == agent.messages[:3]
    assert all(x is y for x, y in zip(model.requests[1].messages, agent.messages, strict=False))


# Regression: requests set in after_model_call were not repaired.
async def test_a_request_rewritten_in_after_model_call_is_repaired() -> None:
    @tool
    async def f() -> str:
        """Nothing."""
        return "ok"

    overflow = ContextOverflowError("prompt is too long")
    model = ScriptedModel([tool_call("f", {}, id="c1"), overflow, "ok"])

    def drop_two(**kwargs: object) -> ContextOnErrorResult:
        messages = kwargs["messages"]
        assert isinstance(messages, list)
        return ContextOnErrorResult(retry=True, messages=messages[2:])  # leaves tool(c1) alone

    agent = Agent(
        model, tools=[f], retry=None, plugins=[ContextHooks(on_error=drop_two, max_retries=1)]
    )
    await agent.chat("go")
    sent = model.requests[-1].messages
    assert not any(isinstance(m, ToolMessage) for m in sent)


# --- properties of compaction ----------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    messages=valid_histories(system=False),
    window=st.integers(min_value=200, max_value=4_000),
    keep=st.floats(min_value=0.05, max_value=0.9),
)
async def test_compaction_properties(messages: list[Message], window: int, keep: float) -> None:
    """After any compaction: the last user message is kept, the kept messages keep their
    order, nothing is orphaned in either direction, and the summary comes first."""
    history = ChatHistory(max_context_tokens=window)
    history.import_history(messages)
    summarizer = ScriptedModel(["a summary"], name="summarizer")
    compaction = Compaction(summarizer=summarizer, max_tokens=window, keep_recent=keep)
    agent = Agent(ScriptedModel([]), history=history, retry=None, context=compaction)
    request = ProviderRequest(model="m", system=None, messages=history.messages)
    before = history.messages

    summarised = await compaction._summarise(request, int(window * keep))
    if summarised is not None:  # what the loop commits (ChatRun._replace_history)
        change = summarised[1]
        history.replace_committed((change.summary, *change.kept))
    smaller = summarised[0] if summarised is not None else None

    after = history.messages
    user = last_user(before)
    event("nothing old enough to summarise" if smaller is None else "summarised")
    if smaller is None:
        assert after == before  # nothing to summarise: nothing changed
        return
    assert isinstance(after[0], UserMessage)
    assert str(after[0].content).startswith(SUMMARY_HEADER)
    assert after[0] not in before
    kept = after[1:]
    positions = [before.index(m) for m in kept]
    assert positions == sorted(positions)  # order preserved
    if user is not None:
        assert user in kept  # the task in hand is never summarised away
    assert not problems(after)
    assert smaller.messages == after
    assert agent.messages == after
