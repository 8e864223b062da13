"""hookloop tools served over MCP (stdio or streamable HTTP), for any MCP client."""

from __future__ import annotations

import json
import logging
import socket
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import pydantic_core

from .._agent import Agent
from .._errors import ToolError, UsageError
from .._extras import import_extra
from .._tools import Tool, exception_text, serialize_result, tool

if TYPE_CHECKING:
    import mcp.types
    from mcp.server import Server

__all__ = ["mcp_server", "serve"]

logger = logging.getLogger(__name__)

ToolSource = Agent | Tool | Callable[..., Any] | Iterable[Tool | Callable[..., Any]]
"""What can be served: an agent (the tools of its enabled scopes), a tool, or several."""


def mcp_server(tools: ToolSource, *, name: str = "hookloop") -> Server[Any]:
    """An MCP server (the SDK's low-level ``mcp.server.Server``) offering ``tools``.

    Each call runs the tool as a chat would, without a chat: the arguments are validated
    against the tool's schema, and a failure (invalid arguments, an exception, a disabled
    tool) is answered as an error result (``is_error``) carrying the text a model would
    see. A result is sent as text, and a JSON object result also as ``structured_content``.
    An agent's tools are read at every request, so scopes registered later are served too;
    its hooks do not run (there is no chat).

    Args:
        tools: An :class:`~hookloop.Agent`, a :class:`~hookloop.Tool` or typed function,
            or a list of them.
        name: The server's name, as clients see it.

    Raises:
        MissingExtraError: The ``mcp`` extra is not installed.
        UsageError: ``tools`` holds something that is not a tool.
        DuplicateNameError: Two of the tools have one name.
    """
    lowlevel = import_extra("mcp.server", extra="mcp", by="mcp_server")
    types = import_extra("mcp.types", extra="mcp", by="mcp_server")
    current = _catalogue(tools)

    async def list_tools(ctx: Any, params: Any) -> mcp.types.ListToolsResult:
        listed: mcp.types.ListToolsResult = types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=dict(t.parameters))
                for t in current().values()
            ]
        )
        return listed

    async def call_tool(ctx: Any, params: mcp.types.CallToolRequestParams) -> Any:
        return await _call(types, current(), params.name, params.arguments or {})

    server: Server[Any] = lowlevel.Server(name, on_list_tools=list_tools, on_call_tool=call_tool)
    return server


async def serve(
    tools: ToolSource,
    *,
    http: bool = False,
    port: int = 0,
    name: str = "hookloop",
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve ``tools`` over MCP until the client leaves (stdio) or the task is cancelled.

    Args:
        tools: What :func:`mcp_server` takes.
        http: Serve streamable HTTP on ``127.0.0.1`` (loopback only: the server has no
            authentication) instead of stdio.
        port: The HTTP port; ``0`` picks a free one.
        name: The server's name, as clients see it.
        on_ready: Called with the URL (``http://127.0.0.1:PORT/mcp``) once HTTP clients
            can connect, or with ``"stdio"``.

    Raises:
        MissingExtraError: The ``mcp`` extra is not installed.
        OSError: The port is taken.
    """
    server = mcp_server(tools, name=name)
    if not http:
        stdio = import_extra("mcp.server.stdio", extra="mcp", by="serve")
        async with stdio.stdio_server() as (read, write):
            if on_ready is not None:
                on_ready("stdio")
            await server.run(read, write, server.create_initialization_options())
        return
    uvicorn = import_extra("uvicorn", extra="mcp", by="serve")
    # Listening before uvicorn starts: a client that connects at once waits in the backlog
    # instead of being refused, so the URL can be announced now.
    listener = tcp_listener(port)
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
        app = server.streamable_http_app(host="127.0.0.1")
        web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        if on_ready is not None:
            on_ready(url)
        await web.serve(sockets=[listener])
    finally:
        listener.close()


def tcp_listener(port: int) -> socket.socket:
    """A listening TCP socket on ``127.0.0.1:port`` for uvicorn to serve on.

    It is made with its protocol number (``IPPROTO_TCP``): asyncio turns Nagle's algorithm
    off only for connections accepted from such a socket, and with it on every MCP call
    waits for a delayed ACK (48 ms per call instead of 3, bench/mcp_overhead.py).
    """
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(128)
    except BaseException:
        listener.close()
        raise
    return listener


def _catalogue(source: ToolSource) -> Callable[[], dict[str, Tool]]:
    """A function giving the tools to serve now, by name."""
    if isinstance(source, Agent):
        agent = source

        def live() -> dict[str, Tool]:
            return {
                t.name: t for scope in agent.scopes.enabled() for t in scope.tools if t.is_enabled()
            }

        return live
    given: object = source  # checked at run time: the caller's types may lie
    if isinstance(given, Tool) or callable(given):
        items: list[Any] = [given]
    elif isinstance(given, Iterable) and not isinstance(given, str | bytes):
        items = list(given)
    else:
        raise UsageError(f"cannot serve {type(source).__name__}: give an agent or tools")
    fixed: dict[str, Tool] = {}
    for item in items:
        if not isinstance(item, Tool) and not callable(item):
            raise UsageError(f"cannot serve {type(item).__name__}: it is not a tool or function")
        made = item if isinstance(item, Tool) else tool(item)
        if made.name in fixed:
            from .._errors import DuplicateNameError

            raise DuplicateNameError(f"two tools to serve are named {made.name!r}")
        fixed[made.name] = made
    return lambda: fixed


async def _call(types: Any, tools: dict[str, Tool], name: str, arguments: Any) -> Any:
    found = tools.get(name)
    if found is None:
        known = ", ".join(sorted(tools)) or "none"
        return _error(types, f"unknown tool {name!r}; available tools: {known}")
    try:
        checked = found.validate("mcp", json.dumps(arguments))
    except ToolError as exc:
        return _error(types, str(exc))
    try:
        result = await found.invoke(checked)
    except Exception as exc:
        logger.info("served tool %r raised", name, exc_info=True)
        kind, text = type(exc).__name__, exception_text(exc)
        return _error(
            types, f"tool {name!r} failed: {kind}" + ("" if text == kind else f": {text}")
        )
    structured = _as_object(result)
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=serialize_result(result))],
        structured_content=structured,
    )


def _as_object(result: object) -> dict[str, Any] | None:
    """The result as a JSON object, when it is one (a dict, a dataclass, a model)."""
    try:
        plain = pydantic_core.to_jsonable_python(result)
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
        return None
    return plain if isinstance(plain, dict) else None


def _error(types: Any, text: str) -> Any:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
