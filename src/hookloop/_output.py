"""Typed output: what a chat asks the model for when it has an output type, and the checks.

An :class:`OutputSpec` is made once per chat from ``output_type``, ``output_mode`` and
``output_retries``. The loop asks it three things, none of which does I/O: how to change
each request (:meth:`OutputSpec.extend`: an output tool, a response format, or
instructions), what a committed answer means (:meth:`OutputSpec.judge`: an accepted value,
a rejected one with the message the model is told, or "not an answer yet: run the tools"),
and, while streaming, what the answer validates to so far (:class:`PartialOutputs`).
"""

from __future__ import annotations

import dataclasses
import json
import re
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeAlias, TypeVar

import pydantic
import pydantic_core

from ._errors import UsageError
from ._messages import AssistantMessage, ToolCall
from ._output_schema import WRAPPER_KEY, convert, inline_root, needs_wrapper, strict_schema, wrap
from .models._base import (
    Model,
    ModelSettings,
    OutputFormat,
    StreamPart,
    TextDelta,
    ToolCallDelta,
    ToolDefinition,
)

__all__ = [
    "DEFAULT_OUTPUT_RETRIES",
    "OUTPUT_TOOL_NAME",
    "Accepted",
    "OutputMode",
    "OutputSpec",
    "PartialOutputs",
    "Rejected",
    "output_spec",
]

OutputMode: TypeAlias = Literal["tool", "native", "prompted"]
"""How the model is asked for typed output; see ``docs/output.md``."""

OUTPUT_TOOL_NAME: Final = "final_result"
"""The name of the tool the model calls with its answer in ``"tool"`` mode."""

DEFAULT_OUTPUT_RETRIES: Final = 2
"""How many invalid answers a chat sends back to the model before it gives up."""

_MODES: Final = ("tool", "native", "prompted")
_TOOL_DESCRIPTION = "Give your final answer to the user with this tool, when you have it."
_PROMPT = (
    "Answer with one JSON value that matches this JSON schema, and nothing else (no text "
    "around it, no code fence):\n{schema}"
)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Accepted:
    """A valid answer: ``value``; ``call`` is the output tool call to answer, if any."""

    value: Any
    call: ToolCall | None = None


