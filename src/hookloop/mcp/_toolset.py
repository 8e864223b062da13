"""An MCP server's tools as a scope of hookloop tools: :class:`MCPToolset`."""

from __future__ import annotations

import asyncio
import dataclasses
import fnmatch
import hashlib
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._agent import Default
from .._errors import (
    DuplicateNameError,
    MCPConnectionError,
    MCPServerError,
    MCPTimeoutError,
    MCPToolError,
    ToolDefinitionError,
    UsageError,
    error_line,
)
from .._extras import import_extra
from .._loopbound import LoopBound
from .._messages import ToolMessage
from .._tools import Scope, Tool, check_name
from ..hooks._contexts import MessageContext
from ..hooks._dispatch import Disposer, Phase
from ..hooks._host import attach_once
from ..models._base import ProviderRequest
from ._results import failure_text, result_value, wraps_one_result
from ._target import Target, target_of

if TYPE_CHECKING:
    import mcp.types
    from mcp import Client

    from ..hooks._contexts import ApprovalDecisionContext, ChatStartContext, PreRequestContext
    from ..hooks._host import AgentHost
    from ._connection import Connection

__all__ = ["MCPToolset"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")
_PREFIX = re.compile(r"[A-Za-z0-9_-]{0,56}")  # room for the tool's own name
_MAX_NAME = 64  # what a tool name (and the providers) allow
_PAGES = 100  # a server whose listing never ends cannot hang a chat
_CONNECTION_CLOSED, _REQUEST_TIMEOUT = -32000, -32001  # JSON-RPC codes the SDK raises

T = TypeVar("T")


class MCPToolset:
    """The tools of one MCP server, as a plugin: ``Agent(plugins=[MCPToolset(...)])``.

    One toolset serves one agent at a time. The disposer ``agent.use(toolset)`` returns
    takes the toolset's hooks and scope away; ``await toolset.aclose()`` then closes its
    connection.

    The server's tools become hookloop tools in a scope named ``name``: the model calls
    them like any other, and every tool hook fires for them (``pre_tool_call`` can refuse
    a call or answer it itself). The connection opens in the first chat and the tool list
    is cached until the server says it changed (``notifications/tools/list_changed``);
    then it is fetched again before the next model call. ``await agent.aclose()`` (or
    leaving ``async with agent``) closes the connection; the next chat opens a new one.

    A tool's structured result (``structured_content``) or else its text is the tool's
    result. A tool that reports an error, a malformed answer, a timeout, or a server that
    dies during the call is a tool error the model sees, caused by an
    :class:`~hookloop.MCPServerError`; the next call reconnects.

    Args:
        server: Where the server is: a URL (streamable HTTP), a command line such as
            ``"python server.py"`` (run with your environment, spoken to over stdio), a
            list of arguments, an ``mcp.StdioServerParameters``, or an in-process
            ``MCPServer`` (or low-level ``mcp.server.Server``).
        name: The scope's name; by default derived from the server (the script's name,
            the URL's host, the in-process server's name).
        prefix: Put before each tool's name, so two servers' tools cannot clash;
            ``f"{name}_"`` by default, ``""`` for none: letters, digits, ``_`` and ``-``,
            at most 56. In a tool's name, characters a tool name cannot hold become ``_``,
            and a name longer than 64 characters is cut to 55 followed by ``_`` and 8
            characters of its hash.
        allow: Only these tools (names on the server; ``*`` and ``?`` patterns allowed).
        deny: Never these tools (names or patterns), even if allowed.
        timeout: Seconds one call (or one listing) may take; ``None`` for no limit.
        connect_timeout: Seconds connecting may take (a stdio server starting up).
        headers: HTTP headers sent with every request to a URL server, such as
            ``{"Authorization": "Bearer ..."}``; their values never appear in messages.

    Raises:
        MissingExtraError: The ``mcp`` extra is not installed.
        UsageError: ``server`` is not a server, or an argument is malformed.
    """

    def __init__(
        self,
        server: object,
        *,
        name: str | None = None,
        prefix: str | Literal[Default.DEFAULT] = Default.DEFAULT,
        allow: Iterable[str] | None = None,
        deny: Iterable[str] = (),
        timeout: float | None = 60.0,
        connect_timeout: float | None = 60.0,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        target = target_of(server, headers)
        self._name = check_name("scope", target.name if name is None else name)
        if target.kind == "stdio":  # a command is named, never shown: its arguments may be secret
            target = dataclasses.replace(target, label=self._name)
        self._target: Target = target
        if prefix is Default.DEFAULT:
            prefix = f"{self._name}_"
        elif not isinstance(prefix, str):
            raise UsageError(f"prefix must be a str, got {type(prefix).__name__}")
        if not _PREFIX.fullmatch(prefix):
            raise UsageError(
                f"prefix {prefix!r} cannot start a tool name: use at most 56 letters, digits, "
                "'_' or '-'"
            )
        self.prefix: str = prefix
        """What the server's tool names are prefixed with."""
        self.allow: tuple[str, ...] | None = None if allow is None else _names("allow", allow)
        """The tools (or patterns) let through, or ``None`` for all."""
        self.deny: tuple[str, ...] = _names("deny", deny)
        """The tools (or patterns) left out."""
        self.timeout = _seconds("timeout", timeout)
        """Seconds one call may take, or ``None``."""
        self.connect_timeout = _seconds("connect_timeout", connect_timeout)
        """Seconds connecting may take, or ``None``."""
        self._tools: tuple[Tool, ...] | None = None
        self._wrapped: frozenset[str] = frozenset()  # tools answering {"result": value}
        self._stale = True
        self._agent: AgentHost | None = None
        self._registered: tuple[Tool, ...] | None = None
        self._scope: Disposer | None = None
        self._connections: LoopBound[Connection] = LoopBound(
            self._open, _close, lambda _connection: None
        )

    def __repr__(self) -> str:
        return f"MCPToolset({self._target.label!r}, name={self._name!r})"

    @property
    def name(self) -> str:
        """The plugin's name, which is also the name of the scope its tools are in."""
        return self._name

    @property
    def server(self) -> str:
        """The server, for messages: its URL (secrets masked), or its name.

        A command's arguments never appear: they often hold secrets (a database URL, an API
        key), and error texts reach the model, traces and logs.
        """
        return self._target.label

    def init_agent(self, agent: AgentHost) -> None:
        """Register the hooks that keep the agent's scope in step with the server.

        Raises:
            UsageError: The toolset serves another agent already.
        """
        self._agent = attach_once(
            f"MCP toolset {self._name!r}",
            self._agent,
            agent,
            "it keeps that agent's scope",
            owner=self,
        )
        # Before the user's own handlers, so they see the server's tools in the scope.
        agent.add_hook("on_chat_start", self._ensure_scope, order=Phase.USER - 1)
        # A resumed chat (maybe in a new process) has no chat start: its decided calls run
        # right after the decisions, and need the scope.
        agent.add_hook("on_approval_decision", self._ensure_scope, order=Phase.USER - 1)
        agent.add_hook("on_message", self._on_message)
        # After the user's handlers (a change may arrive while they run), before the
        # observers and the window, which should see the tools the model gets.
        agent.add_hook("pre_request", self._on_request, order=Phase.OBSERVE - 1)
        agent.hooks.adopt(Disposer(self._detach))  # removing the plugin takes its scope too

    def _detach(self) -> None:
        """Leave the agent: its scope goes; the connection stays open until :meth:`aclose`."""
        if self._scope is not None:
            self._scope()
        self._agent, self._scope, self._registered = None, None, None

    async def list_tools(self) -> tuple[Tool, ...]:
        """The server's tools as hookloop tools (prefixed, filtered); cached until changed.

        Raises:
            MCPServerError: The server cannot be reached or its answer cannot be used.
        """
        if self._tools is not None and not self._stale:
            return self._tools
        await self._connection()  # before the flag: a new session marks the list stale
        self._stale = False  # before fetching: a change announced meanwhile marks it again
        try:
            listed = await self._request(_all_tools)
        except BaseException:
            self._stale = True
            raise
        self._tools = tuple(self._wrap(listed))
        return self._tools

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> object:
        """Call the server's tool ``name`` (its name on the server, without the prefix).

        Returns:
            The tool's ``structured_content``, or else its text (several blocks joined by
            newlines; an image or other binary block is described in brackets). A value
            the server's SDK wrapped as ``{"result": value}`` (its output schema says so)
            is unwrapped.

        Raises:
            MCPToolError: The tool reported an error, or the answer is malformed.
            MCPTimeoutError: No answer within :attr:`timeout`.
            MCPConnectionError: The server cannot be reached or died during the call.
        """
        if self._tools is None:  # the listing says which results the SDK wrapped
            await self.list_tools()
        sent = dict(arguments)
        result: mcp.types.CallToolResult = await self._request(
            lambda client: client.call_tool(name, sent), tool=name
        )
        if result.is_error:
            text = self._target.redact(failure_text(result))  # a server may echo a secret
            raise MCPToolError(text, server=self._target.label, tool_name=name)
        return result_value(result, wrapped=name in self._wrapped)

    async def aclose(self) -> None:
        """Close the connection (a stdio server's process ends); the next use reopens it."""
        await self._connections.close()

    # -- keeping the agent's scope in step --------------------------------------------

    async def _ensure_scope(self, ctx: ChatStartContext | ApprovalDecisionContext) -> None:
        if self._stale or self._registered is None:
            await self._sync()

    async def _on_message(self, ctx: MessageContext) -> None:
        # A tool result is committed right before the next model call: the moment to take
        # in a tool list the server changed during the chat.
        if self._stale and isinstance(ctx.message, ToolMessage):
            await self._sync()

    async def _on_request(self, ctx: PreRequestContext) -> ProviderRequest | None:
        """Give this request the server's new tools when they changed since it was built.

        A change announced over streamable HTTP may arrive after the last tool result was
        committed, which is when :meth:`_on_message` looks.
        """
        before = self._registered
        if not self._stale or before is None:
            return None
        await self._sync()
        after = self._registered
        if after is before or after is None:
            return None
        old = {t.name for t in before}
        kept = [d for d in ctx.request.tools if d.name not in old]
        scope = self._agent.scopes.get(self._name) if self._agent is not None else None
        offered = len(kept) < len(ctx.request.tools) or (not before and scope is not None)
        if not offered or scope is None or not scope.is_enabled():
            return None  # the scope's tools were not offered (disabled, or a hook's choice)
        new = [t.definition for t in after if t.is_enabled()]
        return dataclasses.replace(ctx.request, tools=(*kept, *new))

    async def _sync(self) -> None:
        """Put the server's current tools into the agent's scope.

        The first listing must work (the chat fails with the typed error); later, a server
        that is down keeps its last tools, and calling them gives the model the error.
        """
        try:
            tools = await self.list_tools()
        except MCPServerError as exc:
            if self._registered is None:
                raise
            logger.warning("keeping the last tool list of %s: %s", self._target.label, exc)
            return
        if tools is not self._registered:
            self._register(tools)

    def _register(self, tools: tuple[Tool, ...]) -> None:
        agent = self._agent
        assert agent is not None, "init_agent() first"
        for t in tools:
            found = agent.scopes.lookup(t.name)
            if found is not None and found[1].name != self._name:
                raise DuplicateNameError(
                    f"tool {t.name!r} of MCP server {self._target.label} is already provided "
                    f"by scope {found[1].name!r}; give the toolset another prefix"
                )
        if self._scope is not None:
            self._scope()
        elif self._name in agent.scopes:
            raise DuplicateNameError(
                f"a scope named {self._name!r} is already registered: give the MCP toolset "
                "another name"
            )
        self._scope = agent.scopes.register(Scope(self._name, tools=tools))
        self._registered = tools

    # -- the server's tools as hookloop tools -----------------------------------------

    def _wrap(self, listed: list[mcp.types.Tool]) -> Iterator[Tool]:
        seen: set[str] = set()
        self._wrapped = frozenset(t.name for t in listed if wraps_one_result(t.output_schema))
        for remote in listed:
            if not self._wanted(remote.name):
                continue
            local = _fitted(self.prefix + _UNSAFE.sub("_", remote.name), remote.name)
            if local in seen:
                logger.warning("MCP tool %r of %s: %r is taken", remote.name, self.server, local)
                continue
            try:
                made = Tool(
                    name=local,
                    description=remote.description or remote.title or "",
                    parameters=remote.input_schema,
                    function=self._caller(remote.name),
                )
            except ToolDefinitionError as exc:
                logger.warning("leaving out MCP tool %r of %s: %s", remote.name, self.server, exc)
                continue
            seen.add(local)
            yield made

    def _wanted(self, name: str) -> bool:
        if self.allow is not None and not _matches(name, self.allow):
            return False
        return not _matches(name, self.deny)

    def _caller(self, remote: str) -> Callable[..., Awaitable[object]]:
        async def call(**arguments: Any) -> object:
            return await self.call_tool(remote, arguments)

        call.__qualname__ = f"{self._name}.{remote}"
        return call

    # -- the connection ---------------------------------------------------------------

    async def _connection(self) -> Connection:
        connection = await self._connections.get()
        if not connection.alive:  # it died: close what is left, and connect again
            await self._connections.close()
            connection = await self._connections.get()
        return connection

    async def _open(self) -> Connection:
        from ._connection import Connection  # needs the mcp extra (anyio)

        connection = Connection(self._target, self._changed)
        label = self._target.label
        try:
            async with asyncio.timeout(self.connect_timeout):
                await connection.open()
        except TimeoutError as exc:
            raise MCPTimeoutError(
                f"the MCP server {label} did not finish connecting within "
                f"{self.connect_timeout:g}s",
                server=label,
                timeout=self.connect_timeout or 0.0,
            ) from exc
        except Exception as exc:
            raise MCPConnectionError(
                f"cannot connect to the MCP server {label}: {self._target.redact(_describe(exc))}",
                server=label,
            ) from exc
        if self._tools is not None:
            self._stale = True  # a new session: the server may list other tools now
        return connection

    def _changed(self) -> None:
        self._stale = True

    async def _request(
        self, request: Callable[[Client], Awaitable[T]], tool: str = "", *, again: bool = True
    ) -> T:
        """Send ``request`` within the timeout; every failure becomes an MCPServerError.

        A streamable-HTTP server that forgot the session (it restarted while the agent was
        idle) refuses the request with a 404 without running it: then, as the protocol says,
        a new session is started, and the request is sent ``again`` (once).
        """
        label = self._target.label
        connection = await self._connection()
        try:
            async with asyncio.timeout(self.timeout):
                return await connection.call(request)
        except TimeoutError as exc:
            raise MCPTimeoutError(
                f"the MCP server {label} did not answer within {self.timeout:g}s",
                server=label,
                timeout=self.timeout or 0.0,
            ) from exc
        except Exception as exc:
            if again and connection.ledger.refused(exc):
                connection.alive = False
                logger.info("the MCP server %s forgot the session: starting a new one", label)
                return await self._request(request, tool, again=False)
            raise _failure(exc, connection, self._target, tool) from exc


def _failure(exc: Exception, connection: Connection, target: Target, tool: str) -> MCPServerError:
    """The typed error for a failed request; a dead connection is marked for reconnecting."""
    import pydantic

    from ._connection import Closed
    from ._wire import from_ledger

    label = target.label
    if isinstance(exc, Closed):
        return MCPConnectionError(
            f"the connection to the MCP server {label} was closed (aclose()) before it answered",
            server=label,
        )
    sdk = import_extra("mcp", extra="mcp", by="MCPToolset")
    if isinstance(exc, sdk.MCPError):
        message = target.redact(exc.message)
        if from_ledger(exc):  # a reply that cannot be matched to its call: no server code
            if tool:
                return MCPToolError(message, server=label, tool_name=tool)
            return MCPServerError(message, server=label)
        if connection.ledger.refused(exc):  # on the new session too
            connection.alive = False
            return MCPConnectionError(
                f"the MCP server {label} refused the request on a new session too: {message}",
                server=label,
            )
        if exc.code == _CONNECTION_CLOSED:
            connection.alive = False
            return MCPConnectionError(
                f"the connection to the MCP server {label} closed (did the server exit?); "
                "the next call reconnects",
                server=label,
            )
        if exc.code == _REQUEST_TIMEOUT:
            return MCPTimeoutError(f"{label}: {message}", server=label, timeout=0.0)
        if tool:
            return MCPToolError(message, server=label, tool_name=tool, code=exc.code)
        return MCPServerError(f"the MCP server {label} refused: {message}", server=label)
    if isinstance(exc, _transport_errors()):
        connection.alive = False  # the session is of no more use
        return MCPConnectionError(
            f"the connection to the MCP server {label} failed: {target.redact(_describe(exc))}",
            server=label,
        )
    # A result that does not parse (ValidationError) or does not match the tool's declared
    # output schema (the SDK's RuntimeError): the connection itself is fine.
    kind = "a malformed" if isinstance(exc, pydantic.ValidationError) else "an unusable"
    text = f"the MCP server {label} sent {kind} answer: {target.redact(_describe(exc))}"
    if tool:
        return MCPToolError(text, server=label, tool_name=tool)
    return MCPServerError(text, server=label)


def _transport_errors() -> tuple[type[Exception], ...]:
    """What the transports raise when the connection itself is gone."""
    import anyio

    http = import_extra("httpx2", extra="mcp", by="MCPToolset")
    return (
        OSError,
        anyio.ClosedResourceError,
        anyio.BrokenResourceError,
        anyio.EndOfStream,
        http.TransportError,
    )


async def _all_tools(client: Client) -> list[mcp.types.Tool]:
    tools: list[mcp.types.Tool] = []
    cursor: str | None = None
    for _ in range(_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


async def _close(connection: Connection) -> None:
    await connection.close()


def _fitted(name: str, remote: str) -> str:
    """``name``, or when longer than a tool name may be, its start and a hash of ``remote``."""
    if len(name) <= _MAX_NAME:
        return name
    digest = hashlib.sha256(remote.encode()).hexdigest()[:8]
    return f"{name[: _MAX_NAME - 9]}_{digest}"


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def _names(what: str, names: Iterable[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        raise UsageError(f"{what} takes a list of tool names, not one str: {what}=[{names!r}]")
    checked = tuple(names)
    for name in checked:
        if not isinstance(name, str) or not name:
            raise UsageError(f"{what} holds {name!r}, not a tool name")
    return checked


def _seconds(what: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"{what} must be a positive number of seconds or None, got {value!r}")
    return float(value)


def _describe(exc: BaseException) -> str:
    """One line for an exception; an exception group is described by its first leaf."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = error_line(exc)
    return text if text == type(exc).__name__ else f"{type(exc).__name__}: {text}"
