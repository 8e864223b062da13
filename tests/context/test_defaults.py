"""The safe context default, a turn too large for its budget, and on_pre_compress before drops.

- A default ``Agent`` keeps every request inside the model's window minus room for the answer,
  honours the budget of the ``ChatHistory`` it is given, recovers from a provider's overflow,
  and ``context=None`` opts out.
- A budget too small for the turn in progress is a typed error before anything is sent.
- ``on_pre_compress`` fires before any policy leaves messages out, with those messages.
- Compaction works over a history holding an empty model answer.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AssistantMessage,
    ChatErrorContext,
    ChatHistory,
    ContextOverflowError,
    Message,
    ModelSettings,
    ServerError,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.context import (
    Compaction,
    ContextBeforeRequestResult,
    ContextHooks,
    SlidingWindow,
    count_overhead,
    count_request,
)
from hookloop.hooks import PreCompressContext
from hookloop.models import ProviderRequest
from hookloop.retry import FallbackStrategy
from hookloop.testing import FunctionModel, ScriptedModel, tool_call
from tests.context.test_policies import problems, text
from tests.context.test_strategies import valid_histories


def size(request: ProviderRequest, agent: Agent) -> int:
    return count_request(request, counter=agent.history.token_counter)


def pre_compress_log(agent: Agent) -> list[tuple[Message, ...]]:
    seen: list[tuple[Message, ...]] = []

    def record(ctx: PreCompressContext) -> None:
        seen.append(ctx.messages)

    agent.add_hook("on_pre_compress", record)
    return seen


# --- the default (item 17) ------------------------------------------------------------------


async def test_a_default_agent_keeps_every_request_inside_the_window_minus_the_answer() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(8)], context_window=2_000)
    agent = Agent(model, retry=None)
    for i in range(8):
        await agent.chat(f"question {i}: {text(300)}")

    assert len(agent.messages) == 16  # the history keeps everything
    for request in model.requests:
        assert size(request, agent) <= 2_000 - 500  # a quarter of a small window is kept free
        assert problems(request.messages) == []
        assert request.messages[-1].content.startswith("question")  # type: ignore[union-attr]
    assert len(model.requests[-1].messages) < 15


async def test_the_answers_max_tokens_is_the_room_kept_free() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(6)], context_window=2_000)
    agent = Agent(model, retry=None, settings=ModelSettings(max_tokens=1_200))
    for i in range(6):
        await agent.chat(f"question {i}: {text(150)}")

    for request in model.requests:
        assert size(request, agent) <= 2_000 - 1_200
    assert len(model.requests[-1].messages) < 11


async def test_the_budget_of_a_given_history_is_honoured() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(6)])  # no declared window
    agent = Agent(model, retry=None, history=ChatHistory(max_context_tokens=60))
    for i in range(6):
        await agent.chat(f"question number {i}")

    for request in model.requests:
        assert size(request, agent) <= 60
    assert len(model.requests[-1].messages) < 11
    assert model.requests[-1].messages[-1] == agent.messages[-2]
    assert len(agent.messages) == 12


async def test_context_none_opts_out_and_sends_everything() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(6)], context_window=100)
    agent = Agent(model, retry=None, context=None, history=ChatHistory(max_context_tokens=60))
    for i in range(6):
        await agent.chat(f"question number {i}")

    assert agent.context_policy is None
    assert model.requests[-1].messages == agent.messages[:-1]


def test_the_default_policy_is_a_sliding_window_and_a_wrong_value_is_a_usage_error() -> None:
    agent = Agent(ScriptedModel([]))
    assert isinstance(agent.context_policy, SlidingWindow)
    assert agent.context_policy in agent.plugins
    compaction = Compaction()
    assert Agent(ScriptedModel([]), context=compaction).context_policy is compaction
    with pytest.raises(UsageError, match="context must be a context policy plugin or None"):
        Agent(ScriptedModel([]), context="sliding")  # type: ignore[arg-type]


async def test_a_default_agent_recovers_from_a_providers_overflow() -> None:
    overflow = ContextOverflowError("prompt is too long: 9000 tokens > 8000 maximum", status=400)
    model = ScriptedModel(["a", "b", "c", overflow, "fits now", "still fits"])
    agent = Agent(model, retry=None)
    seen = pre_compress_log(agent)
    for i in range(3):
        await agent.chat(f"turn {i}: {text(100)}")

    assert (await agent.chat("the fourth question")).text == "fits now"
    failed, retried = model.requests[3], model.requests[4]
    assert retried.messages[-1] == failed.messages[-1]
    assert len(retried.messages) < len(failed.messages)
    assert size(retried, agent) <= 0.7 * size(failed, agent)
    assert problems(retried.messages) == []
    kept = {m.id for m in retried.messages}
    assert seen == [tuple(m for m in failed.messages if m.id not in kept)]
    assert len(agent.messages) == 8  # the history keeps everything

    # Later requests keep to the size the provider accepted: no second overflow.
    assert (await agent.chat("the fifth question")).text == "still fits"
    assert size(model.requests[5], agent) <= 0.7 * size(failed, agent)


async def test_an_overflow_nothing_can_shrink_ends_the_chat_with_the_providers_error() -> None:
    overflow = ContextOverflowError("prompt is too long", status=400)
    model = ScriptedModel([overflow, "never sent"])
    agent = Agent(model, retry=None)

    with pytest.raises(ContextOverflowError) as caught:
        await agent.chat("one short question")

    assert caught.value is overflow
    assert len(model.requests) == 1


async def test_a_fallback_model_gets_requests_that_fit_its_own_window() -> None:
    primary = ScriptedModel(
        ["a1", "a2", "a3", ServerError("down")], name="big", context_window=100_000
    )
    small = ScriptedModel(["f1"], name="small", context_window=400)
    agent = Agent(primary, retry=FallbackStrategy([small]))
    for i in range(3):
        await agent.chat(f"question {i}: {text(150)}")

    assert (await agent.chat("question 4")).text == "f1"
    assert size(small.requests[-1], agent) <= 400 - 100  # its window minus a quarter for the answer


async def test_overflow_recovery_applies_the_request_rewrites_once() -> None:
    docs = UserMessage(content="[retrieved] refunds: 30 days", id="docs")

    def add_docs(*, messages: Any, **_: Any) -> ContextBeforeRequestResult:
        return ContextBeforeRequestResult(messages=[*messages, docs])

    overflow = ContextOverflowError("prompt is too long", status=400)
    model = ScriptedModel(["a1", "a2", "a3", overflow, "a4"])
    agent = Agent(model, plugins=[ContextHooks(before_request=add_docs)])
    for i in range(4):
        await agent.chat(f"question {i}: {text(50)}")

    failed, retried = model.requests[-2], model.requests[-1]
    assert [m.id for m in retried.messages].count("docs") == 1
    assert size(retried, agent) < size(failed, agent)


async def test_a_budget_is_learned_only_from_an_overflow_the_smaller_request_cured() -> None:
    # An overflow that trimming cannot cure (the answer's room is what is too large) must not
    # leave the agent sending a sliver of its history for good.
    def answer(request: ProviderRequest) -> str:
        if request.settings.max_tokens == 500:
            raise ContextOverflowError("'max_tokens' is too large: 5000", status=400)
        return "fine"

    model = FunctionModel(answer)
    agent = Agent(model, retry=None)
    for i in range(6):
        await agent.chat(f"question {i}: {text(20)}")
    agent.settings = ModelSettings(max_tokens=500)
    with pytest.raises(ContextOverflowError):
        await agent.chat("question 7")
    assert len(model.requests[-1].messages) < len(agent.messages) - 1  # trimmed, in vain

    agent.settings = ModelSettings()
    assert (await agent.chat("question 8")).text == "fine"
    assert len(model.requests[-1].messages) == len(agent.messages) - 1  # everything went


async def test_a_learned_budget_belongs_to_the_model_that_taught_it() -> None:
    overflow = ContextOverflowError("prompt is too long: 9000 tokens > 8000 maximum", status=400)
    small = ScriptedModel([overflow, "small fits"], name="small")
    big = ScriptedModel(["b1", "b2", "b3", "big again"], name="big")
    agent = Agent(big, retry=None)
    for i in range(3):
        await agent.chat(f"turn {i}: {text(100)}")
    agent.model = small
    assert (await agent.chat("to the small one")).text == "small fits"
    assert len(small.requests[1].messages) < len(small.requests[0].messages)

    agent.model = big
    assert (await agent.chat("back to the big one")).text == "big again"
    assert len(big.requests[-1].messages) == len(agent.messages) - 1


# --- a budget too small for the turn in progress (item 18) ---------------------------------


@tool
async def fetch(n: int) -> str:
    """Return a long page."""
    return text(120)


async def test_a_turn_that_outgrows_the_budget_is_cut_then_an_error_never_left_out() -> None:
    script = [tool_call("fetch", {"n": i}) for i in range(40)] + ["done"]
    model = ScriptedModel(script, context_window=700)
    agent = Agent(
        model, tools=[fetch], retry=None, context=SlidingWindow(reserve=50), max_iterations=60
    )
    errors: list[BaseException] = []

    def on_error(ctx: ChatErrorContext) -> None:
        errors.append(ctx.error)

    agent.add_hook("on_chat_error", on_error)

    with pytest.raises(ContextOverflowError) as caught:
        await agent.chat("read forty pages")

    cut = 0
    for request in model.requests:  # every request carried the whole turn, results cut
        assert [m.id for m in request.messages] == [
            m.id for m in agent.messages[: len(request.messages)]
        ]
        assert problems(request.messages) == []
        assert size(request, agent) <= 650
        cut += any("[truncated:" in str(m.content) for m in request.messages)
    assert cut > 0
    assert 5 < len(model.requests) < 41
    assert errors == [caught.value]
    error = caught.value
    assert error.limit_tokens == 650
    assert error.request_tokens is not None
    assert error.request_tokens > 650
    assert error.message.startswith(
        "the turn in progress does not fit the context budget, so nothing was sent: tool "
        "schemas take "
    )
    assert "(the window of 700 minus 50 kept for the answer)" in error.message
    assert f"and its {len(model.requests)} tool calls with their results" in error.message
    assert problems(agent.messages) == []  # the history stays valid for the next chat


async def test_the_error_says_the_tool_schemas_took_the_budget() -> None:
    @tool
    async def lookup(key: str) -> str:
        """Look a key up in the very large company directory. """ + text(40)
        return key

    model = ScriptedModel(["never sent"])
    agent = Agent(model, tools=[lookup], retry=None, context=None)
    counter = agent.history.token_counter
    tools = counter.count_tools([lookup.definition])
    agent.use(SlidingWindow(max_tokens=tools + 1, reserve=0))

    with pytest.raises(ContextOverflowError) as caught:
        await agent.chat("find alice")

    assert model.requests == []
    turn = counter.count_message(agent.messages[0])
    assert caught.value.message == (
        "the turn in progress does not fit the context budget, so nothing was sent: tool "
        f"schemas take {tools} of the {tools + 1} tokens (the window of {tools + 1} minus 0 "
        f"kept for the answer), the system prompt 0, the turn in progress {turn} (the last "
        "user message). Raise the budget, send fewer or smaller tools, or shorten the input."
    )
    assert caught.value.limit_tokens == tools + 1


# --- on_pre_compress before any discard (item 3) --------------------------------------------


async def test_on_pre_compress_fires_before_the_reactive_drop_tier_with_the_dropped() -> None:
    overflow = ContextOverflowError("This model's maximum context length is 500 tokens.")
    model = ScriptedModel(["a", "b", "c", overflow, "fits now"])
    agent = Agent(model, retry=None, context=Compaction())
    seen = pre_compress_log(agent)
    for i in range(3):
        await agent.chat(f"turn {i}: {text(100)}")

    assert (await agent.chat("the last question")).text == "fits now"
    failed, retried = model.requests[3], model.requests[4]
    kept = {m.id for m in retried.messages}
    assert seen == [tuple(m for m in failed.messages if m.id not in kept)]
    assert seen[0]


async def test_on_pre_compress_fires_once_for_each_message_a_window_leaves_out() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(6)], context_window=600)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    seen = pre_compress_log(agent)
    for i in range(6):
        await agent.chat(f"question {i}: {text(150)}")

    reported = [m for batch in seen for m in batch]
    assert len(reported) == len({m.id for m in reported})  # never twice
    sent = {m.id for m in model.requests[-1].messages}
    assert {m.id for m in reported} == {m.id for m in agent.messages[:-1] if m.id not in sent}
    for index, request in enumerate(model.requests[1:], start=1):
        before = {m.id for m in model.requests[index - 1].messages}
        left_out = [m for m in agent.messages if m.id in before and m not in request.messages]
        assert all(any(m is r for r in reported) for m in left_out)


# --- compaction over an empty model answer (item 13) ----------------------------------------


async def test_compaction_keeps_an_empty_model_answer_it_did_not_summarise() -> None:
    summarizer = ScriptedModel(["Earlier: three questions."] * 3, name="summarizer")
    model = ScriptedModel(["", "second", "", "fourth", "fifth"], context_window=1_000)
    compaction = Compaction(compact_threshold=0.5, keep_recent=0.3, summarizer=summarizer)
    agent = Agent(model, retry=None, context=compaction)
    answers: list[Any] = []
    for i in range(5):
        answers.append((await agent.chat(f"question {i}: {text(100)}")).text)

    assert answers == ["", "second", "", "fourth", "fifth"]
    assert compaction.compactions >= 1
    assert agent.messages[0].content.startswith("[Summary")  # type: ignore[union-attr]
    assert agent.messages[-1] == AssistantMessage(content="fifth", id=agent.messages[-1].id)


# --- properties of the window ---------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(
    messages=valid_histories(system=False),
    window=st.integers(min_value=1, max_value=4_000),
    reserve=st.integers(min_value=0, max_value=500),
)
def test_sliding_window_properties(messages: list[Message], window: int, reserve: int) -> None:
    """A trimmed request fits, keeps the turn in progress whole and its pairing intact, and is
    the history's messages in order; or the turn cannot fit, and the error says so."""
    window_policy = SlidingWindow(max_tokens=window, reserve=reserve)
    agent = Agent(ScriptedModel([]), retry=None, context=window_policy)
    agent.history.import_history(messages)
    request = ProviderRequest(model="m", system="Be brief.", messages=agent.history.messages)
    counter = agent.history.token_counter
    budget = window_policy._budget(request, agent.model)

    overhead = count_overhead(request, counter=counter)
    error: ContextOverflowError | None = None
    try:
        kept = window_policy._fit(request, budget, overhead)
    except ContextOverflowError as raised:
        error = raised
    if error is not None:
        event("the turn in progress does not fit")
        assert error.limit_tokens == budget.total == window - reserve
        assert error.request_tokens is not None
        assert error.request_tokens > error.limit_tokens
        return
    event("fits")
    trimmed = ProviderRequest(model="m", system="Be brief.", messages=kept)
    assert count_request(trimmed, counter=counter) <= budget.total
    assert problems(kept) == []
    turn = messages[
        max((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), default=0) :
    ]
    assert [m.id for m in kept[len(kept) - len(turn) :]] == [m.id for m in turn]
    positions = [next(i for i, m in enumerate(messages) if m.id == k.id) for k in kept]
    assert positions == sorted(positions)
