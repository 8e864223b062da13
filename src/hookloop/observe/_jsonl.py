"""The JSON-lines trace: every hook event of a run as one JSON object per line.

A record (format version :data:`TRACE_FORMAT`)::

    {"v": 1, "seq": 7, "t": 0.0123, "ts": "2026-11-24T10:00:00.012Z",
     "event": "pre_tool_call", "stage": "before", "of": null, "agent": "assistant",
     "session": "session_…", "chat": "c1", "parent": null, "path": ["assistant"],
     "hooks": ["deny_rm"], "data": {...}}

``data`` holds the event's context, field by field (:mod:`._encode`). Every row of the event
table is recorded, whatever rows a later release adds. An event whose handlers may change
something (an interceptor, or a row with settable fields) gives two records:
``"stage": "before"`` as its handlers receive it (``hooks`` names them) and
``"stage": "after"`` with the fields they changed (``of`` is the ``seq`` of its
``before``); a missing ``after`` means a handler
stopped the chain (a short-circuit). The time between the two is the handlers' own (a retry
strategy's backoff wait, say). A sub-agent's events arrive once its own handlers ran
(one record, no stage), with ``path`` from this agent down and ``parent`` naming the chat
and the tool call they run under.
"""

from __future__ import annotations

import contextvars
import io
import itertools
import json
import os
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final, cast

from .._errors import UsageError
from ..hooks._contexts import SubAgentEventContext
from ..hooks._dispatch import Phase
from ..hooks._events import (
    EVENT_TABLE,
    ON_CHAT_ABORT,
    ON_CHAT_DONE,
    ON_CHAT_ERROR,
    ON_CHAT_START,
    ON_SUBAGENT_EVENT,
    ON_TOOL_CALL_ERROR,
    ON_TOOL_CALL_RESULT,
    PRE_TOOL_CALL,
    EventSpec,
)
from ..hooks._host import attach_once
from ..sessions._codec import json_text
from ._encode import JSON, Encoder

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["TRACE_FORMAT", "JsonLinesTracePlugin", "TraceFileError", "read_trace"]

TRACE_FORMAT: Final = 1
"""The version of the record form (``"v"``); a reader refuses versions it does not know."""

_FIRST: Final = -Phase.FORWARD  # before every other handler, as FORWARD is after them all
_ENDS: Final = frozenset({ON_CHAT_DONE, ON_CHAT_ABORT, ON_CHAT_ERROR})
_TOOL_ENDS: Final = frozenset({ON_TOOL_CALL_RESULT, ON_TOOL_CALL_ERROR})
_REQUIRED: Final = ("seq", "t", "event", "agent", "chat", "data")


class TraceFileError(UsageError, ValueError):
    """A file given as a trace is not one this hookloop can read.

    Attributes:
        path: The file.
        line: The first line that cannot be read (1-based), or ``None`` for the whole file.
    """

    def __init__(self, message: str, *, path: str, line: int | None = None) -> None:
        where = f"{path}, line {line}" if line is not None else path
        super().__init__(f"{where}: {message}")
        self.path = path
        self.line = line


