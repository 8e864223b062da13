"""The hook contract: interceptors.

Pre_request, on_response, after_model_call, pre_tool_call, on_tool_call_result, typed returns
(HookReturnError).

Part of DESIGN.md sections 2 and 3 (seed 002 "AG2B hooks").
"""

import dataclasses

import pytest

from hookloop import (
    AfterModelCallContext,
    Agent,
    HookReturnError,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    ServerError,
    ToolCall,
    ToolResultContext,
    ToolReturn,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.retry import DefaultRetryStrategy
from hookloop.testing import (
    ScriptedModel,
    text_response,
    tool_call,
    tool_calls,
)
from tests.hooks._support import (
    add_call,
    make_add,
    make_agent,
    summary,
)

# --- pre_request --------------------------------------------------------------------------


async def test_pre_request_sees_each_iteration_and_its_request() -> None:
    agent, model, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"],
        tools=[make_add()],
        system_prompt="be brief",
    )

    await agent.chat("hi")

    first, second = rec.contexts["pre_request"]
    assert [first.iteration, second.iteration] == [0, 1]
    assert first.request is model.requests[0]
    assert second.request is model.requests[1]
    assert first.request.system == "be brief"
    assert summary(first.request.messages) == [("user", "hi")]
    assert [t.name for t in first.request.tools] == ["add"]
    assert summary(second.request.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "3", False),
    ]


async def test_pre_request_can_replace_the_request_and_each_handler_sees_the_previous() -> None:
    agent, model, rec = make_agent(["ok"], system_prompt="base")
    seen_by_second: list[str | None] = []

    def first(ctx: PreRequestContext) -> ProviderRequest:
        return dataclasses.replace(ctx.request, system=f"{ctx.request.system}\nBe concise.")

    def second(ctx: PreRequestContext) -> None:
        seen_by_second.append(ctx.request.system)

    def third(ctx: PreRequestContext) -> ProviderRequest:
        return dataclasses.replace(ctx.request, messages=(UserMessage(content="rewritten"),))

    agent.add_hook("pre_request", first)
    agent.add_hook("pre_request", second)
    agent.add_hook("pre_request", third)
    await agent.chat("hi")

    sent = model.requests[0]
    assert seen_by_second == ["base\nBe concise."]
    assert sent.system == "base\nBe concise."
    assert summary(sent.messages) == [("user", "rewritten")]
    assert rec.contexts["on_response"][0].request is sent
    assert rec.contexts["after_model_call"][0].request is sent
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "ok", [])]


async def test_pre_request_response_short_circuits_the_chain_and_the_model() -> None:
    agent, model, rec = make_agent([], system_prompt="base")
    later: list[int] = []
    cached = text_response("from cache")

    def rewrite(ctx: PreRequestContext) -> ProviderRequest:
        return dataclasses.replace(ctx.request, system="rewritten")

    agent.add_hook("pre_request", rewrite)
    agent.add_hook("pre_request", lambda ctx: cached)
    agent.add_hook("pre_request", lambda ctx: later.append(ctx.iteration))
    response = await agent.chat("hi")

    assert model.requests == []
    assert later == []
    assert response.text == "from cache"
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "on_response:0",  # on_response runs on the supplied response
        "on_message:assistant",
        "on_chat_done",
    ]  # and after_model_call does not fire: there was no model call
    (ctx,) = rec.contexts["on_response"]
    assert ctx.response is cached
    assert ctx.request.system == "rewritten"
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "from cache", [])]


async def test_on_response_can_rewrite_a_short_circuit_response() -> None:
    agent, model, _ = make_agent([])
    agent.add_hook("pre_request", lambda ctx: text_response("  cached  "))
    agent.add_hook(
        "on_response",
        lambda ctx: dataclasses.replace(ctx.response, content=ctx.response.content.strip()),
    )

    response = await agent.chat("hi")

    assert response.text == "cached"
    assert model.requests == []


async def test_pre_request_short_circuit_with_tool_calls_runs_the_tools() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, _ = make_agent(["done"], tools=[make_add(calls)])

    def first_iteration_from_cache(ctx: PreRequestContext) -> ProviderResponse | None:
        return tool_call("add", {"a": 2, "b": 3}, id="c1") if ctx.iteration == 0 else None

    agent.add_hook("pre_request", first_iteration_from_cache)
    response = await agent.chat("hi")

    assert calls == [(2, 3)]
    assert len(model.requests) == 1
    assert response.iterations == 2
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "5", False),
        ("assistant", "done", []),
    ]


