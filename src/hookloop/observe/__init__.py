"""Seeing a run: an agent's chats as OpenTelemetry spans and metrics.

``agent.use(OpenTelemetryPlugin())`` (``pip install 'hookloop[otel]'``). See
``docs/observability.md``.
"""

from ._otel import OpenTelemetryPlugin

__all__ = ["OpenTelemetryPlugin"]