class JsonLinesTracePlugin:
    """Writes every hook event of an agent (and its sub-agents) as one JSON line.

    Its handlers observe: they never change anything. Use one per agent; ``close()`` (or
    ``with``) closes a file the plugin opened.

    Args:
        target: A path (the file is created or truncated), a text stream, or a function
            taking each line (without its newline).
        content: Record the conversation's text (messages, prompts, tool arguments and
            results); without it, such text is recorded as its length only.
        clock: Seconds, monotonic; ``t`` is measured from the first record.
        wall: Seconds since the epoch, for ``ts``.

    Example:
        >>> import io
        >>> from hookloop import Agent
        >>> from hookloop.testing import ScriptedModel
        >>> out = io.StringIO()
        >>> agent = Agent(ScriptedModel(["Hello!"]))
        >>> _ = agent.use(JsonLinesTracePlugin(out))
        >>> _ = agent.chat_sync("Hi")
        >>> [json.loads(line)["event"] for line in out.getvalue().splitlines()][:3]
        ['on_chat_start', 'on_message', 'pre_request']
    """

    name = "jsonl-trace"

    def __init__(
        self,
        target: str | os.PathLike[str] | IO[str] | Callable[[str], object],
        *,
        content: bool = True,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self._file: IO[str] | None = None
        self._stream: IO[str] | None = None
        if isinstance(target, (str, os.PathLike)):
            self._file = self._stream = open(target, "w", encoding="utf-8")  # noqa: SIM115
            self._write: Callable[[str], object] = self._stream.write
        elif isinstance(target, io.IOBase) or hasattr(target, "write"):
            self._stream = cast("IO[str]", target)
            self._write = self._stream.write
        elif callable(target):
            self._write = target
        else:
            raise UsageError(
                f"a trace target is a path, a text stream or a function, got {target!r}"
            )
        self._lines = self._stream is not None  # a stream gets the newline, a function not
        self._encoder = Encoder(content=content)
        self._clock = clock
        self._wall = wall
        self._start: float | None = None
        self._seq = itertools.count()
        self._chats = itertools.count(1)
        self._agent: AgentHost | None = None
        self._mine: set[int] = set()
        # Which chat, and which tool call of it, the running task works for: a sub-agent's
        # chat runs in a task started inside the tool call, so it inherits both.
        self._chat: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            "hookloop_trace_chat", default=None
        )
        self._call: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            "hookloop_trace_call", default=None
        )
        self._parents: dict[str, dict[str, str | None]] = {}
        self._pending: dict[int, tuple[object, dict[str, object], int]] = {}

    # -- attaching ---------------------------------------------------------------------

    def init_agent(self, agent: AgentHost) -> None:
        """Register a recording handler on every event of the event table."""
        self._agent = attach_once(
            f"trace plugin {self.name!r}",
            self._agent,
            agent,
            "it names the agent in its records",
            owner=self,
        )
        for event, spec in EVENT_TABLE.items():
            if event == ON_SUBAGENT_EVENT:
                self._add(agent, event, self._forwarder(), Phase.OBSERVE)
            elif (spec.kind == "interceptor" or spec.settable) and not spec.sync_only:
                self._add(agent, event, self._before(spec), _FIRST)
                self._add(agent, event, self._after(spec), Phase.OBSERVE)
            else:
                self._add(agent, event, self._observer(spec), Phase.OBSERVE)

    def _add(self, agent: AgentHost, event: str, fn: Callable[[Any], None], order: int) -> None:
        fn.__qualname__ = f"{type(self).__name__}.{event}"
        self._mine.add(id(fn))
        agent.hooks.add(event, fn, order=order)

    def close(self) -> None:
        """Flush the records; close the file if the plugin opened it."""
        if self._stream is not None and not self._stream.closed:
            self._stream.flush()
        if self._file is not None:
            self._file.close()

    def __enter__(self) -> JsonLinesTracePlugin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- handlers ----------------------------------------------------------------------

    def _observer(self, spec: EventSpec) -> Callable[[Any], None]:
        event = spec.name

        def record(ctx: Any) -> None:
            if event == ON_CHAT_START:
                self._chat.set(f"c{next(self._chats)}")
                self._call.set(None)
            self._emit(event, self._encoder.context(ctx))
            if event in _ENDS:
                self._chat.set(None)
                if self._stream is not None:
                    self._stream.flush()
                self._pending.clear()

        return record

    def _before(self, spec: EventSpec) -> Callable[[Any], None]:
        event = spec.name
        changeable = tuple(f for f in (spec.field, *spec.settable) if f)

        def record(ctx: Any) -> None:
            if event == PRE_TOOL_CALL:
                self._call.set(ctx.call.id)
            assert self._agent is not None
            hooks = [
                h.label
                for h in self._agent.hooks.handlers.get(event, ())
                if id(h.fn) not in self._mine
            ]
            seq = self._emit(event, self._encoder.context(ctx), stage="before", hooks=hooks)
            self._pending[id(ctx)] = (ctx, {f: getattr(ctx, f) for f in changeable}, seq)

        return record

    def _after(self, spec: EventSpec) -> Callable[[Any], None]:
        event = spec.name

        def record(ctx: Any) -> None:
            _, before, seq = self._pending.pop(id(ctx), (None, {}, None))
            changed = {
                f: self._encoder.value(getattr(ctx, f), f)
                for f, old in before.items()
                if getattr(ctx, f) is not old
            }
            self._emit(event, {"changed": sorted(changed), **changed}, stage="after", of=seq)
            if event in _TOOL_ENDS:
                self._call.set(None)

        return record

    def _forwarder(self) -> Callable[[SubAgentEventContext], None]:
        return lambda ctx: self._forwarded(ctx)

    def _forwarded(self, ctx: SubAgentEventContext) -> None:
        event = ctx.event
        if event == ON_CHAT_START:
            parent = {"chat": self._chat.get(), "call": self._call.get()}
            chat = f"c{next(self._chats)}"
            self._parents[chat] = parent
            self._chat.set(chat)
            self._call.set(None)
        elif event == PRE_TOOL_CALL:
            self._call.set(getattr(getattr(ctx.context, "call", None), "id", None))
        elif event in _TOOL_ENDS:
            self._call.set(None)
        data = self._encoder.context(ctx.context)
        self._emit(event, data, path=ctx.path)

    # -- writing -----------------------------------------------------------------------

    def _emit(
        self,
        event: str,
        data: dict[str, JSON],
        *,
        stage: str | None = None,
        hooks: list[str] | None = None,
        path: tuple[str, ...] | None = None,
        of: int | None = None,
    ) -> int:
        """Write one record; returns its ``seq``."""
        agent = self._agent
        assert agent is not None
        now = self._clock()
        if self._start is None:
            self._start = now
        chat = self._chat.get()
        seq = next(self._seq)
        record: dict[str, JSON] = {
            "v": TRACE_FORMAT,
            "seq": seq,
            "t": round(now - self._start, 6),
            "ts": _timestamp(self._wall()),
            "event": event,
            "stage": stage,
            "of": of,
            "agent": path[-1] if path else agent.name,
            "session": None if path else agent.session_id,
            "chat": chat,
            "parent": self._parents.get(chat) if chat else None,
            "path": list(path) if path else [agent.name],
            "hooks": hooks,
            "data": data,
        }
        line = json_text(record)  # valid UTF-8 even when a stream split an emoji
        self._write(line + "\n" if self._lines else line)
        return seq


