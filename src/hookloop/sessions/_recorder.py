"""The plugin that keeps an agent's conversation in a session store."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
from typing import TYPE_CHECKING

from .._approval_log import (
    ApprovalLog,
    approval_session_id,
    encode_decision,
    encode_repair,
    encode_request,
    has_unanswered_call,
    is_approval_session,
    open_calls,
    read_log,
)
from .._chat_slot import current_slot
from .._errors import (
    CorruptSessionError,
    SessionConflictError,
    SessionExistsError,
    SessionNotFoundError,
    UsageError,
)
from .._guardrail_log import verdict_writer
from .._limits import Spend
from .._messages import AssistantMessage, Message, new_id
from .._run_context import durable_turn
from ..hooks._contexts import (
    ApprovalDecisionContext,
    ApprovalRequestContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    MessageContext,
    SessionSwitchContext,
)
from ..hooks._dispatch import Phase
from ..hooks._host import attach_once
from ._base import SessionStore, check_session_id
from ._spend_log import SpendRecord, encode_spend, latest_spend
from ._types import StoredMessage

if TYPE_CHECKING:
    from .._loop import ChatRun
    from ..hooks._host import AgentHost

__all__ = ["SessionRecorder"]


class SessionRecorder:
    """A plugin that restores a session into an agent and records every message it commits.

    ``agent.use(store.session())`` keeps the agent's session (``agent.session_id``);
    ``store.session("user-42")`` (or ``SessionRecorder(store, "user-42")``) names one:

    - **Restore.** Before the agent's first chat, or at ``await recorder.restore()``, the
      session's messages replace the conversation in ``agent.history`` (the system prompt,
      which is configuration, stays). A session with no messages yet instead receives the
      conversation the agent has, so it starts from there. The restored history is exactly
      the log; if it ends in a tool call that has no result (the process died while a tool
      ran), the agent's request repair answers it with an error result on the next request.
    - **Record.** Every message the agent commits, the synthetic "cancelled" and "not run"
      tool results included, is appended from ``on_message`` and committed before the loop
      goes on: a message the agent has committed is in the store when the process dies.
    - **Conflicts.** With ``check_conflicts`` (the default), each append says which
      sequence number it expects to follow. If another writer appended to the session
      meanwhile, the append fails with :class:`~hookloop.SessionConflictError`,
      which ends the chat: the agent's history no longer matches the session, and
      interleaving two conversations in one log would corrupt both. Restore again (or use
      another session) to go on.
    - **Switching.** ``await agent.switch_session(new_id, parent_session_id=..., reset=...)``
      moves the recorder to ``new_id`` at once: a session the store has is restored (it
      replaces the conversation); a new one is created with ``parent_session_id`` as its
      parent and starts from the conversation the agent keeps (none after ``reset=True``).
      If the store fails during the switch, the failure is logged and the next chat tries
      again (the restore, or the rest of the copy), and raises if the store still fails.
    - **Approvals.** A tool call that waits for approval and the decision taken on it are
      appended (at ``on_approval_request`` / ``on_approval_decision``) to a side session of
      the same store, ``"<session id>:approvals"``, one record per message; so another
      process restores the session and resumes (see ``docs/approval.md``). Each decision
      is appended only if no other writer decided on the call first, before the call runs;
      otherwise the resume raises :class:`~hookloop.SessionConflictError` and runs
      nothing. The side session is not forked, deleted or exported with the session, nor
      listed by ``list_sessions()``. A side session whose records cannot be read is mended
      with :meth:`repair_approvals`.
    - **Spend.** What the session's chats spent (model requests, tool calls, tokens with
      their cost, seconds; sub-agents' included) is appended to the same side session as
      running totals: at each model call's answer, before its message is stored, and when
      the chat ends. :meth:`spent` reads it, and an agent's ``session_limits`` are checked
      against it, in this process or another, after a restart or a resumed approval. A
      durable turn run again after a crash counts its recorded calls once (see
      ``docs/budgets.md``).

    One recorder serves one agent.

    Args:
        store: Where the session is kept.
        session_id: The session; by default the agent's ``session_id``.
        check_conflicts: Refuse to append after another writer, as described above.

    Raises:
        UsageError: ``store`` is not a session store or the id is not usable (an id of the
            form of an approval side session, ``"...:approvals"``, is one).
    """

    def __init__(
        self, store: SessionStore, session_id: str | None = None, *, check_conflicts: bool = True
    ) -> None:
        if not isinstance(store, SessionStore):
            raise UsageError(f"store must be a SessionStore, got {type(store).__name__}")
        self.store = store
        self._session_id = None if session_id is None else _conversation_id(session_id)
        self.check_conflicts = check_conflicts
        self._agent: AgentHost | None = None
        self._restored = False
        self._last_seq = 0
        # The decision records of a durable turn that resumes (restore's ``own_decisions``):
        # the prefix of their ids, the same in every run of the turn.
        self._own_decisions: str | None = None
        self._parent: str | None = None  # of a session switched to, until it is created
        # Messages in the agent's history whose append failed or was cut short: not known
        # to be stored. Every append first stores these again (appends are idempotent by
        # message id, so one that did commit is not written twice).
        self._unsaved: list[Message] = []
        # Whether an append of _unsaved[0] ended without telling its outcome (cut short by a
        # second cancellation, or failed): it may still commit on the server meanwhile.
        self._uncertain = False
        # The spend records: the newest this recorder read or wrote (None: none yet), whether
        # it read them since the last restore, and the chat they are written for now.
        self._newest: SpendRecord | None = None
        self._spend_read = False
        self._chat: _ChatSpend | None = None
        self._next: _ChatSpend | None = None  # begun by spent_before, for the next chat

    @property
    def name(self) -> str:
        """The plugin's name: ``"session"``."""
        return "session"

    @property
    def session_id(self) -> str | None:
        """The session the agent's messages go to (``None`` until it is used by an agent)."""
        return self._session_id

    @property
    def last_seq(self) -> int:
        """The sequence number of the last message this recorder restored or appended."""
        return self._last_seq

    @property
    def restored(self) -> bool:
        """Whether the session has been restored into the agent."""
        return self._restored

    def __repr__(self) -> str:
        return f"SessionRecorder({self.store!r}, {self._session_id!r})"

    def init_agent(self, agent: AgentHost) -> None:
        """Register the recorder's hooks on ``agent``.

        Raises:
            UsageError: The recorder serves another agent already.
        """
        self._agent = attach_once(
            "a SessionRecorder", self._agent, agent, "it serves one agent", owner=self
        )
        if self._session_id is None:
            self._session_id = _conversation_id(agent.session_id)
        agent.add_hook("on_chat_start", self._on_chat_start)
        # Before every other handler: the message is in agent.history before on_message
        # fires, and a handler that raises ends the chat and skips the handlers after it;
        # one running before the recorder would leave a committed message out of the store,
        # and the next chat would append after it without noticing.
        agent.add_hook("on_message", self._on_message, order=Phase.RECORD)
        agent.add_hook("on_session_switch", self._on_session_switch)
        agent.add_hook("on_approval_request", self._on_approval_request, order=Phase.RECORD)
        agent.add_hook("on_approval_decision", self._on_approval_decision, order=Phase.RECORD)
        # The spend at the chat's end (tool calls and sub-agents after its last model call).
        agent.add_hook("on_chat_done", self._on_chat_end, order=Phase.RECORD)
        agent.add_hook("on_chat_error", self._on_chat_end, order=Phase.RECORD)
        agent.add_hook("on_chat_abort", self._on_chat_end, order=Phase.RECORD)
        agent.add_hook("on_guardrail_verdict", verdict_writer(self), order=Phase.RECORD)

    async def approval_log(self) -> ApprovalLog:
        """What the session's approval records say about its latest batch of waiting calls.

        Restores the session first if the recorder has not yet. Which calls still wait,
        and how decided calls without a result are answered, is for the agent to tell from
        the history (``agent.pending_approvals()``); when every call in the history has its
        result, nothing can be open, and the side session is not read.

        Raises:
            UsageError: The recorder is not used by an agent.
            CorruptSessionError: An approval record cannot be read (see
                :meth:`repair_approvals`).
        """
        agent = self._require_agent()
        if not self._restored:
            await self._restore(agent)
        if not has_unanswered_call(agent.history.messages):
            return ApprovalLog()
        return await self._read_log()

    async def spent(self) -> Spend:
        """What the session has spent so far, by every process and chat that recorded it.

        Model requests, tool calls, tokens with their cost (``None`` when some call was not
        priced) and seconds of its chats, sub-agents' included; a chat running now counts
        what it spent so far. Restores the session first if the recorder has not yet.

        Raises:
            UsageError: The recorder is not used by an agent.
            CorruptSessionError: A spend record cannot be read (see
                :meth:`repair_approvals`).
        """
        agent = self._require_agent()
        if not self._restored:
            await self._restore(agent)
        run = self._running()
        if run is not None:
            chat = await self._chat_for(run)
            return chat.base + run.spend
        newest = await self._read_spend()
        return newest.total if newest is not None else Spend()

    async def spent_before(self) -> Spend:
        """What the session spent before the chat the agent starts now (its limits' start).

        The agent asks as it starts a chat; the chat's spend records then go on from it. A
        durable turn run again after a crash gets what was spent before its first run: its
        recorded calls count again as they replay.
        """
        chat = self._next = await self._new_chat()
        return chat.base

    async def _chat_for(self, run: ChatRun) -> _ChatSpend:
        """The spend-record state of the chat ``run`` (begun by :meth:`spent_before`)."""
        chat = self._chat
        if chat is not None and chat.run is run:
            return chat
        chat, self._next = self._next or await self._new_chat(), None
        chat.run = run
        self._chat = chat
        return chat

    async def _new_chat(self) -> _ChatSpend:
        turn = durable_turn.get()
        key = turn.workflow_id if turn is not None and turn.agent is self._agent else new_id("chat")
        newest = await self._read_spend()
        return _ChatSpend(key, newest.before(key) if newest is not None else Spend())

    async def _read_spend(self) -> SpendRecord | None:
        if not self._spend_read:
            side = approval_session_id(self._require_session())
            unreadable: list[CorruptSessionError] = []
            records = await self.store.records(side, unreadable=unreadable)
            self._newest = latest_spend(side, [(r.seq, r.message) for r in records], unreadable)
            self._spend_read = True
        return self._newest

    async def _record_spend(self, run: ChatRun, key: str) -> None:
        """Append the session's spend now, in ``run``'s chat (``key``: what it is at)."""
        chat = await self._chat_for(run)
        spent = run.spend
        last = chat.recorded
        if last is not None and (spent.requests, spent.tool_calls, spent.usage) == (
            last.requests,
            last.tool_calls,
            last.usage,
        ):
            return  # only the seconds moved on: they go in the next record
        total = chat.base + spent
        record = encode_spend(chat.key, key, chat.base, total)
        side = approval_session_id(self._require_session())
        # A conflict: the side session holds this record's id with other figures. The
        # first run of a durable turn wrote it (its seconds differ), and it stands.
        with contextlib.suppress(SessionConflictError):
            await self.store.append(side, record)
        chat.recorded = spent
        self._newest = SpendRecord(chat.key, chat.base, total)

    def _running(self) -> ChatRun | None:
        """The chat running on the agent, when it is this context's (hooks, tools)."""
        slot = current_slot()
        if slot is None or slot.owner is not self._agent:
            return None
        return slot.run

    async def repair_approvals(self) -> tuple[str, ...]:
        """Set aside a side session whose records cannot be read; returns the calls.

        A damaged approval or spend record (changed behind the store's back, or written by
        something else) makes :meth:`~hookloop.Agent.pending_approvals`, :meth:`spent`,
        ``chat()`` and ``resume()`` raise :class:`~hookloop.CorruptSessionError`. This
        appends a repair record after which the damaged records before it are not read
        (the spend records that read well still count), and the calls of the latest batch
        that have no result yet are set aside: the next chat answers each with an error
        result saying that whether it ran is not known (nothing runs). The side session's
        own record is repaired first (``store.repair()``, when the store can), so that
        appends to it go through again. Records that read well are left as they are. Run
        it while no other process resumes the session.

        Returns:
            The ids of the calls set aside (empty when nothing needed repair).

        Raises:
            UsageError: The recorder is not used by an agent, or the agent is chatting.
        """
        agent = self._require_agent()
        if agent.is_running:
            raise UsageError("repair_approvals() cannot run while the agent is chatting")
        if not self._restored:
            await self._restore(agent)
        side = approval_session_id(self._require_session())
        # The side session's own record first (appends need it), as sessions are repaired;
        # a store that cannot repair, or no side session at all, leaves nothing to do here.
        with contextlib.suppress(UsageError, SessionNotFoundError):
            await self.store.repair(side)
        try:
            await self._read_log()
            self._spend_read = False
            await self._read_spend()
            return ()
        except CorruptSessionError:
            pass
        message_id, calls = open_calls(agent.history.messages)
        await self.store.append(side, encode_repair(message_id, calls))
        self._spend_read = False
        return calls

    async def _read_log(self) -> ApprovalLog:
        side = approval_session_id(self._require_session())
        unreadable: list[CorruptSessionError] = []
        records = await self.store.records(side, unreadable=unreadable)
        own = self._own_decisions
        if own is not None:  # the turn's own decisions (an earlier run of it) left out
            records = [r for r in records if not r.message.id.startswith(own)]
        return read_log(side, [(r.seq, r.message) for r in records], unreadable)

    async def restore(
        self, *, before: str | None = None, own_decisions: str | None = None
    ) -> list[Message]:
        """Load the session into the agent's history now; returns the messages restored.

        Args:
            before: The id of a message: restore only the messages stored before it (all
                of them if the session does not hold it). Messages the agent then commits
                again are not stored twice (appends are idempotent by message id): a
                durable turn run again after a crash restores the session as it was when
                the turn began, and re-commits what the first run stored. Conflicts are
                checked from there: a message found stored, but not right after the one
                before it, or a new one while the session holds more, raises
                :class:`~hookloop.SessionConflictError` (another writer came in between).
            own_decisions: A durable turn that resumes (its workflow id): the approval
                decisions it records get ids made from it, the same in every run of the
                turn, so that its run again does not take them for earlier ones (the calls
                still wait for them) and stores them once. Anyone else's decisions count.

        Raises:
            UsageError: The recorder is not used by an agent, or the agent is chatting.
            CorruptSessionError: A stored message cannot be read; the history is unchanged.
        """
        agent = self._require_agent()
        if agent.is_running:
            raise UsageError("restore() cannot run while the agent is chatting")
        self._own_decisions = None if own_decisions is None else _decision_prefix(own_decisions)
        return await self._restore(agent, before)

    # --- hooks --------------------------------------------------------------------------

    async def _on_chat_start(self, ctx: ChatStartContext) -> None:
        if not self._restored:
            await self._restore(self._require_agent())
        elif self._unsaved:  # e.g. a switch whose copy failed halfway: try again, or raise
            await self._flush()
        if (run := self._running()) is not None:
            # What the session spent, read now: damaged records stop the chat before it
            # sends anything, not after its first answer.
            await self._chat_for(run)

    async def _on_message(self, ctx: MessageContext) -> None:
        if self._restored:
            message = ctx.message
            if type(message) is AssistantMessage and (run := self._running()) is not None:
                # The spend before the message: a process that dies in between has counted
                # a call it made, never the other way round. The message is unsaved from
                # now on: if the spend's append fails, the next append stores it first.
                self._unsaved.append(message)
                try:
                    await self._record_spend(run, message.id)
                except asyncio.CancelledError:
                    await self._flush()  # in the history already: stored all the same
                    raise
                await self._flush()
                return
            await self._append(message)
            return
        # The recorder was added during a chat: an empty session takes the history (this
        # message included); replacing the history of a running chat is not an option.
        if await self.store.records(self._require_session()):
            raise UsageError(
                f"the SessionRecorder for {self._session_id!r} was added during a chat and "
                "the session has messages; add it between chats to restore them"
            )
        await self._restore(self._require_agent())

    async def _on_approval_request(self, ctx: ApprovalRequestContext) -> None:
        side = approval_session_id(self._require_session())
        await self.store.append(side, encode_request(ctx.pending))

    async def _on_approval_decision(self, ctx: ApprovalDecisionContext) -> None:
        # The claim on the call: it fires before any decided call runs, and the append
        # only goes through if no other worker wrote to the side session since it was
        # read here, and no decision on the call is there; so of two workers resuming the
        # same calls, one runs them and the other gets SessionConflictError first.
        side = approval_session_id(self._require_session())
        unreadable: list[CorruptSessionError] = []
        records = await self.store.records(side, unreadable=unreadable)
        message_id, call_id = ctx.pending.message_id, ctx.decision.call_id
        record = encode_decision(ctx.decision, message_id)
        last = max([r.seq for r in records] + [e.seq or 0 for e in unreadable], default=0)
        own = self._own_decisions
        if own is not None:
            key = hashlib.sha256(f"{message_id}\0{call_id}".encode()).hexdigest()[:16]
            record = dataclasses.replace(record, id=f"{own}{key}")
            if any(r.message.id == record.id for r in records):
                return  # recorded by an earlier run of this durable turn
            records = [r for r in records if not r.message.id.startswith(own)]
        log = read_log(side, [(r.seq, r.message) for r in records], unreadable)
        if log.decided(message_id, call_id):
            raise SessionConflictError(
                f"call {call_id!r} was decided already (by another worker?); nothing was "
                "run: restore the session to see where it stands",
                session_id=side,
            )
        await self.store.append(side, record, expected_seq=last)

    async def _on_chat_end(
        self, ctx: ChatDoneContext | ChatErrorContext | ChatAbortContext
    ) -> None:
        run = self._running()
        if self._restored and run is not None:
            await self._record_spend(run, "end")
        self._chat = None

    async def _on_session_switch(self, ctx: SessionSwitchContext) -> None:
        self._session_id = ctx.new_session_id
        self._parent = ctx.parent_session_id
        self._restored = False
        self._last_seq = 0
        self._unsaved = []
        self._uncertain = False
        self._chat = self._next = None
        await self._restore(self._require_agent())

    # --- work ---------------------------------------------------------------------------

    async def _restore(self, agent: AgentHost, before: str | None = None) -> list[Message]:
        session_id = self._require_session()
        self._spend_read = False  # read again when needed: another process may have spent
        records = await self.store.records(session_id)
        cut = None
        if before is not None:
            cut = next((i for i, r in enumerate(records) if r.message.id == before), None)
            if cut is not None:
                records = records[:cut]
        history = agent.history
        if not records and cut is None:
            info = await self.store.info(session_id)
            if info is None and self._parent is not None:
                try:
                    info = await self.store.create(session_id, parent_id=self._parent)
                except SessionExistsError:  # another process made it meanwhile
                    info = await self.store.info(session_id)
            self._last_seq = info.last_seq if info is not None else 0
            self._parent = None
            # The conversation is the session's now, but not stored yet: if the store fails
            # halfway, the rest stays unsaved and the next chat (or append) tries again, and
            # raises if the store still fails.
            self._unsaved = list(history.messages)
            self._restored = True
            await self._flush()
            return []
        messages = _checked(session_id, records)
        # The loop's own way in: these messages were committed by an agent's loop, so they
        # are taken as they are (a model may answer with an empty message, which
        # import_history would refuse). clear_history() marks the history as changed, so
        # the next request is repaired.
        history.clear_history()
        for message in messages:
            history.append_committed(message)
        self._unsaved = []  # the history is the log now
        self._uncertain = False
        # Restored before a message, the session is taken as it was then (the end of the
        # log would let a resumed turn append after messages that came later unnoticed);
        # each message the turn commits again must then be found right after it.
        self._last_seq = records[-1].seq if records else 0
        self._parent = None
        self._restored = True
        return messages

    async def _append(self, message: Message) -> None:
        """Store ``message`` after any earlier message not known to be stored.

        Raises what the store raises; the message then stays unsaved, and the next append
        stores it again first (and raises again if the store still fails).
        """
        self._unsaved.append(message)
        await self._flush()

    async def _flush(self) -> None:
        session_id = self._require_session()
        while self._unsaved:
            message = self._unsaved[0]
            expected = self._last_seq if self.check_conflicts else None
            task = asyncio.ensure_future(
                self.store.append(session_id, message, expected_seq=expected)
            )
            try:
                seq = await asyncio.shield(task)
            except asyncio.CancelledError:
                # The chat was cancelled while the message was being stored. It is in the
                # agent's history already: cutting the append short would leave the store
                # without it (PostgreSQL cancels the statement) or the recorder without its
                # seq although it committed (SQLite's thread finishes it regardless), and
                # the next chat would miss a message or fail with a conflict. So wait for
                # the append to end, then let the cancellation go on. A second
                # cancellation cuts the append short; the message then stays unsaved.
                try:
                    await _wait_for(task)
                except asyncio.CancelledError:
                    self._uncertain = True
                    raise
                if not task.cancelled() and task.exception() is None:
                    self._stored(task.result())
                else:
                    self._uncertain = True
                raise
            except SessionConflictError:
                if not self._uncertain:
                    raise
                # The append whose outcome was unknown committed while this one ran (a
                # PostgreSQL statement cancelled too late, say), so the session moved on by
                # that very message. Once more finds it (a duplicate by id) and its seq; a
                # real other writer conflicts again, and that raises.
                self._uncertain = False
                continue
            except Exception:
                self._uncertain = True
                raise
            if expected is not None and seq != expected + 1:
                # A message stored already (appends are idempotent by id), but not where
                # this history has it: messages of another writer are in between.
                raise SessionConflictError(
                    f"message {message.id!r} is stored at seq {seq} of session "
                    f"{session_id!r}, not right after seq {expected}: another writer appended "
                    "in between; nothing was written",
                    session_id=session_id,
                    expected_seq=expected,
                )
            self._stored(seq)

    def _stored(self, seq: int) -> None:
        self._last_seq = max(self._last_seq, seq)
        self._uncertain = False
        del self._unsaved[0]

    def _require_session(self) -> str:
        if self._session_id is None:
            raise UsageError("the SessionRecorder is not used by an agent: agent.use(recorder)")
        return self._session_id

    def _require_agent(self) -> AgentHost:
        if self._agent is None:
            raise UsageError("the SessionRecorder is not used by an agent: agent.use(recorder)")
        return self._agent


