"""A message as a stored row, and back, in the JSON form of ``hookloop.sessions.dump_messages``.

Each row holds one message as the JSON object :func:`~hookloop.sessions.dump_messages` makes,
with the message's id and the version of that form (``MESSAGE_FORMAT``) beside it, so a later
release can read old rows and refuse rows it cannot read.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import cast

from pydantic_core import from_json

from .._errors import CorruptSessionError, InvalidMessageError
from .._messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    dump_messages,
    load_messages,
)
from .._slots import new as _new
from .._slots import slot_setter as _setter
from ._types import StoredMessage

__all__ = [
    "MESSAGE_FORMAT",
    "Row",
    "decode_messages",
    "decode_rows",
    "encode_message",
    "json_text",
]

MESSAGE_FORMAT = 1
"""The version of the stored message form: ``dump_messages``' JSON object of one message."""

# (seq, message id as the row says, format version, the JSON text): the last three as the
# database gave them, which for a corrupt row may be of any type.
Row = tuple[int, object, object, object]


def encode_message(message: Message) -> str:
    """The JSON text stored for ``message`` (see :func:`json_text`)."""
    return json_text(dump_messages((message,))[0])


def json_text(item: object) -> str:
    r"""``item`` as compact JSON text that can always be written as UTF-8.

    Text is kept as it is (UTF-8 in the database, or in a trace file), except when it holds
    surrogate code points, which UTF-8 cannot encode: a model's stream may split an emoji's
    JSON escapes (``\ud83d`` and ``\ude00``) across two chunks. Such an item is written with
    every non-ASCII character escaped (``ensure_ascii``), which any JSON reader takes back; a
    lone surrogate comes back as it was, and a high surrogate followed by a low one comes
    back as the one character the pair stands for (JSON cannot tell the two apart).
    """
    text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return json.dumps(item, separators=(",", ":"))
    return text


def decode_rows(
    session_id: str,
    rows: Sequence[Row],
    unreadable: list[CorruptSessionError] | None = None,
) -> list[StoredMessage]:
    """Decode a session's rows, in the order given.

    With an ``unreadable`` list, a row that cannot be read is left out and its error added
    to the list instead of raised.

    Raises:
        CorruptSessionError: A row is not a message this hookloop can read; names the first
            such row's sequence number.
    """
    messages = _decoded(rows)
    if messages is not None:
        return _records(rows, messages)
    return _decode_each(session_id, rows, unreadable)


def decode_messages(session_id: str, rows: Sequence[Row]) -> list[Message]:
    """The messages of :func:`decode_rows`, without their records (``load()``'s own path).

    Raises:
        CorruptSessionError: As :func:`decode_rows` without ``unreadable``.
    """
    messages = _decoded(rows)
    if messages is not None:
        return messages
    return [record.message for record in _decode_each(session_id, rows, None)]


def _decoded(rows: Sequence[Row]) -> list[Message] | None:
    try:
        return _decode_all(rows)
    except (ValueError, TypeError, RecursionError):
        return None


def _decode_each(
    session_id: str, rows: Sequence[Row], unreadable: list[CorruptSessionError] | None
) -> list[StoredMessage]:
    """Decode the rows one by one, to name the bad ones (the fast path was in doubt)."""
    out: list[StoredMessage] = []
    for row in rows:
        try:
            out.append(StoredMessage(seq=row[0], message=_decode_one(session_id, row)))
        except CorruptSessionError as exc:
            if unreadable is None:
                raise
            unreadable.append(exc)
    return out


def _decode_all(rows: Sequence[Row]) -> list[Message] | None:
    """The fast path: one JSON parse and one validation for all rows; ``None`` on doubt.

    Raises ``ValueError`` or ``TypeError`` (anything but text, mixed ``str`` and ``bytes``)
    when in doubt too; the caller then decodes row by row.
    """
    if not rows:
        return []
    versions = {version for _, _, version, _ in rows}
    # As the database gives it: an int, or text (Redis stores b"1").
    if len(versions) != 1 or _format(versions.pop()) != MESSAGE_FORMAT:
        return None
    # join() raises TypeError for an item of another type than the first: a bad row.
    texts = [data for _, _, _, data in rows]
    if isinstance(texts[0], bytes):
        joined: str | bytes = b"[" + b",".join(cast("list[bytes]", texts)) + b"]"
    else:
        joined = "[" + ",".join(cast("list[str]", texts)) + "]"
    try:
        # pydantic-core's parser, reusing the key strings: 5 ms for 10k rows against 9 ms
        # for json.loads (bench/stores.py, restore_10k_*).
        items = from_json(joined, cache_strings="keys")
    except ValueError:
        items = json.loads(joined)  # it refuses a lone surrogate, which encode_message keeps
    if len(items) != len(rows):
        return None
    messages = _built(items)
    if messages is None:
        messages = load_messages(items)
    ids = [message_id for _, message_id, _, _ in rows]
    if isinstance(ids[0], bytes):
        ids = [i.decode() if isinstance(i, bytes) else i for i in ids]
    if [message.id for message in messages] != ids:
        return None  # rows that only parsed together, or a foreign row
    return messages


# Each field set through its slot, then the class's own checks (__post_init__) run: the
# frozen dataclass __init__ costs twice as much, pydantic four times (bench/stores.py).

