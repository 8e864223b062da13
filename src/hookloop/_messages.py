"""Messages, content parts and tool calls, and their JSON form at the edge.

Messages are frozen, keyword-only dataclasses: a handler that holds one cannot change the
history behind the agent's back. Make a changed copy with :func:`dataclasses.replace`.
Every message gets a unique ``id`` when it is made. Each checks its fields' types when it
is made (:class:`~hookloop.InvalidMessageError`), so nothing malformed reaches a
history or a session store; a list given for a tuple field is kept as a tuple.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
import os
import reprlib
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from json.encoder import c_make_encoder, encode_basestring  # type: ignore[attr-defined]
from typing import Any, ClassVar, Literal, TypeAlias

import pydantic

from ._errors import InvalidMessageError, ToolValidationError
from ._slots import frozen_maker, slot_init

__all__ = [
    "AssistantMessage",
    "ContentPart",
    "ImagePart",
    "Message",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolMessage",
    "Usage",
    "UserMessage",
    "dump_messages",
    "load_messages",
    "messages_from_json",
    "messages_to_json",
    "new_id",
]

# An id is ``<kind>_`` then 11 characters: 9 random ones (54 bits, a block's) and 2 that count
# the block's ids, all of the base64url alphabet. A message id is 15 characters, which makes
# it a 64-byte str: the least a str of more than one character takes (CPython's allocator
# rounds to 16 bytes; the 21-character ids before took 80, a fifth of an idle message).
# A block holds 4,096 ids, then draws new random characters; a forked child starts a block
# of its own. Two blocks share ids only if they drew the same 54 bits: as unique across
# processes as the one random prefix per process before, and cheaper than uuid4() on the
# loop's hot path (two a model iteration).
_DIGITS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_BLOCK_SIZE = len(_DIGITS) ** 2
_BLOCK_LOCK = threading.Lock()


def _new_block() -> tuple[str, Iterator[int]]:
    random = base64.urlsafe_b64encode(os.urandom(7)).decode("ascii")[:9]  # 54 bits
    return random, itertools.count()


_block = _new_block()  # (random characters, counter): read as one, so threads agree


def _renew_block(used: tuple[str, Iterator[int]]) -> tuple[str, int]:
    """The next block's characters and first number, once the block ``used`` is full."""
    global _block
    with _BLOCK_LOCK:
        if _block is used:  # another thread may have renewed it meanwhile
            _block = _new_block()
        random, counter = _block
        return random, next(counter)


def _renew_after_fork() -> None:
    global _block, _BLOCK_LOCK
    _BLOCK_LOCK = threading.Lock()  # the parent's may have been held by another thread
    _block = _new_block()


os.register_at_fork(after_in_child=_renew_after_fork)


def _message_id() -> str:
    # Every message's id (two per model iteration): other kinds take its characters.
    block = _block
    random, counter = block
    n = next(counter)
    if n >= _BLOCK_SIZE:
        random, n = _renew_block(block)
    return f"msg_{random}{_DIGITS[n >> 6]}{_DIGITS[n & 63]}"


def new_id(kind: str = "msg") -> str:
    """Return a new unique id such as ``msg_Xq3v-9aKzAB`` (``kind``, ``_``, 11 characters)."""
    return f"{kind}_{_message_id()[4:]}"


def _call_id() -> str:
    return new_id("call")


# Validation at construction: a wrongly typed field caught here never reaches a history or a
# session store, where it would make every later restore fail. Each __post_init__ is one
# expression of plain isinstance checks (the loop makes messages on its hot path); only when
# it fails does _refuse look for the field to blame.

_Rule = tuple[str, Callable[[object], bool], str]


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_id(value: object) -> bool:
    return isinstance(value, str) and value != ""


def _is_optional_str(value: object) -> bool:
    return value is None or isinstance(value, str)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_count(value: object) -> bool:
    return type(value) is int and value >= 0  # (a bool is not one: its type is bool)


def _is_user_content(value: object) -> bool:
    return isinstance(value, str) or _all_of(value, (TextPart, ImagePart))


def _is_tool_calls(value: object) -> bool:
    return _all_of(value, ToolCall)


def _all_of(items: object, kind: type | tuple[type, ...]) -> bool:
    """Whether ``items`` is a tuple or list of ``kind`` (a loop: cheaper than all())."""
    if not isinstance(items, (tuple, list)):
        return False
    for item in items:  # noqa: SIM110 - all() with a generator costs twice as much here
        if not isinstance(item, kind):
            return False
    return True


