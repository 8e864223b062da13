"""The runs of a server: each in a task of its own, its events kept for whoever reads them.

A run is one chat turn (or one resume) of one thread's agent. It runs in its own task, so a
client that disconnects does not end it (unless the server was told to cancel on
disconnect); every event it makes is kept in order, numbered from 1, and a reader asks for
the events after a number (``Last-Event-ID``), then waits for the next. The session log
holds the run's messages whatever happens to the readers.

:class:`Threads` holds one agent per thread (built by the factory the first time the thread
is used, with the thread id as its session id) and says which run, if any, is busy on it.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, cast, runtime_checkable

from ag_ui.core import BaseEvent

from .._approval import ApprovalDecision, PendingApproval
from .._chat_slot import ChatHost
from .._errors import ChatCancelledError, DuplicateMessageIdError, UsageError
from .._messages import Message, UserMessage
from .._output import OutputSpec
from .._run_context import NO_DEPS
from .._stream_events import AgentEvent, AgentResponse
from ..observe._jsonl import JsonLinesTracePlugin
from ._agui import (
    EventTranslator,
    backoff_value,
    compaction_value,
    custom,
    run_started,
    trim_value,
    verdict_value,
)

__all__ = [
    "AgentFactory",
    "BusyError",
    "OverloadedError",
    "Run",
    "RunBook",
    "RunStatus",
    "ServedAgent",
    "Threads",
    "UnknownError",
    "check_new_message",
    "sse_safe",
]

logger = logging.getLogger(__name__)

AgentFactory = Callable[[], object]
"""What builds a thread's Agent: called once per thread, with no arguments (as a worker's)."""


@runtime_checkable
class ServedAgent(ChatHost, Protocol):
    """An agent as the server sees it: the chat host, its approvals and its conversation."""

    _chat_output: OutputSpec[Any] | None

    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation's messages."""
        ...

    async def pending_approvals(self) -> tuple[PendingApproval, ...]:
        """The calls waiting for a decision (read from the session with a recorder)."""
        ...

    async def switch_session(
        self, new_session_id: str, *, parent_session_id: str | None = None, reset: bool = False
    ) -> None:
        """Move to another session."""
        ...

    def cancel(self, reason: object = None) -> bool:
        """End the running chat."""
        ...


RunStatus = Literal["running", "finished", "interrupted", "failed", "cancelled"]


_RELEASE_AFTER = 1.0  # seconds: see Threads.start


class BusyError(UsageError):
    """A run is already going on this thread (HTTP 409)."""


class OverloadedError(UsageError):
    """As many runs as the server runs at once are going on (HTTP 503, Retry-After)."""


class UnknownError(UsageError, LookupError):
    """No such thread or run (HTTP 404)."""


# JSON leaves these raw in strings, and many SSE clients (any that split lines as Python's
# str.splitlines() does, httpx's among them) break a line at them: escaped, a JSON text is
# one line for every client, and reads back the same.
_LINE_BREAKS = str.maketrans({"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"})


def sse_safe(text: str) -> str:
    """A JSON text with U+0085, U+2028 and U+2029 escaped, so it stays one line on the wire."""
    return text.translate(_LINE_BREAKS)


def check_new_message(thread_id: str, message: UserMessage, messages: Sequence[Message]) -> None:
    """Refuse a user message whose id the thread holds already (a client's second send).

    Raises:
        DuplicateMessageIdError: The thread holds a message with that id (HTTP 409).
    """
    if any(m.id == message.id for m in messages):
        raise DuplicateMessageIdError(
            f"message {message.id!r} is in thread {thread_id!r} already: a new message needs "
            "a new id (a client retrying a run sends its runId again)",
            message_id=message.id,
        )


