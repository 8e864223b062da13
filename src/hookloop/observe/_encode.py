"""Any hook context as JSON-ready data, with or without the conversation's text.

One walker serves every event: messages take the session codec's JSON form
(:func:`~hookloop.dump_messages`), dataclasses become objects of their fields, a
model its name and window, an exception its type and text, anything else what pydantic
makes of it (or its ``repr``). So an event added to the table later is recorded without a
change here.

Without content capture, a string is kept only under a key that names something rather than
says something (a role, an id, a tool's name, a model); any other string becomes
``{"chars": n}``: its length, not its text. Unknown fields are thus left out by default.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, Final

import pydantic_core

from .._messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    dump_messages,
)
from .._tools import Tool, exception_text
from ..context._tokens import TokenCounter, count_request, counter_for_model
from ..models._base import Model, ProviderRequest

__all__ = ["IDENTIFYING_KEYS", "Encoder"]

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

JSON = Any  # what json.dumps takes: dict, list, str, int, float, bool, None


class Encoder:
    """Turns context values into JSON-ready data.

    Args:
        content: Keep the conversation's text (messages, tool arguments and results,
            prompts); without it, such strings become ``{"chars": n}``.
    """

    __slots__ = ("_counters", "content")

    def __init__(self, *, content: bool) -> None:
        self.content = content
        self._counters: dict[str, TokenCounter] = {}

    def context(self, ctx: object) -> dict[str, JSON]:
        """A hook context's fields, by name."""
        return {
            f.name: self.value(getattr(ctx, f.name), f.name)
            for f in dataclasses.fields(ctx)  # type: ignore[arg-type]
        }

    def value(self, value: object, key: str = "") -> JSON:
        """``value`` as JSON-ready data; ``key`` is the field or key it sits under."""
        if value is None or isinstance(value, (bool, int)):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else repr(value)
        if isinstance(value, str):
            return self.text(value, key)
        if isinstance(value, _MESSAGES):
            return self.value(dump_messages((value,))[0], key)
        if isinstance(value, ToolCall):
            return self.value({"name": value.name, "id": value.id, "arguments": value.arguments})
        if isinstance(value, BaseException):
            return self._error(value)
        if isinstance(value, Model):
            return {
                "class": type(value).__name__,
                "name": value.name,
                "window": value.context_window,
            }
        if isinstance(value, Tool):  # its definition is in the request; here, which one
            return {"class": "Tool", "name": value.name}
        if isinstance(value, ProviderRequest):
            return {**self._fields(value), "tokens": self._tokens(value)}
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._fields(value)
        if isinstance(value, Mapping):
            return {str(k): self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple, set, frozenset)):
            return [self.value(item, key) for item in value]
        name = getattr(value, "name", None)
        if isinstance(name, str):  # a tool, a scope: named things
            return {"class": type(value).__name__, "name": name}
        return self.value(_jsonable(value), key)

    def text(self, text: str, key: str) -> JSON:
        """A string, or its length when it is content that is not captured."""
        if self.content or key in IDENTIFYING_KEYS:
            return text
        return {"chars": len(text)}

    def _fields(self, value: object) -> dict[str, JSON]:
        return {
            f.name: self.value(getattr(value, f.name), f.name)
            for f in dataclasses.fields(value)  # type: ignore[arg-type]
        }

    def _error(self, error: BaseException) -> dict[str, JSON]:
        # The type and text always: a failure must be readable in any trace.
        out: dict[str, JSON] = {"error_type": type(error).__name__, "text": exception_text(error)}
        for name, field in vars(error).items():
            if not name.startswith("_") and name not in ("message", "args") and _scalar(field):
                out[name] = self.value(field, name)
        return out

    def _tokens(self, request: ProviderRequest) -> int:
        """The request's size in tokens, as the context policies count it."""
        counter = self._counters.get(request.model)
        if counter is None:
            counter = self._counters[request.model] = counter_for_model(request.model)
        return count_request(request, counter=counter)


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _jsonable(value: object) -> JSON:
    try:
        return pydantic_core.to_jsonable_python(value, fallback=_shown)
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
        return _shown(value)


def _shown(value: object) -> str:
    try:
        return repr(value)
    except Exception:  # a user's __repr__ that raises must not end the chat
        return f"<{type(value).__name__} object>"
