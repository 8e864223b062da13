"""Seeing a run: a JSON-lines trace of every hook event, and the page that shows it.

``agent.use(JsonLinesTracePlugin("run.jsonl"))`` records each event as one JSON object per
line (the schema is in ``docs/observability.md``); :func:`write_trace_page` turns such a file
into one self-contained HTML page, as ``hookloop trace view run.jsonl -o run.html`` does.
"""

from ._jsonl import TRACE_FORMAT, JsonLinesTracePlugin, TraceFileError, read_trace
from ._page import render_trace_page, write_trace_page

__all__ = [
    "TRACE_FORMAT",
    "JsonLinesTracePlugin",
    "TraceFileError",
    "read_trace",
    "render_trace_page",
    "write_trace_page",
]
