"""The Starlette application of ``hookloop serve``: AG-UI, the plain JSON API and the page.

Routes (every ``/agui`` and ``/api`` one needs the bearer token when the server has one)::

    GET  /                                  the chat page
    POST /agui                              AG-UI: RunAgentInput in, events over SSE
    POST /api/threads/{thread}/runs         start a turn: {"message": "..."} -> the run
    GET  /api/threads/{thread}/messages     the thread's messages, pending calls, running run
    GET  /api/threads/{thread}/approvals    the calls waiting for a decision
    POST /api/threads/{thread}/approvals    decide them: {"decisions": [...]} -> the run
    GET  /api/runs/{run}                    a run's status and result
    GET  /api/runs/{run}/events             its events: SSE (Accept: text/event-stream) or JSON
    POST /api/runs/{run}/cancel             cancel it
    GET  /api/threads/{thread}/trace        the thread's trace page (hookloop.observe's)

Every error is a JSON body ``{"type": ..., "message": ...}`` with its status, never a traceback.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pydantic
from ag_ui.core import ResumeEntry, RunAgentInput
from starlette.applications import Starlette
from starlette.convertors import Convertor, register_url_convertor
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .._approval import (
    ApprovalEditError,
    ApprovalMismatchError,
    UnknownApprovalError,
)
from .._errors import (
    ConcurrentChatError,
    DuplicateMessageIdError,
    HookloopError,
    UsageError,
)
from .._messages import UserMessage, new_id
from .._session_limits import session_spend
from ..observe._page import render_trace_page
from ..observe._read import read_trace
from ..sessions._base import check_session_id
from ._agui import agui_messages, decisions_for, new_user_message, pending_json, spend_json
from ._durable import DurableRuns
from ._page import chat_page
from ._runs import AgentFactory, BusyError, OverloadedError, Run, Threads, UnknownError

__all__ = ["ServeSettings", "build_app"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ServeSettings:
    """What ``create_app`` was told (checked there)."""

    token: str | None
    cors_origins: tuple[str, ...]
    max_body: int
    max_message: int
    max_runs: int
    keepalive: float
    cancel_on_disconnect: bool
    trace: bool
    title: str
    durable: str | None = None  # the workers' database: the turns run on hookloop workers


class HttpError(Exception):
    """An error answered with ``status`` and the JSON body ``{type, message}``."""

    def __init__(
        self, status: int, type: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message
        self.headers = headers or {}


def _error_response(exc: HttpError) -> JSONResponse:
    body = {"type": exc.type, "message": exc.message}
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


def _as_http(exc: Exception) -> HttpError:
    """A hookloop or pydantic error as the HTTP error a client gets."""
    if isinstance(exc, HttpError):
        return exc
    if isinstance(exc, OverloadedError):
        return HttpError(503, "overloaded", str(exc), {"Retry-After": "1"})
    if isinstance(exc, UnknownError):
        return HttpError(404, "not_found", str(exc))
    if isinstance(exc, (BusyError, ConcurrentChatError, DuplicateMessageIdError)):
        return HttpError(409, "conflict", str(exc))
    if isinstance(exc, (UnknownApprovalError, ApprovalMismatchError, ApprovalEditError)):
        return HttpError(422, type(exc).__name__, str(exc))
    if isinstance(exc, pydantic.ValidationError):
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
        )
        return HttpError(400, "invalid_input", problems)
    if isinstance(exc, UsageError):
        return HttpError(400, type(exc).__name__, str(exc))
    if isinstance(exc, HookloopError):
        return HttpError(500, type(exc).__name__, str(exc))
    logger.exception("hookloop serve: a request failed", exc_info=exc)
    return HttpError(500, "internal_error", "the server failed; its log says why")


Handler = Callable[[Request], Awaitable[Response]]


class _Server:
    """The routes' handlers over one :class:`Threads`."""

    def __init__(self, factory: AgentFactory | str, settings: ServeSettings) -> None:
        self.settings = settings
        self.threads: Threads | DurableRuns
        if settings.durable is not None:
            self.threads = DurableRuns(factory, settings.durable, max_runs=settings.max_runs)
        elif callable(factory):
            self.threads = Threads(factory, max_runs=settings.max_runs, trace=settings.trace)
        else:
            raise UsageError("an agent given by its import path is served in the durable mode")

    # -- the guard around every API handler -------------------------------------------------

    def api(self, handler: Handler) -> Handler:
        async def guarded(request: Request) -> Response:
            try:
                self._check_origin(request)
                self._authorize(request)
                return await handler(request)
            except Exception as exc:
                return _error_response(_as_http(exc))

        return guarded

    def _check_origin(self, request: Request) -> None:
        """Refuse a browser's POST from a page of another site (cross-site request forgery).

        A form, or a ``fetch`` with a ``text/plain`` body, needs no CORS preflight: the browser
        sends it and only hides the answer. Browsers name the page's origin in ``Origin``; it
        must be this server's own (its ``Host``) or one of ``cors_origins``.
        """
        if request.method in ("GET", "HEAD"):
            return
        origin = request.headers.get("origin")
        if origin is None:
            return  # not a browser's cross-site request: scripts, curl
        allowed = self.settings.cors_origins
        if origin in allowed or "*" in allowed:
            return
        host = request.headers.get("host", "")
        try:
            netloc = urlsplit(origin).netloc
        except ValueError:  # not a URL
            netloc = ""
        if host and netloc.lower() == host.lower():
            return
        raise HttpError(
            403,
            "forbidden_origin",
            f"requests from pages of {origin!r:.100} are refused: list it with --cors-origin",
        )

    def _authorize(self, request: Request) -> None:
        token = self.settings.token
        if token is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, value = given.partition(" ")
        # Starlette reads a header's bytes as latin-1: encoded back, they are the bytes sent
        # (a token that is not ASCII arrives as its UTF-8)
        ok = scheme.lower() == "bearer" and hmac.compare_digest(
            value.strip().encode("latin-1"), token.encode()
        )
        if not ok:
            raise HttpError(
                401,
                "unauthorized",
                "this server needs its token: Authorization: Bearer <token>",
                {"WWW-Authenticate": "Bearer"},
            )

    async def _body(self, request: Request) -> bytes:
        limit = self.settings.max_body
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise HttpError(413, "too_large", f"the request body is over {limit} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise HttpError(413, "too_large", f"the request body is over {limit} bytes")
        return bytes(body)

    async def _json(self, request: Request) -> dict[str, Any]:
        raw = await self._body(request)
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError):  # RecursionError: nested too deep
            message = "the body is not JSON (or nests too deep)"
            raise HttpError(400, "invalid_input", message) from None
        if not isinstance(value, dict):
            raise HttpError(400, "invalid_input", "the body must be a JSON object")
        return value

    def _check_message(self, message: UserMessage) -> None:
        size = len(message.content) if isinstance(message.content, str) else 0
        if size > self.settings.max_message:
            raise HttpError(
                413,
                "too_large",
                f"the message is {size} characters; this server takes at most "
                f"{self.settings.max_message}",
            )

    @staticmethod
    def _after(request: Request) -> int:
        text = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        try:
            after = int(text)
        except ValueError:
            after = -1
        if after < 0:
            raise HttpError(400, "invalid_input", f"not an event id: {text!r:.40}")
        return after

    # -- AG-UI ------------------------------------------------------------------------------

    async def agui(self, request: Request) -> Response:
        run_input = RunAgentInput.model_validate_json(await self._body(request))
        thread_id = _checked_id(run_input.thread_id, "threadId")
        run_id = _checked_id(run_input.run_id, "runId")
        after = self._after(request)  # checked before a run starts
        run = await self.threads.existing(run_id, thread_id)
        if run is None:
            run = await self.threads.reattach(thread_id, run_id)
        if run is None:
            if after > 0:  # a reconnect: its run's message must not run a second time
                raise HttpError(
                    404,
                    "not_found",
                    f"no run {run_id!r} here to reconnect to (it ended long ago, or the server "
                    "restarted): the thread's messages say where it stands",
                )
            run = await self._start(thread_id, run_id, run_input)
        return self._stream(run, after)

    async def _start(self, thread_id: str, run_id: str, run_input: RunAgentInput) -> Run:
        entries: Sequence[ResumeEntry] = run_input.resume or ()
        message = None
        if not entries:
            message = new_user_message(run_input)
            _checked_id(message.id, "the user message's id")
            self._check_message(message)
        if entries:
            return await self.threads.start(
                thread_id, run_id, decisions=lambda pending: decisions_for(pending, entries)
            )
        return await self.threads.start(thread_id, run_id, message=message)

    def _stream(self, run: Run, after: int) -> StreamingResponse:
        headers = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
        return StreamingResponse(
            self._events(run, after), media_type="text/event-stream", headers=headers
        )

    async def _events(self, run: Run, after: int) -> AsyncIterator[bytes]:
        """The run's events after ``after``, then the live ones; comments while it is quiet."""
        run.readers += 1
        run.release()  # the run's first events go out before its work: see Threads.start
        sent = min(after, len(run.events))
        try:
            yield b": hookloop run " + json.dumps(run.run_id).encode() + b"\n\n"
            while True:
                while sent < len(run.events):
                    data = run.events[sent]
                    sent += 1
                    yield f"id: {sent}\ndata: {data}\n\n".encode()
                if run.done or run.detached:
                    return
                try:
                    async with asyncio.timeout(self.settings.keepalive):
                        await run.wait(sent)
                except TimeoutError:
                    yield b": keepalive\n\n"
        finally:
            run.readers -= 1
            if self.settings.cancel_on_disconnect and not run.done and run.readers == 0:
                self.threads.cancel(run)

    # -- the plain JSON API -----------------------------------------------------------------

    async def start_run(self, request: Request) -> Response:
        thread_id = _path_id(request, "thread")
        body = await self._json(request)
        text = body.get("message")
        if not isinstance(text, str) or not text.strip():
            raise HttpError(400, "invalid_input", 'the body needs "message": a non-empty string')
        run_id = _run_id(body)
        message = UserMessage(content=text)
        self._check_message(message)
        run = await self.threads.start(thread_id, run_id, message=message)
        run.release()  # nobody streams it here
        return JSONResponse(run.summary(), status_code=202)

    async def messages(self, request: Request) -> Response:
        thread_id = _path_id(request, "thread")
        async with self.threads.reading(thread_id) as agent:
            pending = [] if agent.is_running else await agent.pending_approvals()
            running = self.threads.running_on(thread_id)
            body = {
                "threadId": thread_id,
                "messages": [
                    m.model_dump(mode="json", by_alias=True) for m in agui_messages(agent.messages)
                ],
                "pending": [pending_json(p) for p in pending],
                "running": None if running is None else running.summary(),
                "spent": spend_json(await session_spend(agent)),
            }
        return JSONResponse(body)

    async def approvals(self, request: Request) -> Response:
        async with self.threads.reading(_path_id(request, "thread")) as agent:
            pending = [] if agent.is_running else await agent.pending_approvals()
        return JSONResponse({"pending": [pending_json(p) for p in pending]})

    async def decide(self, request: Request) -> Response:
        thread_id = _path_id(request, "thread")
        async with self.threads.reading(thread_id):
            pass  # an unknown thread is a 404
        body = await self._json(request)
        given = body.get("decisions")
        if not isinstance(given, list) or not all(isinstance(d, dict) for d in given):
            raise HttpError(400, "invalid_input", 'the body needs "decisions": a list of objects')
        entries = []
        for d in given:
            call_id = d.get("callId")
            if not isinstance(call_id, str):
                raise HttpError(400, "invalid_input", 'each decision needs its "callId"')
            payload = {k: v for k, v in d.items() if k != "callId"}
            entries.append(ResumeEntry(interrupt_id=call_id, status="resolved", payload=payload))
        run = await self.threads.start(
            thread_id, _run_id(body), decisions=lambda pending: decisions_for(pending, entries)
        )
        run.release()  # nobody streams it here
        return JSONResponse(run.summary(), status_code=202)

    async def run_status(self, request: Request) -> Response:
        return JSONResponse(self.threads.run(_path_id(request, "run")).summary())

    async def run_events(self, request: Request) -> Response:
        run = self.threads.run(_path_id(request, "run"))
        after = self._after(request)
        if "text/event-stream" in request.headers.get("accept", ""):
            return self._stream(run, after)
        if request.query_params.get("wait") in ("1", "true") and not run.done:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_WAIT_MOST):
                    while not run.done:
                        await run.wait(len(run.events))
        events = [
            {"id": n, "event": json.loads(text)}
            for n, text in enumerate(run.events[after:], start=after + 1)
        ]
        return JSONResponse({"runId": run.run_id, "status": run.status, "events": events})

    async def trace(self, request: Request) -> Response:
        thread_id = _path_id(request, "thread")
        lines = self.threads.trace(thread_id)
        title = f"hookloop thread {thread_id}"
        return HTMLResponse(render_trace_page(read_trace(lines), title=title))

    async def cancel(self, request: Request) -> Response:
        run = self.threads.run(_path_id(request, "run"))
        return JSONResponse({"runId": run.run_id, "cancelled": self.threads.cancel(run)})

    async def page(self, request: Request) -> Response:
        traced = self.settings.trace and self.settings.durable is None
        return HTMLResponse(chat_page(self.settings.title, trace=traced))


