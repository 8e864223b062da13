"""ChatHistory: the seed-001 API, its validation, and a history that is never corrupted."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import (
    AssistantMessage,
    ChatHistory,
    DuplicateMessageIdError,
    HistoryError,
    ImagePart,
    InvalidMessageError,
    InvalidRangeError,
    Message,
    MessageNotFoundError,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
)
from hookloop.context import MISSING_RESULT_TEXT, CachingCounter, EstimateCounter, TokenCounter
from tests.context.test_strategies import histories, last_user, problems

Snapshot = tuple[list[Message], int, int, SystemMessage | None, tuple[Message, ...]]


def snapshot(history: ChatHistory) -> Snapshot:
    return (
        history.export_history(),
        history.total_tokens,
        history.get_remaining_budget(),
        history.system_message,
        tuple(history),
    )


def counted(history: ChatHistory) -> int:
    """The history's tokens counted from scratch, to check its running total."""
    counter = EstimateCounter()
    system = history.system_message
    head = counter.count_system(system.content) if system is not None else 0
    return head + sum(counter.count_message(m) for m in history.messages)


@pytest.fixture
def history() -> ChatHistory:
    history = ChatHistory(max_context_tokens=1000)
    history.add_system_prompt("You are a programming assistant.")
    for message in CONVERSATION:
        history.add_message(message)
    return history


CALL = ToolCall(name="run", arguments='{"code": "1+1"}', id="call_1")
CONVERSATION: list[Message] = [
    UserMessage(content="How do I loop?", id="u1"),
    AssistantMessage(content="Use for or while.", id="a1"),
    UserMessage(content="Run 1+1", id="u2"),
    AssistantMessage(tool_calls=(CALL,), id="a2"),
    ToolMessage(tool_call_id="call_1", tool_name="run", content="2", id="t2"),
    AssistantMessage(content="It is 2.", id="a3"),
]


# --- the seed's operations -------------------------------------------------------------------


def test_add_message_appends_in_order_and_counts(history: ChatHistory) -> None:
    assert history.messages == tuple(CONVERSATION)
    assert list(history) == CONVERSATION
    assert len(history) == 6
    assert history.total_tokens == counted(history)
    extra = UserMessage(content="thanks")
    history.add_message(extra)
    assert history.messages[-1] is extra
    assert history.total_tokens == counted(history)


def test_the_system_prompt_comes_first_and_is_replaced_or_removed(history: ChatHistory) -> None:
    exported = history.export_history()
    assert isinstance(exported[0], SystemMessage)
    assert exported[0].content == "You are a programming assistant."
    assert exported[1:] == CONVERSATION
    first_id = exported[0].id
    history.add_system_prompt("Be brief.")
    system = history.system_message
    assert system is not None
    assert system.content == "Be brief."
    assert system.id != first_id
    assert history.total_tokens == counted(history)
    history.add_system_prompt("")
    assert history.system_message is None
    assert history.export_history() == CONVERSATION
    assert history.total_tokens == counted(history)
    history.add_system_prompt("Back.")
    history.add_system_prompt("   \n")  # only whitespace removes it too
    assert history.system_message is None


def test_a_system_prompt_added_late_still_comes_first() -> None:
    history = ChatHistory(max_context_tokens=100)
    history.add_message(UserMessage(content="hi"))
    history.add_system_prompt("rules")
    assert [m.role for m in history.export_history()] == ["system", "user"]
    assert [m.role for m in history.get_trimmed_history()] == ["system", "user"]


def test_clear_history_keeps_the_system_prompt(history: ChatHistory) -> None:
    system = history.system_message
    history.clear_history()
    assert history.export_history() == [system]
    assert len(history) == 0
    assert history.total_tokens == counted(history)
    assert history.get_message_by_id("u1") is None
    history.add_message(CONVERSATION[0])  # its id is free again


def test_delete_message_range_is_inclusive(history: ChatHistory) -> None:
    history.delete_message_range("a1", "a2")
    assert [m.id for m in history] == ["u1", "t2", "a3"]
    assert history.get_message_by_id("u2") is None
    assert history.get_message_by_id("t2") is CONVERSATION[4]
    assert history.total_tokens == counted(history)
    history.delete_message_range("t2", "t2")
    assert [m.id for m in history] == ["u1", "a3"]
    # The stored history keeps what is left; the trimmed view never shows the orphan.
    assert not problems(history.get_trimmed_history())


