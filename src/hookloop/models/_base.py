"""The model protocol: what the loop sends a model and what a model sends back.

A model adapter subclasses :class:`Model` and implements :meth:`Model.request`. Adapters that
can stream also override :meth:`Model.stream`, yielding :data:`StreamPart` items; the loop
folds them into one :class:`ProviderResponse` with :class:`ResponseAccumulator`, so every
adapter streams the same way.
"""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

from .._errors import InvalidResponseError
from .._messages import AssistantMessage, Message, ToolCall, Usage, assistant_message
from .._slots import frozen_maker, slot_init
from .._slots import new as _new
from .._slots import slot_setter as _setter

__all__ = [
    "FinishReason",
    "Model",
    "ModelSettings",
    "OutputFormat",
    "ProviderRequest",
    "ProviderResponse",
    "ResponseAccumulator",
    "StreamEnd",
    "StreamPart",
    "TextDelta",
    "ToolCallDelta",
    "ToolDefinition",
]

FinishReason: TypeAlias = Literal["stop", "tool_calls", "length", "content_filter", "error"]
"""Why the model stopped: an answer, tool calls, the token limit, a filter, or an error."""

_EMPTY: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolDefinition:
    """A tool as the model sees it: name, description and a JSON schema of its parameters.

    ``strict`` asks the provider to hold the arguments to the schema exactly (OpenAI's
    strict function calling); the schema must then be valid for strict mode.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    strict: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSettings:
    """Sampling and tool-choice settings sent with every request.

    Attributes:
        temperature: Sampling temperature; ``None`` leaves the provider's default.
        max_tokens: Most tokens the model may generate in one answer.
        tool_choice: ``"auto"`` (the model decides), ``"none"``, ``"required"``, or the name
            of one tool to force.
        extra: Provider-specific settings passed through unchanged.
        cache_key: What groups requests that share their prefix, for a provider's prompt
            cache; OpenAI's adapters send it, hashed, as ``prompt_cache_key`` (see
            ``docs/providers.md``, "Prompt caching"). ``None`` in an agent's settings: each
            chat's requests to such a model carry the agent's session id. Name one to share
            a cache across sessions that start alike (a tenant's, say).
    """

    temperature: float | None = None
    max_tokens: int | None = None
    tool_choice: str = "auto"
    extra: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    cache_key: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputFormat:
    """A JSON schema the model's text answer must follow (native output mode).

    Attributes:
        name: A short name for the schema, which some providers require.
        schema: The JSON schema, valid for OpenAI's strict mode.
    """

    name: str
    schema: Mapping[str, Any]


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderRequest:
    """One request to a model.

    Attributes:
        model: The model's name, as the provider knows it.
        system: The system prompt, with the enabled scopes' context added.
        messages: The conversation the model sees (never a system message: see ``system``).
        tools: The enabled tools.
        settings: Sampling and tool-choice settings.
        output_format: The JSON schema a text answer must follow, or ``None``; only for a
            model whose ``native_output`` is true (see ``docs/output.md``).
    """

    model: str
    system: str | None
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    settings: ModelSettings = field(default_factory=ModelSettings)
    output_format: OutputFormat | None = None


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ProviderResponse:
    """One answer from a model.

    Attributes:
        content: The text of the answer ("" when the model only called tools).
        tool_calls: The tools the model asked to run, in order.
        finish_reason: Why the model stopped.
        usage: Tokens used, when the provider reported them.
        model: The model that answered, when the provider said.
        id: The provider's id of the response, when it gave one.
    """

    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: FinishReason = "stop"
    usage: Usage | None = None
    model: str | None = None
    id: str | None = None

    def to_message(self) -> AssistantMessage:
        """The assistant message this response commits to history.

        Raises:
            InvalidMessageError: ``content`` is not a str, or ``tool_calls`` not a tuple of
                :class:`~hookloop.ToolCall`.
        """
        return assistant_message(self.content, self.tool_calls)


make_response: Callable[..., ProviderResponse] = frozen_maker(ProviderResponse)
"""A response from its six fields in order, unchecked (no constructor): for hot paths."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    """A piece of the answer's text, as it streams."""

    text: str
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A piece of a tool call, as it streams.

    The first delta of a call carries its ``id`` and ``name``; later ones add to its
    ``arguments``. ``index`` tells parallel calls apart.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""
    type: Literal["tool_call_delta"] = "tool_call_delta"


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamEnd:
    """The last item of a stream: why the model stopped and what it used."""

    finish_reason: FinishReason | None = None
    usage: Usage | None = None
    model: str | None = None
    id: str | None = None
    type: Literal["stream_end"] = "stream_end"


StreamPart: TypeAlias = TextDelta | ToolCallDelta | StreamEnd
"""What a model's ``stream()`` yields: deltas of the answer, then one ``StreamEnd``."""


class ResponseAccumulator:
    """Folds the parts of a stream into one :class:`ProviderResponse`.

    Example:
        >>> from hookloop import TextDelta
        >>> from hookloop.models import ResponseAccumulator
        >>> acc = ResponseAccumulator()
        >>> acc.add(TextDelta(text="Hel")); acc.add(TextDelta(text="lo"))
        >>> acc.response().content
        'Hello'
    """

    __slots__ = ("_calls", "_end", "_text")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, [argument pieces]]
        self._end: StreamEnd | None = None

    def add(self, part: StreamPart) -> None:
        """Take one part of the stream."""
        if isinstance(part, TextDelta):
            self._text.append(part.text)
        elif isinstance(part, ToolCallDelta):
            slot = self._calls.get(part.index)
            if slot is None:
                slot = self._calls[part.index] = [part.id, part.name, []]
            else:
                slot[0] = slot[0] or part.id
                slot[1] = slot[1] or part.name
            slot[2].append(part.arguments)
        else:
            self._end = part

    def response(self) -> ProviderResponse:
        """The response the stream added up to.

        Raises:
            InvalidResponseError: A tool call never got a name.
        """
        calls: list[ToolCall] = []
        for index in sorted(self._calls):
            call_id, name, pieces = self._calls[index]
            if not name:
                raise InvalidResponseError(f"streamed tool call #{index} has no name")
            arguments = "".join(pieces)
            if not arguments.isascii():
                arguments = whole_pairs(arguments)
            if call_id:
                calls.append(ToolCall(name=name, arguments=arguments, id=call_id))
            else:
                calls.append(ToolCall(name=name, arguments=arguments))
        end = self._end or StreamEnd()
        finish = end.finish_reason or ("tool_calls" if calls else "stop")
        return ProviderResponse(
            content="".join(self._text),
            tool_calls=tuple(calls),
            finish_reason=finish,
            usage=end.usage,
            model=end.model,
            id=end.id,
        )


