"""Wrongly typed message fields are refused where they are made, with InvalidMessageError.

A message that could be built with an id of ``5`` or a tool call named ``None`` was recorded
by the session recorder and made every later restore of its session fail. Now nothing
wrongly typed can be built, so nothing invalid reaches a history or a store; and every
public ChatHistory method answers bad input with a typed error, never an AttributeError,
TypeError or RecursionError.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AssistantMessage,
    ChatHistory,
    ImagePart,
    InvalidMessageError,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UsageError,
    UserMessage,
)
from hookloop.sessions import (
    SQLiteSessionStore,
    load_messages,
    messages_from_json,
    messages_to_json,
)
from hookloop.testing import ScriptedModel

JUNK = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.binary(max_size=4),
    st.text(max_size=4),
    st.lists(st.integers(), max_size=2),
    st.tuples(st.integers()),
    st.tuples(st.text(max_size=2)),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.just(object()),
    st.just(TextPart(text="x")),
    st.just(ToolCall(name="f", id="c")),
    st.just(UserMessage(content="x")),
)

# Every public constructor and the fields it takes.
CONSTRUCTORS: dict[str, tuple[Callable[..., object], tuple[str, ...]]] = {
    "TextPart": (TextPart, ("text",)),
    "ImagePart": (ImagePart, ("url", "data", "media_type")),
    "ToolCall": (ToolCall, ("name", "arguments", "id")),
    "ToolCall.create": (ToolCall.create, ("name", "arguments", "id")),
    "Usage": (Usage, ("input_tokens", "output_tokens")),
    "SystemMessage": (SystemMessage, ("content", "id")),
    "UserMessage": (UserMessage, ("content", "id")),
    "AssistantMessage": (AssistantMessage, ("content", "tool_calls", "id")),
    "ToolMessage": (ToolMessage, ("tool_call_id", "tool_name", "content", "is_error", "id")),
}


def _as_message(value: object) -> Message | None:
    if isinstance(value, (SystemMessage, UserMessage, AssistantMessage, ToolMessage)):
        return value
    if isinstance(value, (TextPart, ImagePart)):
        return UserMessage(content=(value,))
    if isinstance(value, ToolCall):
        return AssistantMessage(tool_calls=(value,))
    return None


@pytest.mark.parametrize("name", sorted(CONSTRUCTORS))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_constructor_given_wrong_types_raises_invalid_message_error_only(
    name: str, data: st.DataObject
) -> None:
    make, fields = CONSTRUCTORS[name]
    kwargs = {field: data.draw(JUNK, label=field) for field in fields}
    try:
        value = make(**kwargs)
    except InvalidMessageError:
        return
    # What could be built is well-typed through and through: it survives JSON exactly.
    message = _as_message(value)
    if message is not None:
        assert messages_from_json(messages_to_json([message])) == [message]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner),
    max_leaves=8,
)
FIELD_NAMES = [
    "role",
    "content",
    "id",
    "tool_calls",
    "name",
    "arguments",
    "tool_call_id",
    "tool_name",
    "is_error",
    "type",
    "text",
    "url",
    "data",
    "media_type",
]
MESSAGE_LIKE = st.dictionaries(
    st.sampled_from(FIELD_NAMES),
    st.one_of(JSON, st.sampled_from(["user", "assistant", "tool", "system", "text", "image"])),
    max_size=5,
)


@settings(max_examples=300, deadline=None)
@given(data=st.one_of(JSON, st.lists(MESSAGE_LIKE, max_size=3)))
def test_loading_json_shaped_junk_raises_invalid_message_error_only(data: object) -> None:
    try:
        messages = load_messages(data)
    except InvalidMessageError:
        return
    assert messages_from_json(messages_to_json(messages)) == messages


def _history() -> tuple[ChatHistory, list[str]]:
    history = ChatHistory(max_context_tokens=1000)
    history.add_system_prompt("Be brief.")
    messages: list[Message] = [
        UserMessage(content="hi"),
        AssistantMessage(tool_calls=(ToolCall(name="f", id="c1"),)),
        ToolMessage(tool_call_id="c1", tool_name="f", content="1"),
        AssistantMessage(content="done"),
    ]
    for message in messages:
        history.add_message(message)
    system = history.system_message
    assert system is not None
    return history, [system.id, *(m.id for m in messages)]


def _calls(ids: list[str]) -> dict[str, Callable[[ChatHistory, st.DataObject], object]]:
    arg = st.one_of(JUNK, st.sampled_from(ids))
    return {
        "add_message": lambda h, d: h.add_message(d.draw(JUNK)),
        "append_committed": lambda h, d: h.append_committed(d.draw(JUNK)),
        "add_system_prompt": lambda h, d: h.add_system_prompt(d.draw(JUNK)),
        "delete_message_range": lambda h, d: h.delete_message_range(d.draw(arg), d.draw(arg)),
        "edit_message": lambda h, d: h.edit_message(d.draw(arg), d.draw(JUNK)),
        "get_message_by_id": lambda h, d: h.get_message_by_id(d.draw(arg)),
        "import_history": lambda h, d: h.import_history(d.draw(st.one_of(JUNK, st.lists(JUNK)))),
        "ChatHistory": lambda h, d: ChatHistory(
            max_context_tokens=d.draw(JUNK), token_counter=d.draw(JUNK)
        ),
    }


@pytest.mark.parametrize("method", sorted(_calls([])))
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_history_method_given_wrong_types_raises_usage_errors_only(
    method: str, data: st.DataObject
) -> None:
    history, ids = _history()
    before = (history.export_history(), history.total_tokens)
    try:
        _calls(ids)[method](history, data)
    except UsageError:  # InvalidMessageError and the HistoryError family among them
        assert (history.export_history(), history.total_tokens) == before
        return
    # Accepted: the history still holds only well-formed messages and can be sent.
    assert messages_from_json(messages_to_json(history.export_history()))
    history.get_trimmed_history()


@pytest.mark.parametrize(
    "make",
    [
        lambda: UserMessage(content="hi", id=5),  # type: ignore[arg-type]
        lambda: UserMessage(content="hi", id=None),  # type: ignore[arg-type]
        lambda: ToolCall(name=None),  # type: ignore[arg-type]
        lambda: ToolCall(name="f", arguments=None),  # type: ignore[arg-type]
        lambda: ToolCall(name="f", id=None),  # type: ignore[arg-type]
        lambda: ToolMessage(tool_call_id="c", tool_name=None, content=""),  # type: ignore[arg-type]
        lambda: ImagePart(url=5),  # type: ignore[arg-type]
        lambda: UserMessage(content=5),  # type: ignore[arg-type]
        lambda: AssistantMessage(tool_calls=("junk",)),  # type: ignore[arg-type]
        lambda: TextPart(text=None),  # type: ignore[arg-type]
        lambda: dataclasses.replace(UserMessage(content="hi"), id=5),
    ],
    ids=[
        "id=5",
        "id=None",
        "call name=None",
        "call arguments=None",
        "call id=None",
        "tool_name=None",
        "ImagePart(url=5)",
        "content=5",
        "tool_calls=('junk',)",
        "TextPart(text=None)",
        "replace(id=5)",
    ],
)
def test_the_reported_bad_messages_are_refused_where_they_are_made(
    make: Callable[[], object],
) -> None:
    with pytest.raises(InvalidMessageError):
        make()


def test_a_list_of_parts_or_calls_is_kept_as_a_tuple() -> None:
    parts: Any = [TextPart(text="a")]
    calls: Any = [ToolCall(name="f", id="c1")]
    assert UserMessage(content=parts, id="u").content == (TextPart(text="a"),)
    assert AssistantMessage(tool_calls=calls, id="a").tool_calls == (ToolCall(name="f", id="c1"),)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        '[{"role": "user", "content": ' + "[" * 3_000 + "]" * 3_000 + "}]",
        b"\xff\xfe",
    ],
    ids=["nested list", "nested content", "not UTF-8"],
)
def test_messages_from_json_refuses_what_is_not_messages_with_a_typed_error(
    text: str | bytes,
) -> None:
    with pytest.raises(InvalidMessageError):
        messages_from_json(text)


def test_messages_from_json_refuses_a_value_that_is_not_text() -> None:
    with pytest.raises(InvalidMessageError, match="must be str or bytes, got int"):
        messages_from_json(5)  # type: ignore[arg-type]


def test_tool_call_create_refuses_arguments_json_cannot_hold() -> None:
    with pytest.raises(InvalidMessageError, match="cannot be written as JSON"):
        ToolCall.create("f", {"x": object()})
    with pytest.raises(InvalidMessageError, match="a mapping or None"):
        ToolCall.create("f", 5)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "message",
    ["", "  ", UserMessage(content=""), UserMessage(content=" \n"), [TextPart(text=" ")]],
    ids=["str", "blank str", "UserMessage", "blank UserMessage", "blank parts"],
)
async def test_an_empty_user_message_is_refused_in_every_form(message: Any) -> None:
    agent = Agent(ScriptedModel(["never"]))
    with pytest.raises(InvalidMessageError):
        await agent.chat(message)
    with pytest.raises(InvalidMessageError):
        agent.chat_stream(message)
    assert agent.messages == ()


async def test_a_bad_message_never_reaches_the_store_and_the_session_stays_readable(
    tmp_path: Path,
) -> None:
    async with SQLiteSessionStore(tmp_path / "s.db") as store:
        agent = Agent(ScriptedModel(["one", "two"]), session_id="s", plugins=[store.session()])
        await agent.chat("hello")
        with pytest.raises(InvalidMessageError):
            await agent.chat(UserMessage(content=5))  # type: ignore[arg-type]
        with pytest.raises(InvalidMessageError):
            await agent.chat(UserMessage(content="x", id=None))  # type: ignore[arg-type]
        await agent.chat("again")
        recorder = store.session("s")
        Agent(ScriptedModel([]), plugins=[recorder])
        restored_messages = await recorder.restore()
        assert restored_messages == list(agent.messages)
        assert json.loads(messages_to_json(restored_messages))[0]["content"] == "hello"


@given(
    st.dictionaries(
        st.text(max_size=5),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
            max_leaves=6,
        ),
        max_size=4,
    )
)
@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
def test_tool_call_create_writes_the_arguments_as_json_dumps_does(
    arguments: dict[str, Any],
) -> None:
    # A plain dict takes a C encoder made once; the text is json.dumps's all the same.
    call = ToolCall.create("f", arguments, id="c1")
    assert call.arguments == json.dumps(arguments, ensure_ascii=False)
    assert call == ToolCall(name="f", arguments=call.arguments, id="c1")


def test_tool_call_create_refuses_a_cycle_as_json_does_and_keeps_working() -> None:
    cyclic: dict[str, object] = {}
    cyclic["self"] = cyclic
    with pytest.raises(InvalidMessageError, match="cannot be written as JSON: ValueError"):
        ToolCall.create("f", cyclic)
    # A failed encoding leaves nothing behind for the next one.
    assert ToolCall.create("f", {"a": [1, {"b": 2}]}, id="c").arguments == '{"a": [1, {"b": 2}]}'
    with pytest.raises(InvalidMessageError, match=r"ToolCall\.name must be a str"):
        ToolCall.create(5, {"a": 1})  # type: ignore[arg-type]


def test_a_chats_text_becomes_the_user_message_the_constructor_makes() -> None:
    from hookloop._messages import user_message

    made = user_message("hello there")
    assert type(made) is UserMessage
    assert made == UserMessage(content="hello there", id=made.id)
    assert made.id.startswith("msg_")
    assert made.id != user_message("hello there").id
    for blank in ("", " \n\t"):
        with pytest.raises(InvalidMessageError, match=r"^the user message is empty$"):
            user_message(blank)