def test_a_range_that_splits_a_tool_call_is_repaired_in_the_trimmed_view(
    history: ChatHistory,
) -> None:
    history.delete_message_range("t2", "a3")  # the call's result is gone
    trimmed = history.get_trimmed_history()
    assert [m.id for m in trimmed[1:]] == ["u1", "a1", "u2", "a2", "msg_noresult_call_1"]
    added = trimmed[-1]
    assert isinstance(added, ToolMessage)
    assert added.is_error
    assert added.content == MISSING_RESULT_TEXT
    assert [m.id for m in history] == ["u1", "a1", "u2", "a2"]  # stored: untouched


def test_edit_message_keeps_id_position_and_the_rest(history: ChatHistory) -> None:
    history.edit_message("a2", "Let me run it.")
    edited = history.get_message_by_id("a2")
    assert isinstance(edited, AssistantMessage)
    assert edited.content == "Let me run it."
    assert edited.tool_calls == (CALL,)
    assert history.messages[3] is edited
    assert history.total_tokens == counted(history)
    history.edit_message("t2", "")  # an empty tool result is a result
    history.edit_message("u1", [TextPart(text="look:"), ImagePart(url="https://x/y.png")])
    user = history.get_message_by_id("u1")
    assert isinstance(user, UserMessage)
    assert user.content == (TextPart(text="look:"), ImagePart(url="https://x/y.png"))
    assert history.total_tokens == counted(history)


def test_edit_message_edits_the_system_prompt_by_its_id(history: ChatHistory) -> None:
    system = history.system_message
    assert system is not None
    history.edit_message(system.id, "New rules.")
    assert history.system_message == SystemMessage(content="New rules.", id=system.id)
    assert history.total_tokens == counted(history)


def test_export_history_is_a_copy(history: ChatHistory) -> None:
    exported = history.export_history()
    exported.clear()
    assert len(history.export_history()) == 7


def test_get_message_by_id(history: ChatHistory) -> None:
    assert history.get_message_by_id("a1") is CONVERSATION[1]
    system = history.system_message
    assert system is not None
    assert history.get_message_by_id(system.id) is system
    assert history.get_message_by_id("nope") is None


def test_remaining_budget_is_never_negative() -> None:
    history = ChatHistory(max_context_tokens=20)
    assert history.get_remaining_budget() == 20
    history.add_message(UserMessage(content="x" * 40))  # 4 + 10 tokens
    assert history.get_remaining_budget() == 6
    history.add_message(AssistantMessage(content="y" * 40))
    assert history.get_remaining_budget() == 0
    assert history.total_tokens == 28


def test_import_history_replaces_and_round_trips(history: ChatHistory) -> None:
    saved = history.export_history()
    other = ChatHistory(max_context_tokens=1000)
    other.import_history(saved)
    assert other.export_history() == saved
    assert other.total_tokens == history.total_tokens
    # Without a system message, the current system prompt stays.
    fresh = [UserMessage(content="new start")]
    history.import_history(fresh)
    assert history.messages == tuple(fresh)
    assert history.system_message == saved[0]
    assert history.get_message_by_id("u1") is None
    assert history.total_tokens == counted(history)
    history.import_history(iter([SystemMessage(content="imported"), *fresh]))
    system = history.system_message
    assert system is not None
    assert system.content == "imported"


def test_get_trimmed_history_trims_without_touching_the_store() -> None:
    history = ChatHistory(max_context_tokens=60)
    history.add_system_prompt("rules")  # 4 + 2
    for i in range(10):
        history.add_message(UserMessage(content=f"question {i} " * 3, id=f"u{i}"))
        history.add_message(AssistantMessage(content=f"answer {i} " * 3, id=f"a{i}"))
    history.add_message(UserMessage(content="last one", id="last"))
    before = snapshot(history)
    trimmed = history.get_trimmed_history()
    assert snapshot(history) == before
    assert trimmed[0] is history.system_message
    assert trimmed[-1].id == "last"
    assert [m.id for m in trimmed[1:]] == ["u8", "a8", "u9", "a9", "last"]
    counter = EstimateCounter()
    assert counter.count_system("rules") + sum(map(counter.count_message, trimmed[1:])) <= 60
    assert history.get_trimmed_history() == trimmed
    assert history.get_trimmed_history() is not trimmed


def test_get_trimmed_history_warns_when_the_pinned_messages_cannot_fit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    history = ChatHistory(max_context_tokens=10)
    history.add_system_prompt("a very long system prompt " * 10)
    history.add_message(UserMessage(content="hello"))
    with caplog.at_level(logging.WARNING):
        trimmed = history.get_trimmed_history()
    assert [m.role for m in trimmed] == ["system", "user"]
    assert "exceed the budget" in caplog.text


