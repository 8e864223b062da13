"""Typed output on the scripted model: the output tool, native and prompted modes, retries,
the ``on_output_validation_error`` hook, partial output while streaming, and the strict-schema
transform (a property: it round-trips values of generated models)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import textwrap
from pathlib import Path
from typing import Any, Literal, NotRequired, Optional

import jsonschema
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typing_extensions import TypedDict

from hookloop import (
    OUTPUT_TOOL_NAME,
    Agent,
    ChatErrorContext,
    ChatHistory,
    HookReturnError,
    Message,
    OutputValidationError,
    PartialOutput,
    ToolCall,
    TracePlugin,
    UsageError,
    tool,
)
from hookloop._output import output_spec
from hookloop._output_schema import convert, strict_schema
from hookloop.context._tokens import count_request
from hookloop.hooks import OutputReturn, OutputValidationErrorContext
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, ScriptedModel, ScriptStep, tool_call, tool_calls
from tests._typecheck import mypy


class City(pydantic.BaseModel):
    name: str
    population: int
    districts: dict[str, int] = {}
    motto: str | None = None


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Movie(TypedDict):
    title: str
    year: NotRequired[int]


def shape(messages: tuple[Message, ...]) -> list[tuple[str, ...]]:
    """Messages without their random ids: role, text, and tool calls or the call answered."""
    out: list[tuple[str, ...]] = []
    for m in messages:
        if m.role == "assistant":
            out.append(("assistant", m.content, *(f"{c.name}:{c.arguments}" for c in m.tool_calls)))
        elif m.role == "tool":
            out.append(("tool", m.tool_name, m.content, "error" if m.is_error else "ok"))
        else:
            out.append((m.role, m.text))
    return out


def answer(arguments: dict[str, Any] | str, *, id: str = "out_1") -> ProviderResponse:
    return tool_call(OUTPUT_TOOL_NAME, arguments, id=id)


# --- the output tool (the default mode) ------------------------------------------------------


async def test_a_pydantic_model_comes_back_validated_through_the_output_tool() -> None:
    districts = [{"key": "Frogner", "value": 59_000}, {"key": "Grorud", "value": 27_000}]
    model = ScriptedModel(
        [answer({"name": "Oslo", "population": 709_000, "districts": districts, "motto": None})]
    )
    agent = Agent(model, output_type=City)
    response = await agent.chat("Tell me about Oslo.")
    assert response.output == City(
        name="Oslo", population=709_000, districts={"Frogner": 59_000, "Grorud": 27_000}
    )
    arguments = json.dumps(
        {"name": "Oslo", "population": 709_000, "districts": districts, "motto": None}
    )
    assert shape(response.messages) == [
        ("user", "Tell me about Oslo."),
        ("assistant", "", f"final_result:{arguments}"),
        ("tool", "final_result", "Final answer received.", "ok"),
    ]
    (request,) = model.requests
    assert request.settings.tool_choice == "required"  # text is no answer: a call is forced
    (definition,) = request.tools
    assert (definition.name, definition.strict) == (OUTPUT_TOOL_NAME, True)
    pair = {
        "type": "object",
        "properties": {"key": {"type": "string"}, "value": {"type": "integer"}},
        "required": ["key", "value"],
        "additionalProperties": False,
    }
    assert definition.parameters == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "population": {"type": "integer"},
            "districts": {"anyOf": [{"type": "array", "items": pair}, {"type": "null"}]},
            "motto": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        },
        "required": ["name", "population", "districts", "motto"],
        "additionalProperties": False,
    }


@pytest.mark.parametrize(
    ("output_type", "arguments", "expected"),
    [
        (Point, {"x": 1, "y": 2}, Point(x=1, y=2)),
        (Movie, {"title": "Alien", "year": None}, {"title": "Alien"}),
        (Movie, {"title": "Alien", "year": 1979}, {"title": "Alien", "year": 1979}),
        (int, {"response": 42}, 42),
        (list[Point], {"response": [{"x": 1, "y": 2}]}, [Point(x=1, y=2)]),
        (Point | City, {"response": {"x": 3, "y": 4}}, Point(x=3, y=4)),
        (Literal["yes", "no"], {"response": "no"}, "no"),
        (dict[str, float], {"response": [{"key": "pi", "value": 3.14}]}, {"pi": 3.14}),
    ],
)
async def test_dataclasses_typeddicts_scalars_and_unions_validate(
    output_type: Any, arguments: dict[str, Any], expected: object
) -> None:
    agent = Agent(ScriptedModel([answer(arguments)]), output_type=output_type)
    assert (await agent.chat("Go.")).output == expected


async def test_a_str_output_is_the_text_and_adds_nothing_to_the_request() -> None:
    model = ScriptedModel(["Plain words."])
    response = await Agent(model, output_type=str).chat("Hi")
    assert response.output == "Plain words."
    assert model.requests[0].tools == ()
    assert model.requests[0].settings.tool_choice == "auto"


async def test_a_union_with_str_accepts_text_and_still_offers_the_tool() -> None:
    model = ScriptedModel(["Sorry, no city by that name.", answer({"response": 7})])
    agent = Agent(model, output_type=int | str)
    assert (await agent.chat("Which city?")).output == "Sorry, no city by that name."
    assert [t.name for t in model.requests[0].tools] == [OUTPUT_TOOL_NAME]
    assert model.requests[0].settings.tool_choice == "auto"  # text is an answer: not forced
    assert (await agent.chat("A number?")).output == 7


async def test_tools_stay_usable_beside_the_output_tool() -> None:
    @tool
    def population(city: str) -> int:
        """The population of a city."""
        return 709_000

    model = ScriptedModel(
        [
            tool_call("population", {"city": "Oslo"}, id="call_1"),
            answer({"name": "Oslo", "population": 709_000, "districts": None, "motto": None}),
        ]
    )
    agent = Agent(model, tools=[population], output_type=City)
    response = await agent.chat("How many live in Oslo?")
    assert response.output == City(name="Oslo", population=709_000)
    assert shape(response.messages)[1:3] == [
        ("assistant", "", 'population:{"city": "Oslo"}'),
        ("tool", "population", "709000", "ok"),
    ]
    assert [t.name for t in model.requests[0].tools] == ["population", OUTPUT_TOOL_NAME]
    assert response.iterations == 2


async def test_other_calls_in_the_answering_turn_are_answered_as_not_run() -> None:
    ran: list[str] = []

    @tool
    def note(text: str) -> str:
        """Take a note."""
        ran.append(text)
        return "noted"

    output = ToolCall(name=OUTPUT_TOOL_NAME, arguments='{"x": 1, "y": 2}', id="out_1")
    other = ToolCall(name="note", arguments='{"text": "hi"}', id="call_2")
    agent = Agent(ScriptedModel([tool_calls(output, other)]), tools=[note], output_type=Point)
    response = await agent.chat("Go.")
    assert response.output == Point(x=1, y=2)
    assert shape(response.messages)[2:] == [
        ("tool", "final_result", "Final answer received.", "ok"),
        ("tool", "note", "not run: the final answer was given in the same turn", "error"),
    ]
    assert ran == []


# --- retries ---------------------------------------------------------------------------------


async def test_invalid_arguments_go_back_to_the_model_as_the_output_calls_result() -> None:
    model = ScriptedModel(
        [answer({"x": "one", "y": 2}, id="out_1"), answer({"x": 1, "y": 2}, id="out_2")]
    )
    response = await Agent(model, output_type=Point).chat("Go.")
    assert response.output == Point(x=1, y=2)
    assert shape(response.messages) == [
        ("user", "Go."),
        ("assistant", "", 'final_result:{"x": "one", "y": 2}'),
        (
            "tool",
            "final_result",
            "The answer is not valid:\n"
            "- x: Input should be a valid integer, unable to parse string as an integer\n"
            "Call final_result again with a corrected answer.",
            "error",
        ),
        ("assistant", "", 'final_result:{"x": 1, "y": 2}'),
        ("tool", "final_result", "Final answer received.", "ok"),
    ]
    assert response.iterations == 2


async def test_a_model_that_answers_in_text_is_told_to_call_the_output_tool() -> None:
    model = ScriptedModel(["It is at (1, 2).", answer({"x": 1, "y": 2})])
    response = await Agent(model, output_type=Point).chat("Where?")
    assert response.output == Point(x=1, y=2)
    assert shape(response.messages)[1:3] == [
        ("assistant", "It is at (1, 2)."),
        ("user", "Give your final answer by calling the final_result tool with it, not as text."),
    ]


async def test_giving_up_raises_with_the_last_raw_output_and_leaves_a_valid_history() -> None:
    errors: list[Exception] = []
    model = ScriptedModel([answer("{not json", id="out_1"), answer({"x": 1}, id="out_2")])
    agent = Agent(model, output_type=Point, output_retries=1)

    @agent.hook("on_chat_error")
    def seen(ctx: ChatErrorContext) -> None:
        errors.append(ctx.error)

    with pytest.raises(OutputValidationError) as caught:
        await agent.chat("Go.")
    error = caught.value
    assert (error.raw, error.attempts) == ('{"x": 1}', 2)
    assert isinstance(error.error, pydantic.ValidationError)
    assert str(error) == (
        "the model's answer did not validate after 2 attempts (raise output_retries to allow "
        f"more): {error.error}"
    )
    assert errors == [error]
    assert shape(agent.messages)[1:] == [
        ("assistant", "", "final_result:{not json"),
        (
            "tool",
            "final_result",
            "The answer is not valid:\n- the answer is not valid JSON\n"
            "Call final_result again with a corrected answer.",
            "error",
        ),
        ("assistant", "", 'final_result:{"x": 1}'),
        ("tool", "final_result", "not run: the chat ended with an error", "error"),
    ]


async def test_zero_retries_gives_up_at_the_first_invalid_answer() -> None:
    model = ScriptedModel(["no tool"])
    with pytest.raises(OutputValidationError) as caught:
        await Agent(model, output_type=Point, output_retries=0).chat("Go.")
    assert caught.value.raw == "no tool"
    assert str(caught.value.error) == "answered in text instead of calling the final_result tool"


# --- the hook --------------------------------------------------------------------------------


async def test_a_hook_sees_each_invalid_answer_and_rewrites_the_retry_message() -> None:
    seen: list[tuple[str, int, str]] = []
    model = ScriptedModel([answer({"x": "a", "y": 1}), answer({"x": 1, "y": 1})])
    agent = Agent(model, output_type=Point)

    @agent.hook("on_output_validation_error")
    def explain(ctx: OutputValidationErrorContext) -> str:
        seen.append((ctx.raw, ctx.attempt, type(ctx.error).__name__))
        return "x must be a whole number; try again."

    response = await agent.chat("Go.")
    assert seen == [('{"x": "a", "y": 1}', 1, "ValidationError")]
    assert shape(response.messages)[2] == (
        "tool",
        "final_result",
        "x must be a whole number; try again.",
        "error",
    )


async def test_a_hook_can_repair_the_output_and_end_the_chat() -> None:
    model = ScriptedModel([answer({"x": "1", "y": "two"})])
    agent = Agent(model, output_type=Point, output_retries=0)

    def repair(ctx: OutputValidationErrorContext) -> OutputReturn:
        return OutputReturn(value={"x": 1, "y": 2})

    agent.add_hook("on_output_validation_error", repair)
    response = await agent.chat("Go.")
    assert response.output == Point(x=1, y=2)
    assert shape(response.messages)[-1] == ("tool", "final_result", "Final answer received.", "ok")


async def test_a_repair_that_is_not_valid_either_is_a_hook_return_error() -> None:
    agent = Agent(ScriptedModel([answer({"x": "a", "y": 1})]), output_type=Point)
    agent.add_hook("on_output_validation_error", lambda ctx: OutputReturn(value={"x": "b"}))
    with pytest.raises(HookReturnError, match="returned an output that is not valid"):
        await agent.chat("Go.")


# --- native and prompted modes ---------------------------------------------------------------


async def test_native_mode_sends_the_strict_schema_and_parses_the_text() -> None:
    model = ScriptedModel(['{"response": [1, 2, 3]}'])
    response = await Agent(model, output_type=list[int], output_mode="native").chat("Count.")
    assert response.output == [1, 2, 3]
    (request,) = model.requests
    assert request.tools == ()
    assert request.output_format is not None
    assert request.output_format.name == "output"
    assert request.output_format.schema == {
        "type": "object",
        "properties": {"response": {"type": "array", "items": {"type": "integer"}}},
        "required": ["response"],
        "additionalProperties": False,
    }


async def test_native_mode_runs_tools_and_retries_an_invalid_answer() -> None:
    @tool
    def origin() -> str:
        """Where to start."""
        return "0,0"

    model = ScriptedModel([tool_call("origin", {}), '{"x": 0}', '{"x": 0, "y": 0}'])
    agent = Agent(model, tools=[origin], output_type=Point, output_mode="native")
    response = await agent.chat("Start where?")
    assert response.output == Point(x=0, y=0)
    assert shape(response.messages)[2:5] == [
        ("tool", "origin", "0,0", "ok"),
        ("assistant", '{"x": 0}'),
        (
            "user",
            "The answer is not valid:\n- y: Field required\n"
            "Answer again with only the corrected JSON value.",
        ),
    ]
    assert model.requests[0].output_format is not None
    assert model.requests[0].output_format.name == "Point"


async def test_prompted_mode_puts_the_schema_in_the_system_prompt_and_reads_fenced_json() -> None:
    model = ScriptedModel(['```json\n{"title": "Alien"}\n```', 'Here: {"title": "Heat"} ok'])
    agent = Agent(model, system_prompt="Be brief.", output_type=Movie, output_mode="prompted")
    assert (await agent.chat("A film?")).output == {"title": "Alien"}
    assert (await agent.chat("Another?")).output == {"title": "Heat"}
    system = model.requests[0].system
    assert system is not None
    schema = output_spec(Movie, mode="prompted").schema
    assert system == (
        "Be brief.\n\nAnswer with one JSON value that matches this JSON schema, and nothing "
        "else (no text around it, no code fence):\n" + json.dumps(schema, separators=(",", ":"))
    )
    assert model.requests[0].output_format is None


async def test_native_mode_on_a_model_without_it_is_a_usage_error_before_anything_is_sent() -> None:
    class Plain(FunctionModel):
        native_output = False

    model = Plain(lambda request: "{}")
    with pytest.raises(UsageError, match="output_mode='tool' or 'prompted'"):
        Agent(model, output_type=Point, output_mode="native")
    agent = Agent(model)
    with pytest.raises(UsageError, match="cannot constrain its answer"):
        await agent.chat("Go.", output_type=Point, output_mode="native")
    assert model.requests == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"output_type": Point, "output_mode": "json"}, "output_mode must be one of"),
        ({"output_type": Point, "output_retries": -1}, "output_retries must be an int >= 0"),
        ({"output_type": Point, "output_retries": True}, "output_retries must be an int >= 0"),
        ({"output_type": object()}, "cannot be used"),
    ],
)
def test_bad_output_arguments_are_usage_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        Agent(ScriptedModel([]), **kwargs)


async def test_a_chat_may_ask_for_another_type_or_for_text() -> None:
    model = ScriptedModel([answer({"response": True}), "words", answer({"x": 1, "y": 1})])
    agent = Agent(model, output_type=Point)
    assert (await agent.chat("Yes?", output_type=bool)).output is True
    assert (await agent.chat("Talk.", output_type=None)).output == "words"
    assert (await agent.chat("Where?")).output == Point(x=1, y=1)
    assert [len(r.tools) for r in model.requests] == [1, 0, 1]


async def test_without_an_output_type_the_output_is_the_text() -> None:
    response = await Agent(ScriptedModel(["Hello."])).chat("Hi")
    assert response.output == "Hello." == response.text


def test_chat_sync_takes_the_output_type() -> None:
    agent = Agent(ScriptedModel([answer({"x": 5, "y": 6})]))
    assert agent.chat_sync("Go.", output_type=Point).output == Point(x=5, y=6)


# --- streaming -------------------------------------------------------------------------------


async def test_a_stream_yields_the_output_each_time_it_validates_to_a_new_value() -> None:
    arguments = '{"title": "Alien", "year": 1979}'
    step = ScriptStep(response=answer(arguments), chunk_size=6)
    agent = Agent(ScriptedModel([step]), output_type=Movie)
    partials: list[object] = []
    async with agent.chat_stream("A film?") as events:
        async for event in events:
            if isinstance(event, PartialOutput):
                partials.append(event.output)
    # Pieces of 6: '{"titl', 'e": "Al', 'ien", ', '"year"', ': 1979', '}'. A string counts
    # once it is closed; a TypedDict validates with its later keys still missing.
    assert partials == [{"title": "Alien"}, {"title": "Alien", "year": 1979}]
    assert events.response is not None
    assert events.response.output == {"title": "Alien", "year": 1979}


async def test_a_stream_in_native_mode_follows_the_text() -> None:
    step = ScriptStep(response=ProviderResponse(content='{"x": 1, "y": 22}'), chunk_size=5)
    agent = Agent(ScriptedModel([step]), output_type=Point, output_mode="native")
    async with agent.chat_stream("Where?") as events:
        partials = [e.output async for e in events if isinstance(e, PartialOutput)]
    # '{"x":', ' 1, "', 'y": 2', '2}': a model validates only once every required field is
    # there, and the 2 that may go on (it does: 22) is not taken for a value.
    assert partials == [Point(x=1, y=22)]


# --- typing ----------------------------------------------------------------------------------


def test_a_type_checker_infers_the_output_type_from_the_chat(tmp_path: Path) -> None:
    snippet = tmp_path / "typed.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from dataclasses import dataclass
            from typing import Any
            from typing_extensions import assert_type
            from hookloop import Agent, AgentResponse
            from hookloop.testing import ScriptedModel

            @dataclass
            class Point:
                x: int

            agent = Agent(ScriptedModel([]))
            assert_type(agent.chat_sync("a", output_type=Point).output, Point)
            assert_type(agent.chat_sync("a", output_type=int).output, int)
            assert_type(agent.chat_sync("a").output, Any)

            async def main() -> None:
                response = await agent.chat("a", output_type=Point)
                assert_type(response, AgentResponse[Point])
                bare: AgentResponse = response
            """
        )
    )
    status, errors = mypy(snippet)
    assert (status, errors) == (0, [])


