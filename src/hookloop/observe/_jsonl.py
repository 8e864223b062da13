"""The JSON-lines trace: every hook event of a run as one JSON object per line.

A record (format version :data:`TRACE_FORMAT`)::

    {"v": 3, "seq": 7, "t": 0.0123, "ts": "2026-11-24T10:00:00.012Z",
     "event": "pre_tool_call", "stage": "before", "of": null, "agent": "assistant",
     "session": "session_…", "chat": "c1", "parent": null, "path": ["assistant"],
     "hooks": ["deny_rm"], "data": {...}}

``data`` holds the event's context, field by field (:mod:`._encode`), each message, request
and tool definition written once and referred to afterwards. Every row of the event table is
recorded, whatever rows a later release adds. An event whose handlers may change something
(an interceptor, or a row with settable fields) gives two records when it has handlers
besides the trace's: ``"stage": "before"`` as its handlers receive it (``hooks`` names them)
and ``"stage": "after"`` with the fields they changed (``of`` is the ``seq`` of its
``before``); a missing ``after`` means a handler stopped the chain (a short-circuit). The
time between the two is the handlers' own (a retry strategy's backoff wait, say). With no
other handler (``"hooks": []``) nothing can change it: one record, no stage (format 3;
format 2 wrote an ``after`` with nothing changed). A sub-agent's events arrive once its own
handlers ran (one record, no stage), with ``path`` from this agent down and ``parent``
naming the chat and the tool call they run under.

Recording never changes the run: a record that cannot be written (a full disk, a closed
stream, a function that raises) is logged once at WARNING, kept in
:attr:`JsonLinesTracePlugin.failure`, and ends the recording, not the chat.
"""

from __future__ import annotations

import contextvars
import io
import itertools
import logging
import math
import operator
import os
import time
from collections.abc import Callable
from datetime import UTC, datetime
from math import isfinite
from typing import IO, TYPE_CHECKING, Any, Final, TypeAlias, cast

from .._errors import UsageError
from ..hooks import EVENT_TABLE, EventSpec, Phase, SubAgentEventContext, attach_once
from ..hooks._dispatch import Handler
from ._encode import Encoder, json_string
from ._read import TRACE_FORMAT

if TYPE_CHECKING:
    from ..hooks._host import AgentHost

__all__ = ["JsonLinesTracePlugin"]

logger = logging.getLogger(__name__)

_FIRST: Final = -Phase.FORWARD  # before every other handler, as FORWARD is after them all
_ENDS: Final = frozenset({"on_chat_done", "on_chat_abort", "on_chat_error"})
_TOOL_ENDS: Final = frozenset({"on_tool_call_result", "on_tool_call_error"})
_BEFORE: Final = '"before"'
_AFTER: Final = '"after"'