def test_a_stored_history_is_counted_once_not_on_every_trim() -> None:
    class Spy:
        def __init__(self) -> None:
            self.inner = EstimateCounter()
            self.calls = 0

        def count_text(self, text: str) -> int:
            return self.inner.count_text(text)

        def count_message(self, message: Message) -> int:
            self.calls += 1
            return self.inner.count_message(message)

        def count_system(self, prompt: str) -> int:
            return self.inner.count_system(prompt)

        def count_tools(self, tools: Any) -> int:
            return self.inner.count_tools(tools)

    spy = Spy()
    history = ChatHistory(max_context_tokens=500, token_counter=spy)
    for i in range(2000):
        history.add_message(UserMessage(content=f"q{i}"))
        history.add_message(AssistantMessage(content=f"a{i}"))
    assert spy.calls == 4000
    for _ in range(3):
        history.get_trimmed_history()
        history.get_remaining_budget()
    assert spy.calls == 4000


def test_the_default_counter_is_a_cached_estimate() -> None:
    history = ChatHistory(max_context_tokens=10)
    assert isinstance(history.token_counter, CachingCounter)
    assert isinstance(history.token_counter.counter, EstimateCounter)
    assert history.max_context_tokens == 10
    assert "0 messages" in repr(history)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "100", None])
def test_the_budget_must_be_a_positive_int(bad: Any) -> None:
    with pytest.raises(UsageError, match="max_context_tokens"):
        ChatHistory(max_context_tokens=bad)


def test_the_loop_appends_without_content_validation_or_a_version_bump() -> None:
    history = ChatHistory(max_context_tokens=100)
    empty_answer = AssistantMessage(content="")  # a model may answer with nothing
    history.append_committed(empty_answer)
    assert history.messages == (empty_answer,)
    assert history.total_tokens == counted(history)
    assert history.version == history.checked_version == 0
    with pytest.raises(DuplicateMessageIdError):
        history.append_committed(empty_answer)
    assert len(history) == 1


def test_every_change_from_outside_the_loop_bumps_the_version(history: ChatHistory) -> None:
    changes: list[Callable[[], None]] = [
        lambda: history.add_message(UserMessage(content="more", id="m")),
        lambda: history.edit_message("m", "changed"),
        lambda: history.delete_message_range("m", "m"),
        lambda: history.import_history(CONVERSATION),
        history.clear_history,
    ]
    for change in changes:
        before = history.version
        change()
        assert history.version == before + 1
    before = history.version
    history.add_system_prompt("the conversation is the same")
    with pytest.raises(HistoryError):
        history.delete_message_range("nope", "nope")
    with pytest.raises(InvalidMessageError):
        history.add_message(UserMessage(content=""))
    assert history.version == before


# --- the seed's validation: a typed error, and nothing changed --------------------------------


def bypass(cls: type[Any], **fields: Any) -> Any:
    """A message with field values its type hints forbid (as untyped callers can make)."""
    message = cls.__new__(cls)
    defaults = {"id": f"bad_{id(message)}"}
    for name, value in {**defaults, **fields}.items():
        object.__setattr__(message, name, value)
    for field in dataclasses.fields(cls):
        if not hasattr(message, field.name):
            default = field.default
            if default is dataclasses.MISSING:
                default = field.default_factory()  # type: ignore[misc]
            object.__setattr__(message, field.name, default)
    return message


INVALID_MESSAGES: list[tuple[str, Callable[[], Any], str]] = [
    ("system", lambda: SystemMessage(content="x"), "add_system_prompt"),
    ("dict", lambda: {"role": "user", "content": "hi"}, "invalid role"),
    ("none", lambda: None, "invalid role"),
    ("string", lambda: "hi", "invalid role"),
    ("empty user", lambda: UserMessage(content=""), "empty"),
    ("blank user", lambda: UserMessage(content="  \n "), "empty"),
    ("no parts", lambda: UserMessage(content=()), "no text and no image"),
    ("blank parts", lambda: UserMessage(content=(TextPart(text=" "),)), "no text and no image"),
    ("int user", lambda: bypass(UserMessage, content=42), "must be a str or a tuple"),
    ("bad part", lambda: bypass(UserMessage, content=("text",)), "must be a str or a tuple"),
    ("empty assistant", lambda: AssistantMessage(content=""), "no text and no tool calls"),
    ("none assistant", lambda: bypass(AssistantMessage, content=None), "must be a str"),
    (
        "tool without call",
        lambda: ToolMessage(tool_call_id="", tool_name="f", content="x"),
        "which call",
    ),
    (
        "bytes tool",
        lambda: bypass(ToolMessage, tool_call_id="c", tool_name="f", content=b"x"),
        "must be a str",
    ),
]


