"""Messages: frozen dataclasses, ids, parts, tool calls, usage and the JSON edge."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import sys
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import (
    AssistantMessage,
    ImagePart,
    InvalidMessageError,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolValidationError,
    Usage,
    UsageError,
    UserMessage,
)
from hookloop._messages import assistant_message, dump_usage, load_usage, new_id, tool_result
from hookloop.sessions import dump_messages, load_messages, messages_from_json, messages_to_json

# --- dataclasses --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "attribute", "value"),
    [
        (SystemMessage(content="s"), "content", "x"),
        (UserMessage(content="u"), "content", "x"),
        (AssistantMessage(content="a"), "tool_calls", ()),
        (ToolMessage(tool_call_id="c", tool_name="t", content="r"), "is_error", True),
        (ToolCall(name="t"), "arguments", "{}"),
        (TextPart(text="t"), "text", "x"),
        (ImagePart(url="https://x"), "url", "https://y"),
        (Usage(input_tokens=1), "input_tokens", 2),
    ],
)
def test_values_are_frozen(message: Any, attribute: str, value: Any) -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(message, attribute, value)
    with pytest.raises((AttributeError, TypeError)):
        message.new_attribute = 1  # slots: no stray attributes either


@pytest.mark.parametrize(
    ("cls", "args"),
    [
        (SystemMessage, ("s",)),
        (UserMessage, ("u",)),
        (AssistantMessage, ("a",)),
        (ToolMessage, ("c", "t", "r")),
        (ToolCall, ("t",)),
        (TextPart, ("t",)),
        (Usage, (1, 2)),
    ],
)
def test_values_are_keyword_only(cls: type, args: tuple[Any, ...]) -> None:
    with pytest.raises(TypeError):
        cls(*args)


def test_role_is_a_class_attribute_not_a_field() -> None:
    assert SystemMessage.role == "system"
    assert UserMessage.role == "user"
    assert AssistantMessage.role == "assistant"
    assert ToolMessage.role == "tool"
    for cls in (SystemMessage, UserMessage, AssistantMessage, ToolMessage):
        assert "role" not in {f.name for f in dataclasses.fields(cls)}
    assert UserMessage(content="x").role == "user"
    with pytest.raises(TypeError):
        UserMessage(content="x", role="system")  # type: ignore[call-arg]


def test_defaults() -> None:
    a = AssistantMessage()
    assert (a.content, a.tool_calls) == ("", ())
    t = ToolMessage(tool_call_id="c", tool_name="n", content="r")
    assert t.is_error is False
    assert ToolCall(name="x").arguments == "{}"


def test_ten_thousand_ids_are_distinct() -> None:
    ids = [UserMessage(content="x").id for _ in range(10_000)]
    ids += [ToolCall(name="t").id for _ in range(10_000)]
    ids += [new_id() for _ in range(10_000)]
    assert len(set(ids)) == 30_000


def test_a_message_id_takes_the_least_a_str_takes() -> None:
    # 15 characters: a 64-byte str (an idle message's id was 80 of its ~130 own bytes).
    ids = [AssistantMessage(content="a").id for _ in range(5_000)]  # across a block's end
    assert {len(i) for i in ids} == {15}
    assert max(sys.getsizeof(i) for i in ids) <= 64
    assert len(set(ids)) == len(ids)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_makes_ids_of_its_own() -> None:
    UserMessage(content="x")  # the parent's block is in use
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its ids go to the parent, then it leaves at once
        try:
            ids = [UserMessage(content="x").id for _ in range(100)]
            os.write(write, json.dumps(ids).encode())
        finally:
            os._exit(0)
    os.close(write)
    parent = {UserMessage(content="x").id for _ in range(100)}
    with os.fdopen(read, "rb") as pipe:
        child = set(json.loads(pipe.read()))
    os.waitpid(pid, 0)
    assert len(child) == 100
    assert not parent & child


def test_id_prefixes() -> None:
    assert SystemMessage(content="s").id.startswith("msg_")
    assert ToolCall(name="t").id.startswith("call_")
    assert new_id("run").startswith("run_")
    assert new_id().startswith("msg_")
    assert UserMessage(content="x", id="mine").id == "mine"


def test_replace_makes_a_changed_copy_with_the_same_id() -> None:
    original = UserMessage(content="a")
    changed = dataclasses.replace(original, content="b")
    assert (original.content, changed.content) == ("a", "b")
    assert changed.id == original.id


def test_user_message_text_over_parts() -> None:
    assert UserMessage(content="plain").text == "plain"
    parts = (
        TextPart(text="first"),
        ImagePart(url="https://example.com/a.png"),
        TextPart(text="second"),
        ImagePart(data="AAAA", media_type="image/png"),
    )
    assert UserMessage(content=parts).text == "first\nsecond"
    assert UserMessage(content=(ImagePart(url="https://x"),)).text == ""


def test_image_part_valid_forms() -> None:
    by_url = ImagePart(url="https://example.com/a.png")
    assert (by_url.url, by_url.data, by_url.media_type, by_url.type) == (
        "https://example.com/a.png",
        None,
        None,
        "image",
    )
    by_data = ImagePart(data="iVBORw0KGgo=", media_type="image/png")
    assert (by_data.url, by_data.data, by_data.media_type) == (None, "iVBORw0KGgo=", "image/png")
    assert TextPart(text="t").type == "text"


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, "exactly one of url= or data="),
        ({"url": "https://x", "data": "AAAA", "media_type": "image/png"}, "exactly one"),
        ({"data": "AAAA"}, "needs media_type="),
        ({"data": "AAAA", "media_type": ""}, "needs media_type="),
    ],
)
def test_image_part_validation(kwargs: dict[str, Any], expected: str) -> None:
    with pytest.raises(InvalidMessageError, match=expected) as info:
        ImagePart(**kwargs)
    assert isinstance(info.value, ValueError)
    assert isinstance(info.value, UsageError)


# --- tool calls and usage -----------------------------------------------------------------


def test_tool_call_create_serialises_arguments() -> None:
    call = ToolCall.create("search", {"q": "café", "n": [1, 2]}, id="c1")
    assert call == ToolCall(name="search", arguments='{"q": "café", "n": [1, 2]}', id="c1")
    assert call.parsed_arguments() == {"q": "café", "n": [1, 2]}
    bare = ToolCall.create("noargs")
    assert bare.arguments == "{}"
    assert bare.id.startswith("call_")
    assert bare.id != ToolCall.create("noargs").id


def test_parsed_arguments_empty_string_is_empty_object() -> None:
    assert ToolCall(name="t", arguments="").parsed_arguments() == {}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"a": 1', "not valid JSON"),
        ("nope", "not valid JSON"),
        ("[1, 2]", "must be a JSON object, not list"),
        ("3", "must be a JSON object, not int"),
        ('"s"', "must be a JSON object, not str"),
        ("null", "must be a JSON object, not NoneType"),
    ],
)
def test_parsed_arguments_rejects_non_objects(arguments: str, expected: str) -> None:
    call = ToolCall(name="lookup", arguments=arguments, id="c42")
    with pytest.raises(ToolValidationError, match=expected) as info:
        call.parsed_arguments()
    assert "'lookup'" in str(info.value)
    assert info.value.tool_name == "lookup"
    assert info.value.call_id == "c42"


def test_usage_addition_and_total() -> None:
    a = Usage(input_tokens=10, output_tokens=3)
    b = Usage(input_tokens=5, output_tokens=7)
    assert a + b == Usage(input_tokens=15, output_tokens=10)
    assert (a + b).total_tokens == 25
    assert Usage() == Usage(input_tokens=0, output_tokens=0)
    assert Usage() + a == a
    assert a == Usage(input_tokens=10, output_tokens=3)  # unchanged


def test_usage_costs_add_up_while_both_are_known() -> None:
    a = Usage(input_tokens=10, cost=Decimal("0.25"))
    b = Usage(output_tokens=5, cost=Decimal("0.5"))
    assert (a + b).cost == Decimal("0.75")
    assert (a + Usage(output_tokens=1)).cost is None  # an unknown cost makes the sum unknown
    assert (Usage() + a).cost is None


@pytest.mark.parametrize("cost", [0.5, 1, "0.1", Decimal("-1"), Decimal("NaN"), Decimal("Inf")])
def test_usage_refuses_a_cost_that_is_not_a_finite_decimal_of_zero_or_more(cost: object) -> None:
    with pytest.raises(InvalidMessageError, match=r"Usage\.cost must be a finite Decimal"):
        Usage(cost=cost)  # type: ignore[arg-type]


def test_usage_json_round_trips_its_cost_exactly() -> None:
    usage = Usage(input_tokens=7, cached_input_tokens=2, cost=Decimal("0.000001234567890123"))
    assert load_usage(json.loads(json.dumps(dump_usage(usage)))) == usage
    assert load_usage(dump_usage(Usage(output_tokens=1))) == Usage(output_tokens=1)


# --- (de)serialisation --------------------------------------------------------------------


def _every_kind() -> list[Message]:
    return [
        SystemMessage(content="You are helpful.", id="m0"),
        UserMessage(content="plain ✓", id="m1"),
        UserMessage(
            content=(
                TextPart(text="look"),
                ImagePart(url="https://example.com/cat.png"),
                ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
            ),
            id="m2",
        ),
        AssistantMessage(
            content="calling",
            tool_calls=(
                ToolCall(name="a", arguments='{"x": 1}', id="c1"),
                ToolCall(name="b", arguments="{not json", id="c2"),
            ),
            id="m3",
        ),
        ToolMessage(tool_call_id="c1", tool_name="a", content="1", id="m4"),
        ToolMessage(tool_call_id="c2", tool_name="b", content="bad", is_error=True, id="m5"),
        AssistantMessage(id="m6"),
    ]


def test_dump_messages_shape() -> None:
    assert dump_messages(_every_kind()) == [
        {"role": "system", "content": "You are helpful.", "id": "m0"},
        {"role": "user", "content": "plain ✓", "id": "m1"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image",
                    "url": "https://example.com/cat.png",
                    "data": None,
                    "media_type": None,
                },
                {
                    "type": "image",
                    "url": None,
                    "data": "iVBORw0KGgo=",
                    "media_type": "image/png",
                },
            ],
            "id": "m2",
        },
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"name": "a", "arguments": '{"x": 1}', "id": "c1"},
                {"name": "b", "arguments": "{not json", "id": "c2"},
            ],
            "id": "m3",
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "tool_name": "a",
            "content": "1",
            "is_error": False,
            "id": "m4",
        },
        {
            "role": "tool",
            "tool_call_id": "c2",
            "tool_name": "b",
            "content": "bad",
            "is_error": True,
            "id": "m5",
        },
        {"role": "assistant", "content": "", "tool_calls": [], "id": "m6"},
    ]


def test_dump_and_load_round_trip_every_kind() -> None:
    messages = _every_kind()
    dumped = dump_messages(messages)
    assert json.loads(json.dumps(dumped)) == dumped  # plain JSON values only
    loaded = load_messages(dumped)
    assert loaded == messages
    assert [type(m) for m in loaded] == [type(m) for m in messages]
    assert isinstance(loaded[2].content, tuple)  # type: ignore[union-attr]
    assert isinstance(loaded[3].tool_calls, tuple)  # type: ignore[union-attr]
    assert isinstance(loaded[3].tool_calls[0], ToolCall)  # type: ignore[union-attr]


def test_json_round_trip_every_kind() -> None:
    messages = _every_kind()
    text = messages_to_json(messages)
    assert isinstance(text, str)
    assert "✓" in text  # not escaped
    assert messages_from_json(text) == messages
    assert messages_from_json(text.encode()) == messages
    assert messages_to_json([]) == "[]"
    assert messages_from_json("[]") == []


def test_load_accepts_a_tuple_and_role_is_not_required_to_be_first() -> None:
    loaded = load_messages(({"id": "x", "content": "hi", "role": "user"},))
    assert loaded == [UserMessage(content="hi", id="x")]


def test_loaded_messages_get_fresh_ids_when_missing() -> None:
    a, b = load_messages([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}])
    assert a.id.startswith("msg_")
    assert a.id != b.id


# hypothesis strategies for random message lists
_text = st.text(max_size=30)
_ids = st.text(min_size=1, max_size=12)
_tool_calls = st.builds(ToolCall, name=_text, arguments=_text, id=_ids)
_parts = st.one_of(
    st.builds(TextPart, text=_text),
    st.builds(ImagePart, url=_text),
    st.builds(ImagePart, data=_text, media_type=st.text(min_size=1, max_size=20)),
)
_messages = st.one_of(
    st.builds(SystemMessage, content=_text, id=_ids),
    st.builds(
        UserMessage,
        content=st.one_of(_text, st.lists(_parts, max_size=4).map(tuple)),
        id=_ids,
    ),
    st.builds(
        AssistantMessage,
        content=_text,
        tool_calls=st.lists(_tool_calls, max_size=3).map(tuple),
        id=_ids,
    ),
    st.builds(
        ToolMessage,
        tool_call_id=_ids,
        tool_name=_text,
        content=_text,
        is_error=st.booleans(),
        id=_ids,
    ),
)


@given(st.lists(_messages, max_size=8))
def test_random_message_lists_round_trip_exactly(messages: list[Message]) -> None:
    assert load_messages(dump_messages(messages)) == messages
    assert messages_from_json(messages_to_json(messages)) == messages


# --- invalid input ------------------------------------------------------------------------

_OK = {"role": "user", "content": "fine"}


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("not a list", "expected a list of messages, got str"),
        (b"[]", "expected a list of messages, got bytes"),
        ({"role": "user", "content": "x"}, "expected a list of messages, got dict"),
        (None, "expected a list of messages, got NoneType"),
        ([_OK, 7], r"message 1: expected an object"),
        ([_OK, ["role", "user"]], r"message 1: expected an object"),
        ([{"role": "robot", "content": "x"}], r"message 0: unknown role 'robot'"),
        ([_OK, {"content": "x"}], r"message 1: unknown role None"),
        ([{"role": 3, "content": "x"}], r"message 0: unknown role 3"),
        ([_OK, _OK, {"role": "tool", "content": "x"}], r"message 2 \(tool\): .*tool_call_id"),
        ([{"role": "system"}], r"message 0 \(system\): content: Field required"),
        ([{"role": "system", "content": 5}], r"message 0 \(system\): content"),
        ([_OK, {"role": "assistant", "tool_calls": "c"}], r"message 1 \(assistant\): tool_calls"),
        (
            [{"role": "assistant", "tool_calls": [{"arguments": "{}"}]}],
            r"message 0 \(assistant\): tool_calls\.0\.name",
        ),
        (
            [{"role": "tool", "tool_call_id": "c", "tool_name": "t", "content": "x", "id": 1}],
            r"message 0 \(tool\): id",
        ),
        ([{"role": "user", "content": "x", "name": "bob"}], r"message 0 \(user\): unknown fields"),
        (
            [_OK, {"role": "system", "content": "x", "role2": 1, "extra": 2}],
            r"message 1 \(system\): unknown fields \['extra', 'role2'\]",
        ),
        ([{"role": "user", "content": None}], r"message 0 \(user\): content"),
        ([{"role": "user", "content": ["hi"]}], r"message 0: unknown content part 'hi'"),
        ([{"role": "user", "content": [{"type": "video"}]}], r"message 0: unknown content part"),
        ([_OK, {"role": "user", "content": [{"type": "text"}]}], r"message 1: bad content part"),
        (
            [{"role": "user", "content": [{"type": "image"}]}],
            r"message 0: bad content part.*exactly one of url= or data=",
        ),
        (
            [{"role": "user", "content": [{"type": "image", "data": "AA"}]}],
            r"message 0: bad content part.*media_type",
        ),
    ],
)
def test_load_rejects_invalid_input_naming_the_position(data: object, expected: str) -> None:
    with pytest.raises(InvalidMessageError, match=expected) as info:
        load_messages(data)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (
            [{"role": "user", "content": [{"type": "text", "text": "a", "bold": True}]}],
            r"message 0 \(text part\): unknown fields \['bold'\]",
        ),
        (
            [
                _OK,
                {
                    "role": "assistant",
                    "tool_calls": [{"name": "f", "arguments": "{}", "id": "c", "index": 0}],
                },
            ],
            r"message 1 \(tool call\): unknown fields \['index'\]",
        ),
    ],
)
def test_load_rejects_unknown_fields_nested_inside_messages(data: object, expected: str) -> None:
    # Top-level unknown fields are rejected; the same must hold for content parts and tool
    # calls, or a round trip silently drops data.
    with pytest.raises(InvalidMessageError, match=expected):
        load_messages(data)


@pytest.mark.parametrize("text", ["[{", "", "not json", "[1,]"])
def test_messages_from_json_rejects_invalid_json(text: str) -> None:
    with pytest.raises(InvalidMessageError, match="not valid JSON") as info:
        messages_from_json(text)
    assert isinstance(info.value, ValueError)


def test_messages_from_json_rejects_valid_json_of_the_wrong_shape() -> None:
    with pytest.raises(InvalidMessageError, match="got dict"):
        messages_from_json('{"role": "user", "content": "x"}')
    with pytest.raises(InvalidMessageError, match="message 0: unknown role 'x'"):
        messages_from_json('[{"role": "x"}]')


def test_messages_made_on_the_hot_path_are_the_constructors_own() -> None:
    # tool_result and assistant_message skip the checks (frozen_maker); what they make is
    # the same frozen object the constructor makes.
    call = ToolCall(name="add", arguments="{}", id="c1")
    made = tool_result(call, "3", is_error=True)
    assert type(made) is ToolMessage
    assert made == ToolMessage(
        tool_call_id="c1", tool_name="add", content="3", is_error=True, id=made.id
    )
    answer = assistant_message("hi", (call,))
    assert answer == AssistantMessage(content="hi", tool_calls=(call,), id=answer.id)
    assert hash(answer) == hash(AssistantMessage(content="hi", tool_calls=(call,), id=answer.id))
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.content = "changed"  # type: ignore[misc]
    assert dataclasses.replace(made, content="4").content == "4"
    assert pickle.loads(pickle.dumps(answer)) == answer
