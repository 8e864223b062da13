"""Rows are built without the general loader, and a corrupt one is still refused by name."""

from __future__ import annotations

import json

import pytest

from hookloop import (
    AssistantMessage,
    CorruptSessionError,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
)
from hookloop.sessions import MESSAGE_FORMAT, StoredMessage
from hookloop.sessions._codec import decode_rows, encode_message

CALL = ToolCall(name="lookup", arguments='{"key": 1}')
GOOD: list[Message] = [
    SystemMessage(content="Be brief."),
    UserMessage(content="Where is my order?"),
    AssistantMessage(content="Let me look.", tool_calls=(CALL,)),
    ToolMessage(tool_call_id=CALL.id, tool_name="lookup", content="shipped", is_error=False),
    AssistantMessage(content="It has shipped."),
]


def rows(messages: list[Message]) -> list[tuple[int, object, object, object]]:
    return [(n, m.id, MESSAGE_FORMAT, encode_message(m)) for n, m in enumerate(messages, 1)]


def test_the_stores_own_rows_come_back_equal_and_of_their_classes() -> None:
    loaded = decode_rows("s", rows(GOOD))
    assert loaded == [StoredMessage(seq=n, message=m) for n, m in enumerate(GOOD, 1)]
    assert [type(s.message) for s in loaded] == [type(m) for m in GOOD]
    assert [type(c) for c in loaded[2].message.tool_calls] == [ToolCall]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("position", "path", "value", "reason"),
    [
        (1, ("content",), 5, "content"),
        (0, ("content",), ["not", "text"], "content"),
        (2, ("content",), None, "content"),
        (2, ("tool_calls", 0, "arguments"), {"key": 1}, "arguments"),
        (2, ("tool_calls", 0, "name"), 7, "name"),
        (2, ("tool_calls",), {"0": "x"}, "tool_calls"),
        (3, ("is_error",), "maybe", "is_error"),
        (3, ("tool_name",), 1.5, "tool_name"),
        (4, ("id",), "", "id"),
    ],
)
def test_a_row_with_the_stores_fields_but_a_wrong_type_is_corrupt_and_named(
    position: int, path: tuple[str | int, ...], value: object, reason: str
) -> None:
    good = rows(GOOD)
    seq, message_id, version, text = good[position]
    item = json.loads(str(text))
    target = item
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    good[position] = (seq, message_id, version, json.dumps(item))
    with pytest.raises(CorruptSessionError) as caught:
        decode_rows("s", good)
    assert caught.value.seq == seq
    assert reason in str(caught.value)
    unreadable: list[CorruptSessionError] = []
    kept = decode_rows("s", good, unreadable)
    assert [s.seq for s in kept] == [n for n in range(1, 6) if n != seq]
    assert [e.seq for e in unreadable] == [seq]
