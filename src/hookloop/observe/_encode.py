"""Any hook context as JSON text, with each message, request and tool definition written once.

One walker serves every event: messages take the session codec's JSON form
(:func:`~hookloop.sessions.dump_messages`), dataclasses become objects of their fields, a model its
name and window, an exception its type and text, anything else what pydantic makes of it (or
its ``repr``). So an event added to the table later is recorded without a change here.

**Written once** (since format 2 of the trace). The first time a message, a request, a model's
answer or a tool definition is written it carries an ``"$id"`` (``"m7"``, ``"r3"``,
``"a3"``, ``"t1"``: a kind and a number, counted per kind); wherever the same object comes
again it is ``{"$ref": "m7"}``, and consecutive references in a list are one run,
``{"$refs": ["m0", "m41"]}`` (m0 to m41). So a request that resends the whole conversation
adds a few bytes, not the conversation, and a trace grows with the chat, not with its
square. A long text (a tool's result, which is also its tool message's content) is written
once too: ``{"$id": "s3", "$value": "..."}``, then ``{"$ref": "s3"}``. A key of the
recorded data that starts with ``$`` is written with one more (``"$$ref"``), so no data is
read as a reference.

**Text.** Strings are written as JSON does, with U+2028, U+2029 and U+0085 escaped (readers
that split lines on them still read one record per line) and, in a string holding a lone
surrogate (half of an emoji a stream split), every non-ASCII character escaped: the line is
always valid UTF-8. Without content capture, a string is kept only under a key that names
something rather than says something (a role, an id, a tool's name, a model) or in a field
that names one of a few values (a trim's reason, a wait's reason: an error type); any other
string becomes ``{"chars": n}``: its length, not its text. Unknown fields are thus left out
by default.
"""

from __future__ import annotations

import dataclasses
import json
import math
import operator
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from operator import is_
from typing import Any, Final, TypeAlias

import pydantic_core

from .._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    dump_messages,
)
from .._tools import Tool, exception_text
from ..context._tokens import TokenCounter, count_overhead, counter_for_model
from ..hooks import BackoffWaitContext, TrimContext
from ..models._base import (
    Model,
    ModelSettings,
    ProviderRequest,
    ProviderResponse,
    ToolDefinition,
)

__all__ = ["IDENTIFYING_KEYS", "LONG_TEXT", "Encoder", "json_string"]

_MESSAGES: Final = (UserMessage, AssistantMessage, ToolMessage, SystemMessage)

IDENTIFYING_KEYS: Final = frozenset(
    {
        "action",
        "agent_name",
        "call_id",
        "class",
        "error_type",
        "event",
        "finish_reason",
        "id",
        "memory_type",
        "model",
        "name",
        "new_session_id",
        "parent_session_id",
        "path",
        "previous_session_id",
        "role",
        "session_id",
        "source",
        "strategy",
        "tier",
        "tool_call_id",
        "tool_choice",
        "tool_name",
        "type",
    }
)
"""Keys whose string values are kept without content capture: they name, not say."""

_NAMING_FIELDS: Final[Mapping[type, frozenset[str]]] = {
    TrimContext: frozenset({"reason"}),  # "window" or "overflow"
    BackoffWaitContext: frozenset({"reason"}),  # the failed attempt's error type
}
"""Context fields that name one of a few values, kept without content capture too."""

_RECENT_REQUESTS: Final = 16
"""Requests and answers remembered for references: one model call's records name them a few
times, and a request holds its whole conversation, so only the latest few are kept."""

_encode_basestring: Callable[[str], str] = json.encoder.encode_basestring
_encode_ascii: Callable[[str], str] = json.encoder.encode_basestring_ascii
_SEPARATORS: Final = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


def json_string(text: str) -> str:
    r"""``text`` as a JSON string that is valid UTF-8 and holds no line separator.

    Example:
        >>> print(json_string("a\u2028b"))
        "a\u2028b"
    """
    out = _encode_basestring(text)
    if out.isascii():
        return out
    try:
        out.encode()
    except UnicodeEncodeError:  # a lone surrogate: escape everything that is not ASCII
        return _encode_ascii(text)
    return out.translate(_SEPARATORS)


