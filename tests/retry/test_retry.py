"""Retry strategies: pure backoff and hints, then every rule through the agent on a fake clock."""

from __future__ import annotations

import asyncio
import random
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import (
    AfterModelCallContext,
    Agent,
    AuthenticationError,
    BadRequestError,
    ChatCancelledError,
    CircuitOpenError,
    ContextOverflowError,
    ModelRetry,
    NotFoundError,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    ServerError,
    TextDelta,
    ToolErrorContext,
    ToolMessage,
    UsageError,
    tool,
)
from hookloop.retry import (
    TRANSIENT_ERRORS,
    Backoff,
    CircuitBreaker,
    DefaultRetryStrategy,
    FallbackStrategy,
    ModelRetryStrategy,
    RetryAttempt,
    RetryDecision,
    ToolRetryStrategy,
    apply_jitter,
    backoff_delay,
    retry_after_seconds,
)
from hookloop.testing import FakeClock, ScriptedModel, ScriptStep, text_response, tool_call

NO_JITTER = Backoff(kind="exponential", base=0.5, factor=2.0, max_delay=30.0, jitter="none")


def strategy(clock: FakeClock, **kwargs: object) -> DefaultRetryStrategy:
    kwargs.setdefault("backoff", NO_JITTER)
    return DefaultRetryStrategy(sleep=clock.sleep, clock=clock, **kwargs)  # type: ignore[arg-type]


def record_attempts(agent: Agent, clock: FakeClock) -> list[tuple[int, str, float]]:
    """(attempt, outcome, clock) as each model attempt ends, before any strategy acts."""
    seen: list[tuple[int, str, float]] = []

    def after(ctx: AfterModelCallContext) -> None:
        outcome = "ok" if ctx.error is None else type(ctx.error).__name__
        seen.append((ctx.attempt, outcome, clock.now))

    agent.add_hook("after_model_call", after, order=-100)
    return seen


# --- pure backoff, jitter and hints ------------------------------------------------------


def test_backoff_curves() -> None:
    assert [backoff_delay(n, kind="constant", base=2.0) for n in (1, 2, 3)] == [2.0, 2.0, 2.0]
    assert [backoff_delay(n, kind="linear", base=1.5) for n in (1, 2, 3)] == [1.5, 3.0, 4.5]
    assert [backoff_delay(n, base=0.5, factor=3.0) for n in (1, 2, 3)] == [0.5, 1.5, 4.5]


def test_backoff_is_capped_even_for_huge_attempt_numbers() -> None:
    assert backoff_delay(7, base=1.0, max_delay=10.0) == 10.0
    assert backoff_delay(10_000, base=1.0, max_delay=10.0) == 10.0
    assert backoff_delay(50, kind="linear", base=1.0, max_delay=10.0) == 10.0


@pytest.mark.parametrize("bad", [0, -1])
def test_backoff_attempts_count_from_one(bad: int) -> None:
    with pytest.raises(ValueError, match="from 1"):
        backoff_delay(bad)


def test_jitter_none_full_equal_decorrelated() -> None:
    rng = random.Random(7)
    assert apply_jitter(4.0, kind="none", rng=rng) == 4.0
    full = [apply_jitter(4.0, kind="full", rng=rng) for _ in range(200)]
    assert all(0.0 <= d <= 4.0 for d in full)
    assert min(full) < 1.0 < 3.0 < max(full)  # spread over the whole range
    equal = [apply_jitter(4.0, kind="equal", rng=rng) for _ in range(200)]
    assert all(2.0 <= d <= 4.0 for d in equal)
    decorrelated = [
        apply_jitter(0.0, kind="decorrelated", rng=rng, base=1.0, previous=5.0, max_delay=100.0)
        for _ in range(200)
    ]
    assert all(1.0 <= d <= 15.0 for d in decorrelated)
    assert max(decorrelated) > 10.0


