"""A context policy reports what it leaves out; the loop fires ``on_pre_compress``.

The sliding window and compaction's drop tier set ``ctx.left_out`` instead of dispatching
the event from inside their handlers: ``_loop.py`` stays the only place that sequences
events (DESIGN sections 2 and 8), and the order a user sees is the one it was.
"""

from __future__ import annotations

import pytest

from hookloop import (
    AfterModelCallContext,
    Agent,
    ContextOverflowError,
    HookReturnError,
    MessageContext,
    PreRequestContext,
    ResponseContext,
    UserMessage,
)
from hookloop.context import Compaction, SlidingWindow
from hookloop.hooks import Phase, PreCompressContext
from hookloop.testing import ScriptedModel


def text(words: int) -> str:
    return " ".join(f"word{i}" for i in range(words))


def event_log(agent: Agent) -> list[str]:
    """Every chat event as it fires, with the count of messages on_pre_compress got."""
    log: list[str] = []

    def pre_request(ctx: PreRequestContext) -> None:
        log.append(f"pre_request {ctx.iteration}/{ctx.attempt}")

    def pre_compress(ctx: PreCompressContext) -> None:
        log.append(f"on_pre_compress {len(ctx.messages)}")

    def after(ctx: AfterModelCallContext) -> None:
        log.append(f"after_model_call {'error' if ctx.error else 'ok'}")

    def response(ctx: ResponseContext) -> None:
        log.append("on_response")

    def message(ctx: MessageContext) -> None:
        log.append(f"on_message {ctx.message.role}")

    agent.add_hook("pre_request", pre_request)
    agent.add_hook("on_pre_compress", pre_compress)
    agent.add_hook("after_model_call", after)
    agent.add_hook("on_response", response)
    agent.add_hook("on_message", message)
    return log


TURN = ["on_message user", "pre_request 0/1"]
ANSWERED = ["after_model_call ok", "on_response", "on_message assistant"]


async def test_the_windows_event_order_is_what_it_was() -> None:
    # The same sequence as when the window fired on_pre_compress from its own handler.
    model = ScriptedModel([f"a{i}" for i in range(6)], context_window=600)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    log = event_log(agent)
    for i in range(6):
        await agent.chat(f"question {i}: {text(60)}")

    assert log == [
        *(TURN + ANSWERED) * 4,
        *TURN,
        # The window leaves the first two turns out, before the model call (it moves in
        # steps of a quarter of its 500 tokens: two turns' worth here)...
        "on_pre_compress 4",
        *ANSWERED,
        *TURN,
        "on_pre_compress 2",  # ...and then the third, once
        *ANSWERED,
    ]


@pytest.mark.parametrize("policy", [SlidingWindow, Compaction])
async def test_on_pre_compress_of_a_recovery_fires_once_after_model_call_returned(
    policy: type[SlidingWindow | Compaction],
) -> None:
    # Between the failed attempt's after_model_call handlers and the next attempt, as
    # compaction's summary always did (it used to fire before the user's handlers).
    overflow = ContextOverflowError("This model's maximum context length is 500 tokens.")
    model = ScriptedModel(["a", "b", "c", overflow, "fits now"])
    agent = Agent(model, retry=None, context=policy())
    log = event_log(agent)
    for i in range(4):
        await agent.chat(f"turn {i}: {text(60)}")

    failed, retried = model.requests[3], model.requests[4]
    dropped = len(failed.messages) - len(retried.messages)
    assert dropped == (6 if policy is SlidingWindow else 4)  # the window trims in its steps
    assert log == [
        *(TURN + ANSWERED) * 3,
        *TURN,
        "after_model_call error",
        f"on_pre_compress {dropped}",
        "pre_request 0/2",
        *ANSWERED,
    ]


async def test_on_pre_compress_fires_after_every_pre_request_handler() -> None:
    # Even one placed after the window (ContextHooks' phase): the loop fires the event
    # once the chain returned, not the window from the middle of it.
    model = ScriptedModel([f"answer {i}" for i in range(6)], context_window=600)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    log: list[str] = []
    agent.add_hook("pre_request", lambda ctx: log.append("last pre_request"), order=Phase.LAST)
    agent.add_hook("on_pre_compress", lambda ctx: log.append(f"compress {len(ctx.messages)}"))
    for i in range(6):
        await agent.chat(f"question {i}: {text(60)}")

    assert log == [*["last pre_request"] * 5, "compress 4", "last pre_request", "compress 2"]


async def test_a_handler_that_leaves_messages_out_gets_on_pre_compress_from_the_loop() -> None:
    agent = Agent(ScriptedModel(["one", "two"]), retry=None, context=None)
    await agent.chat("first")
    first_turn = agent.messages

    def leave_out_the_first_turn(ctx: PreRequestContext) -> None:
        if len(agent.messages) > 2:
            ctx.left_out = (*ctx.left_out, *first_turn)

    seen: list[tuple[str, ...]] = []
    agent.add_hook("pre_request", leave_out_the_first_turn)
    agent.add_hook("on_pre_compress", lambda ctx: seen.append(tuple(m.id for m in ctx.messages)))
    await agent.chat("second")

    assert seen == [tuple(m.id for m in first_turn)]
    assert agent.messages[:2] == first_turn  # left out of a request, never from the history


@pytest.mark.parametrize(
    "value", [["a list"], ("not a message",), UserMessage(content="one, not a tuple")]
)
async def test_left_out_of_another_type_is_a_hook_return_error(value: object) -> None:
    agent = Agent(ScriptedModel(["unused"]), retry=None, context=None)

    def bad(ctx: PreRequestContext) -> None:
        ctx.left_out = value  # type: ignore[assignment]

    agent.add_hook("pre_request", bad)
    with pytest.raises(HookReturnError, match="left_out must be a tuple of messages"):
        await agent.chat("hi")
    assert [m.role for m in agent.messages] == ["user"]
