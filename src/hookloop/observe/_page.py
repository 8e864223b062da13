"""The trace page: a JSON-lines trace as one self-contained HTML file.

The page is the template ``_page.html`` with its style (``_page.css``), its script
(``_page.js``) and the records inlined: nothing is fetched, and no URL appears in it (the
records' slashes are escaped, so even a captured link is not one to the browser). The
script builds the timeline when the page opens.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Mapping, Sequence
from functools import cache
from importlib.resources import files
from pathlib import Path
from typing import Any

from ._jsonl import read_trace

__all__ = ["render_trace_page", "write_trace_page"]

_MARKER = re.compile(r"\{\{(title|style|script|data)\}\}")


@cache
def _asset(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def render_trace_page(
    records: Sequence[Mapping[str, Any]], *, title: str = "hookloop trace"
) -> str:
    """The HTML page that shows ``records`` (as :func:`read_trace` returns them).

    Args:
        records: The trace's records, in order.
        title: The page's title.
    """
    data = (
        json.dumps(list(records), ensure_ascii=False, separators=(",", ":"))
        # Inside <script>, "</" would end the element; escaped, every character reads back
        # the same through JSON.parse, and no "https://" is left to look like a link.
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("/", "\\/")
        # ":" only where a string has "://" (a structural colon is never followed by "\/").
        .replace(":\\/", "\\u003a\\/")
    )
    parts = {
        "title": html.escape(title),
        "style": _asset("_page.css"),
        "script": _asset("_page.js"),
        "data": data,
    }
    # One pass over the template: a filled-in part is never searched for markers, so a
    # title or a record that says "{{script}}" stays text.
    return _MARKER.sub(lambda marker: parts[marker[1]], _asset("_page.html"))


def write_trace_page(
    source: str | os.PathLike[str], target: str | os.PathLike[str], *, title: str | None = None
) -> Path:
    """Read the JSON-lines trace ``source`` and write its page to ``target``.

    Returns:
        The page's path.

    Raises:
        TraceFileError: ``source`` is not a trace this hookloop can read.
        OSError: ``target`` cannot be written.
    """
    records = read_trace(source)
    page = Path(target)
    page.write_text(
        render_trace_page(records, title=title or f"hookloop trace: {Path(source).name}"),
        encoding="utf-8",
    )
    return page
