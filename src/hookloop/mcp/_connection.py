"""One live session with an MCP server, owned by a task of its own (needs the mcp extra).

``mcp.Client`` must be entered and left in one task (it holds anyio task groups), while an
agent opens the connection in the first chat that needs it and closes it in ``aclose()``,
from other tasks. So a task of the connection's own enters the client, hands it over, and
waits to be told to leave; calls run from any task of the same loop, through :meth:`call`,
which closing ends (an in-process server's call runs in the caller's task, and nothing else
would stop it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import anyio.lowlevel

from .._extras import import_extra
from .._version import VERSION
from ._target import Target
from ._wire import Ledger

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["Closed", "Connection"]

T = TypeVar("T")

logger = logging.getLogger(__name__)

_LIST_CHANGED = "notifications/tools/list_changed"
_CLOSE_GRACE = 30.0  # a backstop: the SDK bounds a stdio server's exit itself (then kills it)


class Closed(Exception):
    """The connection was closed (``aclose()``) while a call was waiting for its answer."""


class Connection:
    """A connected ``mcp.Client``; :meth:`open` it, :meth:`call` it, then :meth:`close`.

    Args:
        target: The server.
        on_list_changed: Called when the server says its tool list changed.
    """

    def __init__(self, target: Target, on_list_changed: Callable[[], None]) -> None:
        self._target = target
        self._on_list_changed = on_list_changed
        self._stop = asyncio.Event()
        self._owner: asyncio.Task[None] | None = None
        self._client: Client | None = None
        self._calls: set[anyio.CancelScope] = set()
        self.ledger = Ledger(target.label)
        """The requests in flight over a transport, and the server's session refusals."""
        self.alive = False
        """False once the session ended or a call found it dead: the next use reconnects."""

    @property
    def client(self) -> Client:
        """The connected client."""
        assert self._client is not None, "open() first"
        return self._client

    async def open(self) -> None:
        """Connect (start the server's process, or reach its URL) and wait until it is ready.

        Raises:
            Exception: What connecting raised (the caller maps it to a typed error).
        """
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp {self._target.label}")
        try:
            self._client = await ready
        except BaseException:
            await self._abandon()
            raise
        self.alive = True

    async def call(self, request: Callable[[Client], Awaitable[T]]) -> T:
        """``request`` on the client; closing the connection meanwhile ends it.

        Raises:
            Closed: :meth:`close` ran before the answer came.
            Exception: What ``request`` raised.
        """
        with anyio.CancelScope() as scope:
            self._calls.add(scope)
            try:
                return await request(self.client)
            finally:
                self._calls.discard(scope)
        raise Closed  # only close() cancels the scope

    async def close(self) -> None:
        """Leave the session and wait until it is closed (a stdio server's process ended).

        Calls still waiting for their answers end with :class:`Closed`.
        """
        self.alive = False
        self._stop.set()
        for scope in list(self._calls):
            scope.cancel()
        owner = self._owner
        if owner is None or owner.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(owner), _CLOSE_GRACE)
        except TimeoutError:
            owner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await owner

    async def _abandon(self) -> None:
        """Stop connecting now: the client never became ready, so no session needs leaving."""
        self.alive = False
        self._stop.set()
        owner = self._owner
        if owner is None:
            return
        owner.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await owner

    async def _own(self, ready: asyncio.Future[Client]) -> None:
        sdk = import_extra("mcp", extra="mcp", by="MCPToolset")
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = sdk.Client(
                    await self._server(stack),
                    message_handler=self._on_message,
                    client_info=sdk.Implementation(name="hookloop", version=VERSION),
                    cache=None,  # the toolset keeps the tool list itself, until list_changed
                )
                await stack.enter_async_context(client)
                group = await stack.enter_async_context(anyio.create_task_group())
                if _listens(client):
                    await group.start(self._listen, client)
                ready.set_result(client)
                await self._stop.wait()
                group.cancel_scope.cancel()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:  # the session broke under us: the calls in flight say so to the model
                logger.debug("MCP session with %s ended: %r", self._target.label, exc)
        finally:
            self.alive = False
            if not ready.done():
                ready.cancel()

    async def _server(self, stack: contextlib.AsyncExitStack) -> object:
        """What ``mcp.Client`` connects to: a transport watched by :attr:`ledger`.

        An in-process server has no transport to watch (nor a wire to garble).
        """
        target = self._target
        if target.kind == "in-process":
            return target.server
        if target.kind == "stdio":
            stdio = import_extra("mcp.client.stdio", extra="mcp", by="MCPToolset")
            return self.ledger.transport(stdio.stdio_client(target.server))
        http = import_extra("mcp.client.streamable_http", extra="mcp", by="MCPToolset")
        session = await stack.enter_async_context(
            http.create_mcp_http_client(headers=dict(target.headers) or None)
        )
        session.event_hooks["response"].append(self.ledger.on_response)
        transport = http.streamable_http_client(str(target.server), http_client=session)
        return self.ledger.transport(transport)

    async def _listen(
        self, client: Client, *, task_status: Any = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep a ``subscriptions/listen`` stream open: how 2026 servers announce changes.

        Its events reach :meth:`_on_message` too, as ``tools/list_changed`` notifications;
        a stream that ends abruptly (``SubscriptionLost``) means the connection is gone.
        """
        async with contextlib.AsyncExitStack() as stack:
            try:
                events = await stack.enter_async_context(client.listen(tools_list_changed=True))
            except Exception as exc:  # a server that cannot listen: its tools still work
                logger.warning("%s does not announce tool changes: %s", self._target.label, exc)
                task_status.started()
                return
            task_status.started()
            async for _ in events:
                pass

    async def _on_message(self, message: object) -> None:
        if getattr(message, "method", None) == _LIST_CHANGED:
            self._on_list_changed()
        await anyio.lowlevel.checkpoint()


def _listens(client: Client) -> bool:
    """Whether the server announces tool-list changes on a listen stream (2026 protocol)."""
    modern = import_extra("mcp_types.version", extra="mcp", by="MCPToolset")
    tools = client.server_capabilities.tools
    return (
        tools is not None
        and bool(tools.list_changed)
        and client.protocol_version in modern.MODERN_PROTOCOL_VERSIONS
    )