@pytest.mark.parametrize(
    ("make", "match"),
    [(m, t) for _, m, t in INVALID_MESSAGES],
    ids=[n for n, _, _ in INVALID_MESSAGES],
)
def test_add_message_refuses_invalid_messages(
    history: ChatHistory, make: Callable[[], Any], match: str
) -> None:
    before = snapshot(history)
    with pytest.raises(InvalidMessageError, match=match):
        history.add_message(make())
    assert snapshot(history) == before


def test_add_message_refuses_a_taken_id(history: ChatHistory) -> None:
    before = snapshot(history)
    with pytest.raises(DuplicateMessageIdError) as caught:
        history.add_message(UserMessage(content="again", id="u1"))
    assert caught.value.message_id == "u1"
    system = history.system_message
    assert system is not None
    with pytest.raises(DuplicateMessageIdError):
        history.add_message(UserMessage(content="again", id=system.id))
    assert snapshot(history) == before
    assert isinstance(caught.value, HistoryError)
    assert isinstance(caught.value, ValueError)


def test_add_system_prompt_refuses_a_non_string(history: ChatHistory) -> None:
    before = snapshot(history)
    with pytest.raises(InvalidMessageError, match="must be a str"):
        history.add_system_prompt(None)  # type: ignore[arg-type]
    assert snapshot(history) == before


@pytest.mark.parametrize(
    ("start", "end", "error", "match"),
    [
        ("nope", "a2", MessageNotFoundError, "'nope'"),
        ("a1", "nope", MessageNotFoundError, "'nope'"),
        ("a2", "a1", InvalidRangeError, "comes before"),
        ("SYSTEM", "a1", InvalidRangeError, "system prompt"),
        ("u1", "SYSTEM", InvalidRangeError, "system prompt"),
    ],
)
def test_delete_message_range_refuses_bad_ranges(
    history: ChatHistory, start: str, end: str, error: type[Exception], match: str
) -> None:
    system = history.system_message
    assert system is not None
    start, end = (system.id if x == "SYSTEM" else x for x in (start, end))
    before = snapshot(history)
    with pytest.raises(error, match=match) as caught:
        history.delete_message_range(start, end)
    assert snapshot(history) == before
    assert isinstance(caught.value, HistoryError)
    if isinstance(caught.value, InvalidRangeError):
        assert (caught.value.start_id, caught.value.end_id) == (start, end)
    if isinstance(caught.value, MessageNotFoundError):
        assert caught.value.message_id == "nope"
        assert isinstance(caught.value, LookupError)


@pytest.mark.parametrize(
    ("message_id", "content", "error", "match"),
    [
        ("nope", "x", MessageNotFoundError, "'nope'"),
        ("u1", "", InvalidMessageError, "empty"),
        ("u1", "   ", InvalidMessageError, "empty"),
        ("a1", "", InvalidMessageError, "no text and no tool calls"),
        ("a1", [TextPart(text="x")], InvalidMessageError, "must be a str"),
        ("t2", 42, InvalidMessageError, "must be a str"),
        ("u1", 42, InvalidMessageError, "must be a str"),
        ("u1", ["not a part"], InvalidMessageError, "TextPart / ImagePart"),
        ("SYSTEM", "", InvalidMessageError, "non-empty str"),
        ("SYSTEM", ["x"], InvalidMessageError, "non-empty str"),
    ],
)
def test_edit_message_refuses_bad_edits(
    history: ChatHistory, message_id: str, content: Any, error: type[Exception], match: str
) -> None:
    system = history.system_message
    assert system is not None
    message_id = system.id if message_id == "SYSTEM" else message_id
    before = snapshot(history)
    with pytest.raises(error, match=match):
        history.edit_message(message_id, content)
    assert snapshot(history) == before


