"""``create_app``: an agent behind HTTP, as an ASGI application (Starlette)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .._errors import UsageError
from .._extras import extra_needed

if TYPE_CHECKING:
    from starlette.applications import Starlette

__all__ = ["create_app"]


def create_app(
    agent: Callable[[], object] | str,
    *,
    token: str | None = None,
    cors_origins: Iterable[str] = (),
    max_body: int = 1_000_000,
    max_message: int = 100_000,
    max_runs: int = 64,
    keepalive: float = 15.0,
    cancel_on_disconnect: bool = False,
    trace: bool = True,
    title: str = "hookloop",
    durable: str | None = None,
) -> Starlette:
    """The ASGI app serving an agent: AG-UI at ``/agui``, JSON at ``/api``, a page at ``/``.

    Each thread (AG-UI's ``threadId``) is a session: its agent is built by ``agent()`` the
    first time the thread is used, with the thread id as its session id, and kept. Give the
    agent a session recorder (``agent.use(store.session())``) and its conversations outlive
    the process. See ``docs/serve.md``.

    Args:
        agent: Builds a thread's agent (no arguments, like a ``hookloop worker``'s factory).
        token: When given, every ``/agui`` and ``/api`` request needs
            ``Authorization: Bearer <token>`` (401 otherwise).
        cors_origins: The browser origins allowed to call it from other sites (none: CORS off).
        max_body: The most bytes a request body may have (413 beyond).
        max_message: The most characters a user message may have (413 beyond).
        max_runs: The most runs going on at once (503 with ``Retry-After`` beyond).
        keepalive: Seconds of quiet after which a stream sends a comment, so proxies keep it.
        cancel_on_disconnect: Cancel a run when its last reader disconnects (by default it
            goes on, and a client reconnects with ``Last-Event-ID``).
        trace: Record each thread's hook events, for its trace page
            (``/api/threads/THREAD/trace``, linked from the chat page); ``False`` saves
            their time and memory.
        title: The chat page's title.
        durable: The PostgreSQL database of ``hookloop worker`` processes
            (``postgresql://...``): the turns are submitted to their session queue and run
            there, and their events come back through the database, so a run survives its
            worker and this server. ``agent`` must then be the workers' ``--agent``: an
            import path ``"module:function"`` or a module-level function. No traces are
            recorded. DBOS workers only (not Temporal's). See ``docs/serve.md``.

    Raises:
        MissingExtraError: The ``serve`` extra is not installed.
        UsageError: A bound is not a positive number, or ``agent`` is not callable.
    """
    if durable is not None:
        if isinstance(durable, str) and durable.startswith("temporal://"):
            raise UsageError(
                "the durable mode serves the turns of DBOS workers (hookloop worker --database "
                "postgresql://...), not of Temporal workers: give the workers' postgresql:// "
                "database URL"
            )
        if not (isinstance(durable, str) and durable.startswith(("postgresql://", "postgres://"))):
            raise UsageError(
                f"durable must be the workers' postgresql:// database URL, got {durable!r:.80}"
            )
        if not (isinstance(agent, str) or callable(agent)):
            raise UsageError(f"agent must be 'module:function' or a function, got {agent!r:.80}")
    elif not callable(agent):
        raise UsageError(f"agent must be a function that builds an Agent, got {agent!r:.80}")
    for name, value in (("max_body", max_body), ("max_message", max_message)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise UsageError(f"{name} must be a positive int, got {value!r}")
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < 1:
        raise UsageError(f"max_runs must be a positive int, got {max_runs!r}")
    if not (isinstance(keepalive, (int, float)) and keepalive > 0):
        raise UsageError(f"keepalive must be a positive number of seconds, got {keepalive!r}")
    if token is not None and (not isinstance(token, str) or not token.strip()):
        raise UsageError("token must be a non-empty str, or None for no token")
    origins = (cors_origins,) if isinstance(cors_origins, str) else tuple(cors_origins)
    with extra_needed("serve", by="create_app"):
        from ._app import ServeSettings, build_app

    settings = ServeSettings(
        token=token,
        cors_origins=origins,
        max_body=max_body,
        max_message=max_message,
        max_runs=max_runs,
        keepalive=float(keepalive),
        cancel_on_disconnect=cancel_on_disconnect,
        trace=trace,
        title=title,
        durable=durable,
    )
    return build_app(agent, settings)