class JsonLinesTracePlugin:
    """Writes every hook event of an agent (and its sub-agents) as one JSON line.

    Its handlers observe: they never change anything, and a record that cannot be written
    ends the recording (see :attr:`failure`), not the chat. Use one per agent; ``close()``
    (or ``with``) closes a file the plugin opened.

    Args:
        target: A path (the file is created or truncated, and written as UTF-8), a text
            stream, or a function taking each line (without its newline).
        content: Record the conversation's text (messages, prompts, tool arguments and
            results); without it, such text is recorded as its length only.
        error_text: Record errors' texts (an exception's message, a tool's error, a
            provider's error body). They can quote the conversation (a tool's error names
            its arguments), so ``content=False`` alone does not leave them out; with
            ``False`` an error is recorded as its type and figures, its texts as lengths.
        clock: Seconds, monotonic; ``t`` is measured from the first record.
        wall: Seconds since the epoch, for ``ts``.

    Attributes:
        failure: The error that ended the recording (a write that failed), or ``None``.

    Example:
        >>> import io, json
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
        error_text: bool = True,
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
        self.failure: Exception | None = None
        self._end = "\n" if self._stream is not None else ""  # a function gets no newline
        self._encoder = Encoder(content=content, error_text=error_text)
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
        self._parents: dict[str, str] = {}  # chat -> its "parent" as JSON
        self._pending: dict[int, tuple[object, tuple[object, ...], int]] = {}
        # What most records repeat, as JSON text: made again only when it changes.
        self._known: tuple[str | None, str, str | None, str] | None = None  # see _emit
        self._second = -1
        self._prefix = ""
        self._millisecond = -1
        self._stamp = ""

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
            if event == "on_subagent_event":
                self._add(agent, event, lambda ctx: self._forwarded(ctx), Phase.OBSERVE)
            elif _shape(spec)[3]:
                self._add(agent, event, self._before(spec), _FIRST)
                self._add(agent, event, self._after(spec), Phase.OBSERVE)
            else:
                self._add(agent, event, self._observer(spec), Phase.OBSERVE)

    def _add(self, agent: AgentHost, event: str, fn: Callable[[Any], None], order: int) -> None:
        # The handler's label, as errors and other traces' "hooks" name it: made once.
        if type(self) is JsonLinesTracePlugin:
            fn.__qualname__ = _LABELS.get(event) or _LABELS.setdefault(event, f"{_CLASS}.{event}")
        else:
            fn.__qualname__ = f"{type(self).__name__}.{event}"
        self._mine.add(id(fn))
        agent.hooks.add(event, fn, order=order)

    def close(self) -> None:
        """Flush the records; close the file if the plugin opened it."""
        try:
            if self._stream is not None and not self._stream.closed:
                self._stream.flush()
        except Exception as exc:  # a full disk shows at the last flush
            self._failed(exc)
        finally:
            if self._file is not None:
                try:
                    self._file.close()
                except Exception as exc:
                    self._failed(exc)

    def __enter__(self) -> JsonLinesTracePlugin:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- handlers ----------------------------------------------------------------------
    #
    # A handler runs for every event of a run: each is made for its event, with what its
    # records repeat (the event's name, stage and "of" as JSON text) made once.

    def _observer(self, spec: EventSpec) -> Callable[[Any], None]:
        event = spec.name
        head = _shape(spec)[4]
        context, emit = self._encoder.context, self._emit
        if event == "on_chat_start":

            def start(ctx: Any) -> None:
                self._chat.set(f"c{next(self._chats)}")
                self._call.set(None)
                emit(head, context(ctx))

            return start
        if event in _ENDS:

            def end(ctx: Any) -> None:
                emit(head, context(ctx))
                self._chat.set(None)
                self._pending.clear()
                self._flush()

            return end

        def record(ctx: Any) -> None:
            emit(head, context(ctx))

        return record

    def _before(self, spec: EventSpec) -> Callable[[Any], None]:
        event = spec.name
        _, fields, _, _, one, before = _shape(spec)
        context, emit, pending = self._encoder.context, self._emit, self._pending
        assert self._agent is not None
        registry = self._agent.hooks
        calls = self._call if event == "pre_tool_call" else None
        seen: list[Any] = [None, ""]  # the event's handlers, and the others' labels as JSON

        def record(ctx: Any) -> None:
            if calls is not None:
                calls.set(ctx.call.id)
            handlers = registry.handlers.get(event, ())
            if handlers is seen[0]:
                hooks = seen[1]
            else:
                hooks = seen[1] = self._hooks(handlers)
                seen[0] = handlers
            data = context(ctx)
            if hooks == "[]":  # no other handler: nothing can change it, one record says all
                emit(one, data, hooks)
                return
            pending[id(ctx)] = (ctx, fields(ctx), emit(before, data, hooks))

        return record

    def _after(self, spec: EventSpec) -> Callable[[Any], None]:
        event = spec.name
        name, fields, names, _, _, _ = _shape(spec)

        def record(ctx: Any) -> None:
            entry = self._pending.pop(id(ctx), None)
            if entry is not None:  # (none: its one record is written)
                changed = [
                    f
                    for f, new, old in zip(names, fields(ctx), entry[1], strict=True)
                    if new is not old
                ]
                head = _head(name, _AFTER, str(entry[2]))
                self._emit(head, self._encoder.changes(ctx, changed))
            if event in _TOOL_ENDS:
                self._call.set(None)

        return record

    def _forwarded(self, ctx: SubAgentEventContext) -> None:
        event = ctx.event
        if event == "on_chat_start":
            parent = f'{{"chat":{_json(self._chat.get())},"call":{_json(self._call.get())}}}'
            chat = f"c{next(self._chats)}"
            self._parents[chat] = parent
            self._chat.set(chat)
            self._call.set(None)
        elif event == "pre_tool_call":
            self._call.set(getattr(getattr(ctx.context, "call", None), "id", None))
        elif event in _TOOL_ENDS:
            self._call.set(None)
        head = _head(json_string(event), "null")
        self._emit(head, self._encoder.context(ctx.context), path=ctx.path)

    def _hooks(self, handlers: tuple[Handler, ...]) -> str:
        """The other handlers of an event (``handlers``, in firing order) as a JSON list."""
        labels = [json_string(h.label) for h in handlers if id(h.fn) not in self._mine]
        return "[" + ",".join(labels) + "]"

    # -- writing -----------------------------------------------------------------------

    def _emit(
        self, head: str, data: str, hooks: str = "null", *, path: tuple[str, ...] | None = None
    ) -> int:
        """Write one record (``head``: its event, stage and ``of`` as JSON text); its ``seq``."""
        now = self._clock()
        start = self._start
        if start is None:
            start = self._start = now
        seq = next(self._seq)
        if self.failure is not None:
            return seq
        chat = self._chat.get()
        if path:
            middle = self._middle_of(chat, path)
        else:
            # The agent, its session, the chat and its parent: the same for every record
            # of a chat, so made once (again when the session changes).
            agent = self._agent
            assert agent is not None
            known = self._known
            if (
                known is not None
                and known[0] is chat
                and known[1] is agent.name
                and known[2] is agent.session_id
            ):
                middle = known[3]
            else:
                middle = self._middle_of(chat, None)
                self._known = (chat, agent.name, agent.session_id, middle)
        elapsed = now - start
        wall = self._wall()
        # Most records of a busy run share their millisecond, so their stamp: kept.
        stamp = self._stamp if int(wall * 1000) == self._millisecond else self._timestamp(wall)
        try:
            self._write(
                f'{_V}{seq},"t":{f"{elapsed:.6f}" if isfinite(elapsed) else "null"},'
                f'"ts":"{stamp}",{head},{middle},"hooks":{hooks},"data":{data}}}{self._end}'
            )
        except Exception as exc:
            self._failed(exc)
        return seq

    def _middle_of(self, chat: str | None, path: tuple[str, ...] | None) -> str:
        """A record's keys from ``agent`` to ``path``, as JSON text (``path``: a sub-agent's)."""
        if chat is None:
            chat_text = parent = "null"
        else:
            chat_text = f'"{chat}"'
            parent = self._parents.get(chat, "null")
        if path:
            who = f'"agent":{json_string(path[-1])},"session":null'
            names = "[" + ",".join(map(json_string, path)) + "]"
        else:
            agent = self._agent
            assert agent is not None
            name = agent.name
            who = f'"agent":{json_string(name)},"session":{_json(agent.session_id)}'
            names = f"[{json_string(name)}]"
        return f'{who},"chat":{chat_text},"parent":{parent},"path":{names}'

    def _timestamp(self, seconds: float) -> str:
        """UTC, ISO 8601 with milliseconds, as ``datetime`` makes it (kept for _emit)."""
        millisecond = int(seconds * 1000)
        fraction, whole = math.modf(seconds)
        micro = round(fraction * 1e6)
        if micro >= 1_000_000 or micro < 0:
            stamp = _iso(seconds)
        else:
            if whole != self._second:
                self._second = int(whole)
                self._prefix = _iso(whole)[:-4]  # up to the seconds' dot
            stamp = f"{self._prefix}{micro // 1000:03d}Z"
        self._millisecond, self._stamp = millisecond, stamp
        return stamp

    def _flush(self) -> None:
        if self._stream is not None and self.failure is None:
            try:
                self._stream.flush()
            except Exception as exc:
                self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        if self.failure is None:
            self.failure = exc
            logger.warning("the trace could not be written, recording stopped: %s", exc)


_V: Final = f'{{"v":{TRACE_FORMAT},"seq":'  # how every record starts


def _head(event: str, stage: str, of: str = "null") -> str:
    """A record's ``event``, ``stage`` and ``of``, as JSON text (each given as JSON)."""
    return f'"event":{event},"stage":{stage},"of":{of}'


