"""ChatHistory: a conversation with a token budget (the seed's ``IChatHistoryManager``)."""

from __future__ import annotations

import dataclasses
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .._errors import (
    DuplicateMessageIdError,
    InvalidMessageError,
    InvalidRangeError,
    MessageNotFoundError,
    UsageError,
)
from .._messages import (
    CONVERSATION_ROLES,
    AssistantMessage,
    ContentPart,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    check_message,
)
from ._notes import LeftOutNotes
from ._repair import repair
from ._tokens import CachingCounter, EstimateCounter, TokenCounter
from ._trim import trim_to_budget

__all__ = ["ChatHistory"]


class ChatHistory:
    """A conversation, its system prompt, and a token budget to trim it to.

    The stored history is only ever changed by the methods below; :meth:`get_trimmed_history`
    returns a trimmed and repaired *copy* for the next request. The system prompt is kept
    apart from the conversation: it is never trimmed and :meth:`clear_history` keeps it.
    :meth:`export_history` puts it first.

    Every message has a unique id (messages make one when created); a second message with an
    id already present is refused. Every method that raises leaves the history unchanged.
    Token counts are taken once per message, when it is added, so budgets and trims cost no
    re-counting. Not thread-safe: use one history from one task at a time.

    Example:
        >>> from hookloop import AssistantMessage, UserMessage
        >>> history = ChatHistory(max_context_tokens=1000)
        >>> history.add_system_prompt("You are a programming assistant.")
        >>> history.add_message(UserMessage(content="How do I write a loop?"))
        >>> history.add_message(AssistantMessage(content="Use for or while..."))
        >>> [m.role for m in history.get_trimmed_history()]
        ['system', 'user', 'assistant']
        >>> history.get_remaining_budget()
        969

    Args:
        max_context_tokens: The budget: the most tokens the trimmed history (system prompt
            included) may take. Leave room for the tool definitions and the reply.
        token_counter: How to count; by default an :class:`~hookloop.context.EstimateCounter`
            (use :func:`~hookloop.context.counter_for_model` for exact counts).

    Attributes:
        version: Bumped by every change to the conversation except :meth:`append_committed`.
        checked_version: The :attr:`version` its checker (the agent's loop) last found
            valid, so a history nobody else changed is not repaired again.

    Raises:
        UsageError: ``max_context_tokens`` is not a positive int.
    """

    __slots__ = (
        "_counter",
        "_counts",
        "_index",
        "_max",
        "_messages",
        "_notes",
        "_own",
        "_system",
        "_system_tokens",
        "_total",
        "checked_version",
        "version",
    )

    def __init__(
        self, *, max_context_tokens: int, token_counter: TokenCounter | None = None
    ) -> None:
        if (
            isinstance(max_context_tokens, bool)
            or not isinstance(max_context_tokens, int)
            or max_context_tokens < 1
        ):
            raise UsageError(
                f"max_context_tokens must be a positive int, got {max_context_tokens!r}"
            )
        if token_counter is not None and not isinstance(token_counter, TokenCounter):
            raise UsageError(
                f"token_counter must be a TokenCounter, got {type(token_counter).__name__}"
            )
        self._max = max_context_tokens
        # Not `or`: an empty CachingCounter is falsy, and it is still the counter given.
        self._counter: TokenCounter = (
            CachingCounter(EstimateCounter()) if token_counter is None else token_counter
        )
        # What the history counts its own messages with, kept: every iteration counts two.
        self._own = _own_counter(self._counter)
        self._system: SystemMessage | None = None
        self._system_tokens = 0
        self._messages: list[Message] = []
        # Token count of each message, in step with _messages except for a tail of messages
        # the loop appended and nobody has asked about yet: _counted() fills it in.
        # An array of C ints: half the size of a list (bench/context.py, agent_kb_*); the
        # shared empty one until the first count (an idle history holds none).
        self._counts: array[int] = _NO_COUNTS
        self._total = 0  # sum of _counts
        # message id -> position in _messages; made when first needed, so an idle history
        # (a restored session nobody talks to yet) does not hold it (bench/context.py,
        # agent_kb_100_messages_*).
        self._index: dict[str, int] | None = None
        self._notes: LeftOutNotes | None = None  # made when a note is first kept
        self.version = 0
        self.checked_version = 0  # a new, empty history is valid

    # --- reading ------------------------------------------------------------------------

    @property
    def max_context_tokens(self) -> int:
        """The token budget of the trimmed history."""
        return self._max

    @property
    def token_counter(self) -> TokenCounter:
        """The counter the history counts with."""
        return self._counter

    @property
    def system_message(self) -> SystemMessage | None:
        """The system prompt, or ``None``."""
        return self._system

    @property
    def messages(self) -> tuple[Message, ...]:
        """The conversation, oldest first, without the system prompt (not trimmed)."""
        return tuple(self._messages)

    @property
    def total_tokens(self) -> int:
        """Tokens the whole stored history takes, system prompt included (not trimmed)."""
        self._counted()
        return self._system_tokens + self._total

    @property
    def conversation_tokens(self) -> int:
        """Tokens the stored conversation takes, without the system prompt (not trimmed)."""
        self._counted()
        return self._total

    def __len__(self) -> int:
        return len(self._messages)

    def __iter__(self) -> Iterator[Message]:
        return iter(tuple(self._messages))

    def __repr__(self) -> str:
        return (
            f"<ChatHistory {len(self._messages)} messages, "
            f"{self.total_tokens}/{self._max} tokens, "
            f"{'a' if self._system else 'no'} system prompt>"
        )

    def get_message_by_id(self, message_id: str) -> Message | None:
        """The message (system prompt included) with this id, or ``None``.

        Raises:
            UsageError: ``message_id`` is not a str.
        """
        _check_id(message_id)
        if self._system is not None and self._system.id == message_id:
            return self._system
        position = self._ids().get(message_id)
        return None if position is None else self._messages[position]

    def get_remaining_budget(self) -> int:
        """Tokens left in the budget after the whole stored history; 0 once it is exceeded."""
        return max(0, self._max - self.total_tokens)

    def export_history(self) -> list[Message]:
        """A copy of the whole history, system prompt first, untrimmed (for saving)."""
        head: list[Message] = [self._system] if self._system is not None else []
        return head + self._messages

    def get_trimmed_history(self) -> list[Message]:
        """The history to send next: repaired, then trimmed to the budget; system first.

        Repair (:func:`~hookloop.context.repair`) answers any tool call left without a result
        and drops tool results without a call, whatever edits or imports did to the stored
        history. Trimming (:func:`~hookloop.context.trim_to_budget`) keeps the system prompt
        and the last user message, drops the oldest turn units first, never splits a tool
        call from its results, and truncates (with a marker) what cannot fit otherwise. When
        the system prompt and the last user message alone exceed the budget, a warning is
        logged. The stored history is not changed; the result is a new list each call.
        """
        conversation: Sequence[Message] = self._messages
        counts: Sequence[int] | None = self._counted()
        if self.version != self.checked_version:
            repaired = repair(conversation)
            if repaired is conversation:
                self.checked_version = self.version
            else:
                conversation, counts = repaired, None
        system = self._system
        budget = self._max - (self._system_tokens if system is not None else 0)
        trimmed = trim_to_budget(conversation, budget, counter=self._counter, counts=counts)
        return [system, *trimmed] if system is not None else list(trimmed)

    # --- changing -----------------------------------------------------------------------

    def add_message(self, message: Message) -> None:
        """Append a user, assistant or tool message to the conversation.

        Raises:
            InvalidMessageError: Not a user, assistant or tool message (a system message goes
                through :meth:`add_system_prompt`), or one with no content: a user message
                needs text or an image, an assistant message text or tool calls.
            DuplicateMessageIdError: A message with the same id is in the history already.
        """
        check_message(message)
        self._append(message)
        self.version += 1

    def append_committed(self, message: Message) -> None:
        """Append a message the agent's loop has committed, skipping content validation.

        For the loop only: its messages are well-formed by construction, and a model may
        legitimately answer with no text and no tool calls, which :meth:`add_message`
        refuses. Does not bump :attr:`version`: the loop keeps tool calls paired. The
        message is counted when a count is first needed, not on the loop's hot path.

        Raises:
            InvalidMessageError: Not a user, assistant or tool message.
            DuplicateMessageIdError: A message with the same id is in the history already.
        """
        if not isinstance(message, _CONVERSATION):
            check_message(message)  # raises: the right error for each wrong kind
        # _check_new_id and _ids, inlined: this runs twice per iteration of every chat.
        index = self._index
        if index is None:
            index = self._ids()
        message_id = message.id
        if message_id in index or (self._system is not None and self._system.id == message_id):
            self._check_new_id(message_id)  # raises
        messages = self._messages
        index[message_id] = len(messages)
        messages.append(message)

    def _append(self, message: Message) -> None:
        self._check_new_id(message.id)
        counts = self._counted()
        count = self._own.count_message(message)
        if counts is _NO_COUNTS:  # an empty history: its first count
            counts = self._counts = array("i")
        self._ids()[message.id] = len(self._messages)
        self._messages.append(message)
        counts.append(count)
        self._total += count

    def _counted(self) -> array[int]:
        """The per-message counts, after counting messages appended without one."""
        counts = self._counts
        missing = len(self._messages) - len(counts)
        if missing:
            if counts is _NO_COUNTS:  # never written to: the first count makes the history's own
                counts = self._counts = array("i")
            count = self._own.count_message
            total = self._total
            for message in self._messages[-missing:]:  # a loop: no comprehension's frame
                tokens = count(message)
                counts.append(tokens)
                total += tokens
            self._total = total
        return counts

    def _checked_lists(self) -> tuple[list[Message], array[int]] | None:
        """The conversation and its counts, not copied, if its tool calls pair up.

        For the context policies, which must not copy the whole conversation per request.
        ``None`` when the conversation needs :func:`~hookloop.context.repair`. The lists are
        the history's own: read them, never change them.
        """
        messages = self._messages
        if self.version != self.checked_version:
            if repair(messages) is not messages:
                return None
            self.checked_version = self.version
        return messages, self._counted()

    def add_system_prompt(self, prompt: str) -> None:
        """Set the system prompt, replacing any earlier one; ``""`` removes it.

        The system prompt is never trimmed and comes first in :meth:`export_history` and
        :meth:`get_trimmed_history`, whenever it is set. A prompt of only whitespace removes
        it too.

        Raises:
            InvalidMessageError: ``prompt`` is not a str.
        """
        if not isinstance(prompt, str):
            raise InvalidMessageError(
                f"the system prompt must be a str, got {type(prompt).__name__}"
            )
        if not prompt.strip():
            self._system = None
            self._system_tokens = 0
            return
        system = SystemMessage(content=prompt)
        self._system_tokens = self._own.count_system(prompt)
        self._system = system

    def clear_history(self) -> None:
        """Remove every message of the conversation; the system prompt stays.

        For a complete reset, also call ``add_system_prompt("")``.
        """
        self._messages = []
        self._counts = _NO_COUNTS
        self._total = 0
        self._index = None
        self._notes = None
        self.version += 1

    def delete_message_range(self, start_id: str, end_id: str) -> None:
        """Remove the messages from ``start_id`` to ``end_id``, both included.

        A range may split a tool call from its results; :meth:`get_trimmed_history` repairs
        what that leaves, the stored history keeps exactly what is left.

        Raises:
            MessageNotFoundError: Either id is not in the conversation.
            InvalidRangeError: ``end_id`` comes before ``start_id``, or either is the system
                prompt's (remove that with ``add_system_prompt("")``).
            UsageError: An id is not a str.
        """
        _check_id(start_id)
        _check_id(end_id)
        first = self._position(start_id, start_id=start_id, end_id=end_id)
        last = self._position(end_id, start_id=start_id, end_id=end_id)
        if last < first:
            raise InvalidRangeError(
                f"message {end_id!r} (position {last}) comes before {start_id!r} "
                f"(position {first}); pass the older id first",
                start_id=start_id,
                end_id=end_id,
            )
        counts = self._counted()  # before the change, while counts and messages line up
        del self._messages[first : last + 1]
        del counts[first : last + 1]
        self._total = sum(counts)
        self._reindex()
        self.version += 1

    def edit_message(self, message_id: str, new_content: str | Sequence[ContentPart]) -> None:
        """Replace a message's content, keeping its id, position and everything else.

        The system prompt can be edited by its id too. Content parts are for user messages.

        Raises:
            MessageNotFoundError: No message has that id.
            InvalidMessageError: The new content is of the wrong type or empty (the same
                rules as :meth:`add_message`; use ``add_system_prompt("")`` to remove the
                system prompt).
            UsageError: ``message_id`` is not a str.
        """
        _check_id(message_id)
        if self._system is not None and self._system.id == message_id:
            if not isinstance(new_content, str) or not new_content.strip():
                raise InvalidMessageError(
                    "the system prompt's new content must be a non-empty str; "
                    "remove the system prompt with add_system_prompt('')"
                )
            self._system_tokens = self._own.count_system(new_content)
            self._system = dataclasses.replace(self._system, content=new_content)
            return
        position = self._ids().get(message_id)
        if position is None:
            raise MessageNotFoundError(
                f"no message with id {message_id!r} in the history", message_id=message_id
            )
        edited = _with_content(self._messages[position], new_content)
        check_message(edited)
        counts = self._counted()  # before the change, while counts and messages line up
        count = self._own.count_message(edited)
        self._messages[position] = edited
        self._total += count - counts[position]
        counts[position] = count
        self.version += 1

    def import_history(self, messages: Iterable[Message]) -> None:
        """Replace the conversation with these messages, oldest first.

        A system message may come first; it replaces the system prompt. Without one the
        current system prompt stays, as with :meth:`clear_history`. So
        ``import_history(export_history())`` restores a history exactly. To load JSON, use
        :func:`~hookloop.sessions.messages_from_json` first.

        Raises:
            InvalidMessageError: ``messages`` is not an iterable of messages, a system message
                is not first, or a message would be refused by :meth:`add_message`. The error
                names the position.
            DuplicateMessageIdError: Two messages share an id.
        """
        self._import(messages, check_content=True)

    def replace_committed(self, messages: Iterable[Message]) -> None:
        """Replace the conversation with messages the agent's loop committed, and new ones.

        For context policies (a compaction replacing old turns by a summary): like
        :meth:`import_history`, but a message's content is not checked again, since model
        output is recorded as it came (an answer with no text included). Types, ids and the
        place of a system message are still checked.

        Raises:
            InvalidMessageError: Not messages, or a system message that is not first.
            DuplicateMessageIdError: Two messages share an id.
        """
        self._import(messages, check_content=False)

    def _import(self, messages: Iterable[Message], *, check_content: bool) -> None:
        if messages is None or isinstance(messages, (str, bytes, Mapping)):
            raise InvalidMessageError(
                f"import_history needs an iterable of messages, got {type(messages).__name__}"
            )
        try:
            items = list(messages)
        except TypeError as exc:
            raise InvalidMessageError(
                f"import_history needs an iterable of messages, got {type(messages).__name__}"
            ) from exc
        system: SystemMessage | None = None
        conversation: list[Message] = []
        index: dict[str, int] = {}
        for position, message in enumerate(items):
            if isinstance(message, SystemMessage):
                if position != 0:
                    raise InvalidMessageError(
                        f"message {position}: a system message may only come first"
                    )
                if not isinstance(message.content, str) or not message.content.strip():
                    raise InvalidMessageError("message 0: the system message is empty")
                system = message
                continue
            try:
                if check_content:
                    check_message(message)
                elif not isinstance(message, _CONVERSATION):
                    raise InvalidMessageError(
                        f"expected {CONVERSATION_ROLES}, got {type(message).__name__}"
                    )
            except InvalidMessageError as exc:
                raise InvalidMessageError(f"message {position}: {exc}") from exc
            if message.id in index or (system is not None and system.id == message.id):
                raise DuplicateMessageIdError(
                    f"message {position}: id {message.id!r} is used twice",
                    message_id=message.id,
                )
            index[message.id] = len(conversation)
            conversation.append(message)
        conversation = conversation[:]  # no room to grow: a restored history may stay idle
        system_tokens = self._own.count_system(system.content) if system else None
        # Everything checked: now commit, all at once. The messages are counted when a count
        # is first needed (_counted), as appended ones are: an idle history holds no counts.
        self._messages = conversation
        self._counts = _NO_COUNTS
        self._total = 0
        self._index = None  # made again when first needed: an idle history is smaller
        if check_content:  # a new conversation; a policy's replacement keeps what applies
            self._notes = None
        self.version += 1
        if system is not None and system_tokens is not None:
            self._system = system
            self._system_tokens = system_tokens

    # --- helpers ------------------------------------------------------------------------

    def _check_new_id(self, message_id: str) -> None:
        if message_id in self._ids() or (
            self._system is not None and self._system.id == message_id
        ):
            raise DuplicateMessageIdError(
                f"the history already has a message with id {message_id!r}",
                message_id=message_id,
            )

    def _position(self, message_id: str, *, start_id: str, end_id: str) -> int:
        position = self._ids().get(message_id)
        if position is not None:
            return position
        if self._system is not None and self._system.id == message_id:
            raise InvalidRangeError(
                f"{message_id!r} is the system prompt, which no range holds; "
                "remove it with add_system_prompt('')",
                start_id=start_id,
                end_id=end_id,
            )
        raise MessageNotFoundError(
            f"no message with id {message_id!r} in the history", message_id=message_id
        )

    def _reindex(self) -> None:
        self._index = None

    def _left_out_notes(self) -> LeftOutNotes:
        """What ``on_pre_compress`` handlers kept of messages left out without a summary.

        For the agent's loop (which keeps the texts and puts them into requests) and the
        context policies (whose budgets make room for them).
        """
        notes = self._notes
        if notes is None:
            notes = self._notes = LeftOutNotes()
        return notes

    def _ids(self) -> dict[str, int]:
        """Message id -> position, made on first use."""
        index = self._index
        if index is None:
            index = self._index = {m.id: i for i, m in enumerate(self._messages)}
        return index