def _key(name: str) -> str:
    """A key of recorded data as JSON; a ``$`` at its start is doubled (see the module)."""
    return json_string("$" + name if name.startswith("$") else name)


class Encoder:
    """Turns context values into JSON text, writing each message, request and tool once.

    One encoder serves one trace: the references it writes point at what it wrote before.

    Args:
        content: Keep the conversation's text (messages, tool arguments and results,
            prompts); without it, such strings become ``{"chars": n}``.
        error_text: Keep errors' texts (an exception's message, a provider's error body),
            which can quote the conversation; without it they become ``{"chars": n}`` and an
            error is its type and its figures.
    """

    __slots__ = (
        "_by_type",
        "_conversation_state",
        "_counters",
        "_known",
        "_messages",
        "_names",
        "_numbers",
        "_overhead",
        "_plans",
        "_recent",
        "_request_texts",
        "_sums",
        "_texts",
        "_versions",
        "_writers",
        "content",
        "error_text",
    )

    def __init__(self, *, content: bool, error_text: bool = True) -> None:
        self.content = content
        self.error_text = error_text
        self._counters: dict[str, TokenCounter] = {}
        self._numbers = {"m": 0, "r": 0, "a": 0, "t": 0, "s": 0}
        # id(object) -> (object, reference): held, so that an id is never reused meanwhile.
        # id(object) -> (object, kind, number, the reference to it as JSON).
        self._known: dict[int, _Entry] = {}
        self._recent: dict[int, _Entry] = {}  # requests, the latest few
        # An equal object made anew (a message read back from a store): by message id.
        self._versions: dict[str, list[_Entry]] = {}
        self._messages: list[Message] = []  # by number
        self._sums: dict[str, list[int]] = {}  # per model: tokens of messages 0..n-1
        self._plans = _PLANS  # a type's plan is the same in every trace: made once
        self._writers = _WRITERS[content]  # see _writer
        self._conversation_state: (
            tuple[
                tuple[Message, ...],
                tuple[str, ...],
                tuple[tuple[int, int], ...],
                tuple[str, int, int],
            ]
            | None
        ) = None  # see _conversation
        self._overhead: tuple[object, str | None, object, int] | None = None  # see _tokens
        self._request_texts: tuple[tuple[object, ...], str, str] | None = None  # see _request
        self._names: dict[int, tuple[object, object, object, str]] = {}  # see _naming
        self._texts: dict[int, tuple[object, str]] = {}  # see _remembered
        self._by_type: dict[type, Callable[[Any, str], str]] = {
            type(None): lambda value, key: "null",
            bool: _boolean,
            int: _integer,
            float: lambda value, key: _float(value),
            Decimal: lambda value, key: _decimal(value),
            tuple: self._sequence,
            list: self._sequence,
            dict: lambda value, key: self._mapping(value),
            ToolCall: self._remembering(self._call),
            ModelSettings: self._remembering(self._fields),
            ProviderRequest: self._interning("r", self._request),
            ProviderResponse: self._interning("a", self._fields),
            ToolDefinition: self._interning("t", self._fields),
        }
        message = self._interning("m", self._message)
        for kind in _MESSAGES:
            self._by_type[kind] = message

    # -- contexts ------------------------------------------------------------------------

    def context(self, ctx: object) -> str:
        """A hook context's fields, by name, as a JSON object."""
        write = self._writers.get(type(ctx)) or self._writer(type(ctx))
        return write(self, ctx)

    def changes(self, ctx: object, names: list[str]) -> str:
        """``{"changed": [names], name: value, ...}``: the fields handlers changed."""
        if not names:
            return '{"changed":[]}'
        listed = ",".join(json_string(name) for name in sorted(names))
        fields = tuple(p[0] for p in self._plans.get(type(ctx)) or self._plan(type(ctx)))
        chosen = tuple(name for name in fields if name in names)
        if not chosen:
            return f'{{"changed":[{listed}]}}'
        write = self._writers.get((type(ctx), chosen)) or self._writer(type(ctx), chosen)
        return write(self, ctx, f'"changed":[{listed}],')

    def _writer(self, cls: type, chosen: tuple[str, ...] | None = None) -> _Writer:
        """A function writing a ``cls`` object's fields (or the ``chosen`` ones) as JSON.

        ``write(encoder, obj, head="")`` returns the object, ``head`` (JSON text of keys and
        values, each followed by a comma) written first inside its braces: a reference's
        ``"$id"``, a message's role.

        Made for ``cls`` once per process (and content setting), as ``dataclasses`` makes an
        ``__init__``: a record is mostly a context's fields, and a function that reads each
        by name and writes the object in one string costs about three quarters of a loop
        over the fields (bench/observe.py). None and an int are written inline, a value the
        encoder's table knows (a reference, a name) in one call, a string in two. A hook
        context's fixed field is read from its private slot (``hooks/_contexts.py``), without
        the read-only property's call.
        """
        plan = self._plans.get(cls) or self._plan(cls)
        slots = set(getattr(cls, "__slots__", ())) if hasattr(cls, "__settable__") else set()
        # (The class's name is set on the function after, never written into its source.)
        # A field's value: None, an int, a bool, an empty list and a short string of ASCII
        # are written here; anything else by the encoder's table or by _said / value.
        lines = ["def write(self, obj, head=''):", "    by_type = self._by_type"]
        texts = []
        for i, (name, key, naming) in enumerate(plan):
            if chosen is not None and name not in chosen:
                continue
            attribute = f"_{name}" if f"_{name}" in slots else name
            kept = naming or self.content or name in IDENTIFYING_KEYS
            text = (
                "(s if (s := _basestring(x)).isascii() else _json_string(x))"
                f" if len(x) < {LONG_TEXT} else _said(self, x, {name!r})"
                if kept
                else """f'{{"chars":{len(x)}}}'"""
            )
            lines += [
                f"    x = obj.{attribute}",
                f"    if x is None: f{i} = 'null'",
                f"    elif (k := type(x)) is int: f{i} = x",
                f"    elif k is str: f{i} = {text}",
                f"    elif k is bool: f{i} = 'true' if x else 'false'",
                f"    elif (k is tuple or k is list) and not x: f{i} = '[]'",
                f"    elif (e := by_type.get(k)) is not None: f{i} = e(x, {name!r})",
                f"    else: f{i} = {'_said' if kept else '_value'}(self, x, {name!r})",
            ]
            texts.append(f"{key}:{{f{i}}}")  # (a key is a field's name: no braces)
        fields = ",".join(texts)
        lines.append("    return f'{{{head}" + fields + "}}'")
        scope: dict[str, Any] = {
            "_said": Encoder._said,
            "_value": Encoder.value,
            "_basestring": _encode_basestring,
            "_json_string": json_string,
        }
        exec("\n".join(lines), scope)
        write: _Writer = scope["write"]
        write.__qualname__ = f"{type(self).__qualname__}.write[{cls.__qualname__}]"
        self._writers[cls if chosen is None else (cls, chosen)] = write
        return write

    def _said(self, field: object, name: str) -> str:
        """A value whose text is kept, of a type the encoder's table has no entry for."""
        if type(field) is str and len(field) < LONG_TEXT:
            return json_string(field)
        return self.value(field, name)

    def _plan(self, cls: type) -> tuple[tuple[str, str, bool], ...]:
        naming = _NAMING_FIELDS.get(cls, frozenset())
        plan = tuple((f.name, _key(f.name), f.name in naming) for f in dataclasses.fields(cls))
        self._plans[cls] = plan
        return plan

    # -- values --------------------------------------------------------------------------

    def value(self, value: object, key: str = "") -> str:
        """``value`` as JSON text; ``key`` is the field or key it sits under."""
        kind = type(value)
        if kind is str:
            return self.text(value, key)  # type: ignore[arg-type]
        encode = self._by_type.get(kind)
        if encode is None:
            encode = self._by_type[kind] = self._encoder_of(kind)
        return encode(value, key)

    def _encoder_of(self, kind: type) -> Callable[[Any, str], str]:
        """How values of ``kind`` are written: decided once per type."""
        if issubclass(kind, bool):
            return _boolean
        if issubclass(kind, int):
            return _integer
        if issubclass(kind, float):
            return lambda value, key: _float(float(value))
        if issubclass(kind, str):
            return lambda value, key: self.text(str(value), key)
        if issubclass(kind, BaseException):
            return lambda value, key: self._error(value)
        if issubclass(kind, Model):
            return self._naming(self._model)
        if issubclass(kind, Tool):  # its definition is in the request; here, which one
            return self._naming(_tool)
        if dataclasses.is_dataclass(kind):
            return lambda value, key: self._fields(value)
        if issubclass(kind, Mapping):
            return lambda value, key: self._mapping(value)
        if issubclass(kind, (list, tuple, set, frozenset)):
            return lambda value, key: self._sequence(list(value), key)
        return self._naming(_named, unknown=True)

    def _naming(
        self, make: Callable[[Any], str], *, unknown: bool = False
    ) -> Callable[[Any, str], str]:
        """How a model, a tool or a scope is written: by its name, made again when it changes.

        ``unknown``: a type nothing else fits; a value of it with a ``name`` (a scope, a
        toolset) is written so, any other as pydantic makes it.
        """
        names = self._names

        def encode(value: Any, key: str) -> str:
            name = getattr(value, "name", None)
            window = getattr(value, "context_window", None)
            known = names.get(id(value))
            if known is not None and known[1] == name and known[2] == window and known[0] is value:
                return known[3]
            if unknown and not isinstance(name, str):
                return self.value(_jsonable(value), key)
            text = make(value)
            names[id(value)] = (value, name, window, text)
            return text

        return encode

    def _model(self, model: Model) -> str:
        return (
            f'{{"class":{json_string(type(model).__name__)},'
            f'"name":{json_string(model.name)},"window":{self.value(model.context_window)}}}'
        )

    def text(self, text: str, key: str) -> str:
        """A string, or its length when it is content that is not captured.

        A long text is written once: a tool's result is also its tool message's content,
        an answer also the chat's answer.
        """
        if self.content or key in IDENTIFYING_KEYS:
            if len(text) < LONG_TEXT:
                return json_string(text)
            return self._interned(text, "s", _text_value)
        return f'{{"chars":{len(text)}}}'

    def _mapping(self, value: Mapping[Any, Any]) -> str:
        parts = []
        for k, v in value.items():
            name = str(k)
            parts.append(f"{_key(name)}:{self.value(v, name)}")
        return "{" + ",".join(parts) + "}"

    def _fields(self, value: object, head: str = "") -> str:
        write = self._writers.get(type(value)) or self._writer(type(value))
        return write(self, value, head)

    def _error(self, error: BaseException) -> str:
        # The type always: a failure must be readable in any trace. The text unless errors'
        # texts are left out: it can quote the conversation (a tool's arguments).
        text = exception_text(error)
        said = json_string(text) if self.error_text else f'{{"chars":{len(text)}}}'
        parts = [f'"error_type":{json_string(type(error).__name__)}', f'"text":{said}']
        capture = self.content and self.error_text
        for name, field in vars(error).items():
            if name.startswith("_") or name in ("message", "args") or not _scalar(field):
                continue
            if isinstance(field, str) and not capture and name not in IDENTIFYING_KEYS:
                parts.append(f'{_key(name)}:{{"chars":{len(field)}}}')
            else:
                parts.append(f"{_key(name)}:{self.value(field, name)}")
        return "{" + ",".join(parts) + "}"

    # -- written once --------------------------------------------------------------------

    def _interning(self, kind: str, body: Callable[[Any, str], str]) -> Callable[[Any, str], str]:
        """How a value of ``kind`` is written: a reference when it was written before.

        The usual case (the same object again) is answered here, in one call.
        """
        known, recent, once = self._known, self._recent, self._once

        def encode(value: object, key: str) -> str:
            entry = known.get(id(value)) or recent.get(id(value))
            if entry is not None and entry[0] is value:
                return entry[3]
            return once(value, kind, body)

        return encode

    def _interned(self, value: object, kind: str, body: Callable[[Any, str], str]) -> str:
        entry = self._known.get(id(value)) or self._recent.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[3]
        return self._once(value, kind, body)

    def _once(self, value: object, kind: str, body: Callable[[Any, str], str]) -> str:
        """``value``, not written before as itself: a reference to an equal one, or in full."""
        version = None
        if kind in _BY_VERSION:
            version = _version_key(value)
            for earlier, _, _, ref in self._versions.get(version, ()):
                if earlier == value:
                    return ref
        number = self._numbers[kind]
        self._numbers[kind] = number + 1
        entry = (value, kind, number, f'{{"$ref":"{kind}{number}"}}')
        if kind in _RECENT_KINDS:
            recent = self._recent
            if len(recent) >= _RECENT_REQUESTS:
                del recent[next(iter(recent))]
            recent[id(value)] = entry
        else:
            self._known[id(value)] = entry
            if kind == "m":
                self._messages.append(value)  # type: ignore[arg-type]
            if version is not None:  # (a text is found by itself only, never by an equal one)
                self._versions.setdefault(version, []).append(entry)
        return body(value, f'"$id":"{kind}{number}",')

    def _reference(self, value: object) -> tuple[str, int] | None:
        """The kind and number of ``value`` when it was written before (itself, or its equal)."""
        entry = self._known.get(id(value)) or self._recent.get(id(value))
        if entry is not None and entry[0] is value:
            return entry[1], entry[2]
        if type(value) in _BY_IDENTITY:
            return None
        for earlier, kind, number, _ in self._versions.get(_version_key(value), ()):
            if earlier == value:
                return kind, number
        return None

    def _sequence(
        self,
        items: tuple[Any, ...] | list[Any],
        key: str,
        spans: list[tuple[int, int]] | None = None,
    ) -> str:
        """A list; consecutive references to written objects become one run.

        ``spans``, when given, gets the message numbers the list holds, as runs.
        """
        if key == "messages" and spans is None and items and type(items[0]) in _MESSAGES:
            # A chat's messages (its answer's, say) usually start with the last request's.
            return self._conversation(items, [])
        if not items:
            return "[]"
        parts: list[str] = []
        run, first, last, _ = self._gather(items, key, spans, parts, ("", 0, 0))
        if run:
            parts.append(_run(run, first, last, spans))
        return "[" + ",".join(parts) + "]"

    def _gather(
        self,
        items: Sequence[Any],
        key: str,
        spans: list[tuple[int, int]] | None,
        parts: list[str],
        open_run: tuple[str, int, int],
    ) -> tuple[str, int, int, bool]:
        """Add ``items`` to ``parts``, consecutive references as runs, from ``open_run``.

        ``open_run`` is the run being gathered (its kind, ``"m"`` or ``"t"``, or ``""``, and
        its first and last numbers); returns the one open at the end, and whether every item
        was a reference.
        """
        run, first, last = open_run
        whole = True
        for item in items:
            found = self._reference(item) if type(item) in _INTERNED else None
            if found is not None:
                kind, number = found
                if kind == run and number == last + 1:
                    last = number
                    continue
                if run:
                    parts.append(_run(run, first, last, spans))
                run, first, last = kind, number, number
                continue
            whole = False
            if run:
                parts.append(_run(run, first, last, spans))
                run = ""
            parts.append(self.value(item, key))
            if spans is not None and type(item) in _MESSAGES:
                number = self._numbers["m"] - 1  # it was just written: the latest message
                spans.append((number, number))
        return run, first, last, whole

    def _conversation(self, messages: Sequence[Message], spans: list[tuple[int, int]]) -> str:
        """A request's messages, as :meth:`_sequence` writes them, and their ``spans``.

        A request usually resends the previous one's messages and a few more: when the
        previous list (all of it written before, so all references) starts this one, its
        runs are taken as they were and only the messages after it are looked at.
        """
        items = tuple(messages)
        known = self._conversation_state
        parts: list[str] = []
        open_run, at = ("", 0, 0), 0
        if known is not None and len(items) >= len(known[0]) and items[: len(known[0])] == known[0]:
            parts = list(known[1])
            spans.extend(known[2])
            open_run, at = known[3], len(known[0])
        run, first, last, whole = self._gather(items[at:], "messages", spans, parts, open_run)
        # Kept only when every message was a reference: one written here in full would be
        # written again by the next request that took these parts.
        self._conversation_state = (
            (items, tuple(parts), tuple(spans), (run, first, last)) if whole else None
        )
        if run:
            parts.append(_run(run, first, last, spans))
        return "[" + ",".join(parts) + "]"

    def _remembering(self, make: Callable[[Any], str]) -> Callable[[Any, str], str]:
        """How a frozen value is written: its text, made once while it is among the latest few."""
        texts, remembered = self._texts, self._remembered

        def encode(value: object, key: str) -> str:
            known = texts.get(id(value))
            if known is not None and known[0] is value:
                return known[1]
            return remembered(value, make)

        return encode

    def _remembered(self, value: object, make: Callable[[Any], str]) -> str:
        """The text of a frozen value, made now (see :meth:`_remembering`), and kept."""
        text = make(value)
        texts = self._texts
        if len(texts) >= _RECENT_TEXTS:
            del texts[next(iter(texts))]
        texts[id(value)] = (value, text)
        return text

    def _call(self, call: ToolCall) -> str:
        return (
            f'{{"name":{self.text(call.name, "name")},"id":{self.text(call.id, "id")},'
            f'"arguments":{self.text(call.arguments, "arguments")}}}'
        )

    def _message(self, message: Any, head: str) -> str:
        # The session codec's form (dump_messages): the role, then the fields in order. A
        # message of text is written from its fields directly, as that form has them.
        if type(message.content) is str:
            write = self._writers.get(type(message)) or self._writer(type(message))
            return write(self, message, f'{head}"role":{json_string(message.role)},')
        return "{" + head + self._mapping(dump_messages((message,))[0])[1:]

    def _request(self, request: ProviderRequest, head: str) -> str:
        """A request's fields, its messages as :meth:`_conversation` writes them, its tokens.

        The fields around the messages (model, system prompt, tools, settings) are usually
        those of the previous request: their text is made again only when one changed.
        """
        spans: list[tuple[int, int]] = []
        messages = self._conversation(request.messages, spans)
        values = _REQUEST_FIELDS(request)
        known = self._request_texts
        if known is not None and _same_values(known[0], values):
            fields, tail = known[1], known[2]
        else:
            texts = [
                f"{key}:{self.value(value, name)}"
                for name, key, value in zip(_REQUEST_NAMES, _REQUEST_KEYS, values, strict=True)
            ]
            fields = ",".join(texts[:_MESSAGES_AT])
            tail = ",".join(texts[_MESSAGES_AT:])
            # Kept only without a definition: the next request refers to what this one wrote.
            self._request_texts = None if '"$id"' in fields + tail else (values, fields, tail)
        tokens = self._tokens(request, spans)
        return f'{{{head}{fields},"messages":{messages},{tail},"tokens":{tokens}}}'

    def _tokens(self, request: ProviderRequest, spans: list[tuple[int, int]]) -> int:
        """The request's size in tokens, as the context policies count it.

        Each message is counted once (per model's counter): a run of messages costs a
        subtraction, so a long chat's requests are counted in time linear in the chat.
        """
        counter = self._counters.get(request.model)
        if counter is None:
            counter = self._counters[request.model] = counter_for_model(request.model)
        sums = self._sums.setdefault(request.model, [0])
        # The system prompt and the tools rarely change in a chat: counted again when they do.
        known = self._overhead
        if (
            known is not None
            and known[0] is counter
            and known[1] is request.system
            and known[2] == request.tools
        ):
            total = known[3]
        else:
            total = count_overhead(request, counter=counter)
            self._overhead = (counter, request.system, request.tools, total)
        messages = self._messages
        for first, last in spans:
            while len(sums) <= last + 1:
                sums.append(sums[-1] + counter.count_message(messages[len(sums) - 1]))
            total += sums[last + 1] - sums[first]
        return total