# --- the strict-schema transform -------------------------------------------------------------

_NAMES = itertools.count()
_SCALARS: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (int, st.integers(-1000, 1000)),
    (str, st.text(max_size=5)),
    (bool, st.booleans()),
    (float, st.floats(allow_nan=False, allow_infinity=False, width=32)),
    (  # values of any type: they travel as JSON text
        dict[str, Any],
        st.dictionaries(
            st.text(max_size=4),
            st.recursive(
                st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=3),
                lambda inner: (
                    st.lists(inner, max_size=2)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=2)
                ),
                max_leaves=4,
            ),
            max_size=3,
        ),
    ),
]
# The keywords a strict-mode schema may hold (the others go into descriptions).
_STRICT_KEYWORDS = {
    *("$defs", "$ref", "additionalProperties", "anyOf", "const", "description", "enum"),
    *("exclusiveMaximum", "exclusiveMinimum", "format", "items", "maxItems", "maximum"),
    *("minItems", "minimum", "multipleOf", "pattern", "prefixItems", "properties"),
    *("required", "type"),
}


def _field_types(depth: int) -> st.SearchStrategy[tuple[Any, st.SearchStrategy[Any]]]:
    scalar = st.sampled_from(_SCALARS)
    if depth <= 0:
        return scalar

    def combine(inner: tuple[Any, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
        kind, values = inner
        return st.sampled_from(
            [
                (list[kind], st.lists(values, max_size=3)),  # type: ignore[valid-type]
                (dict[str, kind], st.dictionaries(st.text(max_size=4), values, max_size=3)),  # type: ignore[valid-type]
                (Optional[kind], st.none() | values),  # noqa: UP045
                inner,
            ]
        )

    nested = st.deferred(lambda: _models(depth - 1))
    # Models with the same number of fields have the same keys: no validator could tell
    # which of the two a value was, so a union of them is left out.
    union = (
        st.tuples(nested, nested)
        .filter(lambda pair: len(pair[0][0].model_fields) != len(pair[1][0].model_fields))
        .map(_union)
    )
    return (scalar | nested | union).flatmap(combine)


def _union(
    pair: tuple[tuple[Any, st.SearchStrategy[Any]], tuple[Any, st.SearchStrategy[Any]]],
) -> tuple[Any, st.SearchStrategy[Any]]:
    (first, first_values), (second, second_values) = pair
    return first | second, first_values | second_values


def _models(depth: int) -> st.SearchStrategy[tuple[Any, st.SearchStrategy[Any]]]:
    @st.composite
    def build(draw: st.DrawFn) -> tuple[Any, st.SearchStrategy[Any]]:
        count = draw(st.integers(1, 4))
        fields: dict[str, Any] = {}
        values: dict[str, st.SearchStrategy[Any]] = {}
        for index in range(count):
            kind, strategy = draw(_field_types(depth))
            name = f"f{index}"
            if draw(st.booleans()):  # an optional field with a default
                fields[name] = (Optional[kind], None)  # noqa: UP045
                values[name] = st.none() | strategy
            else:
                fields[name] = (kind, ...)
                values[name] = strategy
        model = pydantic.create_model(f"M{next(_NAMES)}", **fields)
        return model, st.fixed_dictionaries(values).map(lambda data: model(**data))

    return build()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_the_strict_transform_round_trips_values_of_generated_models(data: st.DataObject) -> None:
    model, values = data.draw(_models(2))
    value = data.draw(values)
    adapter = pydantic.TypeAdapter(model)
    original = adapter.json_schema()
    strict = strict_schema(original)
    data = adapter.dump_python(value, mode="json")
    sent = convert(original, data, "to_strict")
    jsonschema.validate(sent, strict)  # what a strict-mode provider would accept
    _assert_strict(strict)
    received = convert(original, json.loads(json.dumps(sent)), "from_strict")
    assert received == data  # the strict form hides nothing and adds nothing
    # ...so the value is what validating its own JSON gives (a union of two models that both
    # fit picks the first, with or without the strict form).
    assert adapter.validate_python(received) == adapter.validate_python(data)


def _assert_strict(node: Any) -> None:
    """Every object closed with every property required; no free-keyed object left; only
    the keywords strict mode knows."""
    if isinstance(node, dict):
        if "type" in node or "anyOf" in node or "$ref" in node:  # a schema, not a map of them
            assert set(node) <= _STRICT_KEYWORDS
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
        for child in node.values():
            _assert_strict(child)
    elif isinstance(node, list):
        for child in node:
            _assert_strict(child)


def test_the_transform_keeps_the_request_it_was_given() -> None:
    original = pydantic.TypeAdapter(City).json_schema()
    before = json.dumps(original, sort_keys=True)
    strict_schema(original)
    assert json.dumps(original, sort_keys=True) == before


async def test_a_function_model_sees_the_output_format() -> None:
    seen: list[ProviderRequest] = []

    def reply(request: ProviderRequest) -> str:
        seen.append(request)
        return '{"response": "b"}'

    agent = Agent(FunctionModel(reply), output_type=Literal["a", "b"], output_mode="native")
    assert (await agent.chat("Pick.")).output == "b"
    assert seen[0].output_format is not None


async def test_the_trace_shows_an_invalid_answer() -> None:
    lines: list[str] = []
    model = ScriptedModel(["no tool", answer({"x": 1, "y": 2})])
    agent = Agent(model, output_type=Point, plugins=[TracePlugin(lines.append, clock=lambda: 0.0)])
    await agent.chat("Go.")
    (line,) = [line for line in lines if "on_output_validation_error" in line]
    assert line.endswith(
        'on_output_validation_error attempt 1: "answered in text instead of calling the '
        'final_result tool"'
    )


async def test_a_streamed_chat_takes_its_own_output_type() -> None:
    agent = Agent(ScriptedModel([answer({"response": [1, 2]})]))
    async with agent.chat_stream("Count.", output_type=list[int]) as events:
        partials = [e.output async for e in events if isinstance(e, PartialOutput)]
    assert partials == [[1, 2]]
    assert events.response is not None
    assert events.response.output == [1, 2]


async def test_the_default_window_leaves_room_for_the_output_tool() -> None:
    model = ScriptedModel([answer({"x": i, "y": i}, id=f"out_{i}") for i in range(8)])
    agent = Agent(model, retry=None, history=ChatHistory(max_context_tokens=400))
    for i in range(8):
        await agent.chat(f"question {i}: where is point number {i} today?", output_type=Point)
    for request in model.requests:
        assert [t.name for t in request.tools] == [OUTPUT_TOOL_NAME]
        assert count_request(request, counter=agent.history.token_counter) <= 400
    assert len(model.requests[-1].messages) < len(agent.messages) - 3


async def test_a_sub_agent_with_an_output_type_answers_its_parent_with_the_output() -> None:
    locator = Agent(ScriptedModel([answer({"x": 1, "y": 2})]), name="locator", output_type=Point)
    parent = Agent(
        ScriptedModel([tool_call("locator", {"task": "Find the point."}, id="call_1"), "Found."]),
        tools=[locator.as_tool()],
    )
    response = await parent.chat("Where is the point?")
    assert shape(response.messages)[2] == ("tool", "locator", '{"x":1,"y":2}', "ok")


async def test_a_null_for_an_optional_field_that_takes_no_null_means_its_default() -> None:
    arguments = {"name": "Bergen", "population": 291_000, "districts": None, "motto": None}
    agent = Agent(ScriptedModel([answer(arguments)]), output_type=City)
    assert (await agent.chat("Bergen?")).output == City(name="Bergen", population=291_000)


# --- an answer beside calls that wait for approval, several answers, odd answers -------------


@tool(requires_approval=True)
def lookup(name: str) -> str:
    """Look a city up.

    Args:
        name: The city.
    """
    return f"{name} has 709000 people"


OSLO = {"name": "Oslo", "population": 709_000, "districts": [], "motto": None}


async def test_an_invalid_answer_beside_a_call_that_needs_approval_ends_the_chat_waiting() -> None:
    batch = tool_calls(
        ToolCall.create("lookup", {"name": "Oslo"}, id="c1"),
        ToolCall.create(OUTPUT_TOOL_NAME, {"name": "Oslo", "population": "many"}, id="c2"),
    )
    model = ScriptedModel([batch, answer(OSLO, id="c3")])
    agent = Agent(model, tools=[lookup], output_type=City)
    response = await agent.chat("Oslo?")
    assert response.output is None
    assert [(p.call_id, p.tool_name) for p in response.pending_approvals] == [("c1", "lookup")]
    assert len(model.requests) == 1  # the chat waits: the model is not asked again yet
    assert await agent.pending_approvals() == response.pending_approvals
    resumed = await agent.resume([p.approve() for p in response.pending_approvals])
    assert resumed.output == City(name="Oslo", population=709_000)
    assert shape(agent.messages)[2:] == [
        (
            "tool",
            OUTPUT_TOOL_NAME,
            "The answer is not valid:\n- population: Input should be a valid integer, unable "
            "to parse string as an integer\nCall final_result again with a corrected answer.",
            "error",
        ),
        ("tool", "lookup", "Oslo has 709000 people", "ok"),
        ("assistant", "", f"{OUTPUT_TOOL_NAME}:{json.dumps(OSLO)}"),
        ("tool", OUTPUT_TOOL_NAME, "Final answer received.", "ok"),
    ]


async def test_a_resumed_chat_keeps_the_output_type_it_was_started_with() -> None:
    model = ScriptedModel([tool_call("lookup", {"name": "Oslo"}), answer(OSLO)])
    agent = Agent(model, tools=[lookup])
    response = await agent.chat("Oslo?", output_type=City, output_retries=0)
    assert response.output is None
    resumed = await agent.resume([p.approve() for p in response.pending_approvals])
    assert resumed.output == City(name="Oslo", population=709_000)
    assert [t.name for t in model.requests[1].tools] == ["lookup", OUTPUT_TOOL_NAME]
    assert model.requests[1].settings.tool_choice == "required"


def test_a_resume_may_name_the_output_type_again() -> None:
    # As a resume in another process does; here it asks for text instead.
    model = ScriptedModel([tool_call("lookup", {"name": "Oslo"}), "About 709000."])
    agent = Agent(model, tools=[lookup], output_type=City)
    response = agent.chat_sync("Oslo?")
    resumed = agent.resume_sync([p.approve() for p in response.pending_approvals], output_type=None)
    assert resumed.output == "About 709000."
    assert [t.name for t in model.requests[1].tools] == ["lookup"]


async def test_a_sub_agent_with_an_output_type_that_waits_for_approval_tells_its_parent() -> None:
    sub = Agent(
        ScriptedModel([tool_call("lookup", {"name": "Oslo"})]),
        name="finder",
        tools=[lookup],
        output_type=City,
    )
    parent = Agent(
        ScriptedModel([tool_call("finder", {"task": "Oslo?"}, id="c1"), "Waiting."]),
        tools=[sub.as_tool()],
    )
    response = await parent.chat("Oslo?")
    assert shape(response.messages)[2] == (
        "tool",
        "finder",
        "tool 'finder' failed: WaitingForApprovalError: finder is waiting for a person's "
        'approval: lookup({"name": "Oslo"})',
        "error",
    )
    assert [p.tool_name for p in await sub.pending_approvals()] == ["lookup"]


async def test_of_two_answers_in_one_turn_the_first_valid_one_is_taken() -> None:
    batch = tool_calls(
        ToolCall.create(OUTPUT_TOOL_NAME, {"x": "bad", "y": 0}, id="a"),
        ToolCall.create(OUTPUT_TOOL_NAME, {"x": 2, "y": 3}, id="b"),
    )
    agent = Agent(ScriptedModel([batch]), output_type=Point)
    response = await agent.chat("Go.")
    assert response.output == Point(x=2, y=3)
    assert shape(response.messages)[2:] == [  # in call order (issue 21 item 5)
        ("tool", OUTPUT_TOOL_NAME, "not run: the final answer was given in the same turn", "error"),
        ("tool", OUTPUT_TOOL_NAME, "Final answer received.", "ok"),
    ]


async def test_two_invalid_answers_in_one_turn_are_both_answered_and_count_once() -> None:
    batch = tool_calls(
        ToolCall.create(OUTPUT_TOOL_NAME, {"x": "bad", "y": 0}, id="a"),
        ToolCall.create(OUTPUT_TOOL_NAME, {"x": 1}, id="b"),
    )
    model = ScriptedModel([batch, answer({"x": 1, "y": 2}, id="c")])
    agent = Agent(model, output_type=Point, output_retries=1)
    response = await agent.chat("Go.")
    assert response.output == Point(x=1, y=2)
    again = "\nCall final_result again with a corrected answer."
    assert shape(response.messages)[2:4] == [
        (
            "tool",
            OUTPUT_TOOL_NAME,
            "The answer is not valid:\n- x: Input should be a valid integer, unable to parse "
            "string as an integer" + again,
            "error",
        ),
        (
            "tool",
            OUTPUT_TOOL_NAME,
            "The answer is not valid:\n- y: Field required" + again,
            "error",
        ),
    ]


def test_a_tool_named_like_the_output_tool_is_refused() -> None:
    @tool
    def final_result(x: int) -> str:
        """The user's own tool.

        Args:
            x: A number.
        """
        return "ran"

    model = ScriptedModel([answer({"x": 1, "y": 2})])
    with pytest.raises(UsageError, match="a tool is named 'final_result'"):
        Agent(model, tools=[final_result], output_type=Point)
    agent = Agent(model, tools=[final_result])
    with pytest.raises(UsageError, match="a tool is named 'final_result'"):
        agent.chat_sync("Go.", output_type=Point)
    assert model.requests == []
    # Without an output tool the name is free.
    Agent(model, tools=[final_result], output_type=Point, output_mode="prompted")


class Stock(pydantic.BaseModel):
    counts: dict[str, int]


async def test_a_key_value_pair_with_a_key_that_is_no_string_is_rejected_not_a_crash() -> None:
    model = ScriptedModel(
        [
            answer({"counts": [{"key": ["apples"], "value": 3}]}, id="a"),
            answer({"counts": [{"key": "apples", "value": 3}]}, id="b"),
        ]
    )
    response = await Agent(model, output_type=Stock).chat("Count.")
    assert response.output == Stock(counts={"apples": 3})
    assert shape(response.messages)[2] == (
        "tool",
        OUTPUT_TOOL_NAME,
        "The answer is not valid:\n- counts: Input should be a valid dictionary\nCall "
        "final_result again with a corrected answer.",
        "error",
    )
    spec = output_spec(Stock)
    assert spec.partial('{"counts": [{"key": ["apples"], "value": 3}') == (False, None)
    assert spec.partial('{"counts": [{"key": {}, "value": 3}]}') == (False, None)


class Event(pydantic.BaseModel):
    title: str
    details: dict[str, Any]


async def test_a_dict_of_any_values_travels_as_json_text_and_comes_back_decoded() -> None:
    pairs = [{"key": "date", "value": '"2026-05-01"'}, {"key": "pad", "value": '{"n": [39]}'}]
    model = ScriptedModel([answer({"title": "Launch", "details": pairs})])
    response = await Agent(model, output_type=Event).chat("When?")
    assert response.output == Event(
        title="Launch", details={"date": "2026-05-01", "pad": {"n": [39]}}
    )
    (definition,) = model.requests[0].tools
    assert definition.parameters["properties"]["details"] == {
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "key": {"type": "string"},
                "value": {"type": "string", "description": "The value as JSON text."},
            },
            "required": ["key", "value"],
            "additionalProperties": False,
        },
    }