_WAIT_MOST = 300.0  # seconds ``?wait=true`` waits for a run's end at most


def _run_id(body: dict[str, Any]) -> str:
    given = body.get("runId")
    return new_id("run") if given is None else _checked_id(given, "runId")


def _checked_id(value: object, what: str) -> str:
    """A thread, run or message id: what a session id may be (1 to 256 printable characters).

    Ids go into SSE lines, logs and session stores: a line break or a NUL in one must never
    get there, and a thread id is its session's id.
    """
    try:
        return check_session_id(value, what)
    except UsageError:
        raise HttpError(
            400, "invalid_input", f"{what} must be 1 to 256 printable characters"
        ) from None


def _path_id(request: Request, name: str) -> str:
    return _checked_id(request.path_params[name], name)


class _IdConvertor(Convertor[str]):
    """A thread or run id in a route: any characters, "/" too (sent as %2F, seen decoded).

    Session ids such as ``user/1`` are usual; :func:`_checked_id` judges the rest (a line
    break is a 400, not a route that does not match).
    """

    regex = "(?s:.+)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("hookloop_id", _IdConvertor())


class _JsonCORSMiddleware(CORSMiddleware):
    """Starlette's CORS middleware, whose refused preflight answers JSON like every error."""

    def preflight_response(self, request_headers: Headers) -> Response:
        response = super().preflight_response(request_headers)
        if response.status_code < 400:
            return response
        kept = {
            k: v
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "content-type")
        }
        body = {"type": "cors_refused", "message": bytes(response.body).decode()}
        return JSONResponse(body, status_code=response.status_code, headers=kept)


