"""Tools: schemas from signatures and docstrings, validation, invocation, and the loop."""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import typing
from typing import Any, Literal, Optional

import pydantic
import pytest
import typing_extensions

from hookloop import (
    Agent,
    AssistantMessage,
    Tool,
    ToolCall,
    ToolDefinitionError,
    ToolError,
    ToolMessage,
    ToolValidationError,
    UserMessage,
    tool,
)
from hookloop.models import ToolDefinition
from hookloop.testing import ScriptedModel, tool_call, tool_calls

# --- helpers ------------------------------------------------------------------------------


class Point(pydantic.BaseModel):
    x: int
    y: int = 0


class Options(typing_extensions.TypedDict):
    verbose: bool


class PlainTypedDict(typing.TypedDict):
    verbose: bool


class Opaque:
    """Not something pydantic can describe."""


def _walk_titles(node: object, path: str = "$") -> list[str]:
    """Every path in a JSON schema where a ``title`` keyword appears."""
    found: list[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "title":
                found.append(f"{path}.title")
            if key in ("properties", "$defs") and isinstance(value, dict):
                # Keys here are parameter / definition names, not keywords.
                for name, sub in value.items():
                    found.extend(_walk_titles(sub, f"{path}.{key}.{name}"))
            else:
                found.extend(_walk_titles(value, f"{path}.{key}"))
    elif isinstance(node, list):
        for i, item in enumerate(node):
            found.extend(_walk_titles(item, f"{path}[{i}]"))
    return found


def _tool_messages(messages: typing.Iterable[object]) -> list[ToolMessage]:
    return [m for m in messages if isinstance(m, ToolMessage)]


# --- schema from the signature ------------------------------------------------------------


def test_bare_decorator_builds_schema_from_signature_and_docstring() -> None:
    @tool
    def add(a: int, b: int = 2) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        return a + b

    assert isinstance(add, Tool)
    assert add.name == "add"
    assert add.description == "Add two integers."
    assert add.enabled is True
    assert add.run_in_thread is True
    assert add.definition == ToolDefinition(
        name="add",
        description="Add two integers.",
        parameters={
            "type": "object",
            "properties": {
                "a": {"type": "integer", "description": "The first number."},
                "b": {"type": "integer", "default": 2, "description": "The second number."},
            },
            "required": ["a"],
            "additionalProperties": False,
        },
    )


def test_decorator_with_arguments_overrides_name_description_and_flags() -> None:
    def gate() -> bool:
        return True

    @tool(name="sum-two", description="Custom.", enabled=gate, run_in_thread=False)
    def add(a: int) -> int:
        """Docstring summary that is overridden."""
        return a

    assert add.name == "sum-two"
    assert add.description == "Custom."
    assert add.enabled is gate
    assert add.run_in_thread is False
    assert add.definition.name == "sum-two"
    assert add.definition.description == "Custom."
    assert add.function.__name__ == "add"


def test_description_empty_string_override_is_kept() -> None:
    @tool(description="")
    def f(a: int) -> int:
        """Summary."""
        return a

    assert f.description == ""


def test_schema_types_defaults_optional_list_literal_and_nested() -> None:
    @tool
    def search(
        query: str,
        limit: int = 10,
        ratio: float = 0.5,
        exact: bool = False,
        tag: Optional[str] = None,  # noqa: UP045 - Optional is what we are testing
        ids: list[int] | None = None,
        mode: Literal["fast", "slow"] = "fast",
        point: Point | None = None,
        options: Options | None = None,
    ) -> str:
        """Search things."""
        return query

    params = search.definition.parameters
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert params["required"] == ["query"]
    props = params["properties"]
    assert props["query"] == {"type": "string"}
    assert props["limit"] == {"type": "integer", "default": 10}
    assert props["ratio"] == {"type": "number", "default": 0.5}
    assert props["exact"] == {"type": "boolean", "default": False}
    assert props["tag"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["ids"] == {
        "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}],
        "default": None,
    }
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"], "default": "fast"}
    assert props["point"] == {
        "anyOf": [{"$ref": "#/$defs/Point"}, {"type": "null"}],
        "default": None,
    }
    assert props["options"] == {
        "anyOf": [{"$ref": "#/$defs/Options"}, {"type": "null"}],
        "default": None,
    }
    defs = params["$defs"]
    assert defs["Point"]["properties"]["x"]["type"] == "integer"
    assert defs["Point"]["required"] == ["x"]
    assert defs["Options"]["properties"]["verbose"]["type"] == "boolean"
    assert defs["Options"]["required"] == ["verbose"]
    # The schema is plain JSON.
    assert json.loads(json.dumps(params)) == params


def test_required_list_of_int_param() -> None:
    @tool
    def total(values: list[int]) -> int:
        """Sum."""
        return sum(values)

    assert total.definition.parameters["properties"] == {
        "values": {"type": "array", "items": {"type": "integer"}}
    }
    assert total.definition.parameters["required"] == ["values"]


def test_no_parameters_gives_empty_object_schema() -> None:
    @tool
    def now() -> str:
        """Current time."""
        return "noon"

    assert now.definition.parameters == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert now.validate("c1", "") == {}
    assert now.validate("c1", "{}") == {}


def test_schema_has_no_titles_anywhere_even_in_nested_definitions() -> None:
    @tool
    def place(point: Point, options: Options, title: str = "x") -> str:
        """Place a point."""
        return title

    params = place.definition.parameters
    # A parameter that is itself called "title" must survive the cleaning.
    assert params["properties"]["title"] == {"type": "string", "default": "x"}
    assert _walk_titles(params) == []


def test_docstring_args_section_multiline_and_typed_form() -> None:
    @tool
    def search(query: str, limit: int = 5, flag: bool = False) -> str:
        """Search the catalogue.

        Longer explanation of the tool,
        over two lines.

        Args:
            query: The search query. Examples
                include: cats and dogs.
            limit (int, optional): How many results.
                At most 10.
            flag: A flag.

        Returns:
            The hits, as text.

        Raises:
            ValueError: Never here.
        """
        return query

    assert search.description == (
        "Search the catalogue.\n\nLonger explanation of the tool,\nover two lines."
    )
    props = search.definition.parameters["properties"]
    assert props["query"]["description"] == "The search query. Examples include: cats and dogs."
    assert props["limit"]["description"] == "How many results. At most 10."
    assert props["flag"]["description"] == "A flag."


def test_undocumented_parameter_has_no_description_and_no_docstring_gives_empty() -> None:
    @tool
    def f(a: int, b: int) -> int:
        """Only a.

        Args:
            a: The a.
        """
        return a + b

    @tool
    def g(a: int) -> int:
        return a

    assert f.definition.parameters["properties"]["b"] == {"type": "integer"}
    assert g.description == ""
    assert g.definition.parameters["properties"] == {"a": {"type": "integer"}}


def test_methods_and_async_functions_can_be_tools() -> None:
    class Calculator:
        def __init__(self, base: int) -> None:
            self.base = base

        def plus(self, a: int) -> int:
            """Add to the base."""
            return self.base + a

    async def fetch(url: str) -> str:
        """Fetch a URL."""
        return url

    plus = tool(Calculator(10).plus)
    assert plus.name == "plus"
    assert plus.definition.parameters["properties"] == {"a": {"type": "integer"}}
    assert tool(fetch).definition.parameters["required"] == ["url"]


# --- definition errors --------------------------------------------------------------------


def test_missing_annotation_is_a_definition_error() -> None:
    def f(a: int, b) -> int:  # type: ignore[no-untyped-def]
        return a

    with pytest.raises(ToolDefinitionError, match=r"'b'.*type annotation"):
        tool(f)


@pytest.mark.parametrize(
    "source",
    [
        "def f(a: int, *args: int) -> int: return a",
        "def f(a: int, **kwargs: int) -> int: return a",
    ],
)
def test_var_args_are_a_definition_error(source: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError, match=r"\*args and \*\*kwargs"):
        tool(namespace["f"])


def test_positional_only_parameter_is_a_definition_error() -> None:
    def f(a: int, /, b: int) -> int:
        return a + b

    with pytest.raises(ToolDefinitionError, match=r"'a' is positional-only"):
        tool(f)


@pytest.mark.parametrize(
    "bad_name",
    ["", "has space", "x" * 65, "dot.name", "ünïcode", 123, None, b"bytes"],
)
def test_invalid_names_are_definition_errors(bad_name: object) -> None:
    with pytest.raises(ToolDefinitionError, match="name"):
        Tool(name=bad_name, description="d", parameters={}, function=lambda: None)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad_name", ["", "has space", "x" * 65, 123])
def test_invalid_names_given_to_the_decorator_are_definition_errors(bad_name: object) -> None:
    def f(a: int) -> int:
        return a

    with pytest.raises(ToolDefinitionError, match="name"):
        tool(name=bad_name)(f)  # type: ignore[arg-type]


def test_name_limits_accept_64_chars_and_dash_underscore() -> None:
    def f() -> None:
        return None

    assert tool(name="a" * 64)(f).name == "a" * 64
    assert tool(name="A-z_0-9")(f).name == "A-z_0-9"


def test_function_without_a_usable_name_is_a_definition_error() -> None:
    def f(a: int) -> int:
        return a

    with pytest.raises(ToolDefinitionError, match="<lambda>"):
        tool(lambda a: a)
    # functools.partial has no __name__ at all.
    with pytest.raises(ToolDefinitionError, match="name"):
        tool(functools.partial(f, a=1))


def test_not_callable_is_a_definition_error() -> None:
    with pytest.raises(ToolDefinitionError, match="callable"):
        Tool(name="t", description="d", parameters={}, function=42)  # type: ignore[arg-type]
    with pytest.raises(ToolDefinitionError):
        tool(name="t")(42)  # type: ignore[arg-type]


def test_unsupported_parameter_type_is_a_definition_error() -> None:
    def f(a: Opaque) -> None:
        return None

    with pytest.raises(ToolDefinitionError, match="unsupported parameter type"):
        tool(f)


def test_typing_typeddict_param_builds_or_raises_definition_error() -> None:
    # On Python 3.11 pydantic refuses ``typing.TypedDict``. Whatever the tool does about it,
    # the user must get hookloop's ToolDefinitionError, not a foreign pydantic exception.
    def f(options: PlainTypedDict) -> None:
        return None

    try:
        built = tool(f)
    except ToolDefinitionError:
        return
    assert built.validate("c", '{"options": {"verbose": true}}') == {"options": {"verbose": True}}


def test_unresolvable_annotation_is_a_definition_error() -> None:
    def f(a: DoesNotExist) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(ToolDefinitionError, match="signature"):
        tool(f)


def test_definition_errors_are_usage_errors_not_tool_errors() -> None:
    from hookloop import UsageError

    def f(a) -> None:  # type: ignore[no-untyped-def]
        return None

    with pytest.raises(UsageError) as info:
        tool(f)
    assert not isinstance(info.value, ToolError)


# --- validation ---------------------------------------------------------------------------


@tool
def _typed(count: int, point: Point, tags: list[str] = [], ratio: float = 1.0) -> str:  # noqa: B006
    """Typed tool for validation tests."""
    return "ok"


def test_validate_returns_coerced_kwargs_with_defaults() -> None:
    kwargs = _typed.validate("c1", '{"count": "3", "point": {"x": 1}, "ratio": 2}')
    assert kwargs == {"count": 3, "point": Point(x=1, y=0), "tags": [], "ratio": 2.0}
    assert isinstance(kwargs["point"], Point)
    assert isinstance(kwargs["ratio"], float)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"count": 1', "not valid JSON"),
        ("not json", "not valid JSON"),
        ("[1, 2]", "Input should be an object"),
        ('"text"', "Input should be an object"),
        ("null", "Input should be an object"),
        ('{"count": "many", "point": {"x": 1}}', "count: Input should be a valid integer"),
        ('{"count": 1, "point": {"x": "?"}}', "point.x: Input should be a valid integer"),
        ('{"count": 1, "point": {"x": 1}, "tags": [1]}', "tags.0: Input should be a valid string"),
        ('{"point": {"x": 1}}', "count: Field required"),
        ('{"count": 1, "point": {"x": 1}, "colour": "red"}', "colour: Extra inputs"),
    ],
)
def test_validate_rejects_bad_arguments(arguments: str, expected: str) -> None:
    with pytest.raises(ToolValidationError) as info:
        _typed.validate("call-7", arguments)
    err = info.value
    assert "'_typed'" in str(err)
    assert expected in str(err)
    assert err.tool_name == "_typed"
    assert err.call_id == "call-7"


