"""ContextHooks (seed 000): before_request, on_error, is_retryable_error, max_retries."""

from __future__ import annotations

import pytest

from hookloop import (
    AfterModelCallContext,
    Agent,
    BadRequestError,
    ContextOverflowError,
    Message,
    RateLimitError,
    ServerError,
    UserMessage,
)
from hookloop.context import ContextBeforeRequestResult, ContextHooks, ContextOnErrorResult
from hookloop.models import is_context_overflow
from hookloop.retry import DefaultRetryStrategy
from hookloop.testing import ScriptedModel

OVERFLOW_TEXTS = [
    "This model's maximum context length is 128000 tokens. However, your messages resulted "
    "in 130412 tokens. Please reduce the length of the messages.",
    "prompt is too long: 208310 tokens > 200000 maximum",
    "the request exceeds the available context size, try increasing it",
    "The input token count (1048577) exceeds the maximum number of tokens allowed (1048576).",
    "Input is too long for requested model.",
]


@pytest.mark.parametrize("text", OVERFLOW_TEXTS)
def test_overflow_texts_of_real_providers_are_recognised(text: str) -> None:
    assert is_context_overflow(BadRequestError(text, status=400))
    assert is_context_overflow(ValueError(text))


def test_overflow_is_recognised_from_the_error_code_in_the_body() -> None:
    body = {"error": {"message": "Invalid request", "code": "context_length_exceeded"}}
    assert is_context_overflow(BadRequestError("Invalid request", status=400, body=body))
    assert is_context_overflow(ContextOverflowError("anything"))


@pytest.mark.parametrize(
    "error",
    [
        RateLimitError(
            "Rate limit reached for gpt-4o on tokens per min (TPM): Limit 30000, Used 29000, "
            "Requested 3000. Please reduce the length of the messages.",
            status=429,
        ),
        BadRequestError("Invalid value for 'temperature': must be <= 2", status=400),
        ServerError("internal error", status=500),
    ],
)
def test_other_errors_are_not_overflow(error: Exception) -> None:
    assert not is_context_overflow(error)


async def test_before_request_rewrites_every_attempt_and_never_the_history() -> None:
    seen: list[dict[str, object]] = []

    def keep_last(
        *, model: str, attempt: int, messages: list[Message], system_prompt: str
    ) -> ContextBeforeRequestResult:
        seen.append(
            {"model": model, "attempt": attempt, "n": len(messages), "system": system_prompt}
        )
        return ContextBeforeRequestResult(messages=messages[-1:], system_prompt="Be brief.")

    model = ScriptedModel(["one", "two"])
    agent = Agent(model, retry=None, plugins=[ContextHooks(before_request=keep_last)])
    await agent.chat("first")
    await agent.chat("second")

    assert seen == [
        {"model": "scripted", "attempt": 1, "n": 1, "system": ""},
        {"model": "scripted", "attempt": 1, "n": 3, "system": ""},
    ]
    assert [r.messages for r in model.requests] == [agent.messages[:1], agent.messages[2:3]]
    assert [r.system for r in model.requests] == ["Be brief.", "Be brief."]
    assert len(agent.messages) == 4


async def test_async_before_request_returning_none_changes_nothing() -> None:
    async def look(**kwargs: object) -> None:
        return None

    model = ScriptedModel(["ok"])
    agent = Agent(model, system_prompt="sys", plugins=[ContextHooks(before_request=look)])
    await agent.chat("hi")
    assert model.requests[0].system == "sys"
    assert model.requests[0].messages == agent.messages[:1]


def shrink_to_last_user(**kwargs: object) -> ContextOnErrorResult:
    messages = kwargs["messages"]
    assert isinstance(messages, list)
    last = [m for m in messages if isinstance(m, UserMessage)][-1:]
    return ContextOnErrorResult(retry=True, messages=last)


async def test_on_error_recovers_from_overflow_with_a_smaller_request() -> None:
    overflow = ContextOverflowError("prompt is too long: 9000 tokens > 8000 maximum", status=400)
    model = ScriptedModel(["a", "b", overflow, "recovered"])
    calls: list[tuple[int, str]] = []

    def on_error(**kwargs: object) -> ContextOnErrorResult:
        calls.append((kwargs["attempt"], type(kwargs["error"]).__name__))  # type: ignore[arg-type]
        return shrink_to_last_user(**kwargs)

    hooks = ContextHooks(on_error=on_error, max_retries=1)
    agent = Agent(model, retry=None, plugins=[hooks])
    await agent.chat("1")
    await agent.chat("2")
    assert (await agent.chat("3")).text == "recovered"

    assert calls == [(1, "ContextOverflowError")]
    failed, retried = model.requests[2], model.requests[3]
    assert len(failed.messages) == 5
    assert retried.messages == (agent.messages[4],)
    assert len(agent.messages) == 6  # the history keeps everything


