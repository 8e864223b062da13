"""repair(): no orphaned tool result, no unanswered call, nothing else touched."""

from __future__ import annotations

from hypothesis import given

from hookloop import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from hookloop.context import MISSING_RESULT_TEXT, repair
from tests.context.test_strategies import histories, problems

C1 = ToolCall(name="search", id="c1")
C2 = ToolCall(name="read", id="c2")


def result(call: ToolCall, content: str = "ok") -> ToolMessage:
    return ToolMessage(tool_call_id=call.id, tool_name=call.name, content=content)


def missing(call: ToolCall) -> ToolMessage:
    return ToolMessage(
        tool_call_id=call.id,
        tool_name=call.name,
        content=MISSING_RESULT_TEXT,
        is_error=True,
        id=f"msg_noresult_{call.id}",
    )


def test_a_valid_history_is_returned_itself() -> None:
    messages = [
        SystemMessage(content="s"),
        UserMessage(content="u"),
        AssistantMessage(tool_calls=(C1, C2)),
        result(C2),
        result(C1),
        AssistantMessage(content="done"),
    ]
    assert repair(messages) is messages
    empty: tuple[Message, ...] = ()
    assert repair(empty) is empty


def test_orphaned_and_duplicate_results_are_dropped() -> None:
    user = UserMessage(content="u")
    asked = AssistantMessage(tool_calls=(C1,))
    answer = result(C1)
    orphan = ToolMessage(tool_call_id="nobody", tool_name="x", content="stale")
    duplicate = result(C1, "again")
    late = result(C1, "late")  # after the turn closed
    after = AssistantMessage(content="a")
    assert repair([orphan, user, asked, answer, duplicate, after, late]) == (
        user,
        asked,
        answer,
        after,
    )


def test_unanswered_calls_get_an_error_result_where_the_turn_closes() -> None:
    user = UserMessage(content="u")
    asked = AssistantMessage(tool_calls=(C1, C2))
    answer = result(C2)
    next_user = UserMessage(content="next")
    assert repair([user, asked, answer, next_user]) == (
        user,
        asked,
        answer,
        missing(C1),
        next_user,
    )
    # at the very end too, in call order
    assert repair([user, asked]) == (user, asked, missing(C1), missing(C2))


def test_a_result_separated_from_its_call_counts_as_orphaned() -> None:
    asked = AssistantMessage(tool_calls=(C1,))
    between = SystemMessage(content="interjection")
    answer = result(C1)
    assert repair([asked, between, answer]) == (asked, missing(C1), between)


def test_the_same_call_id_unanswered_twice_gets_distinct_result_ids() -> None:
    first = AssistantMessage(tool_calls=(C1,))
    second = AssistantMessage(tool_calls=(C1,))
    out = repair([first, UserMessage(content="u"), second])
    ids = [m.id for m in out]
    assert len(set(ids)) == len(ids)
    assert [m.tool_call_id for m in out if isinstance(m, ToolMessage)] == ["c1", "c1"]


def test_repairing_the_same_history_twice_gives_equal_messages() -> None:
    broken = [UserMessage(content="u"), AssistantMessage(tool_calls=(C1,))]
    assert repair(broken) == repair(broken)


@given(histories())
def test_repair_leaves_no_problem_and_changes_nothing_else(messages: list[Message]) -> None:
    before = list(messages)
    found = problems(messages)
    out = repair(messages)

    assert messages == before
    assert all(a is b for a, b in zip(messages, before, strict=True))
    assert not problems(out)
    if not found:
        assert out is messages
    # Kept messages: the same objects, in the same order; dropped ones were all bad results.
    originals = {id(m) for m in messages}
    kept = [m for m in out if id(m) in originals]
    position = {id(m): i for i, m in enumerate(messages)}
    assert [position[id(m)] for m in kept] == sorted(position[id(m)] for m in kept)
    dropped = {m.id for m in messages} - {m.id for m in kept}
    assert dropped == found.bad_results
    # Added messages: exactly one error result per unanswered call.
    added = [m for m in out if id(m) not in originals]
    assert all(isinstance(m, ToolMessage) and m.is_error for m in added)
    assert all(m.content == MISSING_RESULT_TEXT for m in added)  # type: ignore[union-attr]
    assert sorted(m.tool_call_id for m in added) == sorted(  # type: ignore[union-attr]
        call_id for _, call_id in found.unanswered
    )
    assert len({m.id for m in out}) == len(out)


@given(histories(valid=False))
def test_repair_is_idempotent(messages: list[Message]) -> None:
    once = repair(messages)
    assert repair(once) is once
