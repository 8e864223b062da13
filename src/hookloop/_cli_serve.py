"""``hookloop serve``: an agent behind HTTP (AG-UI, a JSON API, a chat page) with uvicorn.

Safe by default: it listens on loopback; any other ``--host`` needs ``--token`` (clients send
``Authorization: Bearer <token>``) or an explicit ``--insecure``. See docs/serve.md.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
from collections.abc import Callable
from typing import cast

from ._agent import Agent
from ._errors import UsageError
from ._extras import import_attribute, import_extra
from .mcp._serve import stopped_by_signals

__all__ = ["add_serve_command"]

_LOOPBACK = ("127.0.0.1", "::1", "localhost")
TOKEN_ENV = "HOOKLOOP_SERVE_TOKEN"


def add_serve_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve an agent over HTTP: AG-UI, a JSON API and a chat page (hookloop[serve])",
        description="Serve the agent TARGET builds (MODULE:FUNCTION, called once per thread) "
        "over HTTP: AG-UI over SSE at /agui, a JSON API at /api, a chat page at /. Without "
        "TARGET: the --model (the embedded local model by default) with the calculator. It "
        "listens on 127.0.0.1; another --host needs --token or --insecure.",
    )
    serve.add_argument(
        "target",
        nargs="?",
        metavar="MODULE:FUNCTION",
        help="the function that builds a thread's Agent (modules in the current directory "
        "included)",
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="the port (8000; 0: a free one)")
    serve.add_argument(
        "--token",
        help=f"the bearer token every /agui and /api request needs (or ${TOKEN_ENV}, which "
        "other users of the machine cannot read from the process list)",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="listen on a non-loopback --host without a token: anyone who reaches it runs "
        "the agent",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="a browser origin allowed to call the API from another site; repeatable "
        "(default: none, CORS off)",
    )
    serve.add_argument(
        "--max-body",
        type=int,
        default=1_000_000,
        metavar="BYTES",
        help="the largest request body (413 beyond; 1000000)",
    )
    serve.add_argument(
        "--max-message",
        type=int,
        default=100_000,
        metavar="CHARS",
        help="the longest user message (413 beyond; 100000)",
    )
    serve.add_argument(
        "--max-runs", type=int, default=64, metavar="N", help="runs at once (503 beyond; 64)"
    )
    serve.add_argument(
        "--keepalive",
        type=float,
        default=15.0,
        metavar="S",
        help="seconds of quiet after which a stream gets a comment, so proxies keep it (15)",
    )
    serve.add_argument(
        "--cancel-on-disconnect",
        action="store_true",
        help="cancel a run when its client disconnects (default: it goes on; reconnect with "
        "Last-Event-ID)",
    )
    serve.add_argument(
        "--no-trace",
        action="store_true",
        help="record no trace of the threads (the chat page then has no trace link)",
    )
    serve.add_argument(
        "--durable",
        metavar="DATABASE_URL",
        help="run the turns on `hookloop worker` processes of this postgresql:// database "
        "(their --database; TARGET is their --agent): a run survives its worker and this "
        "server",
    )
    serve.add_argument(
        "--model",
        default="local",
        help="without TARGET: the model that answers (as for hookloop run; local by default)",
    )
    serve.add_argument(
        "--debug", action="store_true", help="show the traceback of a failure, not one line"
    )
    serve.set_defaults(handler=_serve)


def check_exposure(host: str, token: str | None, insecure: bool) -> None:
    """Refuse a non-loopback address without a token or an explicit ``--insecure``.

    Raises:
        UsageError: ``host`` is not loopback and neither is given.
    """
    if host in _LOOPBACK or token or insecure:
        return
    raise UsageError(
        f"--host {host} is reachable from other machines: give --token (clients send "
        "Authorization: Bearer <token>) or --insecure to serve without one"
    )


async def _serve(args: argparse.Namespace) -> int:
    from ._cli import EXIT_OK  # here: the command imports this module
    from .serve import create_app

    token = args.token or os.environ.get(TOKEN_ENV) or None
    check_exposure(args.host, token, args.insecure)
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port must be between 0 and 65535 (got {args.port})")
    uvicorn = import_extra("uvicorn", extra="serve", by="hookloop serve")
    if args.durable is not None and not args.target:
        raise UsageError(
            "--durable serves the agent the workers build: give their --agent as TARGET"
        )
    # The options are checked (by create_app) before a model is loaded, which takes seconds.
    made: list[Callable[[], Agent]] = []
    app = create_app(
        args.target if args.durable is not None else lambda: made[0](),
        token=token,
        cors_origins=args.cors_origin,
        max_body=args.max_body,
        max_message=args.max_message,
        max_runs=args.max_runs,
        keepalive=args.keepalive,
        cancel_on_disconnect=args.cancel_on_disconnect,
        trace=not args.no_trace,
        durable=args.durable,
    )
    if args.durable is None:
        made.append(await _factory(args))
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning")
    server = uvicorn.Server(config)
    startup = server.startup

    async def announced(sockets: object = None) -> None:
        await startup(sockets)
        if server.started:
            host, port = server.servers[0].sockets[0].getsockname()[:2]
            shown = f"[{host}]" if ":" in host else host
            print(f"hookloop: serving at http://{shown}:{port}/", file=sys.stderr, flush=True)

    server.startup = announced
    shutdown = server.shutdown

    async def stopping(sockets: object = None) -> None:
        # uvicorn waits for open responses before the app's shutdown, and a run's stream
        # stays open until the run ends: the runs are cancelled first, so the streams end.
        app.state.hookloop.threads.cancel_all()
        await shutdown(sockets)

    server.shutdown = stopping
    # As `hookloop mcp serve --http`: SIGTERM or Ctrl-C shut it down (runs cancelled, their
    # messages in the session log) and the command ends with its own status, not the signal.
    server.capture_signals = contextlib.nullcontext
    with stopped_by_signals(server) as received:
        await server.serve()
    if signal.SIGINT in received:
        raise KeyboardInterrupt
    return EXIT_OK


async def _factory(args: argparse.Namespace) -> Callable[[], Agent]:
    if args.target:
        value = import_attribute(args.target, "agent factory")
        if not callable(value):
            raise UsageError(
                f"{args.target} is {type(value).__name__}, not a function that builds an Agent"
            )
        return cast("Callable[[], Agent]", value)
    from ._builtin_tools import calculator
    from ._cli import _load
    from .models._spec import model_from_spec

    model = model_from_spec(args.model)
    local = sys.modules.get("hookloop.models._local")
    if local is not None and isinstance(model, local.LocalModel):
        await _load(model, sys.stderr)

    def build() -> Agent:
        return Agent(model, tools=[calculator])

    return build
