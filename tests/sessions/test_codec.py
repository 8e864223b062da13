"""Stored rows and the public surface of hookloop.sessions; round trips as properties."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import subprocess
import sys
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hookloop.sessions
from hookloop import Agent, AssistantMessage, Message, ToolCall, UserMessage
from hookloop._errors import CorruptSessionError, RunError, SessionError
from hookloop.sessions import MESSAGE_FORMAT, StoredMessage
from hookloop.sessions._codec import decode_rows, encode_message
from hookloop.testing import ScriptedModel
from tests.context.test_strategies import histories
from tests.sessions._backends import Backend


def rows_for(messages: list[Message]) -> list[tuple[int, object, object, object]]:
    return [(n, m.id, MESSAGE_FORMAT, encode_message(m)) for n, m in enumerate(messages, 1)]


@settings(max_examples=40)
@given(histories(valid=False))
def test_any_messages_round_trip_through_rows(messages: list[Message]) -> None:
    rows = rows_for(messages)
    assert decode_rows("s", rows) == [
        StoredMessage(seq=n, message=m) for n, m in enumerate(messages, 1)
    ]
    # Rows may come back from a database as bytes.
    as_bytes = [(n, str(i).encode(), str(f).encode(), str(d).encode()) for n, i, f, d in rows]
    assert [r.message for r in decode_rows("s", as_bytes)] == messages


def test_rows_that_only_parse_together_are_refused() -> None:
    one, two = UserMessage(content="one", id="m1"), UserMessage(content="two", id="m2")
    both = f"{encode_message(one)},{encode_message(two)}"
    rows = [(1, "m1", 1, both), (2, "m2", 1, "null")]  # a join would give two objects
    with pytest.raises(CorruptSessionError) as caught:
        decode_rows("s", rows)
    assert (caught.value.session_id, caught.value.seq) == ("s", 1)
    assert "not valid JSON" in caught.value.reason


def test_a_bad_row_is_named_by_its_seq_among_good_ones() -> None:
    messages: list[Message] = [UserMessage(content=f"m{n}", id=f"m{n}") for n in range(5)]
    rows = rows_for(messages)
    rows[3] = (4, "m3", 1, '{"role": "user", "id": "m3"}')  # no content
    with pytest.raises(CorruptSessionError) as caught:
        decode_rows("chat-7", rows)
    error = caught.value
    assert (error.session_id, error.seq) == ("chat-7", 4)
    assert "content" in error.reason
    assert str(error).startswith("session 'chat-7' is corrupt at message seq 4: ")
    assert isinstance(error, SessionError)
    assert isinstance(error, RunError)


def test_encoding_is_the_messages_modules_json_form() -> None:
    call = ToolCall.create("f", {"x": "ação"}, id="c1")
    message = AssistantMessage(content="é", tool_calls=(call,), id="a1")
    assert encode_message(message) == (
        '{"role":"assistant","content":"é","tool_calls":[{"name":"f",'
        '"arguments":"{\\"x\\": \\"ação\\"}","id":"c1"}],"id":"a1"}'
    )


@settings(
    max_examples=15,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(messages=histories(valid=False))
def test_any_messages_round_trip_through_every_store(
    backend: Backend, messages: list[Message]
) -> None:
    session_id = uuid.uuid4().hex  # one place for all examples: a session each

    async def round_trip() -> tuple[list[Message], list[Message]]:
        async with backend.store() as store:
            for message in messages:
                await store.append(session_id, message)
        async with backend.store() as store:
            return await store.load(session_id), await store.load(session_id)

    first, second = asyncio.run(round_trip())
    assert first == messages
    assert second == messages


# --- the public surface -----------------------------------------------------------------


def test_all_is_sorted_and_complete() -> None:
    names = hookloop.sessions.__all__
    assert len(names) == len(set(names))
    for name in names:
        assert getattr(hookloop.sessions, name) is not None, name
    public = {
        name
        for name, value in vars(hookloop.sessions).items()
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
    }
    assert public <= set(names)


def test_public_names_have_docstrings_and_dataclasses_are_keyword_only() -> None:
    for name in hookloop.sessions.__all__:
        obj = getattr(hookloop.sessions, name)
        if not inspect.isclass(obj):
            continue
        assert inspect.getdoc(obj), name
        for attr, member in vars(obj).items():
            if not attr.startswith("_") and inspect.isfunction(member):
                assert inspect.getdoc(member), f"{name}.{attr}"
        if dataclasses.is_dataclass(obj):
            params = inspect.signature(obj).parameters.values()
            assert all(p.kind is p.KEYWORD_ONLY for p in params), name


def test_session_errors_live_in_the_one_error_tree() -> None:
    import hookloop._errors

    for name in hookloop.sessions.__all__:
        obj = getattr(hookloop.sessions, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            assert issubclass(obj, SessionError), name
            assert getattr(hookloop._errors, name) is obj


def test_importing_sessions_needs_no_database_driver() -> None:
    code = (
        "import sys, hookloop.sessions as s; "
        "assert 'asyncpg' not in sys.modules and 'redis' not in sys.modules; "
        "s.SQLiteSessionStore; assert 'asyncpg' not in sys.modules; "
        "s.PostgresSessionStore; s.RedisSessionStore; assert 'asyncpg' not in sys.modules; "
        "assert 'redis' not in sys.modules"
    )  # each store imports its driver when it connects
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# --- surrogates: a stream may split an emoji's JSON escapes across two chunks -----------

surrogates = st.integers(0xD800, 0xDFFF).map(chr)
texts_with_surrogates = st.lists(st.one_of(st.characters(), surrogates), max_size=12).map("".join)


def as_utf16_reads_it(text: str) -> str:
    """The text a JSON reader gives back: a high surrogate then a low one form one character."""
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


@settings(max_examples=60)
@given(texts_with_surrogates)
def test_text_with_surrogates_round_trips_through_rows(text: str) -> None:
    message = AssistantMessage(content=text, id="a1")
    encoded = encode_message(message)
    encoded.encode()  # storable as UTF-8
    (stored,) = decode_rows("s", [(1, "a1", MESSAGE_FORMAT, encoded)])
    assert stored.message == AssistantMessage(content=as_utf16_reads_it(text), id="a1")


def test_a_lone_surrogate_comes_back_as_it_was() -> None:
    message = UserMessage(content="smile \ud83d, then \ude00 alone", id="u1")
    (stored,) = decode_rows("s", [(1, "u1", MESSAGE_FORMAT, encode_message(message))])
    assert stored.message == message


@settings(
    max_examples=10,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=texts_with_surrogates)
def test_text_with_surrogates_round_trips_through_every_store(backend: Backend, text: str) -> None:
    session_id = uuid.uuid4().hex
    message = AssistantMessage(content=text)

    async def round_trip() -> list[Message]:
        async with backend.store() as store:
            assert await store.append(session_id, message) == 1
            assert await store.append(session_id, message) == 1  # the same message: no write
            return await store.load(session_id)

    assert asyncio.run(round_trip()) == [
        dataclasses.replace(message, content=as_utf16_reads_it(text))
    ]


async def test_an_answer_split_inside_an_emoji_is_recorded(backend: Backend) -> None:
    text = json.loads('"smile \\ud83d"') + json.loads('"\\ude00"')  # two stream chunks
    async with backend.store() as store:
        agent = Agent(ScriptedModel([text]), plugins=[store.session("s")])
        await agent.chat("hi")
        stored = await store.load("s")
        assert [m.role for m in stored] == ["user", "assistant"]
        assert stored[1].content == "smile \U0001f600"