@dataclass(frozen=True, slots=True)
class Rejected:
    """An invalid answer and what the model is told before it tries again.

    Attributes:
        raw: What the model sent.
        error: Why it is not valid.
        call: The output tool call it came in, which the message answers; ``None`` when
            the answer was text (the message is then a user message).
        message: What the model is told.
        others: The turn's other output tool calls, each invalid too, with what each is
            answered (they are answers, never run as tools).
    """

    raw: str
    error: Exception
    call: ToolCall | None
    message: str
    others: tuple[Rejected, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputSpec(Generic[T]):
    """How one chat gets, and checks, a typed answer.

    Attributes:
        output_type: The type asked for.
        mode: How the model is asked for it.
        retries: How many invalid answers go back to the model before the chat gives up.
        adapter: Validates a value as ``output_type``.
        schema: The JSON schema the model is shown: valid for strict mode in ``"tool"`` and
            ``"native"`` modes (objects closed, optional fields nullable, ``dict`` fields
            as key/value arrays), the type's own schema in ``"prompted"`` mode.
        original: The type's own schema, wrapped like ``schema``; it guides the conversion
            of an answer back to the type's form.
        wrapped: The answer travels as ``{"response": value}`` (its type is no object).
        plain_text: The type is ``str``: the answer is the text, nothing is added to requests.
        accepts_text: A text answer is valid in ``"tool"`` mode (``str`` is in the type).
        tool: The output tool every request offers (``"tool"`` mode), made once.
        output_format: The response format every request carries (``"native"`` mode).
        instructions: What the system prompt gets (``"prompted"`` mode).
    """

    output_type: Any
    mode: OutputMode
    retries: int
    adapter: pydantic.TypeAdapter[T]
    schema: Mapping[str, Any]
    original: Mapping[str, Any]
    wrapped: bool
    plain_text: bool
    accepts_text: bool
    tool: ToolDefinition | None = dataclasses.field(init=False, repr=False)
    output_format: OutputFormat | None = dataclasses.field(init=False, repr=False)
    instructions: str | None = dataclasses.field(init=False, repr=False)
    _forced: list[Any] = dataclasses.field(init=False, repr=False, default_factory=list)

    def __post_init__(self) -> None:
        # What extend() adds to every request, made once.
        mode, plain = self.mode, self.plain_text
        tool = output_format = instructions = None
        if mode == "tool" and not plain:
            tool = ToolDefinition(
                name=OUTPUT_TOOL_NAME,
                description=_TOOL_DESCRIPTION,
                parameters=self.schema,
                strict=True,
            )
        elif mode == "native" and not plain:
            output_format = OutputFormat(name=_schema_name(self.output_type), schema=self.schema)
        elif mode == "prompted" and not plain:
            instructions = _PROMPT.format(schema=json.dumps(self.schema, separators=(",", ":")))
        object.__setattr__(self, "tool", tool)
        object.__setattr__(self, "output_format", output_format)
        object.__setattr__(self, "instructions", instructions)

    def check_model(self, model: Model) -> None:
        """Refuse a mode the model cannot do, before anything is sent.

        Raises:
            UsageError: Native mode for a model without ``native_output``.
        """
        if self.mode == "native" and not self.plain_text and not model.native_output:
            raise UsageError(
                f"{type(model).__name__} cannot constrain its answer to a JSON schema "
                "(output_mode='native'); use output_mode='tool' or 'prompted'"
            )

    def check_tools(self, tool_names: Iterable[str]) -> None:
        """Refuse a tool of the user's with the output tool's name, before anything is sent.

        Raises:
            UsageError: In ``"tool"`` mode, a tool is named ``final_result``.
        """
        if self.tool is not None and OUTPUT_TOOL_NAME in tool_names:
            raise UsageError(
                f"a tool is named {OUTPUT_TOOL_NAME!r}, the name of the output tool: rename it, "
                "or use output_mode='native' or 'prompted'"
            )

    def extend(
        self, tools: tuple[ToolDefinition, ...], settings: ModelSettings, system: str | None
    ) -> tuple[tuple[ToolDefinition, ...], ModelSettings, str | None]:
        """The tools, settings and system prompt of a request that asks for this output.

        The output tool joins the tools (and a call is forced when text is no answer), or
        the instructions join the system prompt; a native request carries
        :attr:`output_format` instead. The loop builds each request once from these parts.
        """
        if self.tool is not None:
            tools = (*tools, self.tool)
            if not self.accepts_text and settings.tool_choice == "auto":
                settings = self._required(settings)
        elif self.instructions is not None:
            system = f"{system}\n\n{self.instructions}" if system else self.instructions
        return tools, settings, system

    def _required(self, settings: ModelSettings) -> ModelSettings:
        """``settings`` forcing a tool call, made once for the agent's settings object."""
        forced = self._forced
        if not forced or forced[0] is not settings:
            forced[:] = (settings, dataclasses.replace(settings, tool_choice="required"))
        result: ModelSettings = forced[1]
        return result

    def judge(self, message: AssistantMessage) -> Accepted | Rejected | None:
        """What the committed answer ``message`` means; ``None``: run its tool calls.

        Of several output tool calls in one turn, the first valid one is the answer; when
        none is, the first is rejected with the others in :attr:`Rejected.others`.
        """
        if self.mode == "tool" and not self.plain_text:
            calls = [c for c in message.tool_calls if c.name == OUTPUT_TOOL_NAME]
            if calls:
                verdicts = [self._check(call.arguments, call) for call in calls]
                first, *others = verdicts
                for verdict in verdicts:
                    if isinstance(verdict, Accepted):
                        return verdict
                assert isinstance(first, Rejected)
                rejected = tuple(v for v in others if isinstance(v, Rejected))
                return dataclasses.replace(first, others=rejected) if rejected else first
            if message.tool_calls:
                return None
            if self.accepts_text:
                return self._check_text(message.content)
            error = ValueError(f"answered in text instead of calling the {OUTPUT_TOOL_NAME} tool")
            return Rejected(
                raw=message.content,
                error=error,
                call=None,
                message=(
                    f"Give your final answer by calling the {OUTPUT_TOOL_NAME} tool "
                    "with it, not as text."
                ),
            )
        if message.tool_calls:
            return None
        if self.plain_text:
            return self._check_text(message.content)
        return self._check(message.content, None)

    def validate(self, value: object) -> T:
        """``value`` validated as the output type (a hook's :class:`~hookloop.hooks.OutputReturn`).

        Raises:
            pydantic.ValidationError: It is not one.
        """
        return self.adapter.validate_python(value)

    def _check_text(self, text: str) -> Accepted | Rejected:
        try:
            return Accepted(self.adapter.validate_python(text))
        except pydantic.ValidationError as exc:
            return Rejected(raw=text, error=exc, call=None, message=self._retry_text(exc))

    def _check(self, raw: str, call: ToolCall | None) -> Accepted | Rejected:
        try:
            value = self._parse(raw)
        except (ValueError, TypeError) as exc:  # pydantic's ValidationError is a ValueError
            return Rejected(raw=raw, error=exc, call=call, message=self._retry_text(exc, call))
        return Accepted(value, call)

    def _parse(self, raw: str) -> T:
        text = _json_text(raw) if self.mode == "prompted" else raw
        try:
            data = json.loads(text)
        except ValueError:
            if self.mode != "prompted" or (data := _embedded_json(text)) is None:
                raise ValueError("the answer is not valid JSON") from None
        return self.adapter.validate_python(self._unwrap(data))

    def _unwrap(self, data: Any) -> Any:
        if self.mode != "prompted":
            data = convert(self.original, data, "from_strict")
        if self.wrapped:
            if not isinstance(data, Mapping) or WRAPPER_KEY not in data:
                raise ValueError(f'the answer must be an object {{"{WRAPPER_KEY}": ...}}')
            data = data[WRAPPER_KEY]
        return data

    def partial(self, raw: str) -> tuple[bool, Any]:
        """``(True, value)`` when the incomplete answer ``raw`` validates so far."""
        text = _json_text(raw) if self.mode == "prompted" else raw
        # A number at the very end may go on in the next piece: 197 of 1979 is no value.
        text = _OPEN_NUMBER.sub(r"\1", text)
        if not text:
            return False, None
        try:
            data = self._unwrap(pydantic_core.from_json(text, allow_partial=True))
            return True, self.adapter.validate_python(data, experimental_allow_partial=True)
        except (ValueError, TypeError):  # pydantic's ValidationError is a ValueError too
            return False, None

    def _retry_text(self, error: Exception, call: ToolCall | None = None) -> str:
        problems = describe(error)
        if call is not None:
            return (
                f"The answer is not valid:\n{problems}\nCall {OUTPUT_TOOL_NAME} again with "
                "a corrected answer."
            )
        if self.mode == "tool" or self.plain_text:
            return f"The answer is not valid:\n{problems}\nAnswer again, corrected."
        return (
            f"The answer is not valid:\n{problems}\nAnswer again with only the corrected "
            "JSON value."
        )


class PartialOutputs:
    """Follows a streamed answer and tells when what arrived so far validates to a new value."""

    __slots__ = ("_index", "_last", "_pieces", "_spec")

    def __init__(self, spec: OutputSpec[Any]) -> None:
        self._spec = spec
        self._pieces: list[str] = []
        self._index: int | None = None  # the output tool call's index, once it is named
        self._last: tuple[bool, Any] = (False, None)

    def feed(self, part: StreamPart) -> tuple[bool, Any]:
        """``(True, value)`` when ``part`` made the answer validate to a new ``value``."""
        spec = self._spec
        if spec.plain_text:
            return False, None
        if spec.mode == "tool":
            if not isinstance(part, ToolCallDelta):
                return False, None
            if part.name == OUTPUT_TOOL_NAME:
                self._index = part.index
            if part.index != self._index or not part.arguments:
                return False, None
            self._pieces.append(part.arguments)
        elif isinstance(part, TextDelta) and part.text:
            self._pieces.append(part.text)
        else:
            return False, None
        found = spec.partial("".join(self._pieces))
        if not found[0] or found == self._last:
            return False, None
        self._last = found
        return found


def output_spec(
    output_type: object, *, mode: object = "tool", retries: object = DEFAULT_OUTPUT_RETRIES
) -> OutputSpec[Any]:
    """The output spec of a chat.

    Raises:
        UsageError: An unknown mode, a negative or non-int ``retries``, or a type pydantic
            cannot validate or describe as JSON.
    """
    if mode not in _MODES:
        raise UsageError(f"output_mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise UsageError(f"output_retries must be an int >= 0, got {retries!r}")
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(typing.cast(Any, output_type))
        schema = inline_root(adapter.json_schema())
    except (pydantic.PydanticUserError, pydantic_core.SchemaError, TypeError) as exc:
        raise UsageError(f"output_type {output_type!r} cannot be used: {exc}") from exc
    plain = output_type is str
    wrapped = needs_wrapper(schema)
    original = wrap(schema) if wrapped else schema
    return OutputSpec(
        output_type=output_type,
        mode=mode,
        retries=retries,
        adapter=adapter,
        schema=original if mode == "prompted" else strict_schema(original),
        original=original,
        wrapped=wrapped,
        plain_text=plain,
        accepts_text=plain or str in _members(output_type),
    )


def describe(error: Exception) -> str:
    """A validation error as lines the model can act on."""
    if isinstance(error, pydantic.ValidationError):
        lines = []
        for item in error.errors(include_url=False):
            where = ".".join(str(part) for part in item["loc"]) or "(the answer)"
            lines.append(f"- {where}: {item['msg']}")
        return "\n".join(lines)
    return f"- {error}"


def _members(output_type: object) -> tuple[object, ...]:
    origin = typing.get_origin(output_type)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(output_type)
    return (output_type,)


def _schema_name(output_type: object) -> str:
    name = getattr(output_type, "__name__", "") if isinstance(output_type, type) else ""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "output"


_OPEN_NUMBER = re.compile(r"([:,\[]\s*)-?\d[\d.eE+-]*$")
_FENCE = re.compile(r"^```[A-Za-z]*\s*(.*?)\s*(?:```\s*)?$", re.S)


def _json_text(text: str) -> str:
    """The JSON in a prompted answer: without a code fence around it."""
    stripped = text.strip()
    fenced = _FENCE.match(stripped)
    return fenced.group(1) if fenced else stripped


def _embedded_json(text: str) -> Any:
    """The JSON object or array inside prose, if there is exactly one way to read it."""
    for start, end in (("{", "}"), ("[", "]")):
        first, last = text.find(start), text.rfind(end)
        if first != -1 and last > first:
            try:
                return json.loads(text[first : last + 1])
            except ValueError:
                continue
    return None
