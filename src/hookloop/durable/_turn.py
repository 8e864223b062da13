"""Durable chat turns: each turn of a session one workflow of a durable engine."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Final

from .._approval import ApprovalDecision
from .._background import run_sync
from .._chat_slot import ChatHost
from .._errors import UsageError
from .._extras import import_attribute
from .._messages import UserInput, UserMessage, user_message
from .._run_context import NO_DEPS
from .._stream_events import AgentEvent, AgentResponse, MessageCommitted, ToolCallFinished
from ..sessions._base import SessionStore, check_session_id
from ..sessions._recorder import SessionRecorder
from ._engine import DecidingEngine, DurableEngine
from ._records import Decisions, decode_response, decode_turn, encode_response, encode_turn
from ._replay import TurnSteps

__all__ = ["DurableChats", "TurnHandle", "workflow_id"]

WORKFLOW_PREFIX: Final = "hookloop-turn"


def workflow_id(session_id: str, turn_id: str) -> str:
    """The workflow id of a turn: ``"hookloop-turn:<session id>:<turn id>"``.

    In each id, ``%`` is written ``%25`` and ``:`` is written ``%3A``, so that one workflow
    id names one session and turn (``"a:b"``, ``"c"`` and ``"a"``, ``"b:c"`` differ).
    """
    return f"{WORKFLOW_PREFIX}:{_escaped(session_id)}:{_escaped(turn_id)}"


def _escaped(part: str) -> str:
    return part.replace("%", "%25").replace(":", "%3A")


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TurnHandle:
    """A turn that was started: wait for it with :meth:`result`.

    Attributes:
        workflow_id: The turn's workflow id (see :func:`workflow_id`); on Temporal, a
            resume's is the id of the turn that waited for the decisions.
        session_id: The session.
        turn_id: The turn's id in the session (a resume's own id).
    """

    workflow_id: str
    session_id: str
    turn_id: str
    _chats: DurableChats = dataclasses.field(repr=False, compare=False)
    _part: str = dataclasses.field(default="", repr=False, compare=False)

    async def result(self) -> AgentResponse[Any]:
        """Wait for the turn to end (in any worker); its response.

        Raises:
            RunError: What the turn raised (a provider's error, ``MaxIterationsError``...).
            DurableRecordError: The turn's recorded output cannot be read.
        """
        return await self._chats._result(self.workflow_id, self._part)

    async def cancel(self) -> None:
        """Cancel the turn, wherever it runs; its waiters get ``ChatCancelledError``.

        What the turn committed to its session before stays there.
        """
        await self._chats.engine.cancel(self.workflow_id)


class DurableChats:
    """Chat turns that survive their worker: each turn runs as a workflow of ``engine``.

    Each model call and each tool call of a turn is a step of the engine: when the worker
    dies, a worker that resumes the turn replays the finished steps from their records
    and goes on from the call that was running. The conversation is kept in ``sessions``
    as usual. See ``docs/durable.md``.

    Make it before launching the engine, in every worker (a worker resumes only the
    turns whose code it registered).

    Args:
        engine: The durable engine (:class:`~hookloop.durable.DBOSEngine`).
        agent: What builds the agent of a turn, in any worker: an import path
            ``"module:function"``, or a module-level function (kept as its import path).
            It is called with no arguments for each turn and must return a new
            :class:`~hookloop.Agent` with a text answer (no ``output_type``). A call that
            needs approval ends the turn with it pending: :meth:`resume` decides it.
        sessions: Where the sessions are kept.
        on_event: Receives the events of every turn this worker runs, as a chat stream
            would (the model is then asked to stream), including
            :class:`~hookloop.ModelCallRestarted`.
        published_only: ``on_event`` receives only the events of the turns submitted with
            ``publish=True``; the others run without a stream (``hookloop worker`` writes
            the published turns' events for ``hookloop serve --durable``).

    Raises:
        UsageError: ``agent`` cannot be imported or is not a module-level function, or
            ``sessions`` is not a session store.
    """

    def __init__(
        self,
        engine: DurableEngine,
        agent: str | Callable[[], ChatHost],
        *,
        sessions: SessionStore,
        on_event: Callable[[AgentEvent], Awaitable[None]] | None = None,
        published_only: bool = False,
    ) -> None:
        if not isinstance(sessions, SessionStore):
            raise UsageError(f"sessions must be a SessionStore, got {type(sessions).__name__}")
        self.engine = engine
        self.agent_path = _agent_path(agent)
        self._factory = _load_factory(self.agent_path)
        self.sessions = sessions
        self._on_event = on_event
        self._published_only = published_only
        self._workflow = f"chat:{self.agent_path}"
        # The turns of each session running or waiting here: (its lock, how many).
        self._sessions: dict[str, tuple[asyncio.Lock, int]] = {}
        engine.register(self._workflow, self._turn)

    def __repr__(self) -> str:
        return f"DurableChats({self.engine!r}, {self.agent_path!r})"

    async def chat(
        self, session_id: str, message: UserInput, *, turn_id: str | None = None
    ) -> AgentResponse[Any]:
        """Run one turn of the session as a workflow and wait for its response.

        Args:
            session_id: The session.
            message: The user's message.
            turn_id: The turn's id in the session; by default the user message's id. A
                turn started again with the same id (a retried request) is the same
                turn: it runs once, and both get its response.

        Raises:
            UsageError: A session id, message or turn id that cannot be used.
            RunError: What the turn raised.
        """
        return await (await self.submit(session_id, message, turn_id=turn_id)).result()

    async def submit(
        self,
        session_id: str,
        message: UserInput,
        *,
        turn_id: str | None = None,
        publish: bool = False,
    ) -> TurnHandle:
        """Start one turn of the session as a workflow; returns at once. See :meth:`chat`.

        ``publish``: the turn's events go to the worker's ``on_event`` also when it was made
        with ``published_only`` (``hookloop serve --durable`` follows such turns).
        """
        check_session_id(session_id)
        user = user_message(message)
        turn = user.id if turn_id is None else check_session_id(turn_id, "turn_id")
        wid = workflow_id(session_id, turn)
        await self.engine.start(self._workflow, wid, encode_turn(session_id, user, publish=publish))
        return TurnHandle(workflow_id=wid, session_id=session_id, turn_id=turn, _chats=self)

    async def resume(
        self,
        session_id: str,
        decisions: Iterable[ApprovalDecision],
        *,
        turn_id: str,
        publish: bool = False,
    ) -> TurnHandle:
        """Run the decisions on the session's calls waiting for approval; returns at once.

        As ``agent.resume()``, in a worker: the decisions are checked there against the
        session's pending calls, and a refused one is raised by the handle's
        :meth:`~TurnHandle.result` (``agent.resume()``'s error), nothing having run. On DBOS
        they run in a turn of their own (``turn_id``); on Temporal the session's running turn
        (the one that waits) gets them as a signal and goes on (``turn_id`` names the resume:
        sent again, it is the same resume), and the handle's ``workflow_id`` is that turn's;
        with no running turn (it was cancelled, say), they run in a turn of their own too.
        ``publish`` as for :meth:`submit`.

        Raises:
            UsageError: A bad session or turn id.
        """
        check_session_id(session_id)
        turn = check_session_id(turn_id, "turn_id")
        # Where the conversation before the decisions ends: the session's last message now
        # (the waiting turn commits nothing more).
        records = await self.sessions.records(session_id)
        after = records[-1].message.id if records else None
        payload = encode_turn(session_id, Decisions(tuple(decisions), after), publish=publish)
        if isinstance(self.engine, DecidingEngine):  # the turn waits in its workflow: a signal
            wid = await self.engine.decide(workflow_id(session_id, ""), turn, payload)
            if wid is not None:
                return TurnHandle(
                    workflow_id=wid, session_id=session_id, turn_id=turn, _chats=self, _part=turn
                )
        wid = workflow_id(session_id, turn)
        await self.engine.start(self._workflow, wid, payload)
        return TurnHandle(workflow_id=wid, session_id=session_id, turn_id=turn, _chats=self)

    def chat_sync(
        self, session_id: str, message: UserInput, *, turn_id: str | None = None
    ) -> AgentResponse[Any]:
        """Blocking :meth:`chat` (the engine must run in this thread's next event loop)."""
        return run_sync(self.chat(session_id, message, turn_id=turn_id), "chat_sync")

    async def _result(self, wid: str, part: str = "") -> AgentResponse[Any]:
        if part and isinstance(self.engine, DecidingEngine):  # a resume's part of a turn
            return decode_response(await self.engine.result(wid, part), wid)
        return decode_response(await self.engine.result(wid), wid)

    async def _turn(self, payload: str) -> str:
        """The workflow: the turn's agent, its session up to the turn, the chat."""
        wid = self.engine.workflow_id()
        session_id, user, publish = decode_turn(payload, wid)
        # One turn of a session at a time in this worker, in the order they started (the
        # ones a restart recovers included): two at once would interleave their messages.
        # The engine's order has ties (same clock tick); the lock, held only by turns that
        # wait for nothing else, keeps those apart too.
        await self.engine.wait_earlier(workflow_id(session_id, ""))
        async with self._one_at_a_time(session_id):
            return await self._run_turn(wid, session_id, user, publish)

    @contextlib.asynccontextmanager
    async def _one_at_a_time(self, session_id: str) -> AsyncIterator[None]:
        lock, users = self._sessions.get(session_id, (asyncio.Lock(), 0))
        self._sessions[session_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._sessions.pop(session_id)
            if users > 1:
                self._sessions[session_id] = (lock, users - 1)

    async def _run_turn(
        self, wid: str, session_id: str, user: UserMessage | Decisions, publish: bool
    ) -> str:
        steps = TurnSteps(self.engine, wid)
        token = await steps.begin()
        try:
            agent = steps.agent = self._build(session_id)
            recorder = SessionRecorder(self.sessions, session_id)
            agent.use(recorder)
            # The conversation as it was when the turn began: a turn run again finds its
            # own messages in the session, which it commits again (stored once).
            await recorder.restore(
                before=await self._first_of_turn(session_id, user),
                own_decisions=None if isinstance(user, UserMessage) else wid,
            )
            stored: set[str] = set()
            if steps.replaying:
                records = await self.sessions.records(session_id)
                stored = {r.message.id for r in records}
                steps.watch_commits(agent, stored)
            try:
                on_event = self._events(steps, stored, publish)
                if isinstance(user, UserMessage):
                    run = await agent._start(user, on_event, steps=steps)
                else:  # decisions on the calls waiting for approval
                    run = await agent._resumed(
                        user.decisions, on_event, NO_DEPS, None, agent._limits, steps=steps
                    )
                response = await agent._slot.drive(run)
            finally:
                await agent.aclose()  # its background tasks (async memory hooks) end here
        finally:
            steps.end(token)
        return encode_response(response)

    async def _first_of_turn(self, session_id: str, user: UserMessage | Decisions) -> str | None:
        """The id of the turn's first message in the session (``None``: it has none yet)."""
        if isinstance(user, UserMessage):
            return user.id
        if user.after is None:
            return None
        ids = [r.message.id for r in await self.sessions.records(session_id)]
        if user.after not in ids:
            return None
        later = ids[ids.index(user.after) + 1 :]
        return later[0] if later else None

    def _events(
        self, steps: TurnSteps, stored: set[str], publish: bool
    ) -> Callable[[AgentEvent], Awaitable[None]] | None:
        """Where the turn's events go: ``on_event``, but not those an engine sends again.

        None for a turn not published when only published turns' events are wanted: the
        turn then runs without a stream.

        An engine whose every call replays the turn's earlier part (Temporal) would send
        that part's events once per call: an event of a message is dropped when the session
        held the message already (``stored``), any other while :func:`replaying`.
        """
        on_event = self._on_event
        if self._published_only and not publish:
            return None
        if on_event is None or not getattr(self.engine, "replays_each_call", False):
            return on_event

        async def fresh(event: AgentEvent) -> None:
            if isinstance(event, MessageCommitted | ToolCallFinished):
                if event.message.id not in stored:
                    await on_event(event)
            elif not steps.replaying:
                await on_event(event)

        return fresh

    def _build(self, session_id: str) -> ChatHost:
        agent = self._factory()
        if not isinstance(agent, ChatHost):
            raise UsageError(f"{self.agent_path} must return an Agent, got {type(agent).__name__}")
        if agent._output is not None:
            raise UsageError(
                f"{self.agent_path} returned an agent with an output type, which a durable "
                "turn does not support: answer in text"
            )
        agent.session_id = session_id
        return agent


def _agent_path(agent: object) -> str:
    if isinstance(agent, str):
        return agent
    module = getattr(agent, "__module__", None)
    qualname = getattr(agent, "__qualname__", None)
    if not (inspect.isfunction(agent) and module and qualname) or "<" in qualname:
        raise UsageError(
            f"agent must be an import path 'module:function' or a module-level function, "
            f"got {agent!r}"
        )
    return f"{module}:{qualname}"


def _load_factory(path: str) -> Callable[[], object]:
    factory = import_attribute(path, "agent factory")
    if not callable(factory):
        raise UsageError(f"{path} is {type(factory).__name__}, not a function that builds an Agent")
    return factory