_STR = "a str"
_ID = "a non-empty str"


def _refuse(obj: object, rules: tuple[_Rule, ...]) -> InvalidMessageError:
    owner = type(obj).__name__
    for name, ok, expected in rules:
        value = getattr(obj, name)
        if not ok(value):
            return InvalidMessageError(
                f"{owner}.{name} must be {expected}, got {type(value).__name__} {_short(value)}"
            )
    return InvalidMessageError(f"{owner} is malformed")  # not reached: a rule failed


def _short(value: object) -> str:
    """A bounded repr, safe for deep nesting and for objects whose repr raises."""
    return reprlib.repr(value)


def _as_tuple(obj: object, name: str) -> None:
    """Keep a list given for a tuple field as a tuple: a frozen message is frozen through."""
    value = getattr(obj, name)
    if type(value) is not tuple:
        object.__setattr__(obj, name, tuple(value))


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class TextPart:
    """A piece of text inside a user message."""

    text: str
    type: Literal["text"] = "text"

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise _refuse(self, (("text", _is_str, _STR),))


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ImagePart:
    """An image inside a user message, given by URL or as base64 data.

    Attributes:
        url: An ``https:`` or ``data:`` URL of the image.
        data: The image bytes, base64-encoded.
        media_type: The MIME type, such as ``image/png``; required with ``data``.
    """

    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    type: Literal["image"] = "image"

    def __post_init__(self) -> None:
        if not (
            _is_optional_str(self.url)
            and _is_optional_str(self.data)
            and _is_optional_str(self.media_type)
        ):
            raise _refuse(self, _IMAGE_RULES)
        if (self.url is None) == (self.data is None):
            raise InvalidMessageError("ImagePart needs exactly one of url= or data=")
        if self.data is not None and not self.media_type:
            raise InvalidMessageError("ImagePart(data=...) needs media_type=, e.g. 'image/png'")


_IMAGE_RULES: tuple[_Rule, ...] = tuple(
    (name, _is_optional_str, "a str or None") for name in ("url", "data", "media_type")
)

ContentPart: TypeAlias = TextPart | ImagePart
"""One part of a user message's content: text or an image."""


_ARGUMENTS_JSON = json.JSONEncoder(ensure_ascii=False)
"""``json.dumps(..., ensure_ascii=False)``'s encoder, made once: dumps() makes one per call."""


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCall:
    """A request from the model to run one tool.

    Attributes:
        name: The tool's name.
        arguments: The arguments as the model wrote them: a JSON object in text. It is kept
            raw so that malformed arguments reach the tool as a validation error the model
            can see, and so the call goes back to the provider exactly as it came.
        id: The provider's id for the call; tool results refer to it.
    """

    name: str
    arguments: str = "{}"
    id: str = field(default_factory=_call_id)

    def __post_init__(self) -> None:
        if not (
            isinstance(self.name, str)
            and isinstance(self.arguments, str)
            and isinstance(self.id, str)
        ):
            raise _refuse(
                self, (("name", _is_str, _STR), ("arguments", _is_str, _STR), ("id", _is_str, _STR))
            )

    @classmethod
    def create(
        cls, name: str, arguments: Mapping[str, object] | None = None, *, id: str | None = None
    ) -> ToolCall:
        """Make a call from an arguments mapping (serialised to JSON).

        Raises:
            InvalidMessageError: ``arguments`` is not a mapping JSON can hold, or another
                field has the wrong type.
        """
        if (
            arguments is not None
            and type(arguments) is not dict
            and not isinstance(arguments, Mapping)
        ):
            raise InvalidMessageError(
                f"ToolCall.arguments must be a mapping or None, got {type(arguments).__name__}"
            )
        try:
            text = _arguments_text(arguments or {})
        except (TypeError, ValueError, RecursionError) as exc:
            raise InvalidMessageError(
                f"ToolCall.arguments cannot be written as JSON: {type(exc).__name__}"
            ) from None
        call_id = _call_id() if id is None or id == "" else id
        if cls is ToolCall and type(name) is str and type(call_id) is str:
            return _tool_call(name, text, call_id)  # the checks' own outcome, without them
        return cls(name=name, arguments=text, id=call_id)

    def parsed_arguments(self) -> dict[str, Any]:
        """Return the arguments as a dict.

        Raises:
            ToolValidationError: The arguments are not a JSON object.
        """
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise ToolValidationError(
                f"arguments for tool {self.name!r} are not valid JSON: {exc}",
                tool_name=self.name,
                call_id=self.id,
            ) from exc
        if not isinstance(value, dict):
            raise ToolValidationError(
                f"arguments for tool {self.name!r} must be a JSON object, "
                f"not {type(value).__name__}",
                tool_name=self.name,
                call_id=self.id,
            )
        return value