_CONVERSATION = (UserMessage, AssistantMessage, ToolMessage)

_NO_COUNTS: array[int] = array("i")
"""The counts of a history that has counted nothing yet: shared, never written to."""


def _own_counter(counter: TokenCounter) -> TokenCounter:
    """The counter the history counts its own messages and system prompt with: not a cache.

    The history keeps every message's count and its system prompt's itself; a
    :class:`CachingCounter` would keep each a second time (bench/context.py,
    agent_kb_100_messages_*). Requests are counted with the cache, which remembers the
    prompt from the first one on.
    """
    return counter.counter if isinstance(counter, CachingCounter) else counter


def _check_id(message_id: object) -> None:
    if not isinstance(message_id, str):
        raise UsageError(f"a message id is a str, got {type(message_id).__name__}")


def _with_content(message: Message, content: str | Sequence[ContentPart]) -> Message:
    if isinstance(message, UserMessage):
        if isinstance(content, str):
            return dataclasses.replace(message, content=content)
        if isinstance(content, (list, tuple)):
            return dataclasses.replace(message, content=tuple(content))
    elif isinstance(content, str):
        return dataclasses.replace(message, content=content)
    raise InvalidMessageError(
        f"the new content of a {message.role} message must be a str, got {type(content).__name__}"
    )