_Shape: TypeAlias = tuple[str, Callable[[Any], tuple[object, ...]], tuple[str, ...], bool, str, str]
_SHAPES: Final[dict[str, _Shape]] = {}
_LABELS: Final[dict[str, str]] = {}  # the plugin's handlers' labels, by event
_CLASS: Final = "JsonLinesTracePlugin"


def _shape(spec: EventSpec) -> _Shape:
    """What the records of ``spec``'s event need, made once per process, not per plugin.

    Its name as JSON, a getter of the fields its handlers may change (as a tuple), their
    names, whether its records come in two stages (handlers may change something), and the
    :func:`_head` of its one record and of its ``before`` record.
    """
    known = _SHAPES.get(spec.name)
    if known is not None:
        return known
    names = tuple(f for f in (spec.field, *spec.settable) if f)
    fields: Callable[[Any], tuple[object, ...]]
    if not names:
        fields = lambda ctx: ()  # noqa: E731
    elif len(names) == 1:
        one = operator.attrgetter(names[0])
        fields = lambda ctx: (one(ctx),)  # noqa: E731
    else:
        fields = operator.attrgetter(*names)
    staged = (spec.kind == "interceptor" or bool(spec.settable)) and not spec.sync_only
    name = json_string(spec.name)
    shape = (name, fields, names, staged, _head(name, "null"), _head(name, _BEFORE))
    _SHAPES[spec.name] = shape
    return shape


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")[:-6] + "Z"


def _json(value: str | None) -> str:
    return "null" if value is None else json_string(value)
