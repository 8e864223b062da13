"""hookloop tools served over MCP (stdio or streamable HTTP), for any MCP client."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import sys
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pydantic_core

from .._errors import DuplicateNameError, ToolError, UsageError
from .._extras import import_extra
from .._messages import Usage
from .._run_context import NO_DEPS, MissingDepsError, RunContext
from .._tools import Tool, exception_text, serialize_result, tool
from ..hooks._host import AgentHost

if TYPE_CHECKING:
    import mcp.types
    from mcp.server import Server

__all__ = ["mcp_server", "serve", "stdout_to_stderr"]

logger = logging.getLogger(__name__)

ToolSource = AgentHost | Tool | Callable[..., Any] | Iterable[Tool | Callable[..., Any]]
"""What can be served: an agent (the tools of its enabled scopes), a tool, or several."""


def mcp_server(
    tools: ToolSource, *, name: str = "hookloop", allow_unapproved: bool = False
) -> Server[Any]:
    """An MCP server (the SDK's low-level ``mcp.server.Server``) offering ``tools``.

    Each call runs the tool as a chat would, without a chat: the arguments are validated
    against the tool's schema, and a failure (invalid arguments, an exception) is answered
    as an error result (``is_error``) carrying the text a model would see. A result is sent
    as text, and a JSON object result also as ``structured_content``. Disabled tools are
    neither listed nor run. An agent's tools are read at every request, so scopes
    registered later are served too; its hooks do not run (there is no chat).

    When the list can change (an agent is served, or a tool's ``enabled`` is a callable),
    the server says so (the ``listChanged`` capability) and tells its clients when it did:
    with the answer to the first request after the change (a tool call that changed it
    included), on each session of the handshake-era protocol versions and on every
    ``subscriptions/listen`` stream of the 2026 one.

    No person is there to approve a call over MCP: a call that needs approval (the tool's
    ``requires_approval`` is true, or its predicate is for these arguments) is refused with
    an error result, unless ``allow_unapproved`` says the client's user decides.

    A tool taking a :class:`~hookloop.RunContext` is served with an agent only: it gets
    the agent, the agent's ``deps`` and session, and no usage.

    Args:
        tools: An :class:`~hookloop.Agent`, a :class:`~hookloop.Tool` or typed function,
            or a list of them.
        name: The server's name, as clients see it.
        allow_unapproved: Run calls that need approval without one.

    Raises:
        MissingExtraError: The ``mcp`` extra is not installed.
        UsageError: ``tools`` holds something that is not a tool, or a tool taking a
            ``RunContext`` without an agent to serve.
        DuplicateNameError: Two of the tools have one name.
    """
    lowlevel = import_extra("mcp.server", extra="mcp", by="mcp_server")
    types = import_extra("mcp.types", extra="mcp", by="mcp_server")
    current, changing = _catalogue(tools)
    runner = _Runner(
        types, tools if isinstance(tools, AgentHost) else None, allow_unapproved=allow_unapproved
    )
    changes = _Changes(current()) if changing else None

    async def list_tools(ctx: Any, params: Any) -> mcp.types.ListToolsResult:
        served = current()
        if changes is not None:
            await changes.listed(ctx, served)
        listed: mcp.types.ListToolsResult = types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=dict(t.parameters))
                for t in served.values()
            ]
        )
        return listed

    async def call_tool(ctx: Any, params: mcp.types.CallToolRequestParams) -> Any:
        if changes is None:
            return await runner.call(current(), params.name, params.arguments or {})
        served = current()
        await changes.check(ctx, served)
        try:
            return await runner.call(served, params.name, params.arguments or {})
        finally:  # a call may change the list itself (enable a scope, say)
            await changes.check(ctx, current())

    server: Server[Any] = lowlevel.Server(
        name,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_subscriptions_listen=None if changes is None else changes.listen,
    )
    if changes is not None:
        # What handshake-era clients are told at initialize (the 2026 protocol derives it
        # from subscriptions/listen being served): the HTTP transport asks the server for it
        # with no arguments, so the server's own default must say it.
        advertised = lowlevel.NotificationOptions(tools_changed=True)
        plain = server.create_initialization_options

        def with_changes(
            notification_options: Any = None,
            experimental_capabilities: dict[str, dict[str, Any]] | None = None,
            extensions: dict[str, dict[str, Any]] | None = None,
        ) -> Any:
            return plain(notification_options or advertised, experimental_capabilities, extensions)

        server.create_initialization_options = with_changes  # type: ignore[method-assign]
    return server


class _Changes:
    """Tells clients that the served tool list changed, with the next request's answer.

    Nothing tells a server that an agent's scopes or a tool's ``enabled`` changed, so each
    request compares the tools served now with what was served before.
    """

    def __init__(self, served: dict[str, Tool]) -> None:
        subscriptions = import_extra("mcp.server.subscriptions", extra="mcp", by="mcp_server")
        self._event = subscriptions.ToolsListChanged()
        self._bus = subscriptions.InMemorySubscriptionBus()
        self.listen = subscriptions.ListenHandler(self._bus)
        """The ``subscriptions/listen`` handler (2026 clients learn of changes there)."""
        self._last = _signature(served)
        # What each handshake-era session last listed (it is told when that changes), by
        # its connection: a request's session object is made per request, the initialize
        # parameters it reports are the connection's. An id reused by a later connection
        # costs at most one needless notification; the oldest entries make room.
        self._sessions: OrderedDict[int, tuple[object, ...]] = OrderedDict()

    async def listed(self, ctx: Any, served: dict[str, Tool]) -> None:
        """A client lists the tools: it knows them now."""
        await self.check(ctx, served)
        if not _modern(ctx):
            self._sessions[id(ctx.session.client_params)] = _signature(served)
            self._sessions.move_to_end(id(ctx.session.client_params))
            if len(self._sessions) > _SESSIONS:
                self._sessions.popitem(last=False)

    async def check(self, ctx: Any, served: dict[str, Tool]) -> None:
        """Tell the clients if ``served`` differs from what they were last told of."""
        now = _signature(served)
        if now != self._last:
            self._last = now
            await self._bus.publish(self._event)
        if _modern(ctx):
            return
        key = id(ctx.session.client_params)
        known = self._sessions.get(key)
        if known is not None and known != now:
            self._sessions[key] = now
            await ctx.session.send_tool_list_changed()


_SESSIONS = 4096  # handshake-era sessions whose last listing is remembered


def _signature(served: dict[str, Tool]) -> tuple[object, ...]:
    return tuple((t.name, t.description) for t in served.values())


def _modern(ctx: Any) -> bool:
    """Whether a request came on the 2026 protocol (no sessions: listen streams instead)."""
    versions = import_extra("mcp_types.version", extra="mcp", by="mcp_server")
    return ctx.protocol_version in versions.MODERN_PROTOCOL_VERSIONS


async def serve(
    tools: ToolSource,
    *,
    http: bool = False,
    port: int = 0,
    name: str = "hookloop",
    on_ready: Callable[[str], None] | None = None,
    allow_unapproved: bool = False,
) -> None:
    """Serve ``tools`` over MCP until the client leaves (stdio) or the task is cancelled.

    Over HTTP in the main thread, SIGTERM shuts the server down and returns, and SIGINT
    (Ctrl-C) shuts it down and raises ``KeyboardInterrupt``; a second SIGINT does not
    wait for open connections.

    Args:
        tools: What :func:`mcp_server` takes.
        http: Serve streamable HTTP on ``127.0.0.1`` (loopback only: the server has no
            authentication) instead of stdio.
        port: The HTTP port; ``0`` picks a free one.
        name: The server's name, as clients see it.
        on_ready: Called with the URL (``http://127.0.0.1:PORT/mcp``) once HTTP clients
            can connect, or with ``"stdio"``.
        allow_unapproved: Run calls that need approval without one (see
            :func:`mcp_server`).

    Raises:
        MissingExtraError: The ``mcp`` extra is not installed.
        OSError: The port is taken.
    """
    server = mcp_server(tools, name=name, allow_unapproved=allow_unapproved)
    if not http:
        stdio = import_extra("mcp.server.stdio", extra="mcp", by="serve")
        async with stdio.stdio_server() as (read, write):
            # Standard output is the protocol's: a tool's print goes to stderr. (The SDK
            # points the descriptor at stderr too, when sys.stdout writes to it.)
            with contextlib.redirect_stdout(sys.stderr):
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
        # uvicorn's own handling re-raises the signal once shut down: a SIGTERM then kills
        # the process, and a SIGINT ignored at start is lost (exit 0). The loop's instead.
        web.capture_signals = contextlib.nullcontext
        with stopped_by_signals(web) as received:
            if on_ready is not None:
                on_ready(url)
            await web.serve(sockets=[listener])
        if signal.SIGINT in received:
            raise KeyboardInterrupt
    finally:
        listener.close()


@contextlib.contextmanager
def stopped_by_signals(web: Any) -> Iterator[list[int]]:
    """SIGINT and SIGTERM shut ``web`` (a uvicorn server) down; yields the signals seen."""
    loop = asyncio.get_running_loop()
    received: list[int] = []

    def stop(number: int) -> None:
        if web.should_exit and number == signal.SIGINT:
            web.force_exit = True  # a second Ctrl-C: do not wait for open connections
        received.append(number)
        web.should_exit = True

    # SIGINT too when it was ignored at start (a background job's): a server told to stop
    # by `kill -INT` stops, and says so with its exit status.
    installed = []
    for number in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):  # not main
            loop.add_signal_handler(number, stop, number)
            installed.append(number)
    try:
        yield received
    finally:
        for number in installed:
            loop.remove_signal_handler(number)


@contextlib.contextmanager
def stdout_to_stderr() -> Iterator[None]:
    """Send what is written to standard output to standard error meanwhile.

    For importing what a stdio server serves: its standard output is the protocol's, and a
    ``print`` at import (or a C extension's or a child process's write to the descriptor)
    would put a line that is not JSON-RPC before the handshake.
    """
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no descriptor 1: only Python's writes can be redirected
        with contextlib.redirect_stdout(sys.stderr):
            yield
        return
    try:
        os.dup2(2, 1)
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        sys.stdout.flush()  # what was written to the stream object itself: to stderr still
        os.dup2(saved, 1)
        os.close(saved)


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


def _catalogue(source: ToolSource) -> tuple[Callable[[], dict[str, Tool]], bool]:
    """The tools to serve now (a function), and whether what it gives can change.

    The function gives the enabled tools, by name.

    An agent's scopes can change; so can a tool whose ``enabled`` is a callable.
    """
    if isinstance(source, AgentHost):
        agent = source

        def live() -> dict[str, Tool]:
            return {
                t.name: t for scope in agent.scopes.enabled() for t in scope.tools if t.is_enabled()
            }

        return live, True
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
            raise DuplicateNameError(f"two tools to serve are named {made.name!r}")
        if made.context_parameter is not None:
            raise UsageError(
                f"tool {made.name!r} takes a RunContext, which only an agent can give: serve "
                "an agent that has the tool (mcp_server(Agent(model, tools=[...])))"
            )
        fixed[made.name] = made
    changing = any(not isinstance(t.enabled, bool) for t in fixed.values())
    return lambda: {name: t for name, t in fixed.items() if t.is_enabled()}, changing


class _Runner:
    """Runs one served call: validation, the approval rule, the run context, the result."""

    def __init__(self, types: Any, agent: AgentHost | None, *, allow_unapproved: bool) -> None:
        self._types = types
        self._agent = agent
        self._allow_unapproved = allow_unapproved

    async def call(self, tools: dict[str, Tool], name: str, arguments: Any) -> Any:
        types = self._types
        found = tools.get(name)
        if found is None:
            known = ", ".join(sorted(tools)) or "none"
            return _error(types, f"unknown tool {name!r}; available tools: {known}")
        try:
            checked = found.validate("mcp", json.dumps(arguments))
        except ToolError as exc:
            return _error(types, str(exc))
        if not self._allow_unapproved and found.needs_approval(checked):
            return _error(types, f"tool {name!r} needs a person's approval; not available over MCP")
        try:
            if found.context_parameter is not None:
                checked = {**checked, found.context_parameter: self._run_context(found)}
            result = await found.invoke(checked)
        except Exception as exc:
            logger.info("served tool %r raised", name, exc_info=True)
            kind, text = type(exc).__name__, exception_text(exc)
            return _error(
                types, f"tool {name!r} failed: {kind}" + ("" if text == kind else f": {text}")
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=serialize_result(result))],
            structured_content=_as_object(result),
        )

    def _run_context(self, found: Tool) -> RunContext[object]:
        agent = self._agent
        assert agent is not None, "_catalogue() refuses RunContext tools without an agent"
        deps = agent.deps
        if deps is NO_DEPS:
            if found.needs_deps:
                raise MissingDepsError(found.name)
            deps = None
        return RunContext(
            deps=deps,
            agent=agent,
            usage=Usage(),
            session_id=agent.session_id,
            call_id="mcp",
            tool_name=found.name,
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
