"""MCP: the tools of MCP servers as hookloop tools, and hookloop tools served over MCP.

Needs the ``mcp`` extra (``pip install 'hookloop[mcp]'``); importing this module does not,
using its classes does. See ``docs/mcp.md``.
"""

from .._publish import publish as _publish
from ._serve import ToolSource, mcp_server, serve
from ._toolset import MCPToolset

__all__ = ["MCPToolset", "ToolSource", "mcp_server", "serve"]

_publish(globals(), __all__)