def _timestamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def read_trace(source: str | os.PathLike[str] | Iterable[str]) -> list[dict[str, Any]]:
    """The records of a JSON-lines trace, in order.

    Args:
        source: A trace file's path, or its lines.

    Raises:
        TraceFileError: The file cannot be read, a line is not a record, or its format
            version is not :data:`TRACE_FORMAT`.
    """
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<trace>"
    try:
        lines = (
            Path(source).read_text(encoding="utf-8").splitlines()
            if isinstance(source, (str, os.PathLike))
            else list(source)
        )
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFileError(f"cannot be read: {exc}", path=name) from exc
    records: list[dict[str, Any]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise TraceFileError(f"not JSON: {exc}", path=name, line=number) from None
        if not isinstance(record, dict):
            raise TraceFileError("not a trace record (a JSON object)", path=name, line=number)
        version = record.get("v")
        if version != TRACE_FORMAT or isinstance(version, bool):
            newer = " (written by a newer hookloop?)" if _newer(version) else ""
            raise TraceFileError(
                f"trace format {version!r} cannot be read; this hookloop reads "
                f"{TRACE_FORMAT}{newer}",
                path=name,
                line=number,
            )
        missing = [key for key in _REQUIRED if key not in record]
        if missing:
            raise TraceFileError(
                f"not a trace record: no {', '.join(missing)}", path=name, line=number
            )
        records.append(record)
    if not records and lines:
        raise TraceFileError("holds no trace records", path=name)
    return records


def _newer(version: object) -> bool:
    return isinstance(version, int) and not isinstance(version, bool) and version > TRACE_FORMAT
