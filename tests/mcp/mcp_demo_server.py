"""A small MCP server for the tests, written with the official SDK only (no hookloop).

``build()`` makes it for in-process use; ``python mcp_demo_server.py`` serves it over stdio,
and ``python mcp_demo_server.py --http`` over streamable HTTP on a free loopback port, which
it prints on its first line of standard output. ``--port N`` serves on port ``N`` instead (a
server restarted at the same address), and ``--legacy`` speaks only the session-based
protocol versions (before 2026-07-28), as most deployed servers do: it answers the 2026
``server/discover`` probe as such a server does, so clients fall back to ``initialize``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS


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


def legacy_only(app: Any) -> Any:
    """``app`` as a server that knows only the handshake-era (session-based) versions.

    A request stamped with a later version is refused the way such a server refuses a
    request without a session: HTTP 400 with a JSON-RPC error.
    """
    refusal = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "server-error",
            "error": {"code": -32600, "message": "Bad Request: Missing session ID"},
        }
    ).encode()

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        headers = dict(scope.get("headers") or ())
        version = headers.get(b"mcp-protocol-version", b"").decode()
        if scope["type"] == "http" and version and version not in HANDSHAKE_PROTOCOL_VERSIONS:
            content = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 400, "headers": content})
            await send({"type": "http.response.body", "body": refusal})
            return
        await app(scope, receive, send)

    return serve


async def _serve_http(server: MCPServer, *, port: int, legacy: bool) -> None:
    import uvicorn

    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on connections accepted from such a socket
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restart at the same port
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    app = server.streamable_http_app()
    config = uvicorn.Config(legacy_only(app) if legacy else app, log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--legacy", action="store_true")
    options = parser.parse_args()
    if options.http:
        asyncio.run(_serve_http(build(), port=options.port, legacy=options.legacy))
    else:
        build().run()
