"""A small MCP server for the tests, written with the official SDK only (no hookloop).

``build()`` makes it for in-process use; ``python mcp_demo_server.py`` serves it over stdio,
and ``python mcp_demo_server.py --http`` over streamable HTTP on a free loopback port, which
it prints on its first line of standard output.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError


def build() -> MCPServer:
    server = MCPServer("demo")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(structured_output=False)
    def greet(name: str) -> str:
        """Greet someone by name."""
        return f"Hello, {name}!"

    @server.tool(name="files.read", structured_output=False)
    def read(path: str) -> str:
        """Read a file (a name with a dot, as some servers use)."""
        raise ToolError(f"no such file: {path}")

    @server.tool(structured_output=False)
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @server.tool(structured_output=False)
    async def grow(ctx: Context) -> str:
        """Add the tool 'shout' and tell the clients the tool list changed."""

        def shout(text: str) -> str:
            """Say it louder."""
            return text.upper() + "!"

        server.add_tool(shout, structured_output=False)
        await ctx.notify_tools_changed()  # to 2026 clients, on their subscriptions/listen stream
        await ctx.request_context.session.send_tool_list_changed()  # to earlier clients
        return "added shout"

    @server.tool(structured_output=False)
    def die() -> str:
        """Kill the server's own process in the middle of the call."""
        os.kill(os.getpid(), signal.SIGKILL)
        return "never"

    @server.tool(structured_output=False)
    async def hang() -> str:
        """Never answer."""
        await asyncio.Event().wait()
        return "never"

    return server


async def _serve_http(server: MCPServer) -> None:
    import uvicorn

    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on connections accepted from such a socket
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    if sys.argv[1:] == ["--http"]:
        asyncio.run(_serve_http(build()))
    else:
        build().run()