class Node(pydantic.BaseModel):
    v: int
    kids: list[Node] = []


async def test_a_recursive_output_type_has_an_object_at_the_root() -> None:
    model = ScriptedModel([answer({"v": 1, "kids": [{"v": 2, "kids": None}]})])
    response = await Agent(model, output_type=Node).chat("Tree?")
    assert response.output == Node(v=1, kids=[Node(v=2)])
    (definition,) = model.requests[0].tools
    node = {
        "type": "object",
        "properties": {
            "v": {"type": "integer"},
            "kids": {
                "anyOf": [{"type": "array", "items": {"$ref": "#/$defs/Node"}}, {"type": "null"}]
            },
        },
        "required": ["v", "kids"],
        "additionalProperties": False,
    }
    assert definition.parameters == {**node, "$defs": {"Node": node}}
    assert not output_spec(Node).wrapped


class Tagged(pydantic.BaseModel):
    tags: set[str]
    code: str = pydantic.Field(min_length=2, max_length=3, description="A short code.")


async def test_keywords_strict_mode_does_not_know_go_into_the_description() -> None:
    model = ScriptedModel(
        [answer({"tags": ["a"], "code": "x"}, id="a"), answer({"tags": ["a"], "code": "xy"})]
    )
    response = await Agent(model, output_type=Tagged).chat("Tag.")
    assert response.output == Tagged(tags={"a"}, code="xy")  # the first broke minLength
    (definition,) = model.requests[0].tools
    assert definition.parameters["properties"] == {
        "tags": {"type": "array", "items": {"type": "string"}, "description": "uniqueItems: true"},
        "code": {
            "type": "string",
            "description": "A short code. (maxLength: 3; minLength: 2)",
        },
    }
