"""The small interface a durable-execution engine implements for hookloop's durable turns.

DBOS (:class:`~hookloop.durable.DBOSEngine`) and Temporal
(:class:`~hookloop.durable.TemporalEngine`) implement it. The loop and
:class:`~hookloop.durable.DurableChats` only talk to this protocol. It assumes that the
turn's own code may do I/O between steps (the session store, hooks) and that
:meth:`DurableEngine.step` runs an in-process closure: DBOS gives both. Temporal's workflow
code may do no I/O, so its engine runs the turn's code in activities instead, each one
replaying the turn from the records of the calls before it and running one call (see
``_temporal.py``); its workflow only keeps the records. Every value crossing the protocol is a
``str`` (JSON made by hookloop), so an engine needs no serializer of its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from .._background import run_sync
from .._errors import UsageError

__all__ = ["DecidingEngine", "DurableEngine", "EngineLifecycle", "WorkflowBody"]

WorkflowBody = Callable[[str], Awaitable[str]]
"""A workflow's code: its recorded input in, its recorded output out."""


@runtime_checkable
class DurableEngine(Protocol):
    """What hookloop needs from a durable-execution engine.

    A workflow is registered under a name before :meth:`launch` (so a restarted worker can
    recover the workflows it left), and started with an id; its body runs steps, each of
    which runs once: run again after a crash, the body gets each finished step's recorded
    output instead of running it.

    A replay is told from :meth:`step` alone: a step whose body does not run came from the
    record (see :func:`~hookloop.durable.replaying`), so an engine needs nothing more.
    """

    def register(self, name: str, body: WorkflowBody) -> None:
        """Make ``body`` the code of workflows named ``name``; before :meth:`launch`."""
        ...

    async def launch(self) -> None:
        """Start the engine; the workflows this worker left unfinished resume."""
        ...

    async def shutdown(self) -> None:
        """Stop the engine; unfinished workflows resume at the next launch."""
        ...

    async def start(self, name: str, workflow_id: str, payload: str) -> None:
        """Start workflow ``name`` with id ``workflow_id``, or join the one that has it.

        A second start with an id that exists starts nothing: the first run's input stands.
        """
        ...

    async def result(self, workflow_id: str) -> str:
        """Wait for the workflow to end; its output, or the exception it raised."""
        ...

    async def cancel(self, workflow_id: str) -> None:
        """Cancel the workflow, wherever it runs (:meth:`result` raises ``ChatCancelledError``)."""
        ...

    async def step(self, name: str, body: Callable[[], Awaitable[str]]) -> str:
        """Run ``body`` as the workflow's next step, or return that step's recorded output.

        Called from inside a workflow body, one step at a time.
        """
        ...

    def workflow_id(self) -> str:
        """The id of the workflow whose body is running (from inside it)."""
        ...

    async def wait_earlier(self, prefix: str) -> None:
        """From inside a workflow: wait for this worker's earlier workflows of ``prefix``.

        Those whose ids start with ``prefix``, that are not finished and were started
        before the running one (those being recovered included). Each workflow waits only
        for earlier ones, so two never wait for each other.
        """
        ...


@runtime_checkable
class DecidingEngine(Protocol):
    """An engine whose turn waits for approval in its workflow (Temporal), not ending.

    The decisions reach the waiting turn (:meth:`decide`), which goes on; :meth:`result`
    with their key waits for what they do. An engine without it (DBOS) ends the turn, and
    the decisions run in a turn of their own.
    """

    async def decide(self, prefix: str, key: str, payload: str) -> str | None:
        """Send the decisions ``payload`` to the running turn of ``prefix``; its workflow id.

        ``None``: no turn of ``prefix`` runs (the decisions then run in a turn of their own).
        """
        ...

    async def result(self, workflow_id: str, key: str = "") -> str:
        """The output of the turn's part ``key`` (``""``: its first) once it ends or waits."""
        ...


class EngineLifecycle:
    """What the engines share: registering bodies, and the forms of ``launch``/``shutdown``.

    The workflow bodies are registered before the launch; ``launch_sync``, ``shutdown_sync``
    and ``async with`` are the blocking and scoped forms of ``launch`` and ``shutdown``.
    """

    _bodies: dict[str, WorkflowBody]

    @property
    def launched(self) -> bool:
        """Whether :meth:`launch` ran (and :meth:`shutdown` did not since)."""
        raise NotImplementedError

    def register(self, name: str, body: WorkflowBody) -> None:
        """Make ``body`` the code of workflows named ``name``; before :meth:`launch`.

        Raises:
            UsageError: The engine is launched already, or ``name`` is taken.
        """
        if self.launched:
            raise UsageError("register durable workflows before the engine is launched")
        if name in self._bodies:
            raise UsageError(f"a durable workflow named {name!r} is registered already")
        self._bodies[name] = body

    async def launch(self) -> None:
        raise NotImplementedError

    async def shutdown(self) -> None:
        raise NotImplementedError

    def launch_sync(self) -> None:
        """Blocking :meth:`launch`, for code without an event loop."""
        run_sync(self.launch(), "launch_sync")

    def shutdown_sync(self) -> None:
        """Blocking :meth:`shutdown`, for code without an event loop."""
        run_sync(self.shutdown(), "shutdown_sync")

    async def __aenter__(self) -> Self:
        await self.launch()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.shutdown()