_Entry: TypeAlias = tuple[object, str, int, str]
_Writer: TypeAlias = Callable[..., str]
"""A dataclass's writer: ``write(encoder, obj, head="")`` (see Encoder._writer)."""
_PLANS: Final[dict[type, tuple[tuple[str, str, bool], ...]]] = {}
_WRITERS: Final[dict[bool, dict[object, _Writer]]] = {True: {}, False: {}}
"""Each dataclass's writer (Encoder._writer), by content setting and type (and the fields of
an ``after`` record's changes: ``(type, names)``)."""
"""Each dataclass's fields as the encoder writes them (name, JSON key, naming), by type."""
_REQUEST_NAMES: Final = tuple(
    f.name for f in dataclasses.fields(ProviderRequest) if f.name != "messages"
)
_REQUEST_KEYS: Final = tuple(json_string(name) for name in _REQUEST_NAMES)
_REQUEST_FIELDS: Final = operator.attrgetter(*_REQUEST_NAMES)
"""A request's fields but its messages, as a tuple, in one call (see Encoder._request)."""
_MESSAGES_AT: Final = [f.name for f in dataclasses.fields(ProviderRequest)].index("messages")
_INTERNED: Final = frozenset({*_MESSAGES, ProviderRequest, ToolDefinition})
_RECENT_KINDS: Final = frozenset({"r", "a"})  # requests and answers: remembered briefly
_BY_IDENTITY: Final = frozenset({ProviderRequest, ProviderResponse, str})
_BY_VERSION: Final = frozenset({"m", "t"})  # messages and tool definitions: also by an equal one
_RECENT_TEXTS: Final = 64  # tool calls and settings, whose text _remembered keeps
LONG_TEXT: Final = 256
"""Texts this long or longer are written once (``{"$id": "s3", "$value": text}``)."""