async def no_sleep(seconds: float) -> None:
    return None


# Regression: pre_request rewrites piled up on retries.
async def test_pre_request_rewrites_do_not_pile_up_on_retries() -> None:
    model = ScriptedModel([ServerError("b", status=503), ServerError("b", status=503), "ok"])
    agent = Agent(model, system_prompt="You help.", retry=DefaultRetryStrategy(sleep=no_sleep))

    def concise(ctx: PreRequestContext) -> ProviderRequest:
        return dataclasses.replace(ctx.request, system=f"{ctx.request.system}\nBe concise.")

    agent.add_hook("pre_request", concise)
    await agent.chat("hi")
    assert [r.system for r in model.requests] == ["You help.\nBe concise."] * 3


# --- on_response --------------------------------------------------------------------------


async def test_on_response_handlers_all_run_and_compose() -> None:
    agent, model, rec = make_agent(["  hello world  "])
    seen: list[str] = []

    def trim(ctx: ResponseContext) -> ProviderResponse:
        seen.append(f"trim saw {ctx.response.content!r}")
        return dataclasses.replace(ctx.response, content=ctx.response.content.strip())

    def upper(ctx: ResponseContext) -> ProviderResponse:
        seen.append(f"upper saw {ctx.response.content!r}")
        return dataclasses.replace(ctx.response, content=ctx.response.content.upper())

    def observe(ctx: ResponseContext) -> None:
        seen.append(f"observe saw {ctx.response.content!r}")

    agent.add_hook("on_response", trim)
    agent.add_hook("on_response", observe)
    agent.add_hook("on_response", upper)
    agent.add_hook("on_response", observe)
    response = await agent.chat("hi")

    assert seen == [
        "trim saw '  hello world  '",
        "observe saw 'hello world'",
        "upper saw 'hello world'",
        "observe saw 'HELLO WORLD'",
    ]
    assert response.text == "HELLO WORLD"
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "HELLO WORLD", [])]
    (ctx,) = rec.contexts["on_response"]
    assert ctx.iteration == 0
    assert ctx.request is model.requests[0]


async def test_on_response_can_drop_tool_calls_and_set_the_finish_reason() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, _ = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1", content="thinking")], tools=[make_add(calls)]
    )
    agent.add_hook(
        "on_response",
        lambda ctx: dataclasses.replace(ctx.response, tool_calls=(), finish_reason="length"),
    )

    response = await agent.chat("hi")

    assert calls == []
    assert len(model.requests) == 1
    assert response.finish_reason == "length"
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "thinking", [])]


async def test_on_response_can_add_tool_calls() -> None:
    calls: list[tuple[int, int]] = []
    agent, _, _ = make_agent(["no tools", "done"], tools=[make_add(calls)])

    def add_a_call(ctx: ResponseContext) -> ProviderResponse | None:
        if ctx.iteration == 0:
            return tool_calls(add_call("c9", 4, 5))
        return None

    agent.add_hook("on_response", add_a_call)
    await agent.chat("hi")

    assert calls == [(4, 5)]
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c9", "add")]),
        ("tool", "c9", "9", False),
        ("assistant", "done", []),
    ]


# --- after_model_call -----------------------------------------------------------------------


async def test_after_model_call_fields_on_success() -> None:
    answer = text_response("hello")
    agent, model, rec = make_agent([answer])

    await agent.chat("hi")

    (ctx,) = rec.contexts["after_model_call"]
    assert (ctx.iteration, ctx.attempt) == (0, 1)
    assert ctx.request is model.requests[0]
    assert ctx.response is answer
    assert ctx.error is None
    assert ctx.retry is False


async def test_after_model_call_error_without_retry_ends_the_chat() -> None:
    boom = ServerError("boom", status=500)
    agent, model, rec = make_agent([boom, "never"])

    with pytest.raises(ServerError) as raised:
        await agent.chat("hi")

    assert raised.value is boom
    (ctx,) = rec.contexts["after_model_call"]
    assert (ctx.iteration, ctx.attempt) == (0, 1)
    assert ctx.request is model.requests[0]
    assert ctx.response is None
    assert ctx.error is boom
    assert len(model.requests) == 1
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "after_model_call:0:1",
        "on_chat_error",
    ]
    assert rec.contexts["on_chat_error"][0].error is boom


