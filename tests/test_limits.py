"""Usage limits, costs and the repeat limit in the loop (issue 24 items 1, 2 and 4).

The scripted model counts the requests it received (``model.requests``), so "not sent" is
asserted as a count; every stop is checked to leave each tool call answered.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import genai_prices
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hookloop._limits as limits_module
from hookloop import (
    Agent,
    AssistantMessage,
    ChatErrorContext,
    ChatHistory,
    InvalidMessageError,
    Message,
    ToolCall,
    ToolMessage,
    Usage,
    UsageError,
    UsageLimitExceeded,
    UsageLimits,
    UserMessage,
    tool,
)
from hookloop._limits import Budget, Spend
from hookloop._pricing import Pricing
from hookloop.limits import ModelPrice, RepeatLimit, price_for
from hookloop.models import LocalModel, ProviderRequest, ProviderResponse
from hookloop.testing import ScriptedModel, text_response, tool_call, tool_calls
from tests.models._provider_server import ProviderServer, Reply, adapter, whole_answer

PRICE = ModelPrice(input_per_mtok=1_000_000, output_per_mtok=2_000_000)  # $1 an input token
PRICES = {"scripted": PRICE}


def every_call_answered(messages: Sequence[Message]) -> bool:
    calls = [c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answers = [m.tool_call_id for m in messages if isinstance(m, ToolMessage)]
    return sorted(calls) == sorted(answers)


def lookup_script(n: int, *, usage: Usage | None = None) -> list[ProviderResponse]:
    """``n`` turns that each call lookup once, then an answer."""
    turns = [tool_call("lookup", {"key": i}, id=f"c{i}") for i in range(n)]
    if usage is not None:
        turns = [ProviderResponse(**{**vars_of(t), "usage": usage}) for t in turns]
    return [*turns, text_response("done", usage=usage)]


def vars_of(response: ProviderResponse) -> dict[str, Any]:
    return {
        "content": response.content,
        "tool_calls": response.tool_calls,
        "finish_reason": response.finish_reason,
    }


ran: list[int] = []


@tool
def lookup(key: int) -> int:
    """Look a key up."""
    ran.append(key)
    return key * 2


@pytest.fixture(autouse=True)
def _fresh() -> None:
    ran.clear()


def errors_seen(agent: Agent) -> list[BaseException]:
    seen: list[BaseException] = []

    def on_error(ctx: ChatErrorContext) -> None:
        seen.append(ctx.error)

    agent.add_hook("on_chat_error", on_error)
    return seen


# -- UsageLimits -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "match"),
    [
        ({"requests": -1}, "requests must be an int of 0 or more"),
        ({"tool_calls": True}, "tool_calls must be an int"),
        ({"input_tokens": 1.5}, "input_tokens must be an int"),
        ({"cost": -0.01}, "cost must be a finite amount of 0 or more"),
        ({"cost": "1"}, "cost must be a Decimal, an int or a float"),
        ({"cost": Decimal("NaN")}, "cost must be a finite amount"),
        ({"cost": False}, "cost must be a Decimal"),
        ({"seconds": float("inf")}, "seconds must be a finite number of 0 or more"),
        ({"seconds": -1}, "seconds must be a finite number of 0 or more"),
    ],
)
def test_bad_limits_are_refused_when_made(given: dict[str, Any], match: str) -> None:
    with pytest.raises(UsageError, match=match):
        UsageLimits(**given)


def test_a_cost_limit_is_kept_as_a_decimal_of_the_number_given() -> None:
    assert UsageLimits(cost=0.1).cost == Decimal("0.1")
    assert UsageLimits(cost=2).cost == Decimal(2)
    assert UsageLimits(seconds=3).seconds == 3.0


def test_limits_and_repeat_limit_of_the_wrong_type_are_refused() -> None:
    model = ScriptedModel(["x"])
    with pytest.raises(UsageError, match="limits must be a UsageLimits"):
        Agent(model, limits={"requests": 1})  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="repeat_limit must be an int, a RepeatLimit"):
        Agent(model, repeat_limit="3")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match=r"RepeatLimit\.times must be an int of 1 or more"):
        RepeatLimit(times=0)
    with pytest.raises(UsageError, match=r"RepeatLimit\.then must be 'tell' or 'stop'"):
        RepeatLimit(times=2, then="warn")  # type: ignore[arg-type]


# -- before a model call: not sent ---------------------------------------------------------


def test_a_request_limit_stops_the_chat_before_the_call_that_would_cross_it() -> None:
    model = ScriptedModel(lookup_script(5))
    agent = Agent(model, tools=[lookup], limits=UsageLimits(requests=2))
    seen = errors_seen(agent)
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("look up five keys")
    error = info.value
    assert (error.limit, error.maximum, error.used, error.when) == (
        "requests",
        2,
        3,
        "before the call",
    )
    assert len(model.requests) == 2  # the third was never sent
    assert ran == [0, 1]
    assert seen == [error]
    assert every_call_answered(agent.messages)
    assert "requests=2 would be crossed by the next model call, not sent: 3" in str(error)


def test_a_request_too_large_for_tokens_per_request_is_not_sent() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model, limits=UsageLimits(tokens_per_request=20))
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("a long question " * 50)
    assert (info.value.limit, info.value.when) == ("tokens_per_request", "before the call")
    assert isinstance(info.value.used, int)
    assert info.value.used > 20
    assert model.requests == []


def test_an_input_token_limit_counts_the_next_request_before_it_is_sent() -> None:
    usage = Usage(input_tokens=100, output_tokens=5)
    model = ScriptedModel(lookup_script(3, usage=usage))
    agent = Agent(model, tools=[lookup], limits=UsageLimits(input_tokens=150))
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("look up")
    error = info.value
    # 100 reported by the first call, and the second request's estimate on top
    assert (error.limit, error.when) == ("input_tokens", "before the call")
    assert isinstance(error.used, int)
    assert error.used > 150
    assert len(model.requests) == 1
    assert error.usage == Usage(input_tokens=100, output_tokens=5)
    assert every_call_answered(agent.messages)


def test_a_call_whose_estimated_input_cost_crosses_the_cost_limit_is_not_sent() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model, limits=UsageLimits(cost=5), prices=PRICES)  # $1 an input token
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("more than five tokens for sure, many more")
    assert (info.value.limit, info.value.when) == ("cost", "before the call")
    assert isinstance(info.value.used, Decimal)
    assert info.value.used > 5
    assert info.value.usage.cost == 0
    assert model.requests == []


def test_a_time_limit_is_checked_before_each_call_and_between_tool_batches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(limits_module, "monotonic", lambda: now[0])

    @tool
    def slow(key: int) -> int:
        """Take ten seconds (of the test's clock)."""
        now[0] += 10
        return key

    script: list[str | ProviderResponse] = [
        tool_call("slow", {"key": 1}, id="a"),
        tool_call("slow", {"key": 2}, id="b"),
        "x",
    ]
    model = ScriptedModel(script)
    agent = Agent(model, tools=[slow], limits=UsageLimits(seconds=15))
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("go")
    assert (info.value.limit, info.value.when, info.value.used) == (
        "seconds",
        "before the call",
        20.0,
    )
    assert len(model.requests) == 2

    model = ScriptedModel(["never"])
    with pytest.raises(UsageLimitExceeded, match=r"seconds=0\.0"):
        Agent(model, limits=UsageLimits(seconds=0)).chat_sync("go")
    assert model.requests == []


# -- after a model call ----------------------------------------------------------------------


def test_an_output_token_limit_crossed_by_an_answer_ends_the_chat_after_it() -> None:
    big = Usage(input_tokens=10, output_tokens=500)
    model = ScriptedModel(
        [ProviderResponse(**{**vars_of(tool_call("lookup", {"key": 1}, id="c1")), "usage": big})]
    )
    agent = Agent(model, tools=[lookup], limits=UsageLimits(output_tokens=100))
    seen = errors_seen(agent)
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("go")
    error = info.value
    assert (error.limit, error.maximum, error.used, error.when) == (
        "output_tokens",
        100,
        500,
        "after the call",
    )
    assert error.usage == big
    assert seen == [error]
    assert ran == []  # the answer is kept, its call not run
    last = agent.messages[-1]
    assert isinstance(last, ToolMessage)
    assert last.is_error
    assert last.content == "not run: the chat ended with an error"
    assert every_call_answered(agent.messages)


def test_a_cost_limit_crossed_by_the_real_usage_ends_the_chat_after_the_call() -> None:
    price = ModelPrice(input_per_mtok=0, output_per_mtok=1_000_000)  # $1 an output token
    model = ScriptedModel([text_response("hi", usage=Usage(input_tokens=3, output_tokens=7))])
    agent = Agent(model, limits=UsageLimits(cost=5), prices={"scripted": price})
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("hello")
    assert (info.value.limit, info.value.used, info.value.when) == (
        "cost",
        Decimal(7),
        "after the call",
    )
    assert info.value.usage.cost == Decimal(7)


# -- tool batches --------------------------------------------------------------------------


def test_a_batch_that_would_cross_the_tool_call_limit_runs_none_of_its_calls() -> None:
    batch = [ToolCall(name="lookup", arguments=f'{{"key": {i}}}', id=f"b{i}") for i in range(3)]
    model = ScriptedModel(
        [tool_calls(ToolCall(name="lookup", arguments='{"key": 9}', id="a")), tool_calls(*batch)]
    )
    agent = Agent(model, tools=[lookup], limits=UsageLimits(tool_calls=3))
    seen = errors_seen(agent)
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("go")
    error = info.value
    assert (error.limit, error.maximum, error.used, error.when) == (
        "tool_calls",
        3,
        4,
        "tool batch",
    )
    assert ran == [9]  # the first batch (one call) ran; none of the second
    answers = [m for m in agent.messages if isinstance(m, ToolMessage)][1:]
    assert [(m.tool_call_id, m.content, m.is_error) for m in answers] == [
        (f"b{i}", "not run: the chat reached its tool_calls limit", True) for i in range(3)
    ]
    assert seen == [error]
    assert every_call_answered(agent.messages)


# -- per chat, streams -----------------------------------------------------------------------


def test_a_chats_limits_replace_the_agents_for_that_chat() -> None:
    model = ScriptedModel([*lookup_script(2), *lookup_script(2), *lookup_script(2)])
    agent = Agent(model, tools=[lookup], limits=UsageLimits(requests=1))
    assert agent.chat_sync("a", limits=UsageLimits(requests=3)).output == "done"
    assert agent.chat_sync("b", limits=None).output == "done"  # no limits at all
    with pytest.raises(UsageLimitExceeded, match="requests=1"):
        agent.chat_sync("c")  # the agent's again
    assert every_call_answered(agent.messages)


async def test_a_streamed_chat_stops_at_a_limit_like_a_plain_one() -> None:
    model = ScriptedModel(lookup_script(3))
    agent = Agent(model, tools=[lookup])
    seen = errors_seen(agent)
    events = []
    with pytest.raises(UsageLimitExceeded) as info:
        async with agent.chat_stream("go", limits=UsageLimits(tool_calls=1)) as stream:
            async for event in stream:
                events.append(type(event).__name__)
    assert (info.value.limit, info.value.when) == ("tool_calls", "tool batch")
    assert ran == [0]
    assert len(model.requests) == 2
    assert seen == [info.value]
    assert "ChatDone" not in events
    assert every_call_answered(agent.messages)


# -- prices and costs ------------------------------------------------------------------------


def test_costs_are_on_every_usage_and_add_up_in_the_response() -> None:
    price = ModelPrice(input_per_mtok=2.5, output_per_mtok=10, cached_input_per_mtok=1.25)
    usage = Usage(input_tokens=1000, cached_input_tokens=200, output_tokens=100)
    model = ScriptedModel(lookup_script(1, usage=usage))
    agent = Agent(model, tools=[lookup], prices={"scripted": price})
    response = agent.chat_sync("go")
    # 800 * 2.5 + 200 * 1.25 + 100 * 10 = 3250 per million, twice
    assert response.usage.cost == Decimal("0.0065")
    assert response.usage == Usage(
        input_tokens=2000, cached_input_tokens=400, output_tokens=200, cost=Decimal("0.0065")
    )


def test_a_model_without_a_price_costs_none_and_a_chat_of_it_too() -> None:
    usage = Usage(input_tokens=10, output_tokens=1)
    response = Agent(ScriptedModel([text_response("x", usage=usage)])).chat_sync("go")
    assert response.usage == usage
    assert response.usage.cost is None


def test_a_price_of_your_own_kind_estimates_the_input_its_own_way() -> None:
    # A ModelPrice subclass may work out input_cost itself: the budget asks it, and does
    # not multiply by the flat rate it would keep for a ModelPrice.
    class FreeBelowAThousand(ModelPrice):
        def input_cost(self, tokens: int) -> Decimal:
            return Decimal(0) if tokens < 1000 else super().input_cost(tokens)

    price = FreeBelowAThousand(input_per_mtok=1_000_000, output_per_mtok=0)  # $1 a token
    model = ScriptedModel(lookup_script(2))
    agent = Agent(model, tools=[lookup], limits=UsageLimits(cost=5), prices={"scripted": price})
    assert agent.chat_sync("more than five tokens for sure, many more").text == "done"
    assert len(model.requests) == 3


def test_a_cost_limit_on_a_model_without_a_price_is_refused_when_the_chat_starts() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(model, limits=UsageLimits(cost=1))
    started: list[object] = []
    agent.add_hook("on_chat_start", started.append)
    with pytest.raises(UsageError, match="model 'scripted' has no price"):
        agent.chat_sync("go")
    assert (model.requests, started, agent.messages) == ([], [], ())


def test_a_model_without_a_price_chosen_mid_chat_is_refused_before_it_is_called() -> None:
    fallback = ScriptedModel(["never"], name="unpriced")
    model = ScriptedModel(lookup_script(1, usage=Usage(input_tokens=10, output_tokens=1)))
    agent = Agent(model, tools=[lookup], limits=UsageLimits(cost=100), prices=PRICES)

    def switch(ctx: Any) -> None:
        if ctx.iteration == 1:
            ctx.model = fallback  # as a fallback strategy's retry does

    agent.add_hook("pre_request", switch)
    with pytest.raises(UsageError, match="model 'unpriced' has no price"):
        agent.chat_sync("go")
    assert fallback.requests == []
    assert every_call_answered(agent.messages)


def test_each_request_s_cost_is_estimated_at_the_price_of_the_model_it_goes_to() -> None:
    # The budget keeps the last model's price per input token: a model chosen mid-chat is
    # estimated at its own price, not at the first model's.
    free = ScriptedModel(lookup_script(2, usage=Usage(input_tokens=10, output_tokens=1)))
    pricey = ScriptedModel(["never"], name="pricey")  # $1 an input token
    prices = {"scripted": ModelPrice(input_per_mtok=0, output_per_mtok=0), "pricey": PRICE}
    agent = Agent(free, tools=[lookup], limits=UsageLimits(cost=5), prices=prices)
    chosen: list[str] = []

    def switch(ctx: Any) -> None:
        if ctx.iteration == 1:
            ctx.model = pricey
        chosen.append(ctx.model.name)

    agent.add_hook("pre_request", switch)
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("go")
    assert (info.value.limit, info.value.when) == ("cost", "before the call")
    assert info.value.used > 5  # its request's input tokens at $1 each
    assert (chosen, len(free.requests), pricey.requests) == (["scripted", "pricey"], 1, [])
    assert every_call_answered(agent.messages)


def test_the_local_model_costs_nothing_and_the_test_doubles_have_no_price() -> None:
    assert price_for(LocalModel(context_window=2048)) == ModelPrice(
        input_per_mtok=0, output_per_mtok=0
    )
    assert price_for(ScriptedModel(["x"])) is None


async def test_a_hosted_model_is_priced_from_the_bundled_table(server: ProviderServer) -> None:
    body = whole_answer("chat.completions", "ok", usage=(1000, 100))
    body["usage"]["prompt_tokens_details"] = {"cached_tokens": 200}
    server.add(Reply.json(body))
    model = adapter("chat.completions", server)
    model.name = "gpt-4o"
    try:
        response = await Agent(model).chat("hi")
    finally:
        await model.aclose()
    # gpt-4o: $2.5 input, $1.25 cached input, $10 output per million tokens
    assert response.usage.cost == Decimal("0.00325")


async def test_a_price_with_tiers_is_worked_out_by_the_table(server: ProviderServer) -> None:
    body = whole_answer("messages", "ok", usage=(10, 100))
    body["usage"]["cache_read_input_tokens"] = 990
    server.add(Reply.json(body))
    model = adapter("messages", server)
    model.name = "claude-haiku-5-5"  # priced in tiers by request size
    try:
        response = await Agent(model).chat("hi")
    finally:
        await model.aclose()
    table = genai_prices.Usage(input_tokens=1000, output_tokens=100, cache_read_tokens=990)
    expected = genai_prices.calc_price(table, "claude-haiku-5-5", provider_id="anthropic")
    assert response.usage.cost == expected.total_price


def test_cache_writes_are_priced_at_their_own_rate() -> None:
    price = ModelPrice(
        input_per_mtok=3, output_per_mtok=15, cached_input_per_mtok=0.3, cache_write_per_mtok=3.75
    )
    usage = Usage(input_tokens=1000, cached_input_tokens=500, cache_write_tokens=200)
    # 300 plain * 3 + 500 read * 0.3 + 200 written * 3.75 = 1800 per million
    assert price.cost(usage) == Decimal("0.0018")
    plain = ModelPrice(input_per_mtok=3, output_per_mtok=15)  # no write rate: as input
    assert plain.cost(Usage(input_tokens=1000, cache_write_tokens=200)) == Decimal("0.003")


async def test_anthropic_cache_writes_are_priced_by_the_table(server: ProviderServer) -> None:
    body = whole_answer("messages", "ok", usage=(10, 100))
    body["usage"]["cache_read_input_tokens"] = 990
    body["usage"]["cache_creation_input_tokens"] = 500
    server.add(Reply.json(body))
    model = adapter("messages", server)
    model.name = "claude-haiku-5-5"
    try:
        response = await Agent(model).chat("hi")
    finally:
        await model.aclose()
    usage = response.usage
    assert (usage.cached_input_tokens, usage.cache_write_tokens) == (990, 500)
    table = genai_prices.Usage(
        input_tokens=usage.input_tokens,
        output_tokens=100,
        cache_read_tokens=990,
        cache_write_tokens=500,
    )
    expected = genai_prices.calc_price(table, "claude-haiku-5-5", provider_id="anthropic")
    assert usage.cost == expected.total_price
    without_writes = genai_prices.Usage(
        input_tokens=usage.input_tokens, output_tokens=100, cache_read_tokens=990
    )
    cheaper = genai_prices.calc_price(without_writes, "claude-haiku-5-5", provider_id="anthropic")
    assert usage.cost > cheaper.total_price  # a write costs more than plain input


async def test_a_hosted_model_the_table_does_not_know_is_logged_once(
    server: ProviderServer, caplog: pytest.LogCaptureFixture
) -> None:
    for _ in range(2):
        server.add(Reply.json(whole_answer("chat.completions", "ok", usage=(10, 1))))
    model = adapter("chat.completions", server)
    model.name = "no-such-model-anywhere-7"
    agent = Agent(model)
    try:
        with caplog.at_level(logging.WARNING, logger="hookloop._pricing"):
            first = await agent.chat("hi")
            await agent.chat("again")
    finally:
        await model.aclose()
    assert first.usage.cost is None
    warned = [r for r in caplog.records if "no-such-model-anywhere-7" in r.getMessage()]
    assert len(warned) == 1
    assert "has no price" in warned[0].getMessage()


def test_prices_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(UsageError, match="prices must map model names"):
        Agent(ScriptedModel(["x"]), prices={"scripted": 1.0})  # type: ignore[dict-item]
    with pytest.raises(UsageError, match=r"ModelPrice\.output_per_mtok must be a finite amount"):
        ModelPrice(input_per_mtok=1, output_per_mtok=-1)


# -- the repeat limit ------------------------------------------------------------------------


def test_a_call_repeated_past_the_limit_is_answered_with_a_message_and_the_chat_goes_on() -> None:
    same = ['{"key": 1, "x": 2}', '{"x":2,"key":1}', '{ "key": 1, "x": 2 }']

    @tool
    def find(key: int, x: int) -> int:
        """Find."""
        ran.append(key)
        return key

    script = [tool_call("find", args, id=f"r{i}") for i, args in enumerate(same)]
    model = ScriptedModel([*script, "gave up"])
    agent = Agent(model, tools=[find], repeat_limit=2)
    response = agent.chat_sync("go")
    assert response.output == "gave up"
    assert ran == [1, 1]
    told = agent.messages[-2]
    assert isinstance(told, ToolMessage)
    assert told.is_error
    assert told.content == (
        "not run: you called find with the same arguments 2 times already in this chat; use "
        "the results you have, or call it with other arguments"
    )


def test_a_repeat_limit_that_stops_ends_the_chat_with_a_typed_error() -> None:
    model = ScriptedModel([tool_call("lookup", {"key": 1}, id=f"r{i}") for i in range(3)])
    agent = Agent(model, tools=[lookup], repeat_limit=RepeatLimit(times=2, then="stop"))
    with pytest.raises(UsageLimitExceeded) as info:
        agent.chat_sync("go")
    error = info.value
    assert (error.limit, error.maximum, error.used, error.when) == (
        "repeat_limit",
        2,
        3,
        "tool batch",
    )
    assert error.tool_call is not None
    assert error.tool_call.id == "r2"
    assert ran == [1, 1]
    assert every_call_answered(agent.messages)


# -- the seam for spend before the chat (a session's, a parent's) ----------------------------


def test_session_limits_count_what_was_spent_before_the_chat() -> None:
    model = ScriptedModel(["x"])
    budget = Budget(
        UsageLimits(requests=10),
        UsageLimits(requests=3, cost=Decimal("0.5")),
        Spend(requests=2, usage=Usage(input_tokens=1, cost=Decimal("0.25"))),
        None,
        model,
        Pricing({"scripted": ModelPrice(input_per_mtok=1, output_per_mtok=1)}),
        ChatHistory(max_context_tokens=1000),
    )
    request = ProviderRequest(model="scripted", system=None, messages=())
    budget.before_call(request, model, Usage(cost=Decimal(0)))
    with pytest.raises(UsageLimitExceeded) as info:
        budget.before_call(request, model, Usage(cost=Decimal(0)))
    assert (info.value.limit, info.value.maximum, info.value.used) == ("requests", 3, 4)
    with pytest.raises(UsageLimitExceeded) as info:
        budget.after_call(Usage(output_tokens=1, cost=Decimal("0.3")), None)
    assert (info.value.limit, info.value.used) == ("cost", Decimal("0.55"))


def test_a_slice_is_what_is_left_of_the_limits() -> None:
    limits = UsageLimits(requests=5, tokens_per_request=100, cost=1, seconds=10)
    spent = Spend(requests=7, usage=Usage(input_tokens=3, cost=Decimal("0.25")), seconds=4)
    assert limits.remaining(spent) == UsageLimits(
        requests=0, tokens_per_request=100, cost=Decimal("0.75"), seconds=6.0
    )
    assert limits.tightest(UsageLimits(requests=2, input_tokens=9)) == UsageLimits(
        requests=2, input_tokens=9, tokens_per_request=100, cost=1, seconds=10
    )


def test_a_resumed_chat_takes_the_limits_given_to_resume() -> None:
    @tool(requires_approval=True)
    def delete(name: str) -> str:
        """Delete a file."""
        ran.append(len(name))
        return "deleted"

    model = ScriptedModel([tool_call("delete", {"name": "a.txt"}, id="d1"), "never sent"])
    agent = Agent(model, tools=[delete])
    paused = agent.chat_sync("clean up")
    (pending,) = paused.pending_approvals
    with pytest.raises(UsageLimitExceeded) as info:
        agent.resume_sync([pending.approve()], limits=UsageLimits(requests=0))
    assert (info.value.limit, info.value.when) == ("requests", "before the call")
    assert ran == [5]  # the approved call ran; the model call after it was not sent
    assert len(model.requests) == 1
    assert every_call_answered(agent.messages)


async def test_a_running_chat_says_what_it_spent() -> None:
    spends: list[Spend] = []
    usage = Usage(input_tokens=5, output_tokens=1)
    model = ScriptedModel(lookup_script(2, usage=usage))
    limits = UsageLimits(requests=10, tool_calls=10)
    agent = Agent(model, tools=[lookup], limits=limits, prices=PRICES)

    def on_done(ctx: Any) -> None:
        run = agent._slot.run
        assert run is not None
        spends.append(run.spend)

    agent.add_hook("on_chat_done", on_done)
    await agent.chat("go")
    (spend,) = spends
    assert (spend.requests, spend.tool_calls) == (3, 2)
    assert spend.usage == Usage(input_tokens=15, output_tokens=3, cost=Decimal(21))


@pytest.mark.parametrize("scope", ["chat", "session"])
def test_calls_that_waited_for_approval_are_counted_once(scope: str) -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def delete(name: str) -> str:
        """Delete a file."""
        ran.append(name)
        return "deleted"

    batch = tool_calls(
        *(ToolCall(name="delete", arguments=f'{{"name": "{n}"}}', id=n) for n in "abc")
    )
    limits = UsageLimits(tool_calls=4)
    agent = Agent(
        ScriptedModel([batch, "done"]),
        tools=[delete],
        **({"limits": limits} if scope == "chat" else {"session_limits": limits}),
    )
    paused = agent.chat_sync("clean up")
    assert len(paused.pending_approvals) == 3
    done = agent.resume_sync([p.approve() for p in paused.pending_approvals])
    assert done.text == "done"  # 3 calls asked for and run: 3 of the 4 allowed, not 6
    assert ran == ["a", "b", "c"]


def test_more_cached_tokens_than_input_tokens_is_priced_never_below_zero() -> None:
    price = ModelPrice(input_per_mtok=3, output_per_mtok=15, cached_input_per_mtok=0.3)
    odd = Usage(input_tokens=100, cached_input_tokens=1000)  # as a provider may report
    assert price.cost(odd) == Decimal("0.0003")  # the 1000 cached tokens, at their price


@pytest.mark.parametrize("seconds", [10**400, float("inf"), -1, True, "5"])
def test_a_seconds_limit_that_is_not_a_finite_number_is_refused(seconds: object) -> None:
    with pytest.raises(UsageError, match=r"UsageLimits\.seconds"):
        UsageLimits(seconds=seconds)  # type: ignore[arg-type]


# -- the token checks, folded: the same verdicts as each limit checked on its own ------------

_caps = st.one_of(st.none(), st.integers(min_value=0, max_value=60))
_counts = st.integers(min_value=0, max_value=40)


def _first_crossed(checks: list[tuple[str, int | None, int]]) -> tuple[str, int] | None:
    """The first (limit, used) whose cap is set and crossed: the order the budget checks."""
    for name, cap, used in checks:
        if cap is not None and used > cap:
            return name, used
    return None


def _crossed(check: Any) -> tuple[str, object] | None:
    try:
        check()
    except UsageLimitExceeded as exc:
        return exc.limit, exc.used
    return None


@given(
    per_request=_caps,
    inputs=_caps,
    outputs=_caps,
    total=_caps,
    used_in=_counts,
    used_out=_counts,
    reported_in=_counts,
    text=st.text(max_size=80),
)
def test_the_token_limits_stop_exactly_where_each_checked_alone_would(
    per_request: int | None,
    inputs: int | None,
    outputs: int | None,
    total: int | None,
    used_in: int,
    used_out: int,
    reported_in: int,
    text: str,
) -> None:
    # The budget checks every token limit at once below the lowest cap (the counts it
    # checks are all at most the chat's total tokens), each on its own above it.
    limits = UsageLimits(
        tokens_per_request=per_request,
        input_tokens=inputs,
        output_tokens=outputs,
        total_tokens=total,
    )
    model = ScriptedModel(["x"])
    history = ChatHistory(max_context_tokens=10_000)
    budget = Budget(limits, None, None, None, model, Pricing(), history)
    request = ProviderRequest(
        model="scripted", system="s", messages=(UserMessage(content=text or "-"),)
    )
    tokens = budget._estimate(request)
    usage = Usage(input_tokens=used_in, output_tokens=used_out)
    expected = _first_crossed(
        [
            ("tokens_per_request", per_request, tokens),
            ("input_tokens", inputs, used_in + tokens),
            ("total_tokens", total, used_in + used_out + tokens),
        ]
    )
    assert _crossed(lambda: budget.before_call(request, model, usage)) == expected

    reported = Usage(input_tokens=min(reported_in, used_in))
    expected = _first_crossed(
        [
            ("tokens_per_request", per_request, reported.input_tokens),
            ("input_tokens", inputs, used_in),
            ("output_tokens", outputs, used_out),
            ("total_tokens", total, used_in + used_out),
        ]
    )
    assert _crossed(lambda: budget.after_call(usage, reported)) == expected


@pytest.mark.parametrize("field", ["input_tokens", "output_tokens", "cache_write_tokens"])
def test_a_usage_with_a_negative_or_boolean_token_count_is_refused(field: str) -> None:
    with pytest.raises(InvalidMessageError, match=f"{field} must be an int of 0 or more"):
        Usage(**{field: -1})
    with pytest.raises(InvalidMessageError, match=f"{field} must be an int of 0 or more"):
        Usage(**{field: True})