class Run:
    """One run: its events so far (numbered from 1), its status, and who waits for more.

    Attributes:
        run_id: The run's id (AG-UI's runId; hookloop's turn).
        thread_id: Its thread (AG-UI's threadId; hookloop's session id).
        events: The AG-UI events made so far, as JSON texts; event ``n`` is ``events[n - 1]``.
        status: ``running`` until the run ends.
    """

    def __init__(self, run_id: str, thread_id: str) -> None:
        self.run_id = run_id
        self.thread_id = thread_id
        self.events: list[str] = []
        self.status: RunStatus = "running"
        self.error: dict[str, str] | None = None
        self.result: Any = None
        self.task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()  # set, and replaced, when something happens
        self.readers = 0  # open streams, for cancel-on-disconnect
        # The run's chat waits for this: set when its first stream begins (or its starter
        # answers without a stream), so that the first event goes out before the run's work.
        self.released = asyncio.Event()
        self.detached = False  # the server stops following it: its streams end, it goes on

    @property
    def done(self) -> bool:
        """Whether the run has ended (its last event is kept)."""
        return self.status != "running"

    def add(self, events: Sequence[BaseEvent]) -> None:
        """Keep ``events`` and wake the readers."""
        for event in events:
            self.events.append(sse_safe(event.model_dump_json(by_alias=True)))
        if events:
            self._wake()

    def _wake(self) -> None:
        woken, self._changed = self._changed, asyncio.Event()
        woken.set()

    async def wait(self, after: int) -> None:
        """Wait until an event after ``after`` exists, or the run ends or is detached."""
        changed = self._changed
        if len(self.events) > after or self.done or self.detached:
            return
        await changed.wait()

    def release(self) -> None:
        """Let the run's chat go on (its first stream began, or nobody streams it)."""
        self.released.set()

    def detach(self) -> None:
        """End the run's streams without an end event; the run goes on elsewhere.

        The durable mode's server stops, and the turn goes on in the workers: the clients
        reconnect, to this server or another.
        """
        self.detached = True
        self._wake()

    def end(self, status: RunStatus) -> None:
        """Mark the run ended; readers see the end after its last event."""
        self.status = status
        self._wake()

    def summary(self) -> dict[str, Any]:
        """The run as JSON for the plain API."""
        return {
            "runId": self.run_id,
            "threadId": self.thread_id,
            "status": self.status,
            "events": len(self.events),
            "result": self.result,
            "error": self.error,
        }


@dataclass
class _Thread:
    agent: ServedAgent
    run: Run | None = None  # the run going on, or the last one
    trace: list[str] | None = None  # its hook events as JSON lines, when traced
    traced: bool = False  # whether the trace plugin is attached (at the first run's start)


def _send_hook_events(thread: _Thread) -> None:
    """The hook events with no AG-UI name go to the thread's run as CUSTOM events."""

    def sender(event: str, value: Callable[[Any], dict[str, Any]]) -> Callable[[Any], None]:
        def send(ctx: Any) -> None:
            run = thread.run
            if run is not None and not run.done:
                run.add([custom(event, value(ctx))])

        return send

    agent = thread.agent
    agent.add_hook("on_backoff_wait", sender("on_backoff_wait", backoff_value))
    agent.add_hook("on_trim", sender("on_trim", trim_value))
    agent.add_hook("on_compaction", sender("on_compaction", compaction_value))
    agent.add_hook("on_guardrail_verdict", sender("on_guardrail_verdict", verdict_value))


class RunBook:
    """The runs a server holds by id, and those being started (the face both modes share)."""

    def __init__(self, keep_runs: int) -> None:
        self._runs: dict[str, Run] = {}
        self._starting: dict[str, asyncio.Future[None]] = {}  # runs being started, by id
        self._ended: collections.deque[str] = collections.deque()
        self.keep_runs = keep_runs

    def run(self, run_id: str) -> Run:
        """The run named ``run_id``.

        Raises:
            UnknownError: No such run (or it ended long ago and was let go).
        """
        found = self._runs.get(run_id)
        if found is None:
            raise UnknownError(f"no run {run_id!r}")
        return found

    async def existing(self, run_id: str, thread_id: str) -> Run | None:
        """The run ``run_id`` of ``thread_id`` if it was started already (a client retrying).

        A run being started by another request is waited for: two first requests of one run
        at once are one run.

        Raises:
            BusyError: The id names a run of another thread.
        """
        starting = self._starting.get(run_id)
        if starting is not None:
            await asyncio.shield(starting)
        found = self._runs.get(run_id)
        if found is not None and found.thread_id != thread_id:
            raise BusyError(f"run {run_id!r} belongs to another thread")
        return found

    def _ended_now(self, run: Run) -> None:
        """Keep the ended run readable; let the oldest ended ones go."""
        self._ended.append(run.run_id)
        while len(self._ended) > self.keep_runs:
            self._runs.pop(self._ended.popleft(), None)