async def test_after_model_call_retry_makes_another_attempt() -> None:
    boom = ServerError("boom", status=500)
    agent, model, rec = make_agent([boom, "recovered"])

    def retry_errors(ctx: AfterModelCallContext) -> None:
        if ctx.error is not None:
            ctx.retry = True

    agent.add_hook("after_model_call", retry_errors)
    response = await agent.chat("hi")

    assert response.text == "recovered"
    assert len(model.requests) == 2
    first, second = rec.contexts["after_model_call"]
    assert (first.attempt, first.error, first.response) == (1, boom, None)
    assert (second.attempt, second.error) == (2, None)
    assert second.response is not None
    assert second.response.content == "recovered"
    assert rec.events == [
        "on_chat_start",
        "on_message:user",
        "pre_request:0",
        "after_model_call:0:1",
        "pre_request:0",
        "after_model_call:0:2",
        "on_response:0",
        "on_message:assistant",
        "on_chat_done",
    ]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "recovered", [])]


async def test_after_model_call_retry_on_a_successful_response_discards_it() -> None:
    agent, model, rec = make_agent(["first answer", "second answer"])

    fired: list[int] = []

    def retry_once(ctx: AfterModelCallContext) -> None:
        fired.append(ctx.attempt)
        ctx.retry = len(fired) == 1  # counted here, so a wrong attempt number cannot loop

    agent.add_hook("after_model_call", retry_once)
    response = await agent.chat("hi")

    assert fired == [1, 2]
    assert response.text == "second answer"
    assert len(model.requests) == 2
    assert [ctx.response.content for ctx in rec.contexts["on_response"]] == ["second answer"]
    assert summary(agent.messages) == [("user", "hi"), ("assistant", "second answer", [])]


async def test_after_model_call_can_replace_the_request_for_the_retry() -> None:
    agent, model, _ = make_agent([ServerError("too big", status=500), "ok"], system_prompt="long")
    pre_request_saw: list[tuple[int, str | None]] = []
    agent.add_hook(
        "pre_request", lambda ctx: pre_request_saw.append((ctx.iteration, ctx.request.system))
    )

    def shrink_and_retry(ctx: AfterModelCallContext) -> None:
        if ctx.error is not None:
            ctx.request = dataclasses.replace(ctx.request, system="short")
            ctx.retry = True

    agent.add_hook("after_model_call", shrink_and_retry)
    await agent.chat("hi")

    assert [r.system for r in model.requests] == ["long", "short"]
    assert pre_request_saw == [(0, "long"), (0, "short")]


async def test_after_model_call_attempt_is_one_on_every_new_model_call() -> None:
    script = [
        ServerError("a", status=500),
        ServerError("b", status=500),
        tool_call("add", {"a": 1, "b": 2}, id="c1"),
        ServerError("c", status=500),
        "done",
    ]
    agent, _, rec = make_agent(script, tools=[make_add()])

    def retry_errors(ctx: AfterModelCallContext) -> None:
        ctx.retry = ctx.error is not None

    agent.add_hook("after_model_call", retry_errors)
    await agent.chat("hi")

    assert [e for e in rec.events if e.startswith("after_model_call")] == [
        "after_model_call:0:1",
        "after_model_call:0:2",
        "after_model_call:0:3",
        "after_model_call:1:1",
        "after_model_call:1:2",
    ]


# --- pre_tool_call ------------------------------------------------------------------------


async def test_pre_tool_call_context_holds_the_call_tool_and_scope() -> None:
    add = make_add()
    agent, _, rec = make_agent([tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[add])

    await agent.chat("hi")

    (ctx,) = rec.contexts["pre_tool_call"]
    assert ctx.call == add_call("c1")
    assert ctx.tool is add
    assert ctx.scope is agent.scopes.get("default")


async def test_pre_tool_call_can_replace_the_call_and_each_handler_sees_the_previous() -> None:
    calls: list[tuple[int, int]] = []
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add(calls)]
    )
    seen: list[str] = []

    def double_a(ctx: PreToolCallContext) -> ToolCall:
        args = ctx.call.parsed_arguments()
        return ToolCall.create("add", {**args, "a": args["a"] * 10})

    def observe(ctx: PreToolCallContext) -> None:
        seen.append(ctx.call.arguments)

    def bump_b(ctx: PreToolCallContext) -> ToolCall:
        args = ctx.call.parsed_arguments()
        return dataclasses.replace(ctx.call, arguments=f'{{"a": {args["a"]}, "b": 7}}')

    agent.add_hook("pre_tool_call", double_a)
    agent.add_hook("pre_tool_call", observe)
    agent.add_hook("pre_tool_call", bump_b)
    await agent.chat("hi")

    assert seen == ['{"a": 10, "b": 2}']
    assert calls == [(10, 7)]
    (result_ctx,) = rec.contexts["on_tool_call_result"]
    assert result_ctx.call.arguments == '{"a": 10, "b": 7}'
    assert result_ctx.result == 17
    # The history still answers the call the model made, so it stays valid.
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "17", False),
        ("assistant", "done", []),
    ]