class _Tree(pydantic.BaseModel):
    label: str
    children: list[_Tree] = []


@tool
def _nested(root: _Tree, depth: typing.Annotated[int, pydantic.Field(gt=0)] = 1) -> str:
    """Nested and self-referencing models, a constrained default."""
    return "ok"


@pytest.mark.parametrize("made", [_typed, _nested])
@pytest.mark.parametrize(
    "arguments",
    [
        '{"count": "3", "point": {"x": 1}, "ratio": 2}',
        '{"count": 1, "point": {"x": 1}, "tags": ["a"]}',
        '{"root": {"label": "a", "children": [{"label": "b"}]}}',
        '{"root": {"label": "a"}, "depth": "2"}',
        '{"root": {"label": "a", "children": [{"children": []}]}}',
        '{"root": {"label": "a"}, "depth": 0}',
        '{"root": [], "extra": 1}',
        "[1, 2]",
        "null",
        '{"count": 1',
        "",
    ],
)
def test_validate_is_the_arguments_models_validation(made: Tool, arguments: str) -> None:
    # The fields are validated into a dict, not a model instance: the values and every
    # error (its type, place, message, the ValidationError's title) are the model's own.
    model = made.arguments_model
    assert model is not None
    expected: pydantic.BaseModel | pydantic.ValidationError
    try:
        expected = model.model_validate_json(arguments or "{}")
    except pydantic.ValidationError as exc:
        expected = exc
    if isinstance(expected, pydantic.BaseModel):
        kwargs = made.validate("c", arguments)
        assert type(kwargs) is dict
        assert kwargs == dict(expected)
        return
    with pytest.raises(ToolValidationError) as info:
        made.validate("c", arguments)
    cause = info.value.__cause__
    assert isinstance(cause, pydantic.ValidationError)
    assert cause.title == expected.title
    assert cause.errors(include_url=False) == expected.errors(include_url=False)


