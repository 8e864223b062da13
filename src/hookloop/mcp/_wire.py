"""What crosses the wire to an MCP server: replies matched to requests (needs the mcp extra).

The SDK drops a reply it cannot match to a request (a reply it cannot parse, or one with an
id it never sent), so the call it answered waits out its whole timeout. :class:`Ledger`
watches a transport's streams instead and answers such a call at once with an error: a
reply that does not parse but names a request in flight fails that request; a reply with an
id never sent fails every request in flight, since that server's answers cannot be matched
to its calls. A late reply to a request the client gave up on (and said so) is not news.

It also notes what a streamable-HTTP server answers with ``404`` to a request on a session:
the server forgot the session (it restarted), refused the request without running it, and
expects a new session (the protocol's rule); :meth:`Ledger.refused` recognises that error.
"""

from __future__ import annotations

import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import httpx2
import pydantic
from mcp.client.streamable_http import MCP_SESSION_ID
from mcp.shared.dispatcher import coerce_request_id
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.types import (
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
)

if TYPE_CHECKING:
    from mcp.client._transport import ReadStream, Transport, TransportStreams

__all__ = ["Ledger", "from_ledger"]

_MARK = "hookloop"  # ErrorData.data of the errors a Ledger writes: the server sent none
_CANCELLED = "notifications/cancelled"
# What the SDK makes of a 404 whose body is no JSON-RPC error (mcp.client.streamable_http).
_SESSION_TERMINATED = (-32600, "Session terminated")


class Ledger:
    """The requests in flight on one connection, and the session refusals seen on it.

    Args:
        label: The server, for the texts of the errors it writes.
    """

    def __init__(self, label: str) -> None:
        self._label = label
        self._pending: set[RequestId] = set()
        self._abandoned: set[RequestId] = set()  # the client said it gave up on these
        self._refusals: set[tuple[int, str]] = set()

    def transport(self, inner: Transport) -> Transport:
        """``inner`` with its streams watched by this ledger."""
        return _watched(inner, self)

    def refused(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a server's 404 refusal of a request on a session it forgot."""
        return isinstance(exc, MCPError) and (exc.code, exc.message) in self._refusals

    async def on_response(self, response: httpx2.Response) -> None:
        """Note a 404 to a request on a session (an ``httpx2`` response hook)."""
        request = response.request
        if response.status_code != 404 or request.method != "POST":
            return
        if MCP_SESSION_ID not in request.headers:
            return  # no session yet: a 404 there means the method is unknown
        await response.aread()  # small; the SDK then reads the same, cached, content
        self._refusals.add(_error_of(response))

    def sent(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, JSONRPCRequest):
            self._pending.add(coerce_request_id(message.id))
        elif isinstance(message, JSONRPCNotification) and message.method == _CANCELLED:
            given = (message.params or {}).get("requestId")
            if isinstance(given, str | int):
                self._pending.discard(coerce_request_id(given))
                self._abandoned.add(coerce_request_id(given))

    def received(self, item: SessionMessage | Exception) -> list[SessionMessage | Exception]:
        """What the session should see for ``item``: it, or errors for the calls it failed."""
        if isinstance(item, pydantic.ValidationError):
            return self._unparsed(item)
        if isinstance(item, Exception) or not isinstance(
            item.message, JSONRPCResponse | JSONRPCError
        ):
            return [item]
        given = item.message.id
        key = coerce_request_id(given) if given is not None else None
        if key in self._pending:
            self._pending.discard(key)
            return [item]
        if key in self._abandoned:  # a late reply: the client stopped waiting for it
            self._abandoned.discard(key)
            return [item]
        if not self._pending:
            return [item]
        text = (
            f"the MCP server {self._label} answered with id {given!r}, which matches no request "
            "in flight, so its answers cannot be matched to the calls"
        )
        return self._failed(sorted(self._pending, key=str), text)

    def _unparsed(self, error: pydantic.ValidationError) -> list[SessionMessage | Exception]:
        """Fail the request in flight that a reply the SDK cannot parse names by its id.

        A line that names none (a stray print on a stdio server's output) is the SDK's
        to report; the calls wait for their real answers.
        """
        details = error.errors(include_url=False)
        for detail in details:
            raw = detail.get("input")
            if not isinstance(raw, dict):
                continue
            given = raw.get("id")
            if not isinstance(given, str | int) or coerce_request_id(given) not in self._pending:
                continue
            kind = ("JSONRPCError",) if "error" in raw else ("JSONRPCResponse",)
            first = next((d for d in details if tuple(d["loc"][:1]) == kind), detail)
            where = ".".join(str(part) for part in first["loc"][1:]) or "the message"
            text = (
                f"the MCP server {self._label} sent a reply that is not valid JSON-RPC "
                f"({where}: {first['msg']})"
            )
            return self._failed([coerce_request_id(given)], text)
        return [error]

    def _failed(self, ids: list[RequestId], why: str) -> list[SessionMessage | Exception]:
        errors: list[SessionMessage | Exception] = []
        for key in ids:
            self._pending.discard(key)
            failure = ErrorData(code=-32603, message=why, data=_MARK)
            errors.append(SessionMessage(JSONRPCError(jsonrpc="2.0", id=key, error=failure)))
        return errors


def from_ledger(exc: MCPError) -> bool:
    """Whether ``exc`` is an error a :class:`Ledger` wrote (the server sent none)."""
    return bool(exc.data == _MARK)


def _error_of(response: httpx2.Response) -> tuple[int, str]:
    """The JSON-RPC error (code, message) the SDK raises for a refused request."""
    if response.headers.get("content-type", "").lower().startswith("application/json"):
        with contextlib.suppress(ValueError):
            body: Any = json.loads(response.content)
            error = body.get("error") if isinstance(body, dict) else None
            if isinstance(error, dict) and isinstance(error.get("code"), int):
                return error["code"], str(error.get("message", ""))
    return _SESSION_TERMINATED


@contextlib.asynccontextmanager
async def _watched(inner: Transport, ledger: Ledger) -> AsyncIterator[TransportStreams]:
    async with inner as (read, write):
        yield _Reader(read, ledger), _Writer(write, ledger)


class _Watched:
    """A transport's stream, with a ledger beside it; everything else is the stream's."""

    def __init__(self, inner: Any, ledger: Ledger) -> None:
        self._inner = inner
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:  # last_context, for the dispatcher
        return getattr(self._inner, name)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        result: bool | None = await self._inner.__aexit__(exc_type, exc_val, exc_tb)
        return result


class _Reader(_Watched):
    """A transport's read stream, its replies checked by a ledger."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], ledger: Ledger) -> None:
        super().__init__(inner, ledger)
        self._queued: deque[SessionMessage | Exception] = deque()

    async def receive(self) -> SessionMessage | Exception:
        while not self._queued:
            self._queued.extend(self._ledger.received(await self._inner.receive()))
        return self._queued.popleft()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        while not self._queued:
            self._queued.extend(self._ledger.received(await self._inner.__anext__()))
        return self._queued.popleft()


class _Writer(_Watched):
    """A transport's write stream, its requests noted by a ledger."""

    async def send(self, item: SessionMessage, /) -> None:
        self._ledger.sent(item)
        await self._inner.send(item)