_tool_call: Callable[[str, str, str], ToolCall] = frozen_maker(ToolCall)

# json's C encoder for a plain dict, made once: JSONEncoder.encode makes one per call, about
# half of what it costs (ScriptedModel answers and tests make a call per model call). No
# cycle check (its markers would be shared): a failure is encoded again, for the error.
_C_ENCODER = (
    None
    if c_make_encoder is None
    else c_make_encoder(
        None, _ARGUMENTS_JSON.default, encode_basestring, None, ": ", ", ", False, False, True
    )
)


def _arguments_text(arguments: Mapping[str, object]) -> str:
    """``json.dumps(dict(arguments), ensure_ascii=False)``.

    Raises:
        TypeError, ValueError, RecursionError: As ``json.dumps`` does.
    """
    if type(arguments) is dict and _C_ENCODER is not None:
        try:
            return "".join(_C_ENCODER(arguments, 0))
        except (TypeError, ValueError, RecursionError):
            pass  # encoded again below: the error it raises is the one to report
    return _ARGUMENTS_JSON.encode(dict(arguments))


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Tokens a model call used, as the provider reported them, and what they cost.

    Usages add up with ``+``. Their costs add up while both are known: a sum with an unknown
    cost (``None``) is unknown, so a total is never a guess. A chat's total starts at a
    known zero.

    Attributes:
        input_tokens: Tokens of the request, cached ones included.
        output_tokens: Tokens of the answer, reasoning included.
        cached_input_tokens: Of ``input_tokens``, those read from the provider's prompt
            cache, where it says (priced below plain input).
        reasoning_tokens: Of ``output_tokens``, those spent on reasoning, where it says.
        cache_write_tokens: Of ``input_tokens``, those written to the provider's prompt
            cache, where it says (Anthropic's ``cache_creation_input_tokens``, priced above
            plain input); providers that cache by themselves (OpenAI) report none.
        cost: What the tokens cost in US dollars, ``None`` when not priced (see
            ``docs/budgets.md``).

    Raises:
        InvalidMessageError: A token count that is not an int of 0 or more (a bool is not
            one), or a cost that is not a finite ``Decimal`` of 0 or more.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    cost: Decimal | None = None

    def __post_init__(self) -> None:
        cost = self.cost
        if not (
            _is_count(self.input_tokens)
            and _is_count(self.output_tokens)
            and _is_count(self.cached_input_tokens)
            and _is_count(self.reasoning_tokens)
            and _is_count(self.cache_write_tokens)
            and (cost is None or _is_cost(cost))
        ):
            names = (
                "input_tokens",
                "output_tokens",
                "cached_input_tokens",
                "reasoning_tokens",
                "cache_write_tokens",
            )
            rules: tuple[_Rule, ...] = tuple(
                (name, _is_count, "an int of 0 or more") for name in names
            )
            cost_rule = ("cost", _is_cost_or_none, "a finite Decimal of 0 or more, or None")
            raise _refuse(self, (*rules, cost_rule))

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        a, b = self.cost, other.cost
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_input_tokens=self.cached_input_tokens + other.cached_input_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost=None if a is None or b is None else a + b,
        )


def _is_cost(value: object) -> bool:
    return type(value) is Decimal and value.is_finite() and value >= 0


def _is_cost_or_none(value: object) -> bool:
    return value is None or _is_cost(value)


def dump_usage(usage: Usage) -> dict[str, object]:
    """``usage`` as a JSON object; the cost is a decimal string (exact), or null.

    Every place that stores a :class:`Usage` (durable records, the session log) writes it
    with this, and reads it back with :func:`load_usage`.
    """
    cost = usage.cost
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cached_input_tokens": usage.cached_input_tokens,
        "reasoning_tokens": usage.reasoning_tokens,
        "cache_write_tokens": usage.cache_write_tokens,
        "cost": None if cost is None else str(cost),
    }


