"""What ``on_pre_compress`` handlers return is kept where no summary is written (issue 21
item 26): the sliding window and compaction's drop tier put it into the request in place of
the messages they leave out, as a summary message, for as long as they leave them out.

A real agent runs each case with the scripted model, which records every request it gets.
"""

from __future__ import annotations

from hookloop import Agent, ContextOverflowError, UserMessage
from hookloop.context import SUMMARY_HEADER, Compaction, SlidingWindow, count_request
from hookloop.hooks import PreCompressContext
from hookloop.models import ProviderRequest
from hookloop.testing import ScriptedModel
from tests.context.test_policies import problems, text

NOTE = "Facts to keep: the customer is Kim, order #7 is late."


def keep_the_facts(agent: Agent, said: str | None = NOTE) -> list[int]:
    """A memory hook: returns ``said`` for every batch left out; counts the batches."""
    batches: list[int] = []

    def remember(ctx: PreCompressContext) -> str | None:
        batches.append(len(ctx.messages))
        return said

    agent.add_hook("on_pre_compress", remember)
    return batches


def notes_of(request: ProviderRequest) -> str | None:
    """The text of the request's leading summary message, if it has one."""
    first = request.messages[0] if request.messages else None
    if isinstance(first, UserMessage) and first.text.startswith(SUMMARY_HEADER):
        return first.text
    return None


async def test_a_window_sends_the_kept_text_in_place_of_what_it_leaves_out() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(8)], context_window=700)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    batches = keep_the_facts(agent)
    for i in range(8):
        await agent.chat(f"question {i}: {text(120)}")

    first_out = next(i for i, r in enumerate(model.requests) if len(r.messages) < 2 * i + 1)
    assert all(notes_of(r) is None for r in model.requests[:first_out])
    for request in model.requests[first_out:]:  # every later request, in every later chat
        notes = notes_of(request)
        assert notes is not None
        assert NOTE in notes
        assert count_request(request, counter=agent.history.token_counter) <= 700 - 100
        assert problems(request.messages) == []
    assert len(batches) > 1  # the window left messages out more than once
    assert agent.messages[0].text.startswith("question 0")  # the stored history is untouched


async def test_every_kept_text_joins_the_summary_message_in_order() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(6)], context_window=700)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    said = iter(f"fact {n}" for n in range(100))
    agent.add_hook("on_pre_compress", lambda ctx: next(said))
    for i in range(6):
        await agent.chat(f"question {i}: {text(120)}")

    last = notes_of(model.requests[-1])
    assert last is not None
    facts = last.split("\n\n")[1:]
    assert facts == [f"fact {n}" for n in range(len(facts))]
    assert len(facts) >= 2


async def test_nothing_is_added_when_the_handlers_return_nothing() -> None:
    model = ScriptedModel([f"answer {i}" for i in range(6)], context_window=700)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    batches = keep_the_facts(agent, said=None)
    for i in range(6):
        await agent.chat(f"question {i}: {text(120)}")

    assert batches
    assert all(notes_of(r) is None for r in model.requests)


async def test_compactions_drop_tier_sends_the_kept_text_with_the_smaller_request() -> None:
    overflow = ContextOverflowError("This model's maximum context length is 500 tokens.")
    model = ScriptedModel(["a", "b", "c", overflow, "fits now", "and again"])
    agent = Agent(model, retry=None, context=Compaction())
    keep_the_facts(agent)
    for i in range(3):
        await agent.chat(f"turn {i}: {text(100)}")

    assert (await agent.chat("the last question")).text == "fits now"
    failed, retried = model.requests[3], model.requests[4]
    assert notes_of(failed) is None
    assert notes_of(retried) == f"{SUMMARY_HEADER}\n\n{NOTE}"
    assert len(retried.messages) < len(failed.messages)
    await agent.chat("one more")  # the whole history fits again: the turns are back
    assert notes_of(model.requests[5]) is None


async def test_a_window_makes_room_for_kept_texts_that_grow_from_chat_to_chat() -> None:
    # Each batch left out adds a text: the window's room shrinks with the kept texts' tokens
    # (it was kept from the first request on, and the requests outgrew the budget by them).
    model = ScriptedModel([f"answer {i}" for i in range(12)], context_window=900)
    agent = Agent(model, retry=None, context=SlidingWindow(reserve=100))
    said = iter(f"fact {n}: " + "kept words " * 15 for n in range(100))
    agent.add_hook("on_pre_compress", lambda ctx: next(said))
    for i in range(12):
        await agent.chat(f"question {i}: {text(120)}")

    counter = agent.history.token_counter
    assert sum(notes_of(r) is not None for r in model.requests) >= 4
    for request in model.requests:
        assert count_request(request, counter=counter) <= 900 - 100
        assert problems(request.messages) == []