@given(
    attempt=st.integers(min_value=1, max_value=200),
    base=st.floats(min_value=0.0, max_value=100.0),
    factor=st.floats(min_value=1.0, max_value=10.0),
    cap=st.floats(min_value=0.0, max_value=1_000.0),
    jitter=st.sampled_from(["none", "full", "equal", "decorrelated"]),
    previous=st.none() | st.floats(min_value=0.0, max_value=1_000.0),
    seed=st.integers(),
)
def test_a_jittered_delay_is_never_negative_and_never_above_the_cap(
    attempt: int,
    base: float,
    factor: float,
    cap: float,
    jitter: str,
    previous: float | None,
    seed: int,
) -> None:
    backoff = Backoff(base=base, factor=factor, max_delay=cap, jitter=jitter)  # type: ignore[arg-type]
    delay = backoff.delay(attempt, rng=random.Random(seed), previous=previous)
    assert 0.0 <= delay <= cap


@pytest.mark.parametrize(
    "kwargs",
    [{"kind": "fibonacci"}, {"jitter": "some"}, {"base": -1.0}, {"factor": 0.5}],
)
def test_backoff_rejects_bad_configuration(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each message names its field
        Backoff(**kwargs)  # type: ignore[arg-type]


def test_retry_after_hints() -> None:
    now = datetime(2026, 11, 22, 12, 0, 0, tzinfo=UTC)
    later = (now + timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    earlier = (now - timedelta(seconds=30)).strftime("%a, %d %b %Y %H:%M:%S GMT")
    assert retry_after_seconds({"Retry-After": "12"}) == 12.0
    assert retry_after_seconds({"retry-after": "0.25"}) == 0.25
    assert retry_after_seconds({"RETRY-AFTER-MS": "1500", "Retry-After": "9"}) == 1.5
    assert retry_after_seconds({"retry-after": later}, now=now) == 30.0
    assert retry_after_seconds({"retry-after": earlier}, now=now) == 0.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({"retry-after": "-3"}) is None
    assert retry_after_seconds({"retry-after-ms": "nan", "retry-after": "2"}) == 2.0


# --- the default strategy through the agent ---------------------------------------------


def test_a_default_strategy_holds_only_what_it_was_given() -> None:
    # Every Agent() has one: its defaults are the class's, an instance holds what differs.
    plain = DefaultRetryStrategy()
    assert vars(plain) == {}
    assert (plain.max_attempts, plain.max_total_time, plain.max_wait) == (5, 90.0, 60.0)
    assert plain.backoff == Backoff()
    assert plain.retry_on is TRANSIENT_ERRORS
    rng, clock = random.Random(1), FakeClock()
    given = DefaultRetryStrategy(
        max_attempts=2,
        max_total_time=90,  # equal to the default: nothing to hold
        max_wait=1.0,
        backoff=Backoff(base=2.0),
        retry_on=(ValueError,),
        rng=rng,
        clock=clock,
    )
    assert vars(given) == {
        "_clock": clock,
        "max_attempts": 2,
        "max_wait": 1.0,
        "backoff": Backoff(base=2.0),
        "retry_on": (ValueError,),
        "_rng": rng,
    }

    class Patient(DefaultRetryStrategy):
        max_attempts = 9

    # A value given is kept against the subclass's own default, the base's included.
    assert Patient(max_attempts=5).max_attempts == 5
    assert Patient(max_attempts=9).max_attempts == 9


def test_an_agent_retries_by_default_and_retry_none_turns_it_off() -> None:
    assert isinstance(Agent(ScriptedModel([])).retry_strategy, DefaultRetryStrategy)
    bare = Agent(ScriptedModel([]), retry=None, context=None)
    assert bare.retry_strategy is None
    assert bare.plugins == ()


def test_retry_must_be_a_strategy() -> None:
    with pytest.raises(UsageError, match="ModelRetryStrategy"):
        Agent(ScriptedModel([]), retry="exponential")  # type: ignore[arg-type]


async def test_rate_limit_waits_for_retry_after_then_succeeds() -> None:
    clock = FakeClock()
    model = ScriptedModel([RateLimitError("slow down", status=429, retry_after=7.0), "done"])
    agent = Agent(model, retry=strategy(clock))
    attempts = record_attempts(agent, clock)

    assert (await agent.chat("hi")).text == "done"
    assert clock.waits == [7.0]  # the hint (7 s) beats the backoff (0.5 s)
    assert attempts == [(1, "RateLimitError", 0.0), (2, "ok", 7.0)]
    assert len(model.requests) == 2
    assert model.requests[0] == model.requests[1]


async def test_retry_after_ms_header_is_honoured() -> None:
    clock = FakeClock()
    error = RateLimitError("slow down", status=429, headers={"retry-after-ms": "2500"})
    agent = Agent(ScriptedModel([error, "done"]), retry=strategy(clock))
    await agent.chat("hi")
    assert clock.waits == [2.5]


async def test_backoff_wins_when_it_is_longer_than_the_hint() -> None:
    clock = FakeClock()
    errors = [RateLimitError("again", status=429, retry_after=0.1) for _ in range(3)]
    agent = Agent(ScriptedModel([*errors, "done"]), retry=strategy(clock))
    await agent.chat("hi")
    assert clock.waits == [0.5, 1.0, 2.0]


async def test_a_huge_hint_is_capped_at_max_wait() -> None:
    clock = FakeClock()
    error = RateLimitError("come back in an hour", status=429, retry_after=3600.0)
    agent = Agent(ScriptedModel([error, "done"]), retry=strategy(clock, max_wait=20.0))
    await agent.chat("hi")
    assert clock.waits == [20.0]


@pytest.mark.parametrize(
    "error",
    [
        OverloadedError("overloaded", status=529),
        OverloadedError("unavailable", status=503),
        ServerError("internal", status=500),
        ProviderTimeoutError("no answer"),
        ProviderConnectionError("connection reset"),
        TimeoutError("socket timeout"),
        ConnectionResetError("reset by peer"),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_transient_errors_are_retried_with_exponential_backoff(error: Exception) -> None:
    clock = FakeClock()
    model = ScriptedModel([error, error, error, "recovered"])
    agent = Agent(model, retry=strategy(clock))
    attempts = record_attempts(agent, clock)

    assert (await agent.chat("hi")).text == "recovered"
    name = type(error).__name__
    assert attempts == [(1, name, 0.0), (2, name, 0.5), (3, name, 1.5), (4, "ok", 3.5)]
    assert clock.waits == [0.5, 1.0, 2.0]


@pytest.mark.parametrize(
    "error",
    [
        BadRequestError("bad field", status=400),
        AuthenticationError("bad key", status=401),
        NotFoundError("no such model", status=404),
        ContextOverflowError("prompt is too long", status=400),
        ValueError("a bug in a custom model"),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_permanent_errors_are_raised_at_once(error: Exception) -> None:
    clock = FakeClock()
    model = ScriptedModel([error, "never"])
    agent = Agent(model, retry=strategy(clock))
    with pytest.raises(type(error)) as caught:
        await agent.chat("hi")
    assert caught.value is error
    assert clock.waits == []
    assert len(model.requests) == 1
    if isinstance(error, ProviderError):
        assert error.attempts == ()


async def test_gives_up_after_max_attempts_with_the_history_attached() -> None:
    clock = FakeClock()
    errors = [ServerError(f"failure {n}", status=500) for n in range(1, 4)]
    model = ScriptedModel([*errors, "never"])
    agent = Agent(model, retry=strategy(clock, max_attempts=3))

    with pytest.raises(ServerError) as caught:
        await agent.chat("hi")

    last = caught.value
    assert last is errors[-1]
    assert last.attempts == (
        RetryAttempt(attempt=1, error=errors[0], wait=0.5),
        RetryAttempt(attempt=2, error=errors[1], wait=1.0),
        RetryAttempt(attempt=3, error=errors[2], wait=0.0),
    )
    assert any("gave up after 3 attempts and 1.5s" in note for note in last.__notes__)
    assert len(model.requests) == 3


async def test_gives_up_when_the_next_wait_would_pass_the_time_budget() -> None:
    clock = FakeClock()
    errors = [OverloadedError("busy", status=529) for _ in range(5)]
    agent = Agent(ScriptedModel([*errors, "never"]), retry=strategy(clock, max_total_time=3.0))
    attempts = record_attempts(agent, clock)
    with pytest.raises(OverloadedError):
        await agent.chat("hi")
    # waits 0.5 + 1.0 = 1.5 s; the next (2.0 s) would end at 3.5 s > 3.0 s
    assert clock.waits == [0.5, 1.0]
    assert [a[0] for a in attempts] == [1, 2, 3]


async def test_a_retried_answer_then_a_failure_is_timed_from_that_failure() -> None:
    """The strategy skipped an answered first attempt (its promise to the loop); another
    handler retried the answer; the failure of the second attempt is this call's first."""
    clock = FakeClock()
    busy = ServerError("busy", status=503)
    script = [busy, "one", "two", "", busy, "three"]
    agent = Agent(ScriptedModel(script), retry=strategy(clock, max_total_time=60.0))

    def reject_empty(ctx: AfterModelCallContext) -> None:  # a user's check of the answer
        if ctx.response is not None and not ctx.response.content:
            ctx.retry = True

    agent.add_hook("after_model_call", reject_empty)
    assert (await agent.chat("first")).text == "one"  # a failed attempt, retried
    assert (await agent.chat("second")).text == "two"  # the strategy forgets that retry
    clock.advance(3600.0)  # an hour later: the strategy skips the answered first attempt
    assert (await agent.chat("third")).text == "three"
    assert clock.waits == [0.5, 1.0]  # retried (attempt 2 waits 1 s), not given up


async def test_each_model_call_gets_fresh_attempts_and_time() -> None:
    clock = FakeClock()
    busy = OverloadedError("busy", status=529)

    @tool
    async def noop() -> str:
        """Do nothing."""
        return "ok"

    script = [busy, busy, tool_call("noop", {}), busy, busy, "done"]
    agent = Agent(ScriptedModel(script), tools=[noop], retry=strategy(clock, max_attempts=3))
    attempts = record_attempts(agent, clock)
    assert (await agent.chat("hi")).text == "done"
    assert [a[:2] for a in attempts] == [
        (1, "OverloadedError"),
        (2, "OverloadedError"),
        (3, "ok"),
        (1, "OverloadedError"),
        (2, "OverloadedError"),
        (3, "ok"),
    ]
    assert clock.waits == [0.5, 1.0, 0.5, 1.0]


async def test_two_strategies_on_one_agent_never_add_up_their_waits() -> None:
    clock = FakeClock()
    second = strategy(clock)
    error = ServerError("boom", status=500)
    agent = Agent(ScriptedModel([error, error, "done"]), retry=strategy(clock))
    agent.use(second)
    assert (await agent.chat("hi")).text == "done"
    assert clock.waits == [0.5, 1.0]  # one wait per failure, not two


def test_one_instance_serves_one_agent() -> None:
    shared = DefaultRetryStrategy()
    Agent(ScriptedModel([]), retry=shared)
    with pytest.raises(UsageError, match="already attached"):
        Agent(ScriptedModel([]), retry=shared)


async def test_a_disposed_strategy_serves_another_agent_and_no_longer_the_first() -> None:
    clock = FakeClock()
    shared = strategy(clock)
    error = ServerError("boom", status=500)
    first = Agent(ScriptedModel([error, "never"]), retry=None, context=None)
    dispose = first.use(shared)
    dispose()

    second = Agent(ScriptedModel([error, "done"]), retry=shared, context=None)

    assert (await second.chat("hi")).text == "done"
    assert clock.waits == [0.5]
    with pytest.raises(ServerError, match="boom"):
        await first.chat("hi")  # not retried any more
    assert clock.waits == [0.5]
    assert (first.plugins, first.hooks.handlers) == ((), {})
    assert (second.plugins, second.retry_strategy) == ((shared,), shared)


class _Refusing:
    """A plugin whose init_agent fails; it keeps the agent it was given."""

    name = "refusing"

    def __init__(self) -> None:
        self.agent: Agent | None = None

    def init_agent(self, agent: Agent) -> None:
        self.agent = agent
        raise RuntimeError("refused")


def test_an_agent_that_fails_to_build_hands_its_retry_strategy_back() -> None:
    shared = DefaultRetryStrategy()
    refusing = _Refusing()
    with pytest.raises(RuntimeError, match="refused"):
        Agent(ScriptedModel([]), retry=shared, plugins=[refusing])
    with pytest.raises(UsageError, match="context must be"):
        Agent(ScriptedModel([]), retry=shared, context="sliding")  # type: ignore[arg-type]

    half_built = refusing.agent
    assert half_built is not None
    assert (half_built.retry_strategy, half_built.plugins, half_built.hooks.handlers) == (
        None,
        (),
        {},
    )
    assert Agent(ScriptedModel([]), retry=shared).retry_strategy is shared


async def test_cancelling_during_a_backoff_ends_the_chat_at_once() -> None:
    waiting = asyncio.Event()

    async def long_sleep(seconds: float) -> None:
        waiting.set()
        await asyncio.Event().wait()  # as good as forever

    agent = Agent(
        ScriptedModel([RateLimitError("slow", status=429, retry_after=600.0), "never"]),
        retry=DefaultRetryStrategy(sleep=long_sleep),
    )
    chat = asyncio.create_task(agent.chat("hi"))
    await waiting.wait()
    agent.cancel("stop waiting")
    with pytest.raises(ChatCancelledError, match="stop waiting"):
        await asyncio.wait_for(chat, timeout=5)


async def test_a_stream_is_told_to_discard_the_failed_attempts_deltas() -> None:
    clock = FakeClock()
    cut = ScriptStep(
        response=text_response("half an ans"),
        error=ProviderConnectionError("stream cut"),
        chunk_size=4,
        fail_after=2,
    )
    model = ScriptedModel([cut, ScriptStep(response=text_response("whole"), chunk_size=4)])
    agent = Agent(model, retry=strategy(clock))
    events = [event async for event in agent.chat_stream("hi")]
    kinds = [e.type for e in events if not isinstance(e, TextDelta)]
    texts = [e.text for e in events if isinstance(e, TextDelta)]
    assert texts == ["half", " an ", "whol", "e"]
    retry = next(e for e in events if isinstance(e, ModelRetry))
    assert (retry.attempt, type(retry.error)) == (1, ProviderConnectionError)
    assert events.index(retry) == 3  # after the two deltas it invalidates
    assert kinds == ["message", "model_retry", "message", "chat_done"]
    assert clock.waits == [0.5]


# --- writing a strategy ------------------------------------------------------------------


class EveryOtherTime(ModelRetryStrategy):
    """Retries at most once per model call, asynchronously, and counts model calls."""

    name = "every-other-time"

    def __init__(self) -> None:
        super().__init__(sleep=FakeClock().sleep)
        self.calls = 0
        self.retried = False

    def on_first_model_attempt(self) -> None:
        self.calls += 1
        self.retried = False

    async def compute_retry_decision(self, event: AfterModelCallContext) -> RetryDecision:
        if self.retried:
            return RetryDecision(retry=False)
        self.retried = True
        return RetryDecision(retry=True, wait=0.25)


async def test_a_subclass_decides_and_the_base_class_orchestrates() -> None:
    custom = EveryOtherTime()
    boom = ValueError("flaky")
    agent = Agent(ScriptedModel([boom, "one", boom, "two"]), retry=custom)
    assert (await agent.chat("a")).text == "one"
    assert (await agent.chat("b")).text == "two"
    assert custom.calls == 2
    assert custom.history == (RetryAttempt(attempt=1, error=boom, wait=0.25),)

    failing = Agent(ScriptedModel([boom, boom]), retry=EveryOtherTime())
    with pytest.raises(ValueError, match="flaky"):
        await failing.chat("c")


async def test_a_retry_set_by_another_hook_is_left_alone() -> None:
    clock = FakeClock()
    agent = Agent(ScriptedModel([ServerError("x", status=500), "done"]), retry=strategy(clock))

    def retry_first(ctx: AfterModelCallContext) -> None:
        if ctx.error is not None:
            ctx.retry = True

    agent.add_hook("after_model_call", retry_first, order=-1)
    await agent.chat("hi")
    assert clock.waits == []


# --- fallback models and the circuit breaker --------------------------------------------


async def test_fallback_moves_to_the_next_model_and_skips_the_failed_one_for_a_while() -> None:
    clock = FakeClock()
    down = OverloadedError("primary down", status=503)
    primary = ScriptedModel([down, "primary is back"], name="primary")
    backup = ScriptedModel(["backup 1", "backup 2"], name="backup")
    agent = Agent(primary, retry=FallbackStrategy([backup], cooldown=60.0, clock=clock))

    assert (await agent.chat("one")).text == "backup 1"
    assert [r.model for r in backup.requests] == ["backup"]
    assert len(primary.requests) == 1

    clock.now = 30.0  # within the cool-down: the primary is not even tried
    assert (await agent.chat("two")).text == "backup 2"
    assert len(primary.requests) == 1

    clock.now = 61.0  # the cool-down is over: the primary gets one try, and succeeds
    assert (await agent.chat("three")).text == "primary is back"
    assert [r.model for r in primary.requests] == ["primary", "primary"]


async def test_fallback_raises_the_last_error_when_every_model_fails() -> None:
    first = ServerError("first down", status=500)
    last = ServerError("second down", status=502)
    agent = Agent(
        ScriptedModel([first], name="a"),
        retry=FallbackStrategy([ScriptedModel([last], name="b")]),
    )
    with pytest.raises(ServerError) as caught:
        await agent.chat("hi")
    assert caught.value is last
    assert [a.error for a in last.attempts] == [first, last]


async def test_fallback_does_not_hide_a_permanent_error() -> None:
    backup = ScriptedModel(["never"], name="backup")
    agent = Agent(
        ScriptedModel([AuthenticationError("bad key", status=401)]),
        retry=FallbackStrategy([backup]),
    )
    with pytest.raises(AuthenticationError):
        await agent.chat("hi")
    assert backup.requests == []


def test_fallback_needs_models() -> None:
    with pytest.raises(UsageError):
        FallbackStrategy([])
    with pytest.raises(UsageError):
        FallbackStrategy(["gpt-4o"])  # type: ignore[list-item]


# Regression: with every circuit open the primary model was still called.
async def test_with_every_circuit_open_no_model_is_called() -> None:
    primary = ScriptedModel([ServerError("p", status=500)] * 3, name="primary")
    backup = ScriptedModel([ServerError("b", status=500)] * 3, name="backup")
    agent = Agent(primary, retry=FallbackStrategy([backup], cooldown=60.0))
    with pytest.raises(ServerError):
        await agent.chat("one")
    for _ in range(2):
        with pytest.raises(CircuitOpenError):
            await agent.chat("again")
    assert (len(primary.requests), len(backup.requests)) == (1, 1)


# Regression: a failed half-open trial did not reopen the circuit.
def test_a_failed_trial_after_the_cool_down_reopens_the_circuit_at_once() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failure_threshold=3, cooldown=10.0, clock=lambda: now[0])
    model = ScriptedModel([])
    for _ in range(3):
        breaker.record_failure(model)
    assert not breaker.allows(model)
    now[0] = 11.0
    assert breaker.allows(model)  # one trial
    breaker.record_failure(model)
    assert not breaker.allows(model)  # reopened by a single failure
    now[0] = 22.0
    breaker.record_success(model)
    assert breaker.allows(model)
    breaker.record_failure(model)
    assert breaker.allows(model)  # closed again: the threshold counts anew


# --- tools --------------------------------------------------------------------------------


async def test_tool_retry_runs_a_flaky_tool_again() -> None:
    clock = FakeClock()
    runs: list[int] = []

    @tool
    async def flaky(n: int) -> str:
        """Fails twice, then works."""
        runs.append(n)
        if len(runs) < 3:
            raise ConnectionError("upstream reset")
        return "fine"

    model = ScriptedModel([tool_call("flaky", {"n": 1}), "done"])
    agent = Agent(model, tools=[flaky], retry=None)
    agent.use(ToolRetryStrategy(retry_on=(ConnectionError,), backoff=NO_JITTER, sleep=clock.sleep))
    seen: list[int] = []
    agent.add_hook("on_tool_call_error", lambda ctx: seen.append(ctx.attempt), order=100)

    assert (await agent.chat("go")).text == "done"
    assert runs == [1, 1, 1]
    assert seen == [1, 2]
    assert clock.waits == [0.5, 1.0]
    result = agent.messages[2]
    assert isinstance(result, ToolMessage)
    assert (result.content, result.is_error) == ("fine", False)


async def test_tool_retry_gives_up_after_max_attempts_and_the_model_sees_the_error() -> None:
    @tool
    async def broken() -> str:
        """Always fails."""
        raise ConnectionError("down for good")

    agent = Agent(ScriptedModel([tool_call("broken", {}), "sorry"]), tools=[broken], retry=None)
    clock = FakeClock()
    agent.use(ToolRetryStrategy(max_attempts=3, backoff=NO_JITTER, sleep=clock.sleep))
    await agent.chat("go")
    result = agent.messages[2]
    assert isinstance(result, ToolMessage)
    assert result.is_error
    assert "down for good" in result.content
    assert clock.waits == [0.5, 1.0]


async def test_tool_retry_leaves_other_errors_and_other_tools_alone() -> None:
    runs: list[str] = []

    @tool
    async def picky(n: int) -> str:
        """Raises a ValueError."""
        runs.append("picky")
        raise ValueError("not retryable")

    @tool
    async def other() -> str:
        """Raises a ConnectionError but is not in the list."""
        runs.append("other")
        raise ConnectionError("x")

    clock = FakeClock()
    script = [
        tool_call("picky", {"n": 1}),
        tool_call("picky", '{"n": "not a number"}'),
        tool_call("other", {}),
        "done",
    ]
    agent = Agent(ScriptedModel(script), tools=[picky, other], retry=None)
    agent.use(ToolRetryStrategy(retry_on=(ConnectionError,), tools=["picky"], sleep=clock.sleep))
    await agent.chat("go")
    assert runs == ["picky", "other"]  # the invalid call never ran; nothing ran twice
    assert clock.waits == []


async def test_retry_is_ignored_for_errors_running_again_cannot_fix() -> None:
    @tool
    async def typed(n: int) -> int:
        """Needs an int."""
        return n

    attempts: list[int] = []

    def always_retry(ctx: ToolErrorContext) -> None:
        attempts.append(ctx.attempt)
        ctx.retry = True

    script = [tool_call("typed", '{"n": "x"}'), tool_call("missing", {}), "done"]
    agent = Agent(ScriptedModel(script), tools=[typed], retry=None)
    agent.add_hook("on_tool_call_error", always_retry)
    assert (await agent.chat("go")).text == "done"
    assert attempts == [1, 1]


def test_a_tool_retry_strategy_serves_one_agent() -> None:
    shared = ToolRetryStrategy()
    Agent(ScriptedModel([])).use(shared)
    with pytest.raises(UsageError, match="already attached"):
        Agent(ScriptedModel([])).use(shared)


def test_strategies_without_an_rng_share_one_jitter_source() -> None:
    """Every agent has a retry strategy: a Random of its own took 2.9 KB of each idle one."""
    from hookloop.retry import ToolRetryStrategy

    seeded = random.Random(7)
    strategies = [DefaultRetryStrategy(), DefaultRetryStrategy(), ToolRetryStrategy()]
    assert all(s._rng is strategies[0]._rng for s in strategies)
    assert DefaultRetryStrategy(rng=seeded)._rng is seeded  # one given is used


async def test_a_call_answered_at_once_still_starts_a_clean_history_after_a_retried_one() -> None:
    # For an answered first attempt the loop skips the strategy while it has retried
    # nothing (it would change nothing); after a retried call it runs and starts afresh.
    clock = FakeClock()
    retry = strategy(clock)
    agent = Agent(ScriptedModel([ServerError("x", status=500), "one", "two", "three"]), retry=retry)
    assert (await agent.chat("a")).text == "one"
    assert [a.attempt for a in retry.history] == [1]
    assert (await agent.chat("b")).text == "two"
    assert retry.history == ()
    assert (await agent.chat("c")).text == "three"
    assert retry.history == ()


async def test_a_subclass_with_its_own_first_attempt_hook_hears_of_every_model_call() -> None:
    custom = EveryOtherTime()
    agent = Agent(ScriptedModel(["one", "two", "three"]), retry=custom)
    for text in ("a", "b", "c"):
        await agent.chat(text)
    assert custom.calls == 3
