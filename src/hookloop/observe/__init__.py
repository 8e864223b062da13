"""Seeing a run: OpenTelemetry spans and metrics, a JSON-lines trace, and the page that shows it.

``agent.use(OpenTelemetryPlugin())`` (``pip install 'hookloop[otel]'``) sends an agent's chats
to any tracing backend as OpenTelemetry GenAI spans and metrics.
``agent.use(JsonLinesTracePlugin("run.jsonl"))`` records each hook event as one JSON object
per line; :func:`write_trace_page` turns such a file into one self-contained HTML page, as
``hookloop trace view run.jsonl -o run.html`` does. See ``docs/observability.md``.
"""

from .._publish import publish as _publish
from ._jsonl import JsonLinesTracePlugin
from ._otel import OpenTelemetryPlugin
from ._page import render_trace_page, write_trace_page
from ._read import TRACE_FORMAT, read_trace

__all__ = [
    "TRACE_FORMAT",
    "JsonLinesTracePlugin",
    "OpenTelemetryPlugin",
    "read_trace",
    "render_trace_page",
    "write_trace_page",
]

_publish(globals(), __all__)
