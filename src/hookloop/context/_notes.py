"""What ``on_pre_compress`` handlers keep of messages left out of requests without a summary.

A window (``SlidingWindow``) or a reactive tier (``Compaction`` dropping old turns) leaves
stored messages out of a request and writes no summary; the texts the handlers returned
for them go into the request in their place, as a summary would: one user message at the
front, starting with the summary header. A window announces each message once, so the
texts are kept (with the history they are about) and go into every later request that
still leaves those messages out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from .._messages import Message, UserMessage
from ..models._base import ProviderRequest
from ._tokens import TokenCounter

__all__ = ["SUMMARY_HEADER", "LeftOutNotes"]

SUMMARY_HEADER = "[Summary of the earlier conversation]"
"""The first line of every summary message, so people and code can recognise one."""

NOTES_ID = "hookloop-left-out-notes"
"""The id of the message that carries the notes in a request (it is never stored)."""


class LeftOutNotes:
    """The kept texts, each standing for the stored messages up to the newest it was for.

    Attributes:
        tokens: What the notes' message takes in a request (0 without notes), for the
            budget of the requests they go into.
    """

    __slots__ = ("_notes", "tokens")

    def __init__(self) -> None:
        self._notes: list[tuple[str, str]] = []  # (id of the newest message, text)
        self.tokens = 0

    def __bool__(self) -> bool:
        return bool(self._notes)

    def add(
        self,
        messages: Sequence[Message],
        texts: Sequence[str],
        ids: Mapping[str, int],
        counter: TokenCounter,
    ) -> None:
        """Keep ``texts``, returned for the stored ``messages`` left out."""
        kept = [text.strip() for text in texts if text.strip()]
        if not kept or not messages:
            return
        newest = max(messages, key=lambda m: ids.get(m.id, -1))
        self._notes.append((newest.id, "\n\n".join(kept)))
        self._count(counter)

    def clear(self) -> None:
        """Forget every note (the conversation they were about is gone)."""
        self._notes.clear()
        self.tokens = 0

    def applied(
        self, request: ProviderRequest, ids: Mapping[str, int], counter: TokenCounter
    ) -> ProviderRequest:
        """``request`` with the notes of the stored messages it leaves out at its front.

        A note applies when the request starts after the newest message it stands for (a
        request holding that message again has no need of it). A note whose message is no
        longer stored (a summary replaced it) is dropped.
        """
        messages = request.messages
        if messages and messages[0].id == NOTES_ID:  # an earlier attempt's notes
            messages = messages[1:]
        if not self._notes and messages is request.messages:
            return request
        if len(self._notes) != len(stored := [n for n in self._notes if n[0] in ids]):
            self._notes = stored
            self._count(counter)
        start = ids.get(messages[0].id, len(ids)) if messages else len(ids)
        texts = [text for newest, text in self._notes if ids[newest] < start]
        if texts:
            content = "\n\n".join([SUMMARY_HEADER, *texts])
            messages = (UserMessage(content=content, id=NOTES_ID), *messages)
        elif messages is request.messages:
            return request
        return dataclasses.replace(request, messages=messages)

    def _count(self, counter: TokenCounter) -> None:
        texts = [text for _, text in self._notes]
        if not texts:
            self.tokens = 0
            return
        content = "\n\n".join([SUMMARY_HEADER, *texts])
        self.tokens = counter.count_message(UserMessage(content=content, id=NOTES_ID))