def load_usage(data: Mapping[str, object]) -> Usage:
    """The :class:`Usage` of :func:`dump_usage`'s object; one written before costs has none.

    Raises:
        InvalidMessageError: A field is missing or of the wrong type.
    """
    try:
        cost = data.get("cost")
        return Usage(
            input_tokens=data["input_tokens"],  # type: ignore[arg-type]
            output_tokens=data["output_tokens"],  # type: ignore[arg-type]
            cached_input_tokens=data.get("cached_input_tokens", 0),  # type: ignore[arg-type]
            reasoning_tokens=data.get("reasoning_tokens", 0),  # type: ignore[arg-type]
            cache_write_tokens=data.get("cache_write_tokens", 0),  # type: ignore[arg-type]
            cost=None if cost is None else Decimal(cost),  # type: ignore[arg-type]
        )
    except (KeyError, TypeError, ArithmeticError, AttributeError) as exc:
        raise InvalidMessageError(f"a usage record cannot be read: {exc!r}") from exc


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class SystemMessage:
    """Instructions for the model."""

    role: ClassVar[Literal["system"]] = "system"
    content: str
    id: str = field(default_factory=_message_id)

    def __post_init__(self) -> None:
        if not (isinstance(self.content, str) and isinstance(self.id, str) and self.id != ""):
            raise _refuse(self, (("content", _is_str, _STR), ("id", _is_id, _ID)))


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class UserMessage:
    """What the user said: text, or a sequence of text and image parts."""

    role: ClassVar[Literal["user"]] = "user"
    content: str | tuple[ContentPart, ...]
    id: str = field(default_factory=_message_id)

    def __post_init__(self) -> None:
        if not (
            (isinstance(self.content, str) or _is_user_content(self.content))
            and isinstance(self.id, str)
            and self.id != ""
        ):
            raise _refuse(self, _USER_RULES)
        if not isinstance(self.content, str):
            _as_tuple(self, "content")

    @property
    def text(self) -> str:
        """The text of the message, parts joined by newlines, images left out."""
        if isinstance(self.content, str):
            return self.content
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class AssistantMessage:
    """What the model answered: text, tool calls, or both."""

    role: ClassVar[Literal["assistant"]] = "assistant"
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    id: str = field(default_factory=_message_id)

    def __post_init__(self) -> None:
        if not (
            isinstance(self.content, str)
            and (
                (type(self.tool_calls) is tuple and not self.tool_calls)
                or _is_tool_calls(self.tool_calls)
            )
            and isinstance(self.id, str)
            and self.id != ""
        ):
            raise _refuse(self, _ASSISTANT_RULES)
        if type(self.tool_calls) is not tuple:
            _as_tuple(self, "tool_calls")


@slot_init
@dataclass(frozen=True, slots=True, kw_only=True)
class ToolMessage:
    """The result of one tool call, as the model will see it.

    Attributes:
        tool_call_id: The id of the call this answers.
        tool_name: The tool that was called.
        content: The result serialised to text, or the error message.
        is_error: Whether the call failed.
    """

    role: ClassVar[Literal["tool"]] = "tool"
    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    id: str = field(default_factory=_message_id)

    def __post_init__(self) -> None:
        if not (
            isinstance(self.tool_call_id, str)
            and isinstance(self.tool_name, str)
            and isinstance(self.content, str)
            and isinstance(self.is_error, bool)
            and isinstance(self.id, str)
            and self.id != ""
        ):
            raise _refuse(self, _TOOL_RULES)


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage
"""Any message of a conversation; ``message.role`` tells which it is."""

_USER_RULES: tuple[_Rule, ...] = (
    ("content", _is_user_content, "a str or a tuple of TextPart / ImagePart"),
    ("id", _is_id, _ID),
)
_ASSISTANT_RULES: tuple[_Rule, ...] = (
    ("content", _is_str, _STR),
    ("tool_calls", _is_tool_calls, "a tuple of ToolCall"),
    ("id", _is_id, _ID),
)
_TOOL_RULES: tuple[_Rule, ...] = (
    ("tool_call_id", _is_str, _STR),
    ("tool_name", _is_str, _STR),
    ("content", _is_str, _STR),
    ("is_error", _is_bool, "a bool"),
    ("id", _is_id, _ID),
)

# --- made on the loop's hot path -----------------------------------------------------------
# A frozen dataclass's __init__ writes every field with object.__setattr__ and then checks
# them; the loop makes two messages per iteration from fields whose types it knows (or checks
# here in one expression), so it makes them with frozen_maker (no checks, plain stores).

_tool_message = frozen_maker(ToolMessage)
_assistant_message = frozen_maker(AssistantMessage)
_user_message = frozen_maker(UserMessage)