async def test_pre_tool_call_result_short_circuits_the_chain_and_the_tool() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add(calls)]
    )
    later: list[str] = []
    agent.add_hook("pre_tool_call", lambda ctx: ToolReturn({"cached": True}))
    agent.add_hook("pre_tool_call", lambda ctx: later.append(ctx.call.id))

    response = await agent.chat("hi")

    assert calls == []
    assert later == []
    assert response.text == "done"
    (ctx,) = rec.contexts["on_tool_call_result"]  # still runs on the supplied result
    assert ctx.result == {"cached": True}
    assert ctx.tool.name == "add"
    assert ctx.scope.name == "default"
    assert rec.contexts["on_tool_call_error"] == []
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", '{"cached":true}', False),
        ("assistant", "done", []),
    ]
    assert summary(model.requests[1].messages)[-1] == ("tool", "c1", '{"cached":true}', False)


async def test_pre_tool_call_can_short_circuit_with_a_none_result() -> None:
    calls: list[tuple[int, int]] = []
    agent, _, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add(calls)]
    )
    agent.add_hook("pre_tool_call", lambda ctx: ToolReturn(None))

    await agent.chat("hi")

    assert calls == []
    assert [ctx.result for ctx in rec.contexts["on_tool_call_result"]] == [None]
    assert summary(agent.messages)[2] == ("tool", "c1", "null", False)


async def test_pre_tool_call_error_short_circuits_and_the_chat_goes_on() -> None:
    calls: list[tuple[int, int]] = []
    agent, model, rec = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "sorry"], tools=[make_add(calls)]
    )
    denied = PermissionError("Not permitted")
    later: list[str] = []
    agent.add_hook("pre_tool_call", lambda ctx: denied)
    agent.add_hook("pre_tool_call", lambda ctx: later.append(ctx.call.id))

    response = await agent.chat("hi")

    assert calls == []
    assert later == []
    assert response.text == "sorry"
    (ctx,) = rec.contexts["on_tool_call_error"]  # still runs on the supplied error
    assert ctx.error is denied
    assert ctx.tool.name == "add"
    assert ctx.scope.name == "default"
    assert rec.contexts["on_tool_call_result"] == []
    assert rec.terminal == ["on_chat_done"]
    assert summary(agent.messages) == [
        ("user", "hi"),
        ("assistant", "", [("c1", "add")]),
        ("tool", "c1", "Not permitted", True),
        ("assistant", "sorry", []),
    ]
    assert summary(model.requests[1].messages)[-1] == ("tool", "c1", "Not permitted", True)


async def test_pre_tool_call_runs_before_the_argument_check_and_can_repair_arguments() -> None:
    calls: list[tuple[int, int]] = []
    agent, _, rec = make_agent(
        [tool_call("add", "{broken json", id="c1"), "done"], tools=[make_add(calls)]
    )
    agent.add_hook(
        "pre_tool_call", lambda ctx: dataclasses.replace(ctx.call, arguments='{"a": 2, "b": 2}')
    )

    await agent.chat("hi")

    assert calls == [(2, 2)]
    assert rec.contexts["on_tool_call_error"] == []
    assert summary(agent.messages)[2] == ("tool", "c1", "4", False)


async def test_pre_tool_call_runs_for_a_disabled_tool_and_can_short_circuit_it() -> None:
    @tool(enabled=False)
    async def secret() -> str:
        """Disabled."""
        raise AssertionError("a disabled tool must not run")

    agent, _, rec = make_agent([tool_call("secret", {}, id="c1"), "done"], tools=[secret])
    agent.add_hook("pre_tool_call", lambda ctx: ToolReturn("served by a hook"))

    await agent.chat("hi")

    assert [e for e in rec.events if "tool_call" in e] == [
        "pre_tool_call:c1",
        "on_tool_call_result:c1",
    ]
    assert summary(agent.messages)[2] == ("tool", "c1", "served by a hook", False)


