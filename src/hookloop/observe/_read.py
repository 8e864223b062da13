"""Reading a JSON-lines trace back: one record per line, references resolved.

A line ends at a newline only: JSON text never holds a raw newline, while a string may hold
U+2028, U+2029 or U+0085, which ``str.splitlines()`` would take for line ends. Format 2
writes each message, request and tool definition once (see :mod:`._encode`); the reader puts
them back where they were referred to, as one shared object each, so a long chat takes
memory in proportion to its file, not to its requests' sizes added up. Format 1 (no
references) reads as it was written; format 3 differs from 2 only in leaving out the
``after`` record of an event no other handler could change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from typing import Any, Final

from .._errors import TraceFileError

__all__ = [
    "READABLE_FORMATS",
    "TRACE_FORMAT",
    "Shared",
    "read_trace",
    "records_of",
]

TRACE_FORMAT: Final = 3
"""The version of the record form (``"v"``) this hookloop writes."""

READABLE_FORMATS: Final = frozenset({1, 2, 3})
"""The versions :func:`read_trace` reads; it refuses others, naming the line."""

_REQUIRED: Final = ("seq", "t", "event", "agent", "chat", "data")


def read_trace(source: str | os.PathLike[str] | Iterable[str]) -> list[dict[str, Any]]:
    """The records of a JSON-lines trace, in order, with references resolved.

    A message, request or tool definition a format-2 trace wrote once and referred to
    afterwards is one shared dict in every record that names it: read the records, do not
    change them in place.

    Args:
        source: A trace file's path, or its lines.

    Raises:
        TraceFileError: The file cannot be read, a line is not a record, its format version
            is not one of :data:`READABLE_FORMATS`, or it refers to something no earlier line
            wrote.
    """
    return [record for record, _ in records_of(source, resolve=True)]


def records_of(
    source: str | os.PathLike[str] | Iterable[str], *, resolve: bool
) -> Iterator[tuple[dict[str, Any], str]]:
    """Each record of a trace, checked, with its line as written, one at a time.

    Args:
        source: A trace file's path, or its lines.
        resolve: Put what format 2 refers to back into the records; without it, references
            are only checked (each names something an earlier line wrote).

    Raises:
        TraceFileError: As :func:`read_trace`.
    """
    name = os.fspath(source) if isinstance(source, (str, os.PathLike)) else "<trace>"
    resolver = _Resolver(name)
    seen = found = False
    try:
        for number, line in _lines(source):
            seen = True
            if not line.strip():
                continue
            record = _record(line, name, number)
            if record["v"] != 1:  # format 2 and later write things once, then refer to them
                resolver.resolve(record, number, build=resolve)
            found = True
            yield record, line
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceFileError(f"cannot be read: {exc}", path=name) from exc
    if seen and not found:
        raise TraceFileError("holds no trace records", path=name)


def _lines(source: str | os.PathLike[str] | Iterable[str]) -> Iterator[tuple[int, str]]:
    """The lines of a file (split at newlines only, read as they come), or of an iterable."""
    if isinstance(source, (str, os.PathLike)):
        with open(source, encoding="utf-8", newline="\n") as file:
            yield from enumerate(file, 1)
    else:
        number = 0
        for text in source:  # lines given by a caller (a newline at the end or none)
            for part in text.removesuffix("\n").split("\n"):
                number += 1
                yield number, part


def _record(line: str, name: str, number: int) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except ValueError as exc:
        raise TraceFileError(f"not JSON: {exc}", path=name, line=number) from None
    if not isinstance(record, dict):
        raise TraceFileError("not a trace record (a JSON object)", path=name, line=number)
    version = record.get("v")
    if version not in READABLE_FORMATS or isinstance(version, bool):
        newer = " (written by a newer hookloop?)" if _newer(version) else ""
        *rest, last = sorted(READABLE_FORMATS)
        readable = f"{', '.join(map(str, rest))} and {last}"
        raise TraceFileError(
            f"trace format {version!r} cannot be read; this hookloop reads {readable}{newer}",
            path=name,
            line=number,
        )
    missing = [key for key in _REQUIRED if key not in record]
    if missing:
        raise TraceFileError(f"not a trace record: no {', '.join(missing)}", path=name, line=number)
    return record


def _newer(version: object) -> bool:
    return (
        isinstance(version, int)
        and not isinstance(version, bool)
        and version > max(READABLE_FORMATS)
    )


class Shared(dict[str, Any]):
    """A dict that format 2 wrote once and records share: a message, a request, ...

    It is a plain dict to every reader; the trace page writes it once again (``kind`` is
    its id's letter: ``"m"`` for messages, ``"r"`` requests, ``"a"`` answers, ``"t"`` tool
    definitions).
    """

    __slots__ = ("kind",)

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind


class _Resolver:
    """Puts what format 2 wrote once back where it is referred to, or checks that it can.

    Numbers count per traced agent (``path[0]``) and per kind, as each plugin writes its
    own: two agents' plugins may share one file.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.scopes: dict[str, _Scope] = {}
        self.line = 0

    def resolve(self, record: dict[str, Any], line: int, *, build: bool) -> None:
        path = record.get("path")
        key = path[0] if isinstance(path, list) and path and isinstance(path[0], str) else ""
        scope = self.scopes.get(key)
        if scope is None:
            scope = self.scopes[key] = _Scope()
        self.line = line
        if build:
            record["data"] = self._value(record["data"], scope)
        else:
            self._check(record["data"], scope)

    def _value(self, value: Any, scope: _Scope) -> Any:
        if isinstance(value, dict):
            if len(value) == 1 and "$ref" in value:
                return scope.table[self._known(value["$ref"], scope)]
            ref = value.get("$id")
            if ref is not None and "$value" in value:  # a long text, written once
                text = value["$value"]
                scope.define(self._id(ref), text)
                return text
            out: dict[str, Any] = {} if ref is None else Shared(self._id(ref)[0])
            for key, item in value.items():
                if key != "$id":
                    out[key[1:] if key.startswith("$$") else key] = self._value(item, scope)
            if ref is not None:
                scope.define(ref, out)
            return out
        if isinstance(value, list):
            items: list[Any] = []
            for item in value:
                if isinstance(item, dict) and len(item) == 1 and "$refs" in item:
                    kind, start, end = self._run(item["$refs"], scope)
                    table = scope.table
                    items.extend(table[f"{kind}{n}"] for n in range(start, end + 1))
                else:
                    items.append(self._value(item, scope))
            return items
        return value

    def _check(self, value: Any, scope: _Scope) -> None:
        if isinstance(value, dict):
            if len(value) == 1 and "$ref" in value:
                self._known(value["$ref"], scope)
                return
            for key, item in value.items():
                if key != "$id" and not (key == "$value" and "$id" in value):
                    self._check(item, scope)
            if "$id" in value:
                scope.define(self._id(value["$id"]), None)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict) and len(item) == 1 and "$refs" in item:
                    self._run(item["$refs"], scope)
                else:
                    self._check(item, scope)

    def _known(self, ref: object, scope: _Scope) -> str:
        name = self._id(ref)
        if name not in scope.table:
            raise self._error(f"refers to {ref!r}, which no earlier line wrote")
        return name

    def _run(self, run: object, scope: _Scope) -> tuple[str, int, int]:
        """The kind and numbers of a run of references, each checked."""
        if not (isinstance(run, list) and len(run) == 2):
            raise self._error(f"a run of references is two ids, got {run!r:.60}")
        first, last = self._id(run[0]), self._id(run[1])
        kind = first[0]
        try:
            start, end = int(first[1:]), int(last[1:])
        except ValueError:
            raise self._error(f"a run of references is two ids, got {run!r:.60}") from None
        if last[0] != kind or end < start:
            raise self._error(f"{first!r} to {last!r} is not a run of references")
        if not scope.holds(kind, start, end):  # a file with lines taken out: name the gap
            for number in range(start, end + 1):
                self._known(f"{kind}{number}", scope)
        return kind, start, end

    def _id(self, ref: object) -> str:
        if not isinstance(ref, str) or len(ref) < 2:
            raise self._error(f'a reference is an id like "m7", got {ref!r:.60}')
        return ref

    def _error(self, message: str) -> TraceFileError:
        return TraceFileError(message, path=self.name, line=self.line)


class _Scope:
    """What one traced agent's plugin wrote once: by id, and how far each kind is numbered."""

    __slots__ = ("gaps", "next", "table")

    def __init__(self) -> None:
        self.table: dict[str, Any] = {}
        self.next: dict[str, int] = {}  # kind -> the next number the writer gives
        self.gaps: set[str] = set()  # kinds not numbered 0, 1, 2, ... in order

    def define(self, ref: str, value: Any) -> None:
        self.table[ref] = value
        kind = ref[0]
        if ref[1:] == str(self.next.get(kind, 0)):
            self.next[kind] = self.next.get(kind, 0) + 1
        else:
            self.gaps.add(kind)

    def holds(self, kind: str, start: int, end: int) -> bool:
        """Whether ids ``start`` to ``end`` of ``kind`` are all defined (quickly)."""
        return kind not in self.gaps and end < self.next.get(kind, 0)
