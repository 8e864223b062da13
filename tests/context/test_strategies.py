"""Hypothesis strategies and oracles shared by the context tests, and tests of the oracles.

``histories()`` draws conversations made of turns (a user message, then assistant answers
and tool-call groups); ``histories(valid=False)`` then breaks them the ways edits, restores
and other people's trimming do: results deleted or moved, calls deleted, duplicated or
orphaned results. ``problems()`` is an independent (quadratic, obviously correct) statement
of the pairing rule the provider enforces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import Phase, find, given, settings
from hypothesis import strategies as st

from hookloop import (
    AssistantMessage,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

WORDS = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "ação", "数据", "λ", "{x: 1}"]


@st.composite
def texts(draw: st.DrawFn, *, max_words: int = 60) -> str:
    """Text of very different sizes, sometimes huge, cheap to draw."""
    word = draw(st.sampled_from(WORDS))
    repeat = draw(st.one_of(st.integers(1, max_words), st.integers(1, 800)))
    return " ".join([word] * repeat)


@st.composite
def tool_group(draw: st.DrawFn) -> list[Message]:
    calls = tuple(
        ToolCall.create(
            draw(st.sampled_from(["search", "read_file", "add"])),
            {"q": draw(texts(max_words=5))},
        )
        for _ in range(draw(st.integers(1, 3)))
    )
    content = draw(st.one_of(st.just(""), texts(max_words=3)))
    results: list[Message] = [
        ToolMessage(
            tool_call_id=call.id,
            tool_name=call.name,
            content=draw(
                st.one_of(texts(), st.builds(lambda t: json.dumps({"result": t}), texts()))
            ),
            is_error=draw(st.booleans()),
        )
        for call in calls
    ]
    order = draw(st.permutations(range(len(results))))
    return [AssistantMessage(content=content, tool_calls=calls), *(results[i] for i in order)]


@st.composite
def user_message(draw: st.DrawFn) -> UserMessage:
    if draw(st.integers(0, 9)) == 0:
        return UserMessage(content=(TextPart(text=draw(texts())), TextPart(text="more")))
    return UserMessage(content=draw(texts()))


@st.composite
def valid_histories(draw: st.DrawFn, *, system: bool | None = None) -> list[Message]:
    messages: list[Message] = []
    if system if system is not None else draw(st.booleans()):
        messages.append(SystemMessage(content=draw(texts(max_words=20))))
    for turn in range(draw(st.integers(0, 7))):
        if turn or draw(st.integers(0, 4)):  # now and then a history starts with the assistant
            messages.append(draw(user_message()))
        for _ in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                messages.extend(draw(tool_group()))
            else:
                messages.append(AssistantMessage(content=draw(texts())))
    return messages


@st.composite
def broken_histories(draw: st.DrawFn) -> list[Message]:
    """A valid history, then a few of the damages seen in the wild."""
    messages = draw(valid_histories())
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["delete", "orphan", "duplicate", "move", "drop_results"]))
        if kind == "delete" and messages:
            del messages[draw(st.integers(0, len(messages) - 1))]
        elif kind == "orphan":
            at = draw(st.integers(0, len(messages)))
            orphan = ToolMessage(tool_call_id="call_gone", tool_name="search", content="stale")
            messages.insert(at, orphan)
        elif kind == "duplicate":
            tools = [m for m in messages if isinstance(m, ToolMessage)]
            if tools:
                original = draw(st.sampled_from(tools))
                copy = ToolMessage(
                    tool_call_id=original.tool_call_id, tool_name="dup", content="again"
                )
                messages.insert(draw(st.integers(0, len(messages))), copy)
        elif kind == "move" and messages:
            message = messages.pop(draw(st.integers(0, len(messages) - 1)))
            messages.insert(draw(st.integers(0, len(messages))), message)
        elif kind == "drop_results":
            messages = [m for m in messages if not isinstance(m, ToolMessage)]
    return messages


def histories(*, valid: bool | None = None) -> st.SearchStrategy[list[Message]]:
    """Valid histories, broken ones, or (``None``) either."""
    if valid is True:
        return valid_histories()
    if valid is False:
        return broken_histories()
    return st.one_of(valid_histories(), broken_histories())


# --- oracles -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Problems:
    bad_results: frozenset[str]  # ids of tool messages a provider would reject
    unanswered: frozenset[tuple[str, str]]  # (assistant message id, call id)

    def __bool__(self) -> bool:
        return bool(self.bad_results or self.unanswered)

    def within(self, other: Problems) -> bool:
        return self.bad_results <= other.bad_results and self.unanswered <= other.unanswered


def problems(messages: Sequence[Message]) -> Problems:
    """Every tool result must sit in the run of tool messages right after an assistant
    message with tool calls, answer one of its calls, and be the first to answer it; every
    call must be answered in that run."""
    bad: set[str] = set()
    unanswered: set[tuple[str, str]] = set()
    for i, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            head = i - 1
            while head >= 0 and isinstance(messages[head], ToolMessage):
                head -= 1
            owner = messages[head] if head >= 0 else None
            earlier = {m.tool_call_id for m in messages[head + 1 : i] if isinstance(m, ToolMessage)}
            ok = (
                isinstance(owner, AssistantMessage)
                and message.tool_call_id in {c.id for c in owner.tool_calls}
                and message.tool_call_id not in earlier
            )
            if not ok:
                bad.add(message.id)
        elif isinstance(message, AssistantMessage) and message.tool_calls:
            j = i + 1
            answered = set()
            while j < len(messages) and isinstance(messages[j], ToolMessage):
                answered.add(messages[j].tool_call_id)  # type: ignore[union-attr]
                j += 1
            unanswered.update(
                (message.id, c.id) for c in message.tool_calls if c.id not in answered
            )
    return Problems(frozenset(bad), frozenset(unanswered))


def last_user(messages: Sequence[Message]) -> UserMessage | None:
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            return message
    return None


# --- the oracles and strategies themselves ---------------------------------------------------


@given(valid_histories())
def test_valid_histories_have_no_problems(messages: list[Message]) -> None:
    assert not problems(messages)
    assert len({m.id for m in messages}) == len(messages)


def test_problems_finds_each_kind() -> None:
    call = ToolCall(name="f", id="c1")
    other = ToolCall(name="f", id="c2")
    asked = AssistantMessage(tool_calls=(call, other))
    answer = ToolMessage(tool_call_id="c1", tool_name="f", content="1")
    again = ToolMessage(tool_call_id="c1", tool_name="f", content="2")
    orphan = ToolMessage(tool_call_id="zz", tool_name="f", content="3")
    late = ToolMessage(tool_call_id="c2", tool_name="f", content="4")
    user = UserMessage(content="u")
    found = problems([orphan, asked, answer, again, user, late])
    assert found.bad_results == {orphan.id, again.id, late.id}
    assert found.unanswered == {(asked.id, "c2")}


def test_broken_histories_produce_every_kind_of_problem() -> None:
    # The property tests over broken histories are only as good as the damage they see.
    settings_ = settings(database=None, max_examples=2000, phases=[Phase.generate])
    kinds = (
        broken_histories().map(problems).map(lambda p: (bool(p.bad_results), bool(p.unanswered)))
    )
    assert find(kinds, lambda kind: kind[0], settings=settings_)
    assert find(kinds, lambda kind: kind[1], settings=settings_)
