"""Public names show the path users import them from (``hookloop.UsageError``), as httpx's do.

The classes and functions of the errors and messages modules have ``__module__ ==
"hookloop"``; they still pickle, validate with pydantic and resolve their type hints; and
``dir()`` of a package lists its lazy names before they load.
"""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
import typing

import pydantic
import pytest

import hookloop
from hookloop import _errors, _messages

PUBLISHED = sorted(
    name
    for name in hookloop.__all__
    if name in getattr(_errors, "__all__", ()) or name in getattr(_messages, "__all__", ())
    if isinstance(getattr(hookloop, name), type) or callable(getattr(hookloop, name))
)


def test_the_names_of_errors_and_messages_name_the_root_as_their_module() -> None:
    assert len(PUBLISHED) > 50
    wrong = {name: getattr(hookloop, name).__module__ for name in PUBLISHED}
    assert {name: module for name, module in wrong.items() if module != "hookloop"} == {}
    assert repr(hookloop.UsageError) == "<class 'hookloop.UsageError'>"


@pytest.mark.parametrize("name", [n for n in PUBLISHED if isinstance(getattr(hookloop, n), type)])
def test_a_published_class_pickles_by_reference_and_resolves_its_hints(name: str) -> None:
    cls = getattr(hookloop, name)
    assert pickle.loads(pickle.dumps(cls)) is cls
    typing.get_type_hints(cls)  # evaluated in hookloop's namespace now: nothing missing


@pytest.mark.parametrize(
    "error",
    [
        hookloop.UsageError("bad"),
        hookloop.SessionNotFoundError("s1"),
        hookloop.MissingExtraError(extra="openai", needed_by="OpenAIModel"),
        hookloop.RateLimitError("slow down", status=429, retry_after=2.0, model="m"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_pickles_with_its_message_and_fields(error: hookloop.HookloopError) -> None:
    error.add_note("a note")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (str(copy), copy.args, vars(copy)) == (str(error), error.args, vars(error))


def test_messages_pickle_and_validate_with_pydantic() -> None:
    call = hookloop.ToolCall.create("add", {"a": 1}, id="c1")
    messages: list[hookloop.Message] = [
        hookloop.SystemMessage(content="be brief", id="s"),
        hookloop.UserMessage(content=[hookloop.TextPart(text="hi")], id="u"),
        hookloop.AssistantMessage(content="", tool_calls=[call], id="a"),
        hookloop.ToolMessage(content="1", tool_call_id="c1", tool_name="add", id="t"),
    ]
    assert pickle.loads(pickle.dumps(messages)) == messages

    class Transcript(pydantic.BaseModel):
        messages: list[hookloop.Message]
        usage: hookloop.Usage

    transcript = Transcript(messages=messages, usage=hookloop.Usage(input_tokens=3))
    assert Transcript.model_validate_json(transcript.model_dump_json()) == transcript
    assert "messages" in Transcript.model_json_schema()["properties"]
    for cls in (hookloop.UserMessage, hookloop.AssistantMessage, hookloop.TextPart):
        assert all(not isinstance(f.type, str) for f in dataclasses.fields(cls)), cls


@pytest.mark.parametrize(
    ("package", "lazy"),
    [
        ("hookloop", "OpenAIModel"),
        ("hookloop", "PostgresSessionStore"),
        ("hookloop.models", "AnthropicModel"),
        ("hookloop.sessions", "RedisSessionStore"),
    ],
)
def test_dir_lists_a_lazy_name_before_it_loads(package: str, lazy: str) -> None:
    code = (
        f"import {package} as p; print({lazy!r} in vars(p), {lazy!r} in dir(p), "
        f"set(p.__all__) <= set(dir(p)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == "False True True\n"
