"""Typed output through the real clients: the OpenAI, Responses and Anthropic adapters against
the local wire-format server (what goes on the wire, strict schemas with ``dict`` fields,
retries), and the real local model answering under the schema's grammar."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pydantic
import pytest

from hookloop import (
    OUTPUT_TOOL_NAME,
    Agent,
    ModelSettings,
    PartialOutput,
    UsageError,
    UserMessage,
    tool,
)
from hookloop._builtin_tools import calculator
from hookloop.models import OutputFormat, ProviderRequest
from hookloop.models._local import LocalModel
from hookloop.models._openai import OpenAIModel
from tests.models._provider_server import (
    ProviderServer,
    answer,
)


class Stock(pydantic.BaseModel):
    warehouse: str
    counts: dict[str, int]
    note: str | None = None


PAIRS = [{"key": "apples", "value": 3}, {"key": "pears", "value": 0}]
STOCK = Stock(warehouse="north", counts={"apples": 3, "pears": 0})
STOCK_ARGS = json.dumps({"warehouse": "north", "counts": PAIRS, "note": None})
PAIR_SCHEMA = {
    "type": "object",
    "properties": {"key": {"type": "string"}, "value": {"type": "integer"}},
    "required": ["key", "value"],
    "additionalProperties": False,
}
STRICT_STOCK = {
    "type": "object",
    "properties": {
        "warehouse": {"type": "string"},
        "counts": {"type": "array", "items": PAIR_SCHEMA},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["warehouse", "counts", "note"],
    "additionalProperties": False,
}


async def test_openai_output_tool_is_strict_and_a_dict_field_comes_back(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(answer("chat.completions", calls=(("call_1", OUTPUT_TOOL_NAME, STOCK_ARGS),)))
    agent = Agent(make_model("chat.completions"), output_type=Stock)
    response = await agent.chat("Count the stock.")
    assert response.output == STOCK
    body = server.received[0].body
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": OUTPUT_TOOL_NAME,
                "description": "Give your final answer to the user with this tool, when you "
                "have it.",
                "parameters": STRICT_STOCK,
                "strict": True,
            },
        }
    ]
    assert body["tool_choice"] == "required"
    assert "response_format" not in body


async def test_openai_retries_invalid_arguments_and_sends_the_error_back(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    bad = json.dumps({"warehouse": "north", "counts": [{"key": "apples", "value": "lots"}]})
    server.add(
        answer("chat.completions", calls=(("call_1", OUTPUT_TOOL_NAME, bad),)),
        answer("chat.completions", calls=(("call_2", OUTPUT_TOOL_NAME, STOCK_ARGS),)),
    )
    agent = Agent(make_model("chat.completions"), output_type=Stock)
    assert (await agent.chat("Count the stock.")).output == STOCK
    second = server.received[1].body["messages"]
    assert second[-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "The answer is not valid:\n"
        "- counts.apples: Input should be a valid integer, unable to parse string as an "
        "integer\nCall final_result again with a corrected answer.",
    }


async def test_openai_native_mode_sends_a_strict_json_schema_response_format(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(answer("chat.completions", STOCK_ARGS))
    agent = Agent(make_model("chat.completions"), output_type=Stock, output_mode="native")
    assert (await agent.chat("Count the stock.")).output == STOCK
    body = server.received[0].body
    assert body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Stock", "schema": STRICT_STOCK, "strict": True},
    }
    assert "tools" not in body


async def test_openai_native_mode_keeps_tools_usable(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    @tool
    def count(fruit: str) -> int:
        """Count one fruit in the north warehouse."""
        return 3

    server.add(
        answer("chat.completions", calls=(("call_1", "count", '{"fruit": "apples"}'),)),
        answer("chat.completions", STOCK_ARGS),
    )
    model = make_model("chat.completions")
    agent = Agent(model, tools=[count], output_type=Stock, output_mode="native")
    response = await agent.chat("Count the stock.")
    assert response.output == STOCK
    first, second = (r.body for r in server.received)
    assert [t["function"]["name"] for t in first["tools"]] == ["count"]
    assert first["response_format"] == second["response_format"]
    assert second["messages"][-1]["content"] == "3"


async def test_a_llama_cpp_server_gets_the_schema_as_a_json_object_format(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(answer("chat.completions", '{"response": 12}'))
    agent = Agent(make_model("chat.completions", json_mode="json_object"), output_mode="native")
    assert (await agent.chat("How many?", output_type=int)).output == 12
    schema = {
        "type": "object",
        "properties": {"response": {"type": "integer"}},
        "required": ["response"],
        "additionalProperties": False,
    }
    assert server.received[0].body["response_format"] == {"type": "json_object", "schema": schema}


def test_a_json_mode_that_does_not_exist_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="json_mode must be"):
        OpenAIModel("m", base_url="http://127.0.0.1:1/v1", json_mode="grammar")  # type: ignore[arg-type]


async def test_openai_streams_partial_output(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(
        answer("chat.completions", calls=(("call_1", OUTPUT_TOOL_NAME, STOCK_ARGS),), stream=True)
    )
    agent = Agent(make_model("chat.completions"), output_type=Stock)
    async with agent.chat_stream("Count the stock.") as events:
        partials = [e.output async for e in events if isinstance(e, PartialOutput)]
    # The arguments arrive 4 characters at a time; a key/value pair counts once it is whole.
    assert partials == [Stock(warehouse="north", counts={"apples": 3}), STOCK]
    assert events.response is not None
    assert events.response.output == STOCK


async def test_responses_native_mode_sends_a_text_format(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(answer("responses", STOCK_ARGS))
    agent = Agent(make_model("responses"), output_type=Stock, output_mode="native")
    assert (await agent.chat("Count the stock.")).output == STOCK
    assert server.received[0].body["text"] == {
        "format": {"type": "json_schema", "name": "Stock", "schema": STRICT_STOCK, "strict": True}
    }


async def test_anthropic_model_that_answers_text_is_asked_for_the_output_tool(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(
        answer("messages", "North has 3 apples and no pears."),
        answer("messages", calls=(("toolu_1", OUTPUT_TOOL_NAME, STOCK_ARGS),)),
    )
    agent = Agent(make_model("messages"), output_type=Stock)
    assert (await agent.chat("Count the stock.")).output == STOCK
    first, second = (r.body for r in server.received)
    assert first["tool_choice"] == {"type": "any"}
    assert first["tools"] == [
        {
            "name": OUTPUT_TOOL_NAME,
            "description": "Give your final answer to the user with this tool, when you have it.",
            "input_schema": STRICT_STOCK,
        }
    ]
    assert second["messages"][-2:] == [
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "North has 3 apples and no pears."}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "text",
                    "text": "Give your final answer by calling the final_result tool with it, "
                    "not as text.",
                }
            ],
        },
    ]


async def test_anthropic_prompted_mode_reads_the_json_from_text(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    server.add(answer("messages", f"```json\n{json.dumps(STOCK.model_dump())}\n```"))
    agent = Agent(make_model("messages"), output_type=Stock, output_mode="prompted")
    assert (await agent.chat("Count the stock.")).output == STOCK
    assert "matches this JSON schema" in server.received[0].body["system"]


async def test_anthropic_refuses_native_mode_before_sending(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    model = make_model("messages")
    with pytest.raises(UsageError, match="AnthropicModel cannot constrain its answer"):
        Agent(model, output_type=Stock, output_mode="native")
    request = ProviderRequest(
        model="m",
        system=None,
        messages=(UserMessage(content="Hi"),),
        output_format=OutputFormat(name="Stock", schema=STRICT_STOCK),
    )
    with pytest.raises(UsageError, match="no JSON-schema output mode"):
        await model.request(request)
    assert server.received == []


# --- the real local model ------------------------------------------------------------------


class Person(pydantic.BaseModel):
    name: str
    age: int


async def test_the_local_model_answers_under_the_schema_grammar(local_model: LocalModel) -> None:
    agent = Agent(local_model, output_type=Person, output_mode="native", output_retries=0)
    response = await agent.chat("Alice is 31 years old. Give her name and age.")
    # Greedy decoding: the same answer every run; the grammar makes it parse.
    assert response.output == Person(name="Alice", age=31)
    assert response.text == '{"name": "Alice", "age": 31}'


PENALISED = ModelSettings(extra={"repeat_penalty": 1.1})
"""A repeat penalty, for the open-ended lists a small greedy model would repeat forever."""


async def test_the_local_model_fills_a_dict_through_key_value_pairs(
    local_model: LocalModel,
) -> None:
    # Greedy and without a repeat penalty (LocalModel's neutral sampling) the 135M model
    # lists the same pairs until max_tokens; the penalty, asked for, ends the list.
    agent = Agent(local_model, output_mode="native", output_retries=0, settings=PENALISED)
    response = await agent.chat("Give two fruit and a count of each.", output_type=dict[str, int])
    assert isinstance(response.output, dict)
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in response.output.items())
    raw = json.loads(response.text)
    assert list(raw) == ["response"]
    assert {pair["key"]: pair["value"] for pair in raw["response"]} == response.output


async def test_the_local_model_streams_partial_output(local_model: LocalModel) -> None:
    agent = Agent(local_model, output_type=Person, output_mode="native", output_retries=0)
    async with agent.chat_stream("Bob is 40. Give his name and age.") as events:
        partials = [e.output async for e in events if isinstance(e, PartialOutput)]
    assert events.response is not None
    assert partials[-1] == events.response.output == Person(name="Bob", age=40)


class Total(pydantic.BaseModel):
    total: float


async def test_the_local_model_uses_a_tool_then_answers_through_the_output_tool(
    local_model: LocalModel,
) -> None:
    agent = Agent(
        local_model,
        tools=[calculator],
        output_type=Total,
        output_retries=1,
        settings=ModelSettings(tool_choice="calculator"),
    )
    response = await agent.chat("What is 17 * 23? Use the calculator.")
    # The calculator call is forced; after its one tool round (LocalModel's tool_rounds=1)
    # the model is made to call the output tool, not to write text. The figures it copies
    # are its own choice: only the shapes the grammar forces are asserted.
    assert [
        (m.role, [c.name for c in getattr(m, "tool_calls", ())]) for m in response.messages
    ] == [
        ("user", []),
        ("assistant", ["calculator"]),
        ("tool", []),
        ("assistant", [OUTPUT_TOOL_NAME]),
        ("tool", []),
    ]
    (output_call,) = response.messages[3].tool_calls  # type: ignore[union-attr]
    assert response.output == Total.model_validate_json(output_call.arguments)


class Node(pydantic.BaseModel):
    v: int
    kids: list[Node] = []


class Event(pydantic.BaseModel):
    title: str
    details: dict[str, Any]


async def test_anthropic_gets_an_object_at_the_root_of_a_recursive_output_type(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    tree = json.dumps({"v": 1, "kids": [{"v": 2, "kids": None}]})
    server.add(answer("messages", calls=(("toolu_1", OUTPUT_TOOL_NAME, tree),)))
    agent = Agent(make_model("messages"), output_type=Node)
    assert (await agent.chat("A tree?")).output == Node(v=1, kids=[Node(v=2)])
    (definition,) = server.received[0].body["tools"]
    schema = definition["input_schema"]
    assert schema["type"] == "object"
    assert schema["properties"]["kids"]["anyOf"][0] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Node"},
    }
    assert schema["$defs"]["Node"] == {
        key: value for key, value in schema.items() if key != "$defs"
    }


async def test_openai_fills_a_dict_of_any_values_through_json_text(
    server: ProviderServer, make_model: Callable[..., Any]
) -> None:
    pairs = [{"key": "date", "value": '"2026-05-01"'}, {"key": "pad", "value": "39"}]
    arguments = json.dumps({"title": "Launch", "details": pairs})
    server.add(answer("chat.completions", calls=(("call_1", OUTPUT_TOOL_NAME, arguments),)))
    agent = Agent(make_model("chat.completions"), output_type=Event)
    response = await agent.chat("When is the launch?")
    assert response.output == Event(title="Launch", details={"date": "2026-05-01", "pad": 39})
    (definition,) = server.received[0].body["tools"]
    details = definition["function"]["parameters"]["properties"]["details"]
    assert details["items"]["properties"]["value"] == {
        "type": "string",
        "description": "The value as JSON text.",
    }


async def test_the_local_model_fills_a_dict_of_any_values(local_model: LocalModel) -> None:
    agent = Agent(
        local_model, output_type=Event, output_mode="native", output_retries=0, settings=PENALISED
    )
    response = await agent.chat(
        "The launch is on 2026-05-01 at pad 39A. Give a title and the details (date, pad)."
    )
    # Each value arrives as text, decoded when it is JSON; the dict is no longer always empty.
    raw = json.loads(response.text)["details"]
    assert raw  # greedy decoding: the same pairs every run
    assert response.output.details == {pair["key"]: _json_or_text(pair["value"]) for pair in raw}


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text
