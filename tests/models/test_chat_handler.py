"""hookloop's llama.cpp chat format: the prompt the local model reads.

The served behaviour (grammar, streaming, the model reading a result back) is tested against
the real model in test_local.py; these check the prompt itself, whole.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop.models._chat_handler import _arguments_grammar, render

CALCULATOR = {
    "name": "calculator",
    "description": "Evaluate an arithmetic expression.",
    "parameters": {
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
}
GUIDE = (
    "You can use these tools:\n"
    "functions.calculator: Evaluate an arithmetic expression.\n"
    '  parameters: {"type":"object","properties":{"expression":{"type":"string"}},'
    '"required":["expression"]}\n\n'
    "To use a tool, answer with its name and JSON arguments:\n"
    'functions.NAME:\n{"argument": "value"}\n'
    "The tool's result comes back to you in the next message.\n"
    "To answer the user in words, begin with:\n"
    "message:"
)


def conversation(arguments: str = '{"expression": "17 * 23"}') -> list[dict[str, object]]:
    call = {"id": "c1", "type": "function",
            "function": {"name": "calculator", "arguments": arguments}}  # fmt: skip
    return [
        {"role": "user", "content": "What is 17 * 23?"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "391"},
    ]


def test_the_tool_result_is_a_user_turn_and_the_tools_are_listed_without_a_system_prompt() -> None:
    assert render(conversation(), [CALCULATOR]) == (
        f"<|im_start|>system\n{GUIDE}<|im_end|>\n"
        "<|im_start|>user\nWhat is 17 * 23?<|im_end|>\n"
        '<|im_start|>assistant\nfunctions.calculator:\n{"expression": "17 * 23"}<|im_end|>\n'
        "<|im_start|>user\nThe answer from calculator is 391.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_a_system_prompt_comes_before_the_tool_guide_and_words_are_marked() -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello."},
        {"role": "user", "content": [{"type": "text", "text": "Sum?"}]},
    ]
    assert render(messages, [CALCULATOR]) == (
        f"<|im_start|>system\nBe brief.\n\n{GUIDE}<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n"
        "<|im_start|>assistant\nmessage:\nHello.<|im_end|>\n"
        "<|im_start|>user\nSum?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_without_tools_the_prompt_is_plain_chatml() -> None:
    # The form text answers are written from: no guide for a small model to talk about, and
    # no earlier call for it to echo to the user.
    assert render(conversation(), []) == (
        "<|im_start|>user\nWhat is 17 * 23?<|im_end|>\n"
        "<|im_start|>user\nThe answer from calculator is 391.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_arguments_are_written_back_exactly_and_stay_so_turn_after_turn(text: str) -> None:
    arguments = json.dumps({"expression": text}, ensure_ascii=False)
    first = render(conversation(arguments), [CALCULATOR])
    assert f"functions.calculator:\n{arguments}<|im_end|>" in first
    later = [*conversation(arguments), {"role": "assistant", "content": "ok"},
             {"role": "user", "content": "again"}]  # fmt: skip
    second = render(later, [CALCULATOR])
    assert second.startswith(first.removesuffix("<|im_start|>assistant\n"))


def test_a_failed_tool_is_shown_as_a_failure_and_words_are_written_without_the_call_syntax() -> (
    None
):
    messages = [
        *conversation('{"expression": "1 / 0"}')[:2],
        {"role": "tool", "tool_call_id": "c1",
         "content": "tool 'calculator' failed: ZeroDivisionError: division by zero"},
        {"role": "assistant", "content": "It cannot be divided."},
        {"role": "user", "content": "Try 2 / 1."},
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c2", "type": "function",
             "function": {"name": "calculator", "arguments": '{"expression": "2 /"}'}}]},
        {"role": "tool", "tool_call_id": "c2",
         "content": "invalid arguments for tool 'calculator': expression: bad"},
    ]  # fmt: skip
    assert render(messages, []) == (  # the prompt text answers are written from
        "<|im_start|>user\nWhat is 17 * 23?<|im_end|>\n"
        "<|im_start|>user\ncalculator failed: ZeroDivisionError: division by zero<|im_end|>\n"
        "<|im_start|>assistant\nIt cannot be divided.<|im_end|>\n"
        "<|im_start|>user\nTry 2 / 1.<|im_end|>\n"
        "<|im_start|>user\ncalculator failed: invalid arguments: expression: bad<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


def test_a_calls_fixed_start_is_written_and_only_the_rest_is_generated() -> None:
    pytest.importorskip("llama_cpp")
    two_numbers = {
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    }
    schemas = [CALCULATOR["parameters"], two_numbers, {"type": "object", "properties": {}}]
    starts = [_arguments_grammar(schema)[0] for schema in schemas]
    assert starts == ['{"expression": "', '{"a": ', ""]
