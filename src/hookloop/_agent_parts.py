"""The parts of an agent that it makes when first needed: an idle agent holds none of them.

A part of :class:`~hookloop.Agent` (it inherits them), kept apart as ``_agent_memory.py`` is.
Many agents may sit idle with a conversation each (a server's sessions; the peer benchmark's
scenario C, ``bench/round3.py``'s ``agents_kb_rss``): an agent's session id, chat slot,
approval book and background tasks are made by their first use, each the same one after it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from ._approval_log import ApprovalBook
from ._background import BackgroundTasks
from ._chat_slot import ChatSlot
from ._messages import new_id

if TYPE_CHECKING:
    from ._chat_slot import ChatHost

__all__ = ["IdleParts"]


class IdleParts:
    """The session id, chat slot, approval book and background tasks, made when first used."""

    _session_id: str | None
    _chat_slot: ChatSlot | None
    _approvals: ApprovalBook | None
    _background: BackgroundTasks | None

    def _no_parts(self, session_id: str | None) -> None:
        """Start with none of the parts (``session_id``: the one given, checked, or None)."""
        self._session_id = session_id
        self._chat_slot = None
        self._approvals = None
        self._background = None

    @property
    def session_id(self) -> str:
        """The session the agent is in; change it with :meth:`switch_session`."""
        session_id = self._session_id
        if session_id is None:
            session_id = self._session_id = new_id("session")
        return session_id

    @session_id.setter
    def session_id(self, session_id: str) -> None:
        self._session_id = session_id

    @property
    def background(self) -> BackgroundTasks:
        """Tasks the agent started that nobody awaits (async memory hooks); see ``aclose``."""
        tasks = self._background
        if tasks is None:
            tasks = self._background = BackgroundTasks()
        return tasks

    @property
    def is_running(self) -> bool:
        """Whether a chat is running now."""
        slot = self._chat_slot
        return slot is not None and slot.run is not None

    @property
    def _slot(self) -> ChatSlot:
        """The slot that keeps one chat at a time on this agent."""
        slot = self._chat_slot
        if slot is None:
            slot = self._chat_slot = ChatSlot(cast("ChatHost", self))
        return slot

    def _book(self) -> ApprovalBook:
        """The calls of the latest batch that waited for approval, as this process saw them."""
        book = self._approvals
        if book is None:
            book = self._approvals = ApprovalBook()
        return book