def build_app(factory: AgentFactory | str, settings: ServeSettings) -> Starlette:
    """The application: routes, CORS when origins are listed, the runs closed at shutdown."""
    server = _Server(factory, settings)
    api = server.api
    thread = "/api/threads/{thread:hookloop_id}"
    run = "/api/runs/{run:hookloop_id}"
    routes = [
        Route("/", server.page, methods=["GET"]),
        Route("/agui", api(server.agui), methods=["POST"]),
        Route(thread + "/runs", api(server.start_run), methods=["POST"]),
        Route(thread + "/messages", api(server.messages), methods=["GET"]),
        Route(thread + "/approvals", api(server.approvals), methods=["GET"]),
        Route(thread + "/approvals", api(server.decide), methods=["POST"]),
        Route(thread + "/trace", api(server.trace), methods=["GET"]),
        Route(run + "/events", api(server.run_events), methods=["GET"]),
        Route(run + "/cancel", api(server.cancel), methods=["POST"]),
        Route(run, api(server.run_status), methods=["GET"]),  # last: it matches the others too
    ]
    middleware = []
    if settings.cors_origins:
        middleware.append(
            Middleware(
                _JsonCORSMiddleware,
                allow_origins=list(settings.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["authorization", "content-type", "last-event-id"],
            )
        )

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await server.threads.open()
        try:
            yield
        finally:
            await server.threads.aclose()

    async def not_found(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        kind = "not_found" if status == 404 else "method_not_allowed" if status == 405 else "error"
        detail = getattr(exc, "detail", "") or "no such route"
        return JSONResponse({"type": kind, "message": str(detail)}, status_code=status)

    async def failed(request: Request, exc: Exception) -> Response:
        return _error_response(_as_http(exc))

    app = Starlette(
        routes=routes,
        middleware=middleware,
        lifespan=lifespan,
        exception_handlers={404: not_found, 405: not_found, Exception: failed},
    )
    app.state.hookloop = server
    return app