class Threads(RunBook):
    """The threads' agents and runs of one server process.

    Args:
        factory: Builds a thread's agent.
        max_runs: The most runs going on at once in this process.
        trace: Record each thread's hook events for its trace page (once per thread: a
            trace refers back to what it wrote before, so a thread's is one whole).
        keep_runs: How many ended runs stay readable (the oldest go first).
    """

    def __init__(
        self, factory: AgentFactory, *, max_runs: int, trace: bool = True, keep_runs: int = 1000
    ) -> None:
        super().__init__(keep_runs)
        self._factory = factory
        self._trace = trace
        self._checked: set[type] = set()  # the agents' classes found to be agents
        self._threads: dict[str, _Thread] = {}
        self.max_runs = max_runs
        self.running = 0
        self._closing = False  # the server is stopping: no run starts

    async def agent(self, thread_id: str, *, create: bool) -> ServedAgent:
        """The thread's agent; a thread seen for the first time gets one from the factory.

        With ``create=False`` a thread unknown here and empty in the agent's session store
        (if it has one) is refused.

        Raises:
            UnknownError: ``create`` is false and the thread has no messages anywhere.
        """
        thread = self._threads.get(thread_id)
        if thread is not None:
            return thread.agent
        agent = self._factory()
        if type(agent) not in self._checked:  # a runtime protocol check costs ~0.2 ms
            if not isinstance(agent, ServedAgent):
                raise UsageError(f"the agent factory returned {type(agent).__name__}, not an Agent")
            self._checked.add(type(agent))
        served = cast(ServedAgent, agent)
        await served.switch_session(thread_id, reset=True)
        if not create:
            await served.pending_approvals()  # with a session recorder: restores the session
            if not served.messages:
                await served.aclose()  # not kept: its connections go with it
                raise UnknownError(f"no thread {thread_id!r}")
        if thread_id in self._threads:  # another request made the thread's agent meanwhile
            await served.aclose()
            return self._threads[thread_id].agent
        made = self._threads[thread_id] = _Thread(served)
        _send_hook_events(made)
        if self._trace:
            made.trace = []  # the plugin is attached when the first run starts: see start()
        return served

    async def open(self) -> None:
        """Nothing to open: the agents are made as threads come."""

    async def reattach(self, thread_id: str, run_id: str) -> Run | None:
        """None: a run of this process that it does not hold is gone (see DurableRuns)."""
        return None

    @contextlib.asynccontextmanager
    async def reading(self, thread_id: str) -> AsyncIterator[ServedAgent]:
        """The thread's agent, to read its conversation.

        Raises:
            UnknownError: The thread has no messages anywhere.
        """
        yield await self.agent(thread_id, create=False)

    def trace(self, thread_id: str) -> list[str]:
        """The hook events of a thread as JSON lines (its trace page's).

        Raises:
            UnknownError: No such thread here, or the server records no traces.
        """
        thread = self._threads.get(thread_id)
        if thread is None or thread.trace is None:
            raise UnknownError(f"no trace of thread {thread_id!r} here")
        return thread.trace

    def running_on(self, thread_id: str) -> Run | None:
        """The run going on on ``thread_id``, if any."""
        thread = self._threads.get(thread_id)
        run = None if thread is None else thread.run
        return run if run is not None and not run.done else None

    async def start(
        self,
        thread_id: str,
        run_id: str,
        *,
        message: UserMessage | None = None,
        decisions: Callable[[Sequence[PendingApproval]], list[ApprovalDecision]] | None = None,
    ) -> Run:
        """Start a run of ``thread_id``: a chat of ``message``, or a resume with decisions.

        ``decisions`` is given the thread's pending calls and returns the decisions on them.
        Every check ``agent.chat()`` or ``agent.resume()`` makes is made before this returns,
        so a refused run never starts and has no events.

        Raises:
            BusyError: A run is going on on the thread, or ``run_id`` is taken.
            OverloadedError: ``max_runs`` runs are going on.
            UsageError: What ``chat()`` or ``resume()`` refuses.
        """
        if run_id in self._runs or run_id in self._starting:
            raise BusyError(f"run {run_id!r} exists already")
        starting = self._starting[run_id] = asyncio.get_running_loop().create_future()
        created = thread_id not in self._threads
        try:
            return await self._start(thread_id, run_id, message, decisions)
        except BaseException:
            thread = self._threads.get(thread_id)
            if created and thread is not None and thread.run is None:
                # a thread made for this start, which was refused: not kept
                del self._threads[thread_id]
                with contextlib.suppress(Exception):
                    await thread.agent.aclose()
            raise
        finally:
            del self._starting[run_id]
            starting.set_result(None)

    async def _start(
        self,
        thread_id: str,
        run_id: str,
        message: UserMessage | None,
        decisions: Callable[[Sequence[PendingApproval]], list[ApprovalDecision]] | None,
    ) -> Run:
        agent = await self.agent(thread_id, create=True)
        thread = self._threads[thread_id]
        if message is not None:
            check_new_message(thread_id, message, agent.messages)
        if thread.run is not None and not thread.run.done:
            raise BusyError(
                f"thread {thread_id!r} is busy with run {thread.run.run_id!r}: wait for its end "
                "or cancel it"
            )
        if self.closing():
            raise OverloadedError("the server is stopping")
        if self.running >= self.max_runs:
            raise OverloadedError(
                f"{self.running} runs are going on, the most this server runs at once"
            )
        run = Run(run_id, thread_id)
        translate = EventTranslator(thread_id, run_id)

        async def emit(event: AgentEvent) -> None:
            run.add(translate.events(event))

        # The thread and a place among the runs are taken before the first await, so two
        # requests at once cannot both start (the second gets BusyError or OverloadedError).
        thread.run = run
        self.running += 1
        try:
            if decisions is not None:
                pending = await agent.pending_approvals()
                decided = decisions(pending)
                # as resume() with no output arguments: the paused chat's output type
                output = agent._chat_output
                chat = await agent._resumed(decided, emit, NO_DEPS, output, agent._limits)
            else:
                assert message is not None
                chat = await agent._start(message, emit)
        except BaseException:
            thread.run = None
            self.running -= 1
            raise
        # The slot is the agent's now: from here on the run is started.
        self._runs[run_id] = run
        run.add([run_started(thread_id, run_id)])

        async def drive() -> None:
            try:
                await run.released.wait()
                if thread.trace is not None and not thread.traced:
                    # Attached here, after the run's first event went out, not before it: its
                    # 38 hooks take longer to register than a whole run takes to start. The
                    # chat fires no hook before it is driven.
                    thread.traced = True
                    agent.use(JsonLinesTracePlugin(thread.trace.append))
                    await asyncio.sleep(0)  # requests waiting for their first event go first
                response: AgentResponse[Any] = await agent._slot.drive(chat)
            except ChatCancelledError:
                run.add(translate.cancelled(agent.messages))
                self._end(run, "cancelled")
            except asyncio.CancelledError:
                run.add(translate.cancelled(agent.messages))
                self._end(run, "cancelled")
                raise
            except Exception as exc:
                logger.warning("run %s of thread %s failed: %r", run_id, thread_id, exc)
                run.error = {"type": type(exc).__name__, "message": str(exc)}
                run.add(translate.failed(exc))
                self._end(run, "failed")
            else:
                run.result = response.text
                run.add(translate.finished(response, agent.messages))
                self._end(run, "interrupted" if response.pending_approvals else "finished")

        loop = asyncio.get_running_loop()
        run.task = loop.create_task(drive(), name=f"hookloop run {run_id}")
        # A run nobody streams (its starter answered with JSON, or its client went before its
        # stream began) is released by its starter, or at the latest after this.
        loop.call_later(_RELEASE_AFTER, run.release)
        if self.closing():  # the server began to stop while this run was being started
            self.cancel(run)
        return run

    def cancel(self, run: Run) -> bool:
        """Ask a run going on to end (as ``agent.cancel()``); ``False`` if it has ended."""
        if run.done:
            return False
        thread = self._threads.get(run.thread_id)
        return thread is not None and thread.agent.cancel("cancelled over HTTP")

    def _end(self, run: Run, status: RunStatus) -> None:
        self.running -= 1
        run.end(status)
        self._ended_now(run)

    def closing(self) -> bool:
        """Whether the server is stopping (:meth:`cancel_all` was called): no run starts."""
        return self._closing

    def cancel_all(self) -> list[asyncio.Task[None]]:
        """Cancel the runs going on (their streams end with the cancelled outcome); none starts."""
        self._closing = True
        tasks = [r.task for r in self._runs.values() if r.task is not None and not r.done]
        for task in tasks:
            task.cancel()
        return tasks

    async def aclose(self) -> None:
        """Cancel the runs going on and close every agent (the server is stopping)."""
        tasks = self.cancel_all()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        for thread in self._threads.values():
            with contextlib.suppress(Exception):
                await thread.agent.aclose()
