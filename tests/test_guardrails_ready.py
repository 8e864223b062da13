"""The ready checks of ``hookloop.guardrails``: personal data, length, tool arguments."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from hookloop import (
    OUTPUT_TOOL_NAME,
    Agent,
    GuardrailTripped,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
    Verdict,
    tool,
)
from hookloop.guardrails import (
    denied_arguments,
    find_pii,
    input_guardrail,
    max_length,
    output_guardrail,
    pii,
    tool_call_guardrail,
    tool_result_guardrail,
)
from hookloop.testing import ScriptedModel, tool_call, tool_calls


class Text:
    """A stand-in context: the checks read ``text`` (and, for tool calls, the call)."""

    def __init__(self, text: str) -> None:
        self.text = text


def kinds(text: str) -> list[tuple[str, str]]:
    return [(kind, text[start:end]) for kind, start, end in find_pii(text)]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("write to jane.doe+x@mail.example.org now", [("email", "jane.doe+x@mail.example.org")]),
        ("call +44 20 7946 0958 today", [("phone", "+44 20 7946 0958")]),
        ("or (555) 123-4567", [("phone", "(555) 123-4567")]),
        ("card 4111 1111 1111 1111 ok", [("card", "4111 1111 1111 1111")]),
        ("card 4111-1111-1111-1112 fails Luhn", []),
        (
            "key sk-proj-abcdefghijklmnopqrstuvwx1234",
            [("api_key", "sk-proj-abcdefghijklmnopqrstuvwx1234")],
        ),
        ("aws AKIAIOSFODNN7EXAMPLE here", [("api_key", "AKIAIOSFODNN7EXAMPLE")]),
        ("gh ghp_" + "a" * 36, [("api_key", "ghp_" + "a" * 36)]),
        ("on 2024-01-02 at 10:30, order 12345", []),
        (
            "call 415-555-0100 or 01 23 45 67 89",
            [("phone", "415-555-0100"), ("phone", "01 23 45 67 89")],
        ),
        # digits that are not phone numbers: a time stamp, an ISBN, an address, an order
        ("at 2024-01-15 10:30:45", []),
        ("ISBN 978-3-16-148410-0", []),
        ("from 192.168.100.200", []),
        ("order 1234567890", []),
        ("nothing to see", []),
    ],
)
def test_find_pii(text: str, found: list[tuple[str, str]]) -> None:
    assert kinds(text) == found


def test_a_luhn_invalid_long_number_is_not_a_card() -> None:
    # 16 digits with a bad checksum and no separators: too long for a phone, not a card.
    assert kinds("id 4111111111111112") == []
    assert kinds("id 4111111111111111") == [("card", "4111111111111111")]


def test_pii_blocks_redacts_or_rejects_and_never_keeps_the_text() -> None:
    text = "mail a@b.io, card 4111 1111 1111 1111"
    blocked = pii()(Text(text))
    assert blocked == Verdict.block(
        "personal data or a secret: 1 email, 1 card", data={"found": {"email": 1, "card": 1}}
    )
    redacted = pii(action="redact")(Text(text))
    assert redacted.replacement == "mail [email], card [card]"
    assert pii(action="reject")(Text(text)).action == "reject"
    assert pii(kinds=["phone"])(Text(text)) == Verdict.allow()
    assert "a@b.io" not in str(blocked) + str(redacted.data)


def test_bad_arguments_are_usage_errors() -> None:
    with pytest.raises(UsageError, match="unknown PII kinds"):
        pii(kinds=["ssn"])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="positive int"):
        max_length(0)
    with pytest.raises(UsageError, match="invalid"):
        denied_arguments({"path": ["("]})
    with pytest.raises(UsageError, match="action"):
        pii(action="mask")  # type: ignore[arg-type]


def test_max_length() -> None:
    assert max_length(5)(Text("12345")) == Verdict.allow()
    assert max_length(5)(Text("123456")).action == "block"
    assert max_length(5, action="truncate")(Text("123456")).replacement == "12345"


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"contents of {path}: token sk-ant-abcdefghijklmnopqrstuvwxyz"


async def test_the_ready_checks_in_a_chat() -> None:
    model = ScriptedModel(
        [
            tool_call("read_file", {"path": "/etc/shadow"}, id="c1"),
            tool_call("read_file", {"path": "notes.txt"}, id="c2"),
            "done",
        ]
    )
    agent = Agent(model, tools=[read_file], retry=None, context=None)
    agent.use(input_guardrail(pii(action="redact")))
    agent.use(input_guardrail(max_length(100)))
    agent.use(tool_call_guardrail(denied_arguments({"path": [r"^/etc/", r"\.ssh"]})))
    agent.use(tool_result_guardrail(pii(action="redact")))
    agent.use(output_guardrail(pii()))
    assert (await agent.chat("I am bob@example.com, read my files")).text == "done"

    first = model.requests[0].messages[-1]
    assert isinstance(first, UserMessage)
    assert first.content == "I am [email], read my files"
    refused, result = (m for m in agent.history.messages if isinstance(m, ToolMessage))
    assert refused.is_error
    assert "denied pattern '^/etc/'" in refused.content
    assert result.content == "contents of notes.txt: token [api_key]"


async def test_a_too_long_input_trips() -> None:
    agent = Agent(ScriptedModel(["never"]), retry=None, context=None)
    agent.use(input_guardrail(max_length(10)))
    with pytest.raises(GuardrailTripped, match="more than the 10 allowed") as caught:
        await agent.chat("x" * 11)
    assert caught.value.guardrail == "max_length"


@tool
def read_all(paths: list[str], options: dict[str, str] | None = None) -> str:
    """Read files."""
    return "read " + ", ".join(paths)


@pytest.mark.parametrize(
    "arguments",
    [{"paths": ["/etc/passwd"]}, {"paths": ["a"], "options": {"k": "le café"}}],
)
async def test_denied_arguments_are_found_inside_lists_and_objects(
    arguments: dict[str, Any],
) -> None:
    model = ScriptedModel([tool_call("read_all", arguments, id="c1"), "done"])
    agent = Agent(model, tools=[read_all], retry=None, context=None)
    agent.use(tool_call_guardrail(denied_arguments({"*": [r"^/etc/", "café"]})))
    await agent.chat("read")
    (answer,) = (m for m in agent.history.messages if isinstance(m, ToolMessage))
    assert answer.is_error
    assert "denied pattern" in answer.content


async def test_escaped_json_is_checked_as_the_tool_receives_it() -> None:
    received: list[str] = []

    @tool
    def send(to: str) -> str:
        """Send mail."""
        received.append(to)
        return "sent"

    escaped = ToolCall(name="send", arguments='{"to": "jane\\u0040example.com"}', id="c1")
    model = ScriptedModel([tool_calls(escaped), "done"])
    agent = Agent(model, tools=[send], retry=None, context=None)
    agent.use(tool_call_guardrail(pii(action="reject")))
    await agent.chat("mail her")
    assert received == []  # "\u0040" is "@": the check saw the address the tool would get


async def test_a_typed_output_is_checked_as_its_value() -> None:
    class Contact(pydantic.BaseModel):
        email: str

    answer = ToolCall(
        name=OUTPUT_TOOL_NAME, arguments='{"email": "jane\\u0040example.com"}', id="o1"
    )
    agent = Agent(ScriptedModel([tool_calls(answer)]), retry=None, context=None)
    agent.use(output_guardrail(pii()))
    with pytest.raises(GuardrailTripped, match="email"):
        await agent.chat("who?", output_type=Contact)


@pytest.mark.parametrize("denied", [{"path": 5}, {"path": [None]}, ["path"]])
def test_denied_arguments_refuses_patterns_that_are_not_str(denied: Any) -> None:
    with pytest.raises(UsageError, match="denied_arguments"):
        denied_arguments(denied)


def test_one_pii_kind_may_be_named_alone() -> None:
    assert pii(kinds="email")(Text("a@b.io")).action == "block"
    with pytest.raises(UsageError, match="PII kinds"):
        pii(kinds=5)  # type: ignore[arg-type]
