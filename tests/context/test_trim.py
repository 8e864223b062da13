"""trim_to_budget(), truncate_tool_results() and group_units(): pure, linear, pairing-safe."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from typing import overload

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
)
from hookloop.context import (
    CachingCounter,
    EstimateCounter,
    cut_to_fit,
    group_units,
    repair,
    trim_to_budget,
    truncate_tool_results,
)
from hookloop.models import ToolDefinition
from tests.context.test_strategies import histories, last_user, problems

MARKER = re.compile(r"\[truncated: (\d+) characters removed to fit the context window\]$")


class LenCounter:
    """One token per character of content plus one per message: easy to reason about."""

    def __init__(self) -> None:
        self.calls = 0

    def count_text(self, text: str) -> int:
        return len(text)

    def count_message(self, message: Message) -> int:
        self.calls += 1
        content = message.content
        text = (
            content
            if isinstance(content, str)
            else "".join(p.text if isinstance(p, TextPart) else "IMG" for p in content)
        )
        calls = message.tool_calls if isinstance(message, AssistantMessage) else ()
        return 1 + len(text) + sum(len(c.arguments) for c in calls)

    def count_system(self, prompt: str) -> int:
        return 1 + len(prompt)

    def count_tools(self, tools: Sequence[ToolDefinition]) -> int:
        return len(tools)


def user(text: str) -> UserMessage:
    return UserMessage(content=text)


def said(text: str) -> AssistantMessage:
    return AssistantMessage(content=text)


def group(name: str, *results: str) -> list[Message]:
    calls = tuple(ToolCall(name=name, arguments="", id=f"{name}{i}") for i in range(len(results)))
    return [
        AssistantMessage(tool_calls=calls),
        *(
            ToolMessage(tool_call_id=c.id, tool_name=name, content=r)
            for c, r in zip(calls, results, strict=True)
        ),
    ]


def total(messages: Sequence[Message], counter: LenCounter | EstimateCounter) -> int:
    return sum(counter.count_message(m) for m in messages)


# --- group_units -----------------------------------------------------------------------------


def test_group_units_keeps_calls_with_their_results_and_orphans_together() -> None:
    orphan = ToolMessage(tool_call_id="x", tool_name="t", content="o")
    messages = [orphan, orphan, user("u"), *group("f", "1", "2"), said("a"), *group("g")]
    assert group_units(messages) == [range(2), range(2, 3), range(3, 6), range(6, 7), range(7, 8)]


@given(histories())
def test_units_cover_the_messages_in_order(messages: list[Message]) -> None:
    units = group_units(messages)
    assert [i for unit in units for i in unit] == list(range(len(messages)))
    for unit in units:
        head = messages[unit.start]
        if len(unit) > 1:
            assert all(isinstance(messages[i], ToolMessage) for i in unit[1:])
            assert isinstance(head, ToolMessage) or (
                isinstance(head, AssistantMessage) and head.tool_calls
            )


# --- trim_to_budget: examples ----------------------------------------------------------------


def test_when_everything_fits_the_input_comes_back() -> None:
    messages = (SystemMessage(content="s"), user("u"), said("a"))
    assert trim_to_budget(messages, 100, counter=LenCounter()) is messages
    as_list = list(messages)
    assert trim_to_budget(as_list, 100, counter=LenCounter()) == messages


def test_oldest_units_go_first_and_the_pinned_stay() -> None:
    system = SystemMessage(content="s" * 9)  # 10 tokens
    u1, a1, u2, a2, u3 = user("1" * 9), said("2" * 9), user("3" * 9), said("4" * 9), user("5" * 9)
    messages = [system, u1, a1, u2, a2, u3]
    counter = LenCounter()
    assert trim_to_budget(messages, 60, counter=counter) == tuple(messages)
    # At 50, a1 would fit too, but the kept conversation must start at a user message.
    assert trim_to_budget(messages, 50, counter=counter) == (system, u2, a2, u3)
    assert trim_to_budget(messages, 40, counter=counter) == (system, u2, a2, u3)
    assert trim_to_budget(messages, 39, counter=counter) == (system, u3)
    assert trim_to_budget(messages, 20, counter=counter) == (system, u3)


def test_the_kept_conversation_starts_at_a_user_message() -> None:
    u1, a1, u2 = user("1" * 99), said("2" * 9), user("3" * 9)
    # a1 would fit, but an answer without its question is dropped too.
    assert trim_to_budget([u1, a1, u2], 25, counter=LenCounter()) == (u2,)


def test_a_tool_group_is_kept_or_dropped_whole() -> None:
    u1, u2 = user("question"), user("follow-up")
    tools = group("f", "r" * 30, "s" * 5)
    tail = said("done")
    messages = [u1, u2, *tools, tail]
    counter = LenCounter()
    # Room for the answer and the small result, but not for the whole group: no split.
    small = total([u2, tail, tools[0], tools[2]], counter)
    assert trim_to_budget(messages, small, counter=counter) == (u2, tail)
    whole = total([u2, *tools, tail], counter)
    assert trim_to_budget(messages, whole, counter=counter) == (u2, *tools, tail)


def test_the_current_turns_tool_results_stay_before_older_turns() -> None:
    u1, a1 = user("old question"), said("old answer")
    u2 = user("now")
    first, second = group("f", "x" * 20), group("g", "y" * 20)
    messages = [u1, a1, u2, *first, *second]
    counter = LenCounter()
    budget = total([u2, *first, *second], counter)
    assert trim_to_budget(messages, budget, counter=counter) == (u2, *first, *second)
    assert trim_to_budget(messages, budget - 1, counter=counter) == (u2, *second)


def test_a_huge_newest_tool_result_is_truncated_not_dropped() -> None:
    system = SystemMessage(content="rules")
    question = user("read the file")
    calls = (
        ToolCall(name="read", arguments="", id="r1"),
        ToolCall(name="ls", arguments="", id="l1"),
    )
    asked = AssistantMessage(content="reading", tool_calls=calls)
    big = ToolMessage(tool_call_id="r1", tool_name="read", content="z" * 10_000)
    small = ToolMessage(tool_call_id="l1", tool_name="ls", content="a b c")
    messages = [system, question, asked, big, small]
    counter = LenCounter()
    out = trim_to_budget(messages, 500, counter=counter)

    assert out[:3] == (system, question, asked)  # the assistant text was not touched
    assert out[4] is small  # the small result neither
    cut = out[3]
    assert isinstance(cut, ToolMessage)
    assert cut.id == big.id
    assert cut.tool_call_id == "r1"
    assert cut.content.startswith("z" * 100)
    match = MARKER.search(cut.content)
    assert match is not None
    assert int(match.group(1)) == 10_000 - cut.content.index("\n")
    assert total(out, counter) <= 500
    assert not problems(out)


def test_assistant_text_is_cut_after_tool_results() -> None:
    question = user("q")
    calls = (ToolCall(name="f", arguments="", id="f1"),)
    asked = AssistantMessage(content="t" * 3000, tool_calls=calls)
    answer = ToolMessage(tool_call_id="f1", tool_name="f", content="r" * 3000)
    counter = LenCounter()
    out = trim_to_budget([question, asked, answer], 400, counter=counter)
    assert [m.id for m in out] == [question.id, asked.id, answer.id]
    assert MARKER.search(out[1].content)
    assert MARKER.search(out[2].content)
    assert total(out, counter) <= 400


def test_tool_results_are_cut_before_assistant_text() -> None:
    question = user("q")
    calls = (ToolCall(name="f", arguments="", id="f1"),)
    asked = AssistantMessage(content="t" * 3000, tool_calls=calls)
    answer = ToolMessage(tool_call_id="f1", tool_name="f", content="r" * 3000)
    out = trim_to_budget([question, asked, answer], 3400, counter=LenCounter())
    assert out[1] is asked  # cutting the result was enough
    assert out[2].id == answer.id
    assert MARKER.search(out[2].content)  # type: ignore[arg-type]


def test_a_result_too_short_to_gain_from_cutting_is_left_alone() -> None:
    question = user("q")
    calls = (ToolCall(name="f", arguments="", id="f1"), ToolCall(name="g", arguments="", id="g1"))
    asked = AssistantMessage(content="t" * 3000, tool_calls=calls)
    big = ToolMessage(tool_call_id="f1", tool_name="f", content="r" * 200)
    tiny = ToolMessage(tool_call_id="g1", tool_name="g", content="abc")
    counter = LenCounter()
    out = trim_to_budget([question, asked, big, tiny], 400, counter=counter)
    assert out[3] is tiny  # a marker would make it longer
    assert MARKER.search(out[1].content)  # type: ignore[arg-type]
    assert MARKER.search(out[2].content)  # type: ignore[arg-type]
    assert total(out, counter) <= 400


def test_only_the_newest_unit_of_the_turn_is_truncated() -> None:
    question = user("q")
    older, newer = group("f", "x" * 1000), group("g", "y" * 10)
    out = trim_to_budget([question, *older, *newer], 100, counter=LenCounter())
    assert out == (question, *newer)  # the older unit is dropped, not cut to fill the room


def test_system_messages_anywhere_are_kept() -> None:
    first, middle = SystemMessage(content="s"), SystemMessage(content="m")
    messages = [first, user("1" * 50), middle, said("2" * 50), user("3")]
    assert trim_to_budget(messages, 20, counter=LenCounter()) == (first, middle, messages[-1])


def test_an_older_huge_unit_is_dropped_with_everything_before_it() -> None:
    u1, big, u2, a2 = user("first"), said("B" * 5000), user("second"), said("ok")
    counter = LenCounter()
    assert trim_to_budget([u1, big, u2, a2], 100, counter=counter) == (u2, a2)


def test_an_uncuttable_newest_unit_is_dropped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    question = user("q")
    call = ToolCall(name="write", arguments="x" * 1000, id="w1")  # arguments are never cut
    unit = [
        AssistantMessage(tool_calls=(call,)),
        ToolMessage(tool_call_id="w1", tool_name="w", content=""),
    ]
    with caplog.at_level(logging.WARNING, logger="hookloop.context._trim"):
        assert trim_to_budget([question, *unit], 100, counter=LenCounter()) == (question,)
    assert "cannot be cut" in caplog.text


def test_when_the_pinned_messages_exceed_the_budget_the_last_user_message_is_cut() -> None:
    system = SystemMessage(content="s" * 50)
    question = user("q" * 1000)
    counter = LenCounter()
    out = trim_to_budget([system, said("a"), question], 200, counter=counter)
    assert out[0] is system
    assert out[1].id == question.id
    assert MARKER.search(out[1].content)
    assert total(out, counter) <= 200
    assert len(out) == 2


def test_a_user_message_with_parts_keeps_its_images_when_cut() -> None:
    image = ImagePart(url="https://example.com/cat.png")
    question = UserMessage(content=(TextPart(text="a" * 500), image, TextPart(text="b" * 500)))
    out = trim_to_budget([question], 300, counter=LenCounter())
    (cut,) = out
    assert isinstance(cut, UserMessage)
    assert isinstance(cut.content, tuple)
    assert image in cut.content
    assert LenCounter().count_message(cut) <= 300


def test_a_system_prompt_larger_than_the_budget_is_kept_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    system = SystemMessage(content="s" * 500)
    question = user("q")
    with caplog.at_level(logging.WARNING, logger="hookloop.context._trim"):
        out = trim_to_budget([system, said("a"), question], 100, counter=LenCounter())
    assert out == (system, question)
    assert "exceed the budget" in caplog.text


def test_counts_must_match_the_messages() -> None:
    with pytest.raises(UsageError, match="counts has 1 items for 2 messages"):
        trim_to_budget([user("a"), user("b")], 1, counter=LenCounter(), counts=[1])


# --- trim_to_budget: properties --------------------------------------------------------------


@st.composite
def trim_cases(draw: st.DrawFn) -> tuple[list[Message], int]:
    messages = draw(histories())
    size = total(messages, EstimateCounter())
    return messages, draw(st.integers(0, size + 20))


@given(trim_cases(), st.sampled_from([0.0, 0.25, 0.5]))
def test_trim_properties(case: tuple[list[Message], int], headroom: float) -> None:
    messages, budget = case
    counter = EstimateCounter()
    before = list(messages)
    out = trim_to_budget(messages, budget, counter=counter, headroom=headroom)
    if headroom:  # in steps: never more than the most that fits, and the same rules
        most = trim_to_budget(messages, budget, counter=counter)
        assert {m.id for m in out} <= {m.id for m in most}

    # The input is untouched.
    assert messages == before
    assert all(a is b for a, b in zip(messages, before, strict=True))
    # Order: ids form a subsequence; unchanged messages are the same objects.
    by_id = {m.id: (i, m) for i, m in enumerate(messages)}
    positions = [by_id[m.id][0] for m in out]
    assert positions == sorted(set(positions))
    for message in out:
        original = by_id[message.id][1]
        if message is not original:  # a truncated copy: shorter, marked, same kind
            assert type(message) is type(original)
            text = message.content if isinstance(message.content, str) else message.content[-1].text  # type: ignore[union-attr]
            assert MARKER.search(text)
            assert counter.count_message(message) < counter.count_message(original)
    # System messages and the last user message are kept.
    kept = {m.id for m in out}
    assert all(m.id in kept for m in messages if isinstance(m, SystemMessage))
    assert all(by_id[m.id][1] is m for m in out if isinstance(m, SystemMessage))
    final = last_user(messages)
    if final is not None:
        assert final.id in kept
    # The budget holds whenever the pinned messages fit in it.
    pinned = [m for m in messages if isinstance(m, SystemMessage) or m is final]
    if total(pinned, counter) <= budget:
        assert total(out, counter) <= budget
    if total(messages, counter) <= budget:
        assert out == tuple(messages)
    # Units are kept or dropped whole; no new pairing problem.
    for unit in group_units(messages):
        ids = {messages[i].id for i in unit}
        assert ids <= kept or not ids & kept
    assert problems(out).within(problems(messages))
    # Oldest first: the unpinned messages kept are the newest unpinned ones.
    pinned_ids = {m.id for m in pinned}
    unpinned_in = [m.id for m in messages if m.id not in pinned_ids]
    unpinned_out = [m.id for m in out if m.id not in pinned_ids]
    assert unpinned_out == unpinned_in[len(unpinned_in) - len(unpinned_out) :]


@given(trim_cases())
def test_repair_then_trim_is_always_sendable(case: tuple[list[Message], int]) -> None:
    messages, budget = case
    out = trim_to_budget(repair(messages), budget, counter=EstimateCounter())
    assert not problems(out)


# --- linear time, counted rather than timed ---------------------------------------------------


class CountingSequence(Sequence[Message]):
    """A read-only sequence that counts how many items are read from it."""

    def __init__(self, items: Sequence[Message]) -> None:
        self._items = items
        self.reads = 0

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Message: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Message]: ...
    def __getitem__(self, index: int | slice) -> Message | Sequence[Message]:
        if isinstance(index, slice):
            part = self._items[index]
            self.reads += len(part)
            return part
        self.reads += 1
        return self._items[index]

    def __iter__(self) -> Iterator[Message]:
        for item in self._items:
            self.reads += 1
            yield item


def long_history(n: int) -> list[Message]:
    """n messages: user / assistant turns, every tenth assistant message a tool call."""
    messages: list[Message] = [SystemMessage(content="You are helpful.")]
    turn = 0
    while len(messages) < n:
        messages.append(user(f"question {turn} " * 5))
        if turn % 10 == 9:
            messages.extend(group(f"tool{turn}", f"result {turn} " * 20))
        messages.append(said(f"answer {turn} " * 10))
        turn += 1
    return messages[:n]


def test_a_warm_trim_counts_nothing_and_a_cold_one_counts_only_what_it_walks() -> None:
    messages = long_history(10_000)
    spy = LenCounter()
    counter = CachingCounter(spy)
    cold = trim_to_budget(messages, 4000, counter=counter)
    walked = spy.calls
    assert 0 < walked < len(messages) // 10  # the newest units, the pinned ones, no more
    assert walked >= len(cold) - 1
    warm = trim_to_budget(messages, 4000, counter=counter)
    assert spy.calls == walked  # every count came from the cache
    assert warm == cold
    given_counts = [spy.count_message(m) for m in messages]
    spy.calls = 0
    assert trim_to_budget(messages, 4000, counter=spy, counts=given_counts) == cold
    assert spy.calls == 0


def test_trimming_reads_each_message_a_bounded_number_of_times() -> None:
    reads = {}
    for n in (5_000, 10_000, 20_000):
        messages = CountingSequence(long_history(n))
        counts = [LenCounter().count_message(m) for m in messages._items]
        messages.reads = 0
        trim_to_budget(messages, 4000, counter=LenCounter(), counts=counts)
        reads[n] = messages.reads
    # Linear: a constant number of reads per message, not a number that grows with n.
    assert reads[5_000] <= 3 * 5_000
    assert reads[20_000] <= 2 * reads[10_000] + 100
    assert reads[10_000] <= 2 * reads[5_000] + 100


# --- truncate_tool_results --------------------------------------------------------------------


def test_old_tool_results_are_cut_and_the_newest_kept() -> None:
    old = group("f", "o" * 500)
    newer = group("g", "n" * 500)
    messages = [user("u"), *old, said("a"), *newer]
    out = truncate_tool_results(messages, max_chars=100)
    assert out[:2] == tuple(messages[:2])
    assert out[3:] == tuple(messages[3:])
    cut = out[2]
    assert isinstance(cut, ToolMessage)
    assert cut.id == old[1].id
    assert (
        cut.content == "o" * 100 + "\n[truncated: 400 characters removed to fit the context window]"
    )
    everything = truncate_tool_results(messages, max_chars=100, keep_recent=0)
    assert MARKER.search(everything[-1].content)  # type: ignore[arg-type]
    assert truncate_tool_results(messages, max_chars=100, keep_recent=5) == tuple(messages)


def test_truncating_tool_results_changes_nothing_when_nothing_is_long() -> None:
    messages = (user("u"), *group("f", "short"), *group("g", "x" * 120))
    # 120 chars cut to 100 plus a 60-char marker would be longer: left alone.
    assert truncate_tool_results(messages, max_chars=100, keep_recent=0) is messages
    with pytest.raises(UsageError):
        truncate_tool_results(messages, max_chars=-1)


@given(histories(), st.integers(0, 300), st.integers(0, 3))
def test_truncating_tool_results_keeps_every_message_in_place(
    messages: list[Message], max_chars: int, keep_recent: int
) -> None:
    before = list(messages)
    out = truncate_tool_results(messages, max_chars=max_chars, keep_recent=keep_recent)
    assert messages == before
    assert [m.id for m in out] == [m.id for m in messages]
    assert problems(out) == problems(messages)
    for new, old in zip(out, messages, strict=True):
        if new is not old:
            assert isinstance(new, ToolMessage)
            assert isinstance(old, ToolMessage)
            assert len(new.content) < len(old.content)
            assert new.content.startswith(old.content[:max_chars])


def test_cut_to_fit_cuts_the_largest_tool_result_first_and_keeps_every_message() -> None:
    counter = EstimateCounter()
    first, second = ToolCall(name="read", id="c1"), ToolCall(name="read", id="c2")
    turn = [
        UserMessage(content="read both files"),
        AssistantMessage(tool_calls=(first,)),
        ToolMessage(tool_call_id="c1", tool_name="read", content="x" * 4_000),
        AssistantMessage(tool_calls=(second,)),
        ToolMessage(tool_call_id="c2", tool_name="read", content="short"),
    ]

    cut = cut_to_fit(turn, 200, counter=counter)

    assert cut is not None
    assert [m.id for m in cut] == [m.id for m in turn]
    assert sum(map(counter.count_message, cut)) <= 200
    assert cut[2].content.startswith("x" * 100)
    assert "[truncated:" in cut[2].content
    assert [cut[i] for i in (0, 1, 3, 4)] == [turn[i] for i in (0, 1, 3, 4)]
    assert cut_to_fit(turn, 10_000, counter=counter) == tuple(turn)
    assert cut_to_fit(turn, 10, counter=counter) is None  # framing alone is larger
