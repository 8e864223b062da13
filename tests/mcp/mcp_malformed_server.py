"""An MCP server (official SDK, low level) that answers a tool call with a malformed result.

``python mcp_malformed_server.py`` serves it over stdio: the tool ``bad`` sends ``content``
as a string where the protocol wants a list of blocks; ``pid`` answers properly.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import mcp.types
from mcp.server import Server
from mcp.server.stdio import stdio_server


async def list_tools(ctx: Any, params: Any) -> mcp.types.ListToolsResult:
    tools = [mcp.types.Tool(name=name, input_schema={"type": "object"}) for name in ("bad", "pid")]
    return mcp.types.ListToolsResult(tools=tools)


async def call_tool(ctx: Any, params: mcp.types.CallToolRequestParams) -> Any:
    if params.name == "pid":
        return mcp.types.CallToolResult(content=[mcp.types.TextContent(text=str(os.getpid()))])
    return mcp.types.CallToolResult.model_construct(content="not a list of blocks")


async def main() -> None:
    server = Server("malformed", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    asyncio.run(main())