def test_validate_keeps_what_a_hand_made_arguments_model_adds() -> None:
    # A model that does more than validate its fields (a model validator, model_post_init)
    # is validated as itself: the keyword arguments are what it made of them.
    class Scaled(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")
        n: int
        unit: str = "m"

        @pydantic.model_validator(mode="after")
        def _in_cm(self) -> Scaled:
            if self.unit == "m":
                self.n, self.unit = self.n * 100, "cm"
            return self

    class Stamped(pydantic.BaseModel):
        n: int
        stamp: str = ""

        def model_post_init(self, context: Any, /) -> None:
            self.stamp = f"n={self.n}"

    def handler(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    for model, expected in [
        (Scaled, {"n": 300, "unit": "cm"}),
        (Stamped, {"n": 3, "stamp": "n=3"}),
    ]:
        made = Tool(
            name="hand",
            description="Hand-made.",
            parameters=model.model_json_schema(),
            function=handler,
            arguments_model=model,
        )
        assert made.validate("c", '{"n": 3}') == expected
    with pytest.raises(ToolValidationError, match="n: Input should be a valid integer"):
        made.validate("c", '{"n": "x"}')


def test_a_hand_made_tool_takes_a_model_that_is_completed_after_the_tool() -> None:
    # The arguments model names a type not defined yet when the tool is made: the tool is
    # made all the same, and validates with the model once the model is complete.
    class Pending(pydantic.BaseModel):
        inner: DefinedLater

    made = Tool(
        name="later",
        description="Its model is completed later.",
        parameters={"type": "object"},
        function=lambda **kwargs: kwargs,
        arguments_model=Pending,
    )

    class DefinedLater(pydantic.BaseModel):
        a: int

    Pending.model_rebuild()
    assert made.validate("c", '{"inner": {"a": 1}}') == {"inner": DefinedLater(a=1)}
    with pytest.raises(ToolValidationError, match="Input should be a valid integer"):
        made.validate("c", '{"inner": {"a": "x"}}')


def test_validate_empty_string_is_an_empty_object() -> None:
    @tool
    def opt(a: int = 4) -> int:
        """Optional only."""
        return a

    assert opt.validate("c", "") == {"a": 4}
    with pytest.raises(ToolValidationError, match="count: Field required"):
        _typed.validate("c", "")


def test_hand_built_tool_only_checks_for_a_json_object() -> None:
    def handler(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
    }
    t = Tool(name="raw", description="Raw tool.", parameters=schema, function=handler)
    assert t.arguments_model is None
    assert t.definition == ToolDefinition(name="raw", description="Raw tool.", parameters=schema)
    # No schema validation: wrong types and extra keys pass through untouched.
    assert t.validate("c", '{"n": "not an int", "extra": [1]}') == {
        "n": "not an int",
        "extra": [1],
    }
    assert t.validate("c", "") == {}
    for bad, expected in [("[1]", "must be a JSON object, not list"), ("{", "not valid JSON")]:
        with pytest.raises(ToolValidationError, match=expected) as info:
            t.validate("c9", bad)
        assert info.value.tool_name == "raw"
        assert info.value.call_id == "c9"


# --- invoke -------------------------------------------------------------------------------


async def test_invoke_awaits_async_function_on_the_loop_thread() -> None:
    seen: list[int] = []

    @tool
    async def f(a: int) -> int:
        """Async."""
        seen.append(threading.get_ident())
        await asyncio.sleep(0)
        return a * 2

    assert await f.invoke({"a": 21}) == 42
    assert seen == [threading.get_ident()]


async def test_invoke_runs_sync_function_in_a_worker_thread_by_default() -> None:
    seen: list[int] = []

    @tool
    def f(a: int) -> int:
        """Sync."""
        seen.append(threading.get_ident())
        return a + 1

    assert await f.invoke({"a": 1}) == 2
    assert len(seen) == 1
    assert seen[0] != threading.get_ident()


async def test_invoke_runs_sync_function_inline_without_thread() -> None:
    seen: list[int] = []

    @tool(run_in_thread=False)
    def f(a: int) -> int:
        """Sync inline."""
        seen.append(threading.get_ident())
        return a + 1

    assert await f.invoke({"a": 1}) == 2
    assert seen == [threading.get_ident()]


async def test_invoke_awaits_awaitable_returned_by_sync_function() -> None:
    async def later() -> str:
        return "done"

    t = Tool(name="t", description="", parameters={}, function=lambda: later(), run_in_thread=False)
    assert await t.invoke({}) == "done"


async def test_invoke_propagates_exceptions_unchanged() -> None:
    @tool(run_in_thread=False)
    def f() -> None:
        """Boom."""
        raise KeyError("k")

    with pytest.raises(KeyError, match="k"):
        await f.invoke({})


# --- through the agent --------------------------------------------------------------------


async def test_malformed_json_arguments_become_an_error_the_model_sees_next() -> None:
    calls: list[int] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        calls.append(a + b)
        return a + b

    model = ScriptedModel([tool_call("add", '{"a": 1', id="c1"), "sorry"])
    agent = Agent(model, tools=[add])
    response = await agent.chat("add")

    assert response.text == "sorry"
    assert calls == []
    assert len(model.requests) == 2
    last = model.requests[-1].messages[-1]
    assert isinstance(last, ToolMessage)
    assert last.tool_call_id == "c1"
    assert last.tool_name == "add"
    assert last.is_error is True
    assert "'add'" in last.content
    assert "not valid JSON" in last.content
    assert agent.messages[-2] == last
    assert model.remaining == 0


async def test_wrong_argument_types_become_an_error_and_the_model_can_retry() -> None:
    calls: list[tuple[int, int]] = []

    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        calls.append((a, b))
        return a + b

    model = ScriptedModel(
        [
            tool_call("add", {"a": "one", "b": 2}, id="c1"),
            tool_call("add", {"a": 1, "b": 2}, id="c2"),
            "3",
        ]
    )
    agent = Agent(model, tools=[add])
    response = await agent.chat("add")

    assert response.text == "3"
    assert calls == [(1, 2)]
    first_error = model.requests[1].messages[-1]
    assert isinstance(first_error, ToolMessage)
    assert first_error.is_error is True
    assert "a: Input should be a valid integer" in first_error.content
    ok = model.requests[2].messages[-1]
    assert ok == ToolMessage(tool_call_id="c2", tool_name="add", content="3", id=ok.id)
    assert response.iterations == 3


async def test_tool_exception_becomes_error_message_naming_the_exception() -> None:
    @tool
    async def explode(reason: str) -> str:
        """Always fails."""
        raise ValueError(f"kaput: {reason}")

    model = ScriptedModel([tool_call("explode", {"reason": "disk"}, id="c1"), "it failed"])
    agent = Agent(model, tools=[explode])
    response = await agent.chat("go")

    assert response.text == "it failed"
    msg = model.requests[-1].messages[-1]
    assert isinstance(msg, ToolMessage)
    assert msg.is_error is True
    assert msg.tool_call_id == "c1"
    assert "ValueError" in msg.content
    assert "kaput: disk" in msg.content
    assert "'explode'" in msg.content


class _Reply(pydantic.BaseModel):
    name: str
    count: int


@pytest.mark.parametrize(
    ("value", "check"),
    [
        ("plain text, not JSON", lambda c: c == "plain text, not JSON"),
        ("", lambda c: c == ""),
        (None, lambda c: c == "null"),
        (42, lambda c: c == "42"),
        (True, lambda c: c == "true"),
        (
            {"a": 1, "b": [1, 2], "c": None},
            lambda c: json.loads(c) == {"a": 1, "b": [1, 2], "c": None},
        ),
        ([1, "x", {"k": "ü"}], lambda c: json.loads(c) == [1, "x", {"k": "ü"}]),
        (_Reply(name="n", count=2), lambda c: json.loads(c) == {"name": "n", "count": 2}),
    ],
)
async def test_tool_return_values_are_serialised(
    value: object, check: typing.Callable[[str], bool]
) -> None:
    @tool(run_in_thread=False)
    def give() -> object:
        """Return the value."""
        return value

    model = ScriptedModel([tool_call("give", {}, id="c1"), "done"])
    agent = Agent(model, tools=[give])
    await agent.chat("go")

    msg = model.requests[-1].messages[-1]
    assert isinstance(msg, ToolMessage)
    assert msg.is_error is False
    assert check(msg.content), msg.content


@pytest.mark.parametrize("enabled", [False, lambda: False])
async def test_disabled_tool_is_hidden_and_calling_it_fails(enabled: Any) -> None:
    ran: list[bool] = []

    @tool(enabled=enabled)
    def secret() -> str:
        """Hidden."""
        ran.append(True)
        return "x"

    @tool
    def visible() -> str:
        """Shown."""
        return "y"

    model = ScriptedModel([tool_call("secret", {}, id="c1"), "ok"])
    agent = Agent(model, tools=[secret, visible])
    await agent.chat("go")

    assert [t.name for t in model.requests[0].tools] == ["visible"]
    assert ran == []
    msg = model.requests[-1].messages[-1]
    assert isinstance(msg, ToolMessage)
    assert msg.is_error is True
    assert msg.content == "tool 'secret' is disabled"


async def test_enabled_callable_is_asked_before_every_model_call() -> None:
    state = {"on": False}

    @tool(enabled=lambda: state["on"], run_in_thread=False)
    def toggled() -> str:
        """Toggled."""
        return "t"

    @tool(run_in_thread=False)
    def flip() -> str:
        """Turn the other tool on."""
        state["on"] = True
        return "flipped"

    model = ScriptedModel([tool_call("flip", {}), tool_call("toggled", {}), "end"])
    agent = Agent(model, tools=[toggled, flip])
    await agent.chat("go")

    assert [[t.name for t in r.tools] for r in model.requests] == [
        ["flip"],
        ["toggled", "flip"],
        ["toggled", "flip"],
    ]
    last = model.requests[-1].messages[-1]
    assert isinstance(last, ToolMessage)
    assert (last.content, last.is_error) == ("t", False)


async def test_enabled_callable_that_raises_counts_as_disabled_and_warns(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken() -> bool:
        raise RuntimeError("flag service down")

    @tool(enabled=broken, run_in_thread=False)
    def flaky() -> str:
        """Flaky."""
        return "x"

    model = ScriptedModel([tool_call("flaky", {}, id="c1"), "done"])
    agent = Agent(model, tools=[flaky])
    with caplog.at_level(logging.WARNING, logger="hookloop"):
        response = await agent.chat("go")

    assert response.text == "done"
    assert model.requests[0].tools == ()
    msg = model.requests[-1].messages[-1]
    assert isinstance(msg, ToolMessage)
    assert msg.is_error is True
    assert "disabled" in msg.content
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings, "a failing enabled() must be logged"
    assert any("flaky" in r.getMessage() for r in warnings)
    assert all(r.exc_info and isinstance(r.exc_info[1], RuntimeError) for r in warnings)
    assert flaky.is_enabled() is False


async def test_hand_built_tool_runs_through_the_agent() -> None:
    received: list[dict[str, Any]] = []

    async def handler(**kwargs: Any) -> dict[str, Any]:
        received.append(kwargs)
        return {"echo": kwargs}

    raw = Tool(
        name="raw",
        description="Raw.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        function=handler,
    )
    model = ScriptedModel(
        [tool_call("raw", {"q": 5, "z": True}, id="c1"), tool_call("raw", "[1]", id="c2"), "ok"]
    )
    agent = Agent(model, tools=[raw])
    await agent.chat("go")

    assert model.requests[0].tools == (raw.definition,)
    assert received == [{"q": 5, "z": True}]
    first, second = _tool_messages(agent.messages)
    assert json.loads(first.content) == {"echo": {"q": 5, "z": True}}
    assert first.is_error is False
    assert second.is_error is True
    assert "must be a JSON object" in second.content


async def test_sync_tool_runs_off_the_loop_thread_inside_a_chat() -> None:
    threads: dict[str, int] = {}

    @tool
    def threaded() -> str:
        """Threaded."""
        threads["threaded"] = threading.get_ident()
        return "a"

    @tool(run_in_thread=False)
    def inline() -> str:
        """Inline."""
        threads["inline"] = threading.get_ident()
        return "b"

    model = ScriptedModel(
        [tool_calls(ToolCall.create("threaded"), ToolCall.create("inline")), "ok"]
    )
    await Agent(model, tools=[threaded, inline]).chat("go")

    loop_thread = threading.get_ident()
    assert threads["inline"] == loop_thread
    assert threads["threaded"] != loop_thread


async def test_parallel_tool_calls_run_concurrently_and_commit_in_call_order() -> None:
    first_started = asyncio.Event()
    second_done = asyncio.Event()
    finished: list[str] = []

    @tool
    async def first() -> str:
        """Waits for the second tool."""
        first_started.set()
        await second_done.wait()
        finished.append("first")
        return "first result"

    @tool
    async def second() -> str:
        """Waits for the first tool to start, then finishes first."""
        await first_started.wait()
        second_done.set()
        finished.append("second")
        return "second result"

    model = ScriptedModel(
        [
            tool_calls(ToolCall.create("first", id="c1"), ToolCall.create("second", id="c2")),
            "both done",
        ]
    )
    agent = Agent(model, tools=[first, second])
    # A sequential implementation deadlocks: first() waits for second(), which never runs.
    async with asyncio.timeout(2):
        response = await agent.chat("go")

    assert finished == ["second", "first"]
    assert response.text == "both done"
    user, assistant, m1, m2, final = agent.messages
    assert isinstance(user, UserMessage)
    assert isinstance(assistant, AssistantMessage)
    assert (m1.tool_call_id, m1.content) == ("c1", "first result")  # type: ignore[union-attr]
    assert (m2.tool_call_id, m2.content) == ("c2", "second result")  # type: ignore[union-attr]
    assert final == response.message
    assert model.requests[-1].messages[-2:] == (m1, m2)


async def test_one_failing_call_among_parallel_calls_does_not_affect_the_others() -> None:
    @tool
    async def good(n: int) -> int:
        """Good."""
        return n

    model = ScriptedModel(
        [
            tool_calls(
                ToolCall.create("good", {"n": 1}, id="a"),
                ToolCall(name="good", arguments="{", id="b"),
                ToolCall.create("missing", {}, id="c"),
                ToolCall.create("good", {"n": 4}, id="d"),
            ),
            "ok",
        ]
    )
    agent = Agent(model, tools=[good])
    await agent.chat("go")

    results = [(m.tool_call_id, m.is_error) for m in _tool_messages(agent.messages)]
    assert results == [("a", False), ("b", True), ("c", True), ("d", False)]
    contents = {m.tool_call_id: m.content for m in _tool_messages(agent.messages)}
    assert contents["a"] == "1"
    assert contents["d"] == "4"
    assert "unknown tool 'missing'" in contents["c"]


def test_annotated_field_constraints_reach_the_schema_and_the_validation() -> None:
    @tool
    def pick(
        count: typing.Annotated[int, pydantic.Field(ge=1, le=5, description="How many.")],
        code: typing.Annotated[str, pydantic.Field(pattern=r"^[A-Z]{3}$")],
    ) -> str:
        """Pick some.

        Args:
            code: A currency code.
        """
        return code * count

    properties = pick.parameters["properties"]
    assert properties["count"] == {
        "description": "How many.",
        "maximum": 5,
        "minimum": 1,
        "type": "integer",
    }
    assert properties["code"]["pattern"] == "^[A-Z]{3}$"
    assert properties["code"]["description"] == "A currency code."
    assert pick.validate("c1", '{"count": 2, "code": "EUR"}') == {"count": 2, "code": "EUR"}
    with pytest.raises(ToolValidationError):
        pick.validate("c1", '{"count": 9, "code": "EUR"}')


# Regression: tools with an async __call__ never ran.
async def test_a_tool_whose_function_has_an_async_call_runs() -> None:
    class Lookup:
        async def __call__(self, city: str) -> str:
            return f"sunny in {city}"

    weather = Tool(
        name="weather",
        description="Weather.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
        function=Lookup(),
    )
    agent = Agent(ScriptedModel([tool_call("weather", {"city": "Oslo"}), "ok"]), tools=[weather])
    await agent.chat("weather?")
    assert agent.messages[2].content == "sunny in Oslo"  # type: ignore[union-attr]
