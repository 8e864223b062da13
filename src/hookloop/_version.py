"""The installed hookloop's version, read once from its package metadata.

The one place that asks ``importlib.metadata``: the root's ``__version__``, the command's
``--version``, the MCP client's ``clientInfo`` and the OpenTelemetry tracer and meter read it
from here, so none of them imports the package root for it.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["VERSION"]

try:
    VERSION: str = version("hookloop")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    VERSION = "0.0.0"
