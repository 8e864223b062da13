"""A restore takes the trusted path for every backend's own rows, and still names a bad one.

The trusted path builds the messages without the general loader (``load_messages``); these
tests make that loader fail, so a row that silently fell back to it would show.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings

from hookloop import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from hookloop._errors import CorruptSessionError
from hookloop.sessions import MESSAGE_FORMAT, StoredMessage, _codec
from hookloop.sessions._codec import Row, decode_rows, encode_message
from tests.context.test_strategies import histories

CALL = ToolCall(name="lookup", arguments='{"key": 1}')
MESSAGES: list[Message] = [
    UserMessage(content="Where is my order?"),
    AssistantMessage(content="Let me look.", tool_calls=(CALL,)),
    ToolMessage(tool_call_id=CALL.id, tool_name="lookup", content='{"state": "shipped"}'),
    AssistantMessage(content="It has shipped."),
]


def as_text(messages: list[Message]) -> list[Row]:
    """Rows as SQLite and PostgreSQL give them: int format, str id and data."""
    return [(n, m.id, MESSAGE_FORMAT, encode_message(m)) for n, m in enumerate(messages, 1)]


def as_bytes(messages: list[Message]) -> list[Row]:
    """Rows as Redis gives them: every field bytes, the format too."""
    return [
        (n, m.id.encode(), str(MESSAGE_FORMAT).encode(), encode_message(m).encode())
        for n, m in enumerate(messages, 1)
    ]


@pytest.fixture
def no_general_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(items: object) -> list[Message]:
        raise AssertionError("the rows went through the general loader")

    monkeypatch.setattr(_codec, "load_messages", refuse)


@pytest.mark.parametrize("make_rows", [as_text, as_bytes], ids=["text", "bytes"])
@pytest.mark.usefixtures("no_general_loader")
def test_every_backends_own_rows_take_the_trusted_path(make_rows: object) -> None:
    rows = make_rows(MESSAGES)  # type: ignore[operator]
    assert decode_rows("s", rows) == [
        StoredMessage(seq=n, message=m) for n, m in enumerate(MESSAGES, 1)
    ]


def has_parts(message: Message) -> bool:
    return isinstance(message, UserMessage) and not isinstance(message.content, str)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages=histories(valid=False))
@pytest.mark.usefixtures("no_general_loader")
def test_any_history_without_content_parts_takes_the_trusted_path(
    messages: list[Message],
) -> None:
    plain = [m for m in messages if not has_parts(m)]  # images go through the loader
    expected = [StoredMessage(seq=n, message=m) for n, m in enumerate(plain, 1)]
    assert decode_rows("s", as_text(plain)) == expected
    assert decode_rows("s", as_bytes(plain)) == expected


@pytest.mark.usefixtures("no_general_loader")
def test_a_lone_surrogate_is_restored_on_the_trusted_path_too() -> None:
    # A model's stream may split an emoji's escapes; the store keeps the half it got.
    odd = [UserMessage(content="half an emoji: \ud83d"), AssistantMessage(content="ok")]
    assert [s.message for s in decode_rows("s", as_bytes(odd))] == odd
    assert [s.message for s in decode_rows("s", as_text(odd))] == odd


def test_a_bytes_row_of_another_format_is_still_refused_by_name() -> None:
    rows = as_bytes(MESSAGES)
    seq, message_id, _, data = rows[2]
    rows[2] = (seq, message_id, b"2", data)
    with pytest.raises(CorruptSessionError) as caught:
        decode_rows("s", rows)
    assert (caught.value.seq, caught.value.reason) == (
        3,
        "message format 2 cannot be read; this hookloop reads 1 (written by a newer hookloop?)",
    )


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        # As many fields as a tool message has, but not its own.
        (
            lambda item: item.pop("tool_call_id") and item.update(other="x"),
            "not a hookloop message: (tool): unknown fields ['other']",
        ),
        (
            lambda item: item.update(extra=1),
            "not a hookloop message: (tool): unknown fields ['extra']",
        ),
    ],
    ids=["a field swapped", "a field too many"],
)
def test_a_row_without_exactly_its_fields_is_refused_by_name(
    change: Callable[[dict[str, object]], object], reason: str
) -> None:
    rows = as_text(MESSAGES)
    seq, message_id, version, data = rows[2]
    item = json.loads(str(data))
    change(item)
    rows[2] = (seq, message_id, version, json.dumps(item))
    with pytest.raises(CorruptSessionError) as caught:
        decode_rows("s", rows)
    assert (caught.value.seq, caught.value.reason) == (3, reason)
