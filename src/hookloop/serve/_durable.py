"""The durable mode of a server: the turns run on ``hookloop worker`` processes.

``create_app(agent, durable=DATABASE_URL)`` (``hookloop serve TARGET --durable URL``) runs no
agent itself. A run is a durable turn submitted to the session queue of the workers' PostgreSQL
database (:class:`~hookloop.durable.SessionQueue`; its turn id is the run id), and its events
come from the events table the workers write (:mod:`hookloop.durable._events`): a task per
run follows the table, woken by LISTEN/NOTIFY, translates each event into AG-UI's and keeps it
in the run, exactly as a run of the process's own would. When the turn ends (the queue says
so), the run gets its last events.

What the mode adds to the in-process one:

- a worker killed in the middle of a turn is replaced by another that resumes the turn; the
  events the resumed turn sends again are stored once, so the client's stream goes on where
  it was, with the same event ids;
- the server holds nothing a run needs: a restarted server (or another one) serves the same
  run again from the table, so a client that reconnects with ``Last-Event-ID`` gets what it
  missed whichever server it reaches; a stopping server ends its streams and leaves the runs
  to the workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Final, cast

from .._approval import ApprovalDecision, PendingApproval
from .._errors import ChatCancelledError, StoreError
from .._messages import Message, UserMessage
from .._run_context import NO_DEPS
from ..durable._events import POLLING, TurnEventLog
from ..durable._queue import SessionQueue
from ..durable._turn import DurableChats, workflow_id
from ..sessions._recorder import SessionRecorder
from ._agui import EventTranslator, run_started
from ._runs import (
    BusyError,
    OverloadedError,
    Run,
    RunBook,
    RunStatus,
    ServedAgent,
    UnknownError,
    check_new_message,
)

__all__ = ["DurableRuns"]

logger = logging.getLogger(__name__)

_RESUBMITS: Final = 3  # a turn stopped by a store error is started again this many times


class DurableRuns(RunBook):
    """The runs of a server in the durable mode; the same face as :class:`Threads`.

    Args:
        agent: The turns' agent factory: ``"module:function"`` or a module-level function
            (the workers' ``--agent``).
        database_url: The workers' PostgreSQL database (their ``--database``).
        max_runs: The most runs this server follows at once.
        keep_runs: How many ended runs stay readable here.
    """

    def __init__(
        self,
        agent: str | Callable[[], object],
        database_url: str,
        *,
        max_runs: int,
        keep_runs: int = 1000,
    ) -> None:
        from ..sessions import PostgresSessionStore

        self._url = database_url
        self._queue = SessionQueue(database_url)
        self._sessions = PostgresSessionStore(database_url)
        self._chats = DurableChats(self._queue, cast(Any, agent), sessions=self._sessions)
        super().__init__(keep_runs)
        self._log = TurnEventLog(database_url)
        self._busy: dict[str, Run] = {}  # thread id -> its run going on
        self._tasks: set[asyncio.Task[None]] = set()
        self._caught_up: dict[str, asyncio.Future[None]] = {}  # set once the first read is in
        self.max_runs = max_runs
        self.running = 0
        self._closing = False

    async def open(self) -> None:
        """Connect to the workers' database (the application's startup).

        Raises:
            StoreError: The database cannot be used.
        """
        await self._queue.launch()
        await self._log.start()

    async def aclose(self) -> None:
        """Stop following the runs (they go on in the workers) and disconnect."""
        self.cancel_all()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        await self._log.stop()
        await self._queue.shutdown()
        await self._sessions.close()

    # -- the runs ---------------------------------------------------------------------------

    async def reattach(self, thread_id: str, run_id: str) -> Run | None:
        """The run ``run_id`` of ``thread_id`` if its turn is in the database; else None.

        Its turn was started by this server before a restart, or by another server: it is
        followed from its first event.
        """
        wid = workflow_id(thread_id, run_id)
        if await self._queue.status(wid) is None:
            return None
        if run_id in self._runs:  # another request attached it meanwhile
            return await self.existing(run_id, thread_id)
        run = self._follow(thread_id, run_id, None)
        # Its stored events are read before its streams start, so that a Last-Event-ID names
        # an event the run has (a stream starts at most at the run's last event).
        caught_up = self._caught_up[run_id]
        await asyncio.wait(
            (caught_up, cast(asyncio.Task[None], run.task)), return_when=asyncio.FIRST_COMPLETED
        )
        return run

    async def start(
        self,
        thread_id: str,
        run_id: str,
        *,
        message: UserMessage | None = None,
        decisions: Callable[[Sequence[PendingApproval]], list[ApprovalDecision]] | None = None,
    ) -> Run:
        """Submit a turn of ``thread_id`` to the workers and follow it.

        A turn with this id in the database already (a client retrying after a restart) is
        joined, not run again.

        With ``decisions`` (given the thread's pending calls, it returns the decisions on
        them), the turn runs them, as ``agent.resume()``; they are checked here first, as
        ``resume()`` checks them, so a refused one starts nothing.

        Raises:
            BusyError: A run is going on on the thread here, or ``run_id`` is taken.
            OverloadedError: ``max_runs`` runs are followed, or the server is stopping.
            UsageError: What ``resume()`` refuses.
        """
        if run_id in self._runs or run_id in self._starting:
            raise BusyError(f"run {run_id!r} exists already")
        busy = self._busy.get(thread_id)
        if busy is not None:
            raise BusyError(
                f"thread {thread_id!r} is busy with run {busy.run_id!r}: wait for its end or "
                "cancel it"
            )
        if self._closing:
            raise OverloadedError("the server is stopping")
        if self.running >= self.max_runs:
            raise OverloadedError(
                f"{self.running} runs are going on, the most this server follows at once"
            )
        # Taken before the first await: two requests at once cannot both start.
        placeholder = Run(run_id, thread_id)
        self._busy[thread_id] = placeholder
        starting = self._starting[run_id] = asyncio.get_running_loop().create_future()
        try:
            if decisions is not None:
                decided = await self._checked(thread_id, decisions)
                await self._chats.resume(thread_id, decided, turn_id=run_id, publish=True)
            else:
                assert message is not None
                await self._check_message(thread_id, message)
                await self._chats.submit(thread_id, message, turn_id=run_id, publish=True)
        except BaseException:
            del self._busy[thread_id]
            raise
        else:
            return self._follow(thread_id, run_id, message, placeholder)
        finally:
            del self._starting[run_id]
            starting.set_result(None)

    async def _check_message(self, thread_id: str, message: UserMessage) -> None:
        """Before the turn is submitted: refuse what ``chat()`` refuses, and a known id."""
        async with self.reading(thread_id) as agent:
            check_new_message(thread_id, message, agent.messages)
            await agent._start(message, None)  # chat()'s checks; the agent is thrown away

    async def _checked(
        self,
        thread_id: str,
        decisions: Callable[[Sequence[PendingApproval]], list[ApprovalDecision]],
    ) -> list[ApprovalDecision]:
        """The decisions on the thread's pending calls, checked as ``resume()`` checks them."""
        async with self.reading(thread_id) as agent:
            decided = decisions(await agent.pending_approvals())
            # resume()'s own checks, on an agent that is then thrown away (never driven)
            await agent._resumed(decided, None, NO_DEPS, None, agent._limits)
        return decided

    def _follow(
        self,
        thread_id: str,
        run_id: str,
        message: UserMessage | None,
        run: Run | None = None,
    ) -> Run:
        run = run or Run(run_id, thread_id)
        self._caught_up[run_id] = asyncio.get_running_loop().create_future()
        self._runs[run_id] = run
        self._busy[thread_id] = run
        self.running += 1
        task = asyncio.get_running_loop().create_task(
            self._follow_turn(run, message), name=f"hookloop durable run {run_id}"
        )
        run.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run

    async def _follow_turn(self, run: Run, message: UserMessage | None) -> None:
        """Translate the turn's stored events into the run's, then its end."""
        wid = workflow_id(run.thread_id, run.run_id)
        texts = iter(range(1, 1 << 62))
        translate = EventTranslator(
            run.thread_id, run.run_id, text_id=lambda: f"{run.run_id}:text-{next(texts)}"
        )
        run.add([run_started(run.thread_id, run.run_id)])
        seq = 0
        ending: asyncio.Future[Any] = asyncio.ensure_future(self._queue.result(wid))
        resubmits = 0
        try:
            while True:
                with self._log.watching(wid) as wait:
                    ended = ending.done()  # known before the read: then all events are in
                    try:
                        rows = await self._log.read(wid, seq)
                    except StoreError:  # the database is away: try again in a while
                        logger.info("run %s: its events cannot be read now", run.run_id)
                        await asyncio.sleep(POLLING)
                        continue
                    for _, event in rows:
                        run.add(translate.events(event))
                    if rows:
                        seq = rows[-1][0]
                    caught_up = self._caught_up.pop(run.run_id, None)
                    if caught_up is not None:
                        caught_up.set_result(None)
                    if ended:
                        if not self._stopped_by_store(run, ending):
                            break
                        # A store error stopped the turn, resumable: started again, it
                        # resumes from its records (in whichever worker).
                        if message is None or resubmits >= _RESUBMITS:
                            break
                        resubmits += 1
                        await asyncio.sleep(POLLING)
                        with contextlib.suppress(StoreError):
                            await self._chats.submit(
                                run.thread_id, message, turn_id=run.run_id, publish=True
                            )
                        ending = asyncio.ensure_future(self._queue.result(wid))
                        continue
                    woken = asyncio.ensure_future(wait(POLLING))
                    try:
                        await asyncio.wait((woken, ending), return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        woken.cancel()
            await self._end(run, ending, translate)
        except asyncio.CancelledError:
            ending.cancel()
            raise
        finally:
            self._caught_up.pop(run.run_id, None)
            if not run.done:  # the server stops: the turn goes on in the workers
                self._release(run)
                run.detach()

    def _stopped_by_store(self, run: Run, ending: asyncio.Future[Any]) -> bool:
        """Whether the turn stopped on a store error (it is then resumable), not cancelled."""
        return isinstance(ending.exception(), StoreError)

    async def _end(self, run: Run, ending: asyncio.Future[Any], translate: EventTranslator) -> None:
        try:
            text = ending.result()
        except ChatCancelledError:
            run.add(translate.cancelled(await self._messages(run.thread_id, None)))
            self._finish(run, "cancelled")
            return
        except Exception as exc:
            self._failed(run, translate, exc)
            return
        from ..durable._records import decode_response

        response = decode_response(text, workflow_id(run.thread_id, run.run_id))
        run.result = response.text
        messages = await self._messages(run.thread_id, response.message.id)
        run.add(translate.finished(response, messages))
        self._finish(run, "interrupted" if response.pending_approvals else "finished")

    def _failed(self, run: Run, translate: EventTranslator, exc: BaseException) -> None:
        logger.warning("run %s of thread %s failed: %r", run.run_id, run.thread_id, exc)
        run.error = {"type": type(exc).__name__, "message": str(exc)}
        run.add(translate.failed(exc))
        self._finish(run, "failed")

    async def _messages(self, thread_id: str, last: str | None) -> list[Message]:
        """The thread's messages, up to ``last`` (the turn's answer) if given."""
        try:
            records = await self._sessions.records(thread_id)
        except StoreError:
            return []
        messages = [record.message for record in records]
        ids = [m.id for m in messages]
        if last is not None and last in ids:
            messages = messages[: ids.index(last) + 1]
        return messages

    def _release(self, run: Run) -> None:
        if self._busy.get(run.thread_id) is run:
            del self._busy[run.thread_id]
        self.running -= 1

    def _finish(self, run: Run, status: RunStatus) -> None:
        self._release(run)
        run.end(status)
        self._ended_now(run)

    def cancel(self, run: Run) -> bool:
        """Cancel the run's turn (it ends at its next step); ``False`` if it has ended."""
        if run.done:
            return False
        task = asyncio.get_running_loop().create_task(
            self._queue.cancel(workflow_id(run.thread_id, run.run_id))
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    def running_on(self, thread_id: str) -> Run | None:
        """The run going on on ``thread_id`` here, if any."""
        return self._busy.get(thread_id)

    def closing(self) -> bool:
        """Whether the server is stopping: no run starts."""
        return self._closing

    def cancel_all(self) -> list[asyncio.Task[None]]:
        """End the streams (the turns go on in the workers); no run starts."""
        self._closing = True
        for run in list(self._runs.values()):
            if not run.done:
                run.detach()
        return []

    def trace(self, thread_id: str) -> list[str]:
        """No traces in the durable mode.

        Raises:
            UnknownError: Always.
        """
        raise UnknownError(f"no trace of thread {thread_id!r}: the durable mode records none")

    @contextlib.asynccontextmanager
    async def reading(self, thread_id: str) -> AsyncIterator[ServedAgent]:
        """An agent holding the thread's conversation as the session store has it now.

        Raises:
            UnknownError: The thread has no messages and no run here.
        """
        agent = cast(ServedAgent, self._chats._build(thread_id))
        try:
            recorder = SessionRecorder(self._sessions, thread_id)
            agent.use(recorder)
            await recorder.restore()
            if not agent.messages and thread_id not in self._busy:
                raise UnknownError(f"no thread {thread_id!r}")
            yield agent
        finally:
            await agent.aclose()
