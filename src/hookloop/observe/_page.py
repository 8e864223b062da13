"""The trace page: a JSON-lines trace as one self-contained HTML file.

The page is the template ``_page.html`` with its style (``_page.css``), its script
(``_page.js``) and the records inlined: nothing is fetched, and no URL appears in it (the
records' slashes are escaped, so even a captured link is not one to the browser). The
script builds the timeline when the page opens.

The records are inlined in the trace's own form, so the page of a long chat is about the
size of its trace: :func:`write_trace_page` copies each checked line of the file as it is,
and :func:`render_trace_page` writes what the records share (a message every request of a
chat resends, which :func:`~hookloop.observe.read_trace` reads back as one shared dict)
once again: ``"$id"`` where it first appears, ``{"$ref": id}`` (in a list, a run
``{"$refs": [first, last]}``) wherever it comes again, a key of the data that starts with
``$`` with one more. The script puts it back.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from ._encode import LONG_TEXT as _LONG_TEXT
from ._read import Shared, records_of

__all__ = ["render_trace_page", "write_trace_page"]

_MARKER = re.compile(r"\{\{(title|style|script|data)\}\}")
_SURROGATE = re.compile("[\ud800-\udfff]")


@cache
def _asset(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def render_trace_page(
    records: Sequence[Mapping[str, Any]], *, title: str = "hookloop trace"
) -> str:
    """The HTML page that shows ``records`` (as :func:`read_trace` returns them).

    The page is text that can always be written as UTF-8 (a lone surrogate a stream split
    off an emoji is escaped in the data, replaced in the title).

    Args:
        records: The trace's records, in order.
        title: The page's title.
    """
    return "".join(_page(_encoded(records), title))


def write_trace_page(
    source: str | os.PathLike[str] | Iterable[str],
    target: str | os.PathLike[str],
    *,
    title: str | None = None,
) -> Path:
    """Write the page of the JSON-lines trace ``source`` to ``target``, as UTF-8.

    The trace is checked whole before ``target`` is opened, so a trace that cannot be read
    leaves an existing page as it was; then it is read again and copied line by line: the
    page never sits whole in memory.

    Args:
        source: A trace file's path, or its lines (read twice).
        target: The page to write.
        title: The page's title; by default the trace file's name.

    Returns:
        The page's path.

    Raises:
        TraceFileError: ``source`` is not a trace this hookloop can read.
        OSError: ``target`` cannot be written.
    """
    if not isinstance(source, (str, os.PathLike)):
        source = list(source)
    for _ in records_of(source, resolve=False):
        pass
    if title is None:
        title = (
            f"hookloop trace: {Path(source).name}"
            if not isinstance(source, list)
            else "hookloop trace"
        )
    page = Path(target)
    lines = (line for _, line in records_of(source, resolve=False))
    with page.open("w", encoding="utf-8") as file:
        file.writelines(_page(lines, title))
    return page


def _page(records: Iterable[str], title: str) -> Iterator[str]:
    """The page's text, piece by piece: the template filled in, the data record by record.

    Args:
        records: Each record as JSON text.
        title: The page's title.
    """
    parts = {
        "title": html.escape(_SURROGATE.sub("\ufffd", title)),
        "style": _asset("_page.css"),
        "script": _asset("_page.js"),
    }
    template = _asset("_page.html")
    at = 0
    # One pass over the template: a filled-in part is never searched for markers, so a
    # title or a record that says "{{script}}" stays text.
    for marker in _MARKER.finditer(template):
        yield template[at : marker.start()]
        if marker[1] == "data":
            yield "["
            for number, text in enumerate(records):
                yield ("," if number else "") + _inlined(text.strip())
            yield "]"
        else:
            yield parts[marker[1]]
        at = marker.end()
    yield template[at:]


def _inlined(text: str) -> str:
    """A record's JSON text made safe inside ``<script>``; it reads back the same."""
    if not text.isascii() and _SURROGATE.search(text):
        text = _SURROGATE.sub(lambda c: f"\\u{ord(c[0]):04x}", text)
    return (
        # "</" would end the element; escaped, every character reads back the same through
        # JSON.parse, and no "https://" is left to look like a link.
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("/", "\\/")
        # ":" only where a string has "://" (a structural colon is never followed by "\/").
        .replace(":\\/", "\\u003a\\/")
    )


def _encoded(records: Iterable[Mapping[str, Any]]) -> Iterator[str]:
    """Each record as JSON text; in a format-2 record what is shared is written once.

    Shared are the objects :func:`read_trace` put back from one definition. Each is written
    in full the first time, referred to afterwards, numbered per traced agent and per kind as
    a trace file numbers them, so a request's messages stay runs.
    """
    written: dict[int, str] = {}
    numbers: dict[tuple[str, str], int] = {}
    texts: list[str] = []

    def out(value: Any, scope: str) -> Any:
        if isinstance(value, Shared):
            key = id(value)
            ref = written.get(key)
            if ref is not None:
                return {"$ref": ref}
            number = numbers.get((scope, value.kind), 0)
            numbers[scope, value.kind] = number + 1
            written[key] = ref = f"{value.kind}{number}"
            return {"$id": ref, **{_key(str(k)): out(v, scope) for k, v in value.items()}}
        if isinstance(value, str) and len(value) >= _LONG_TEXT:
            key = id(value)
            ref = written.get(key)
            if ref is not None:
                return {"$ref": ref}
            number = numbers.get((scope, "s"), 0)
            numbers[scope, "s"] = number + 1
            written[key] = ref = f"s{number}"
            texts.append(value)  # held: its id names it until the page is written
            return {"$id": ref, "$value": value}
        if isinstance(value, Mapping):
            return {_key(str(k)): out(v, scope) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return _runs([out(item, scope) for item in value])
        return value

    for record in records:
        if record.get("v") in (2, 3):  # (format 3 refers as format 2 does)
            path = record.get("path")
            scope = path[0] if isinstance(path, list) and path else ""
            record = {**record, "data": out(record.get("data"), str(scope))}
        yield json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def _key(key: str) -> str:
    return "$" + key if key.startswith("$") else key


def _runs(items: list[Any]) -> list[Any]:
    """Consecutive references (m3, m4, ... m9) as one run: ``{"$refs": ["m3", "m9"]}``."""
    out: list[Any] = []
    start = end = ""
    for item in items:
        ref = item.get("$ref") if isinstance(item, dict) and len(item) == 1 else None
        if isinstance(ref, str) and end and _follows(end, ref):
            end = ref
            continue
        if start:
            out.append(_run(start, end))
            start = end = ""
        if isinstance(ref, str):
            start = end = ref
        else:
            out.append(item)
    if start:
        out.append(_run(start, end))
    return out


def _follows(last: str, ref: str) -> bool:
    return last[0] == ref[0] and ref[1:].isdigit() and int(ref[1:]) == int(last[1:]) + 1


def _run(start: str, end: str) -> dict[str, Any]:
    return {"$ref": start} if end == start else {"$refs": [start, end]}