def whole_pairs(text: str) -> str:
    """``text`` encodable as UTF-8: split surrogate pairs joined, any other surrogate U+FFFD.

    A service that slices UTF-16 strings can cut an emoji between two stream chunks; each
    chunk then holds half of it, and the halves put together are still two characters that
    UTF-8 cannot carry (a tool's arguments so joined would fail validation).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # UTF-16 stores a pair as its two halves: this joins them, and replaces the rest.
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return text


class Model(abc.ABC):
    """A language model the agent can call.

    Subclasses implement :meth:`request`. Streaming adapters also override :meth:`stream`;
    the default streams the whole answer as one piece.

    Attributes:
        name: The model's name as its provider knows it.
        context_window: How many tokens one request may hold, when known.
        provider_name: Who serves the model, as telemetry names it (``"openai"``,
            ``"anthropic"``); ``"hookloop"`` for a model that runs in this process.
        native_output: Whether the model constrains its text answer to the request's
            ``output_format`` (a JSON schema); an agent refuses native output mode for a
            model without it.
        prompt_cache_key: Whether the model sends its requests' ``settings.cache_key`` to
            its provider; an agent whose settings name no key then gives its chats'
            requests the session id as the key (nothing is done for other models).
    """

    name: str = "model"
    context_window: int | None = None
    provider_name: str = "hookloop"

    @property
    def base_url(self) -> str | None:
        """The API root the model sends requests to; ``None`` when it runs in process."""
        return None

    native_output: bool = False
    prompt_cache_key: bool = False

    @abc.abstractmethod
    async def request(self, request: ProviderRequest) -> ProviderResponse:
        """Send one request and return the whole answer.

        Raises:
            ProviderError: The provider failed; the subclass says how.
        """

    async def aclose(self) -> None:  # noqa: B027 - an optional hook, not an abstract method
        """Release what the model holds (connections, a server process); by default nothing."""

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Send one request and yield the answer as it arrives, ending with a StreamEnd."""
        return WholeAnswerStream(self.request(request))