_user_content, _user_id = _setter(UserMessage, "content"), _setter(UserMessage, "id")
_system_content, _system_id = _setter(SystemMessage, "content"), _setter(SystemMessage, "id")
_assistant_content = _setter(AssistantMessage, "content")
_assistant_calls = _setter(AssistantMessage, "tool_calls")
_assistant_id = _setter(AssistantMessage, "id")
_call_name, _call_arguments = _setter(ToolCall, "name"), _setter(ToolCall, "arguments")
_call_id = _setter(ToolCall, "id")
_tool_call_id, _tool_name = _setter(ToolMessage, "tool_call_id"), _setter(ToolMessage, "tool_name")
_tool_content, _tool_error = _setter(ToolMessage, "content"), _setter(ToolMessage, "is_error")
_tool_id = _setter(ToolMessage, "id")
_record_seq, _record_message = _setter(StoredMessage, "seq"), _setter(StoredMessage, "message")


def _records(rows: Sequence[Row], messages: list[Message]) -> list[StoredMessage]:
    """Each message with its row's ``seq`` (an int: the stores' own column), set by slot."""
    out: list[StoredMessage] = []
    append = out.append
    for row, message in zip(rows, messages, strict=True):
        record = _new(StoredMessage)
        _record_seq(record, row[0])
        _record_message(record, message)
        append(record)
    return out


def _built(items: object) -> list[Message] | None:
    """Messages built straight from the objects ``dump_messages`` writes; ``None`` on doubt.

    The store's own rows have exactly the fields ``dump_messages`` writes, so each message
    is made from them directly and checked by its class's own checks, without the general
    loader's pydantic pass (bench/stores.py, restore_10k_ms). Anything else (content parts,
    a missing or unknown field, a wrong type) gives ``None`` and goes through
    :func:`load_messages`, which names the problem. Nothing is changed in ``items``.

    An object has exactly a message's fields when it has as many keys as the message has
    fields and every field is found (a ``KeyError`` otherwise): cheaper than comparing key
    sets.
    """
    if not isinstance(items, list):
        return None
    out: list[Message] = []
    append = out.append
    try:
        for item in items:
            if type(item) is not dict:
                return None
            role = item.get("role")
            size = len(item)
            message: Message
            if role == "assistant" and size == 4:
                calls = item["tool_calls"]
                if type(calls) is not list:
                    return None
                built: list[ToolCall] = []
                for data in calls:
                    if type(data) is not dict or len(data) != 3:
                        return None
                    call = _new(ToolCall)
                    _call_name(call, data["name"])
                    _call_arguments(call, data["arguments"])
                    _call_id(call, data["id"])
                    call.__post_init__()
                    built.append(call)
                message = _new(AssistantMessage)
                _assistant_content(message, item["content"])
                _assistant_calls(message, tuple(built))
                _assistant_id(message, item["id"])
            elif role == "user" and size == 3 and type(item["content"]) is str:
                message = _new(UserMessage)
                _user_content(message, item["content"])
                _user_id(message, item["id"])
            elif role == "tool" and size == 6:
                message = _new(ToolMessage)
                _tool_call_id(message, item["tool_call_id"])
                _tool_name(message, item["tool_name"])
                _tool_content(message, item["content"])
                _tool_error(message, item["is_error"])
                _tool_id(message, item["id"])
            elif role == "system" and size == 3:
                message = _new(SystemMessage)
                _system_content(message, item["content"])
                _system_id(message, item["id"])
            else:
                return None
            message.__post_init__()
            append(message)
    except (KeyError, InvalidMessageError):
        return None  # a field missing or of the wrong type: the loader says which
    return out


def _decode_one(session_id: str, row: Row) -> Message:
    seq, message_id, version, data = row
    try:
        found = _format(version)
    except ValueError:
        raise CorruptSessionError(
            session_id=session_id, seq=seq, reason=f"message format {version!r} is not a number"
        ) from None
    if found != MESSAGE_FORMAT:
        newer = " (written by a newer hookloop?)" if found > MESSAGE_FORMAT else ""
        raise CorruptSessionError(
            session_id=session_id,
            seq=seq,
            reason=f"message format {found} cannot be read; this hookloop reads "
            f"{MESSAGE_FORMAT}{newer}",
        )
    try:
        item = json.loads(_text(data))
    except (ValueError, TypeError, RecursionError) as exc:  # bad JSON, bad UTF-8
        raise CorruptSessionError(
            session_id=session_id, seq=seq, reason=f"not valid JSON: {exc}"
        ) from exc
    try:
        (message,) = load_messages([item])
    except InvalidMessageError as exc:
        reason = str(exc).removeprefix("message 0: ").removeprefix("message 0 ")
        raise CorruptSessionError(
            session_id=session_id, seq=seq, reason=f"not a hookloop message: {reason}"
        ) from exc
    try:
        expected = _text(message_id)
    except (TypeError, ValueError):
        expected = None
    if message.id != expected:
        raise CorruptSessionError(
            session_id=session_id,
            seq=seq,
            reason=f"the row is for message {message_id!r} but holds message {message.id!r}",
        )
    return message


def _format(version: object) -> int:
    if isinstance(version, int) and not isinstance(version, bool):
        return version
    if isinstance(version, (str, bytes)):
        return int(version)
    raise ValueError(f"not a format version: {version!r}")


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode()
    raise TypeError(f"not text: {value!r:.80}")