@pytest.mark.parametrize(
    ("messages", "error", "match"),
    [
        (None, InvalidMessageError, "NoneType"),
        ("hello", InvalidMessageError, "str"),
        ({"role": "user"}, InvalidMessageError, "dict"),
        (42, InvalidMessageError, "int"),
        ([UserMessage(content="a"), None], InvalidMessageError, "message 1: invalid role"),
        ([UserMessage(content="a"), UserMessage(content="")], InvalidMessageError, "message 1"),
        (
            [UserMessage(content="a"), SystemMessage(content="s")],
            InvalidMessageError,
            "message 1: a system message may only come first",
        ),
        (
            [SystemMessage(content=" ")],
            InvalidMessageError,
            "message 0: the system message is empty",
        ),
        (
            [UserMessage(content="a", id="same"), AssistantMessage(content="b", id="same")],
            DuplicateMessageIdError,
            "message 1: id 'same'",
        ),
        (
            [SystemMessage(content="s", id="same"), UserMessage(content="a", id="same")],
            DuplicateMessageIdError,
            "used twice",
        ),
    ],
)
def test_import_history_refuses_invalid_input_as_a_whole(
    history: ChatHistory, messages: Any, error: type[Exception], match: str
) -> None:
    before = snapshot(history)
    with pytest.raises(error, match=match):
        history.import_history(messages)
    assert snapshot(history) == before


# --- properties ------------------------------------------------------------------------------


@given(histories(), st.integers(1, 3000))
def test_the_trimmed_history_is_always_sendable(messages: list[Message], budget: int) -> None:
    systems = [m for m in messages if isinstance(m, SystemMessage)]
    messages = systems[:1] + [m for m in messages if not isinstance(m, SystemMessage)]
    history = ChatHistory(max_context_tokens=budget)
    history.import_history(messages)
    before = snapshot(history)
    trimmed = history.get_trimmed_history()
    assert snapshot(history) == before
    assert not problems(trimmed)
    system = history.system_message
    if system is not None:
        assert trimmed[0] is system
    conversation = [m for m in messages if not isinstance(m, SystemMessage)]
    final = last_user(conversation)
    if final is not None:
        assert final.id in {m.id for m in trimmed}
    counter = EstimateCounter()
    pinned = [m for m in (system, final) if m is not None]
    if sum(map(counter.count_message, pinned)) <= budget:
        assert sum(map(counter.count_message, trimmed)) <= budget


Operation = tuple[str, int, int]


@given(
    histories(valid=True),
    st.lists(
        st.tuples(
            st.sampled_from(["add", "delete", "edit", "bad_edit", "clear", "system", "lookup"]),
            st.integers(0, 40),
            st.integers(0, 40),
        ),
        max_size=12,
    ),
)
def test_any_sequence_of_operations_keeps_the_history_consistent(
    messages: list[Message], operations: list[Operation]
) -> None:
    history = ChatHistory(max_context_tokens=10_000)
    history.import_history(messages)
    for name, i, j in operations:
        ids = [m.id for m in history]
        before = snapshot(history)
        try:
            if name == "add":
                history.add_message(UserMessage(content=f"added {i}"))
            elif name == "delete" and ids:
                history.delete_message_range(ids[i % len(ids)], ids[j % len(ids)])
            elif name == "edit" and ids:
                target = history.get_message_by_id(ids[i % len(ids)])
                assert target is not None
                history.edit_message(target.id, f"edited {j}")
            elif name == "bad_edit":
                history.edit_message(f"missing {i}", "x")
            elif name == "clear":
                history.clear_history()
            elif name == "system":
                history.add_system_prompt("" if i % 2 else f"prompt {j}")
            elif name == "lookup" and ids:
                assert history.get_message_by_id(ids[i % len(ids)]) is not None
        except HistoryError:
            assert snapshot(history) == before
        except InvalidMessageError:  # e.g. an edit that leaves an assistant message empty
            assert snapshot(history) == before
        assert history.total_tokens == counted(history)
        assert all(history.get_message_by_id(m.id) is m for m in history)
        assert len({m.id for m in history.export_history()}) == len(history) + (
            history.system_message is not None
        )


def test_a_counter_is_a_token_counter() -> None:
    assert isinstance(ChatHistory(max_context_tokens=1).token_counter, TokenCounter)


def test_replace_committed_keeps_what_the_loop_recorded_and_checks_the_rest() -> None:
    history = ChatHistory(max_context_tokens=1_000)
    question = UserMessage(content="hello?")
    silent = AssistantMessage(content="")  # a model may answer with nothing
    history.replace_committed([question, silent])
    assert history.messages == (question, silent)
    assert history.conversation_tokens == sum(
        history.token_counter.count_message(m) for m in (question, silent)
    )

    for bad in (
        [question, SystemMessage(content="late")],
        [question, question],
        [question, "not a message"],
    ):
        with pytest.raises((InvalidMessageError, DuplicateMessageIdError)):
            history.replace_committed(bad)  # type: ignore[arg-type]
        assert history.messages == (question, silent)
    with pytest.raises(InvalidMessageError, match="no text and no tool calls"):
        history.import_history([question, silent])  # users' imports are still checked