async def test_pre_tool_call_is_skipped_for_an_unknown_tool() -> None:
    agent, _, rec = make_agent([tool_call("nope", {}, id="c1"), "done"], tools=[make_add()])
    seen: list[str] = []
    agent.add_hook("pre_tool_call", lambda ctx: seen.append(ctx.call.id))

    await agent.chat("hi")

    assert seen == []
    assert [e for e in rec.events if "tool_call" in e] == ["on_tool_call_error:c1"]


# --- on_tool_call_result ------------------------------------------------------------------


async def test_on_tool_call_result_handlers_all_run_and_compose() -> None:
    add = make_add()
    agent, _, _ = make_agent([tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[add])
    seen: list[object] = []

    def wrap(ctx: ToolResultContext) -> ToolReturn:
        seen.append(("wrap", ctx.call.id, ctx.tool is add, ctx.scope.name, ctx.result))
        return ToolReturn({"sum": ctx.result})

    def observe(ctx: ToolResultContext) -> None:
        seen.append(("observe", ctx.result))

    def redact(ctx: ToolResultContext) -> ToolReturn:
        seen.append(("redact", ctx.result))
        return ToolReturn({**ctx.result, "redacted": True})  # type: ignore[dict-item]

    agent.add_hook("on_tool_call_result", wrap)
    agent.add_hook("on_tool_call_result", observe)
    agent.add_hook("on_tool_call_result", redact)
    agent.add_hook("on_tool_call_result", observe)
    await agent.chat("hi")

    assert seen == [
        ("wrap", "c1", True, "default", 3),
        ("observe", {"sum": 3}),
        ("redact", {"sum": 3}),
        ("observe", {"sum": 3, "redacted": True}),
    ]
    assert summary(agent.messages)[2] == ("tool", "c1", '{"sum":3,"redacted":true}', False)


async def test_on_tool_call_result_tool_return_none_makes_the_result_null() -> None:
    agent, _, _ = make_agent(
        [tool_call("add", {"a": 1, "b": 2}, id="c1"), "done"], tools=[make_add()]
    )
    seen: list[object] = []
    agent.add_hook("on_tool_call_result", lambda ctx: ToolReturn(None))
    agent.add_hook("on_tool_call_result", lambda ctx: seen.append(ctx.result))

    await agent.chat("hi")

    assert seen == [None]
    assert summary(agent.messages)[2] == ("tool", "c1", "null", False)


# --- typed interceptor returns -------------------------------------------------------------

BAD_RETURNS = [
    ("pre_request", "a string"),
    ("pre_request", {"request": None}),
    ("pre_request", ToolReturn("x")),
    ("on_response", "a string"),
    ("on_response", {"response": text_response("x")}),
    ("pre_tool_call", {"result": 1}),
    ("pre_tool_call", "a string"),
    ("on_tool_call_result", 42),
    ("on_tool_call_result", {"result": 1}),
    ("on_tool_call_error", "a message"),
    ("on_tool_call_error", ValueError),  # the class, not an instance
]


@pytest.mark.parametrize(("event", "bad"), BAD_RETURNS)
async def test_wrong_return_type_raises_hook_return_error_and_ends_the_chat(
    event: str, bad: object
) -> None:
    agent, model, rec = make_agent(
        [tool_calls(add_call("c1"), ToolCall.create("nope", {}, id="c2")), "never"],
        tools=[make_add()],
    )

    def bad_handler(ctx: object) -> object:
        return bad

    agent.add_hook(event, bad_handler)  # type: ignore[call-overload]

    with pytest.raises(HookReturnError) as raised:
        await agent.chat("hi")

    error = raised.value
    assert isinstance(error, UsageError)
    assert isinstance(error, TypeError)
    assert f"{event!r} handler" in str(error)
    assert "bad_handler" in str(error)
    assert type(bad).__name__ in str(error)
    assert rec.terminal == ["on_chat_error"]
    assert rec.contexts["on_chat_error"][0].error is error
    assert len(model.requests) == (0 if event == "pre_request" else 1)