def _same_values(old: tuple[object, ...], new: tuple[object, ...]) -> bool:
    """Whether ``new`` holds the values of ``old``, each the same object (a str: its text).

    Not equal ones: 1 and 1.0, True and 1 compare equal and are written apart. A tuple (a
    request's tools, made anew for each request) is the same when it holds the same objects.
    """
    for a, b in zip(old, new, strict=True):
        if a is b or (type(a) is str and a == b):
            continue
        if type(a) is tuple and type(b) is tuple and len(a) == len(b) and all(map(is_, a, b)):
            continue
        return False
    return True


def _text_value(text: str, head: str) -> str:
    return f'{{{head}"$value":{json_string(text)}}}'


def _boolean(value: object, key: str) -> str:
    return "true" if value else "false"


def _integer(value: object, key: str) -> str:
    return int.__repr__(int(value))  # type: ignore[call-overload]


def _tool(tool: Tool) -> str:
    return f'{{"class":"Tool","name":{json_string(tool.name)}}}'


def _named(value: Any) -> str:
    return f'{{"class":{json_string(type(value).__name__)},"name":{json_string(value.name)}}}'


def _version_key(value: object) -> str:
    if isinstance(value, ToolDefinition):
        return "t:" + value.name
    return "m:" + str(getattr(value, "id", ""))


def _run(kind: str, first: int, last: int, spans: list[tuple[int, int]] | None) -> str:
    if spans is not None and kind == "m":
        spans.append((first, last))
    if first == last:
        return f'{{"$ref":"{kind}{first}"}}'
    return f'{{"$refs":["{kind}{first}","{kind}{last}"]}}'


def _float(value: float) -> str:
    return float.__repr__(value) if math.isfinite(value) else json_string(repr(value))


def _decimal(value: Decimal) -> str:
    """A cost as a JSON number with all its digits (``str`` of a finite Decimal is one)."""
    return str(value) if value.is_finite() else json_string(str(value))


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _jsonable(value: object) -> Any:
    try:
        return pydantic_core.to_jsonable_python(value, fallback=_shown)
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
        return _shown(value)


def _shown(value: object) -> str:
    try:
        return repr(value)
    except Exception:  # a user's __repr__ that raises must not end the chat
        return f"<{type(value).__name__} object>"