def _conversation_id(session_id: str) -> str:
    checked = check_session_id(session_id)
    if is_approval_session(checked):
        raise UsageError(
            f"session id {checked!r} has the form of an approval side session (ending in "
            "':approvals'), which holds another session's approval records; choose another id"
        )
    return checked


async def _wait_for(task: asyncio.Future[int]) -> None:
    """Wait until ``task`` is done, whatever its outcome; cancelled again, cancel it too."""
    try:
        await asyncio.wait((task,))
    except asyncio.CancelledError:
        task.cancel()
        raise


def _checked(session_id: str, records: list[StoredMessage]) -> list[Message]:
    """The messages, refusing a log that could not have come from an agent's history."""
    seen: set[str] = set()
    messages: list[Message] = []
    for record in records:
        message = record.message
        if message.role == "system":
            raise CorruptSessionError(
                session_id=session_id,
                seq=record.seq,
                reason="a system message, which an agent never commits",
            )
        if message.id in seen:
            raise CorruptSessionError(
                session_id=session_id, seq=record.seq, reason=f"message id {message.id!r} twice"
            )
        seen.add(message.id)
        messages.append(message)
    return messages


class _ChatSpend:
    """The chat the recorder writes spend records for: its key, base, and last record."""

    __slots__ = ("base", "key", "recorded", "run")

    def __init__(self, key: str, base: Spend) -> None:
        self.run: ChatRun | None = None
        self.key = key
        self.base = base
        self.recorded: Spend | None = None


def _decision_prefix(turn: str) -> str:
    """The prefix of the ids of a durable turn's decision records (``turn``: its id)."""
    return f"msg_decision_{hashlib.sha256(turn.encode()).hexdigest()[:16]}_"