async def test_without_max_retries_on_error_is_never_called() -> None:
    called: list[object] = []
    overflow = ContextOverflowError("too long", status=400)
    agent = Agent(
        ScriptedModel([overflow]),
        retry=None,
        plugins=[ContextHooks(on_error=lambda **kw: called.append(kw))],
    )
    with pytest.raises(ContextOverflowError):
        await agent.chat("hi")
    assert called == []


async def test_retries_stop_after_max_retries() -> None:
    overflow = ContextOverflowError("too long", status=400)
    model = ScriptedModel([overflow, overflow, overflow])
    agent = Agent(
        model, retry=None, plugins=[ContextHooks(on_error=shrink_to_last_user, max_retries=2)]
    )
    with pytest.raises(ContextOverflowError):
        await agent.chat("hi")
    assert len(model.requests) == 3


async def test_on_error_declining_lets_the_error_through() -> None:
    overflow = ContextOverflowError("too long", status=400)
    model = ScriptedModel([overflow, "never"])
    hooks = ContextHooks(on_error=lambda **kw: ContextOnErrorResult(retry=False), max_retries=3)
    agent = Agent(model, retry=None, plugins=[hooks])
    with pytest.raises(ContextOverflowError):
        await agent.chat("hi")
    assert len(model.requests) == 1


async def test_only_retryable_errors_reach_on_error() -> None:
    called: list[object] = []

    def on_error(**kwargs: object) -> ContextOnErrorResult:
        called.append(kwargs["error"])
        return ContextOnErrorResult(retry=True)

    server = ServerError("boom", status=500)
    agent = Agent(
        ScriptedModel([server, "never"]),
        retry=None,
        plugins=[ContextHooks(on_error=on_error, max_retries=2)],
    )
    with pytest.raises(ServerError):
        await agent.chat("hi")
    assert called == []

    custom = ContextHooks(
        on_error=on_error, is_retryable_error=lambda e: isinstance(e, ServerError), max_retries=1
    )
    agent = Agent(ScriptedModel([server, "fine"]), retry=None, plugins=[custom])
    assert (await agent.chat("hi")).text == "fine"
    assert called == [server]


async def test_on_error_does_not_stack_on_a_retry_already_decided() -> None:
    called: list[object] = []
    overflow = ContextOverflowError("too long", status=400)
    agent = Agent(
        ScriptedModel([overflow, "ok"]),
        retry=None,
        plugins=[ContextHooks(on_error=lambda **kw: called.append(kw), max_retries=1)],
    )

    def first(ctx: AfterModelCallContext) -> None:
        ctx.retry = ctx.error is not None

    agent.add_hook("after_model_call", first, order=-5_000)
    assert (await agent.chat("hi")).text == "ok"
    assert called == []


def test_context_hooks_is_a_removable_plugin() -> None:
    agent = Agent(ScriptedModel([]), retry=None, context=None)
    dispose = agent.use(ContextHooks(before_request=lambda **kw: None, on_error=lambda **kw: None))
    assert set(agent.hooks.handlers) == {"pre_request", "after_model_call"}
    dispose()
    assert agent.hooks.handlers == {}


def test_max_retries_must_not_be_negative() -> None:
    with pytest.raises(ValueError, match="max_retries"):
        ContextHooks(max_retries=-1)


def test_requests_passed_to_before_request_are_lists() -> None:
    captured: list[object] = []
    hooks = ContextHooks(before_request=lambda **kw: captured.append(kw["messages"]))
    agent = Agent(ScriptedModel(["x"]), retry=None, plugins=[hooks])
    agent.chat_sync("hi")
    assert isinstance(captured[0], list)
    assert captured[0] == list(agent.messages[:1])


async def no_sleep(seconds: float) -> None:
    return None


# Regression: before_request rewrites piled up on retries.
async def test_before_request_of_context_hooks_sees_the_built_request_every_attempt() -> None:
    seen: list[int] = []

    def before(**kwargs: object) -> ContextBeforeRequestResult:
        messages = kwargs["messages"]
        assert isinstance(messages, list)
        seen.append(len(messages))
        return ContextBeforeRequestResult(messages=[*messages, UserMessage(content="(note)")])

    model = ScriptedModel([ServerError("b", status=503), "ok"])
    agent = Agent(
        model,
        retry=DefaultRetryStrategy(sleep=no_sleep),
        plugins=[ContextHooks(before_request=before)],
    )
    await agent.chat("hi")
    assert seen == [1, 1]
    assert [len(r.messages) for r in model.requests] == [2, 2]


# Regression: ContextHooks.max_retries counted other strategies' retries.
async def test_context_hooks_count_their_own_retries_only() -> None:
    calls: list[int] = []

    def on_error(**kwargs: object) -> ContextOnErrorResult:
        calls.append(1)
        return ContextOnErrorResult(retry=True)

    model = ScriptedModel([ServerError("b", status=503), ContextOverflowError("too long"), "ok"])
    agent = Agent(
        model,
        retry=DefaultRetryStrategy(sleep=no_sleep),
        plugins=[ContextHooks(on_error=on_error, max_retries=1)],
    )
    assert (await agent.chat("hi")).text == "ok"
    assert calls == [1]