def tool_result(call: ToolCall, content: str, *, is_error: bool = False) -> ToolMessage:
    """The tool message that answers ``call`` (a checked ``ToolCall``) with ``content``.

    The same as ``ToolMessage(tool_call_id=call.id, tool_name=call.name, content=content,
    is_error=is_error)``, made without the checks; ``content`` must be a str and ``is_error``
    a bool (the loop's are).
    """
    return _tool_message(call.id, call.name, content, is_error, _message_id())


def assistant_message(content: object, tool_calls: object) -> AssistantMessage:
    """``AssistantMessage(content=content, tool_calls=tool_calls)``, checked alike.

    What a model answered comes in unchecked: fields of the right types are written
    without the constructor, anything else goes through it, which refuses it.
    """
    if type(content) is str and type(tool_calls) is tuple and _all_of(tool_calls, ToolCall):
        return _assistant_message(content, tool_calls, _message_id())
    return AssistantMessage(content=content, tool_calls=tool_calls)  # type: ignore[arg-type]


_CLASSES: dict[str, type[Message]] = {
    "system": SystemMessage,
    "user": UserMessage,
    "assistant": AssistantMessage,
    "tool": ToolMessage,
}
_ADAPTERS: dict[str, pydantic.TypeAdapter[Any]] = {
    role: pydantic.TypeAdapter(cls) for role, cls in _CLASSES.items()
}
_FIELDS: dict[str, frozenset[str]] = {
    role: frozenset(f.name for f in dataclasses.fields(cls)) for role, cls in _CLASSES.items()
}
_CALL_FIELDS = frozenset(f.name for f in dataclasses.fields(ToolCall))
_PART_ADAPTERS: dict[str, pydantic.TypeAdapter[Any]] = {
    "text": pydantic.TypeAdapter(TextPart),
    "image": pydantic.TypeAdapter(ImagePart),
}
_PART_FIELDS = {
    "text": frozenset(f.name for f in dataclasses.fields(TextPart)),
    "image": frozenset(f.name for f in dataclasses.fields(ImagePart)),
}


def dump_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Turn messages into plain JSON-ready dicts, each with its ``role``."""
    out: list[dict[str, Any]] = []
    for message in messages:
        data = _ADAPTERS[message.role].dump_python(message, mode="json")
        out.append({"role": message.role, **data})
    return out


def load_messages(data: object) -> list[Message]:
    """Build messages from dicts made by :func:`dump_messages`.

    Raises:
        InvalidMessageError: An item is not a message, names an unknown role, or has fields
            of the wrong type. The message names the item's position.
    """
    if isinstance(data, (str, bytes)) or not isinstance(data, Sequence):
        raise InvalidMessageError(f"expected a list of messages, got {type(data).__name__}")
    out: list[Message] = []
    for index, item in enumerate(data):
        if not isinstance(item, Mapping):
            raise InvalidMessageError(f"message {index}: expected an object, got {_short(item)}")
        fields = dict(item)
        role = fields.pop("role", None)
        adapter = _ADAPTERS.get(role) if isinstance(role, str) else None
        if adapter is None:
            raise InvalidMessageError(
                f"message {index}: unknown role {role!r}; expected one of {sorted(_ADAPTERS)}"
            )
        _reject_unknown(index, role, fields, _FIELDS[role])
        if role == "assistant" and isinstance(fields.get("tool_calls"), list):
            for call in fields["tool_calls"]:
                if isinstance(call, Mapping):
                    _reject_unknown(index, "tool call", call, _CALL_FIELDS)
        if role == "user" and isinstance(fields.get("content"), list):
            fields["content"] = tuple(_load_part(index, p) for p in fields["content"])
        try:
            out.append(adapter.validate_python(fields))
        except pydantic.ValidationError as exc:
            raise InvalidMessageError(f"message {index} ({role}): {_describe(exc)}") from exc
        except RecursionError:
            raise InvalidMessageError(f"message {index} ({role}): nested too deeply") from None
    return out


def _reject_unknown(
    index: int, what: str, fields: Mapping[str, Any], known: frozenset[str]
) -> None:
    unknown = fields.keys() - known
    if unknown:
        raise InvalidMessageError(f"message {index} ({what}): unknown fields {sorted(unknown)}")


def _load_part(index: int, part: object) -> ContentPart:
    kind = part.get("type") if isinstance(part, Mapping) else None
    adapter = _PART_ADAPTERS.get(kind) if isinstance(kind, str) else None
    if adapter is None or not isinstance(part, Mapping):
        raise InvalidMessageError(f"message {index}: unknown content part {_short(part)}")
    _reject_unknown(index, f"{kind} part", part, _PART_FIELDS[str(kind)])
    try:
        result: ContentPart = adapter.validate_python(part)
    except pydantic.ValidationError as exc:
        raise InvalidMessageError(f"message {index}: bad content part: {_describe(exc)}") from exc
    return result


def messages_to_json(messages: Iterable[Message]) -> str:
    """Serialise messages to a JSON array."""
    return json.dumps(dump_messages(messages), ensure_ascii=False)


def messages_from_json(text: str | bytes) -> list[Message]:
    """Load messages from a JSON array made by :func:`messages_to_json`.

    Raises:
        InvalidMessageError: The text is not JSON or does not hold valid messages.
    """
    if not isinstance(text, (str, bytes, bytearray)):
        raise InvalidMessageError(f"messages JSON must be str or bytes, got {type(text).__name__}")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidMessageError(f"messages JSON is not valid JSON: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise InvalidMessageError(f"messages JSON is not valid UTF-8: {exc}") from None
    except RecursionError:  # nesting deeper than any message: refuse, do not crash
        raise InvalidMessageError("messages JSON is nested too deeply to be messages") from None
    return load_messages(data)


def _describe(exc: pydantic.ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in exc.errors()
    )


# --- the rules of a message entering a conversation ----------------------------------------

CONVERSATION_ROLES = "a UserMessage, AssistantMessage or ToolMessage"
"""How an error names the messages a conversation holds."""

UserInput: TypeAlias = str | UserMessage | Sequence[ContentPart]
"""What ``chat()`` takes as the user's message."""