def response_parts(response: ProviderResponse) -> list[StreamPart]:
    """Split a whole response into the stream parts that add up to it."""
    parts: list[StreamPart] = [*response_deltas(response)]
    parts.append(
        StreamEnd(
            finish_reason=response.finish_reason,
            usage=response.usage,
            model=response.model,
            id=response.id,
        )
    )
    return parts


# The parts of a whole answer are made through their slots (see _slots.py), once per part
# of every streamed answer (bench/loop.py, stream_ratio).
_text_text, _text_type = _setter(TextDelta, "text"), _setter(TextDelta, "type")
_delta_index, _delta_id = _setter(ToolCallDelta, "index"), _setter(ToolCallDelta, "id")
_delta_name, _delta_arguments = _setter(ToolCallDelta, "name"), _setter(ToolCallDelta, "arguments")
_delta_type = _setter(ToolCallDelta, "type")


def response_deltas(response: ProviderResponse) -> list[TextDelta | ToolCallDelta]:
    """The parts of :func:`response_parts` without the closing :class:`StreamEnd`."""
    parts: list[TextDelta | ToolCallDelta] = []
    if response.content:
        text = _new(TextDelta)
        _text_text(text, response.content)
        _text_type(text, "text_delta")
        parts.append(text)
    for index, call in enumerate(response.tool_calls):
        delta = _new(ToolCallDelta)
        _delta_index(delta, index)
        _delta_id(delta, call.id)
        _delta_name(delta, call.name)
        _delta_arguments(delta, call.arguments)
        _delta_type(delta, "tool_call_delta")
        parts.append(delta)
    return parts


class WholeAnswerStream:
    """The stream of an answer that comes whole: one part for its text, one per tool call.

    An async iterator of :data:`StreamPart` like any model's stream. The loop knows it:
    instead of iterating it and folding the parts back into a response, it awaits
    :meth:`response` and hands the consumer the response's parts itself, which costs a
    fraction of an async generator and a :class:`ResponseAccumulator`.

    Args:
        answer: What gives the response once, awaited on the first use (``request()``'s
            coroutine, say); it raises what the model raises.
    """

    __slots__ = ("_answer", "_parts")

    def __init__(self, answer: Coroutine[Any, Any, ProviderResponse]) -> None:
        self._answer: Coroutine[Any, Any, ProviderResponse] | None = answer
        self._parts: Iterator[StreamPart] | None = None

    def response(self) -> Coroutine[Any, Any, ProviderResponse]:
        """The whole answer, to await once (the stream is used up then).

        The answer's own coroutine, not one around it: every streamed answer of the loop
        is awaited through it (bench/loop.py, stream_ratio).

        Raises:
            RuntimeError: The answer was already taken.
        """
        answer, self._answer = self._answer, None
        if answer is None:
            raise RuntimeError("the answer of this stream was already taken")
        return answer

    def __aiter__(self) -> WholeAnswerStream:
        return self

    async def __anext__(self) -> StreamPart:
        if self._parts is None:
            if self._answer is None:
                raise StopAsyncIteration
            self._parts = iter(response_parts(await self.response()))
        try:
            return next(self._parts)
        except StopIteration:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Drop the answer not taken yet, without asking the model for it."""
        answer, self._answer = self._answer, None
        if answer is not None:
            answer.close()
        self._parts = iter(())