def check_message(message: object) -> None:
    """Raise InvalidMessageError unless the message may enter the conversation.

    The rules of :meth:`ChatHistory.add_message`, also applied to what ``chat()`` is given.
    """
    if isinstance(message, SystemMessage):
        raise InvalidMessageError(
            "a system message cannot be added to the conversation; use add_system_prompt()"
        )
    if isinstance(message, UserMessage):
        content = message.content
        if isinstance(content, str):
            if not content.strip():
                raise InvalidMessageError("the user message is empty")
            return
        if not isinstance(content, tuple) or not all(
            isinstance(p, (TextPart, ImagePart)) for p in content
        ):
            raise InvalidMessageError(
                "a user message's content must be a str or a tuple of TextPart / ImagePart"
            )
        if not any(isinstance(p, ImagePart) or p.text.strip() for p in content):
            raise InvalidMessageError("the user message has no text and no image")
        return
    if isinstance(message, AssistantMessage):
        if not isinstance(message.content, str):
            raise InvalidMessageError("an assistant message's content must be a str")
        if not message.content.strip() and not message.tool_calls:
            raise InvalidMessageError("the assistant message has no text and no tool calls")
        return
    if isinstance(message, ToolMessage):
        # An empty result is allowed: a tool may legitimately return nothing.
        if not isinstance(message.content, str):
            raise InvalidMessageError("a tool message's content must be a str")
        if not message.tool_call_id:
            raise InvalidMessageError("the tool message does not say which call it answers")
        return
    raise InvalidMessageError(
        f"invalid role: expected {CONVERSATION_ROLES}, got {type(message).__name__} "
        f"(role {getattr(message, 'role', None)!r})"
    )


def user_message(message: UserInput) -> UserMessage:
    """The user message a chat is given, whatever form it comes in, checked.

    It passes :func:`check_message`'s rules: ``chat("")`` and ``chat(UserMessage(content=""))``
    are refused alike.

    Raises:
        InvalidMessageError: Not a non-empty str, a user message or a sequence of parts.
    """
    if isinstance(message, UserMessage):
        check_message(message)
        return message
    if type(message) is str:  # every chat's: made without the constructor, checked alike
        if not message.strip():
            raise InvalidMessageError("the user message is empty")
        return _user_message(message, _message_id())
    if isinstance(message, str):
        message = UserMessage(content=message)
        check_message(message)
        return message
    if isinstance(message, Sequence) and message:
        message = UserMessage(content=tuple(_content_part(part) for part in message))
        check_message(message)
        return message
    raise InvalidMessageError(
        f"a user message must be a non-empty str, a UserMessage or a sequence of parts, "
        f"got {type(message).__name__}"
    )


def _content_part(part: object) -> ContentPart:
    if isinstance(part, (TextPart, ImagePart)):
        return part
    raise InvalidMessageError(
        f"a user message part must be TextPart or ImagePart, got {type(part).__name__}"
    )
