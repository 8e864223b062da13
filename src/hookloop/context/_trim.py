"""Trimming a conversation to a token budget: pure functions over message sequences.

Nothing here mutates its input or keeps state; each function returns a new tuple (or the
input itself, as a tuple, when there is nothing to do).

The unit of trimming is the *turn unit* (:func:`group_units`): an assistant message with tool
calls together with the tool results right after it, or any other single message. Units are
kept or dropped whole, so a trim never separates a tool call from its result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from bisect import bisect_left
from collections.abc import Sequence
from itertools import accumulate
from typing import overload

from .._errors import UsageError
from .._messages import (
    AssistantMessage,
    ContentPart,
    Message,
    SystemMessage,
    TextPart,
    ToolMessage,
    UserMessage,
)
from ._tokens import TokenCounter

__all__ = [
    "cut_to_fit",
    "group_units",
    "step_start",
    "trim_to_budget",
    "truncate_tool_results",
]

logger = logging.getLogger(__name__)

_SHRINK_ATTEMPTS = 8


def group_units(messages: Sequence[Message]) -> list[range]:
    """Split messages into turn units, as index ranges that cover ``messages`` in order.

    A unit is an assistant message with tool calls plus the tool results that directly
    follow it, or a run of tool results with no such assistant message before it (orphans),
    or any other single message.

    Example:
        >>> from hookloop import AssistantMessage, ToolCall, ToolMessage, UserMessage
        >>> call = ToolCall(name="f", id="c1")
        >>> group_units([
        ...     UserMessage(content="hi"),
        ...     AssistantMessage(tool_calls=(call,)),
        ...     ToolMessage(tool_call_id="c1", tool_name="f", content="42"),
        ...     AssistantMessage(content="42"),
        ... ])
        [range(0, 1), range(1, 3), range(3, 4)]
    """
    units: list[range] = []
    n = len(messages)
    i = 0
    while i < n:
        j = i + 1
        message = messages[i]
        if isinstance(message, ToolMessage) or (
            isinstance(message, AssistantMessage) and message.tool_calls
        ):
            while j < n and isinstance(messages[j], ToolMessage):
                j += 1
        units.append(range(i, j))
        i = j
    return units


def _unit_start(messages: Sequence[Message], end: int) -> int:
    """The start of the unit that ends just before ``end`` (a unit boundary)."""
    start = end - 1
    if isinstance(messages[start], ToolMessage):
        while start > 0 and isinstance(messages[start - 1], ToolMessage):
            start -= 1
        before = messages[start - 1] if start > 0 else None
        if isinstance(before, AssistantMessage) and before.tool_calls:
            start -= 1
    return start


def _unit_end(messages: Sequence[Message], start: int) -> int:
    """Where the turn unit starting at ``start`` ends (see :func:`group_units`)."""
    end = start + 1
    first = messages[start]
    if isinstance(first, ToolMessage) or (isinstance(first, AssistantMessage) and first.tool_calls):
        while end < len(messages) and isinstance(messages[end], ToolMessage):
            end += 1
    return end


def step_start(
    messages: Sequence[Message],
    counts: Sequence[int],
    start: int,
    before: int,
    step: int,
    last_user: int,
) -> int:
    """Where a window that moves in steps of ``step`` tokens starts.

    ``start`` is where the largest window that fits starts (a unit boundary) and ``before``
    the tokens of the messages before it. The window in steps starts at the first unit
    boundary at or after ``start`` whose tokens before it reach the next multiple of
    ``step``, but never after the last user message (at ``last_user``). The multiples are
    counted from the first message, so the start stays where it is while the conversation
    grows by less than ``step`` tokens, and then moves by a block of about ``step`` tokens:
    the requests in between share their prefix, and it depends on nothing but the messages
    and the step (another process, or a restored session, finds the same start).
    """
    target = -(-before // step) * step
    at, span = start, 32
    # The first message with `target` tokens before it: the running sums are made at C speed
    # (walking the block unit by unit in Python would cost the request that moves it), over
    # spans that double, so a step reads about as many counts as the block it drops.
    while at < last_user and before < target:
        end = min(at + span, last_user)
        sums = list(accumulate(counts[at:end], initial=before))
        found = bisect_left(sums, target)
        if found < len(sums):
            at += found
            break
        at, before, span = end, sums[-1], span * 2
    while at < last_user and not _is_unit_start(messages, at):
        at += 1  # inside a unit (a tool result): the unit goes whole
    return at


def _is_unit_start(messages: Sequence[Message], index: int) -> bool:
    """Whether a turn unit (:func:`group_units`) starts at ``index``."""
    if not isinstance(messages[index], ToolMessage) or index == 0:
        return True
    before = messages[index - 1]
    return not isinstance(before, ToolMessage) and not (
        isinstance(before, AssistantMessage) and before.tool_calls
    )


def trim_to_budget(
    messages: Sequence[Message],
    budget: int,
    *,
    counter: TokenCounter,
    counts: Sequence[int] | None = None,
    headroom: float = 0.0,
) -> tuple[Message, ...]:
    """Keep the newest messages that fit in ``budget`` tokens, plus the pinned ones.

    The rules, in order:

    1. System messages and the last user message are pinned: always kept.
    2. Turn units (:func:`group_units`) are kept from the newest back, while they fit;
       the first that does not fit is dropped with everything older ("oldest first").
    3. When the newest unit after the last user message does not fit on its own (a huge
       tool result, say), it is truncated to fit, tool results first, then assistant text,
       each cut message ending in a visible ``[truncated: ...]`` marker. The model needs
       it to continue the turn; dropping it would make the model call the tool again.
    4. When something older than the last user message was dropped, the kept conversation
       starts at a user message: an answer without its question misleads the model, and some
       providers reject a conversation that starts with the assistant.
    5. When the pinned messages alone exceed the budget, the last user message is truncated
       to fit; if even that cannot fit (a system prompt larger than the budget), a warning is
       logged and the pinned messages are returned as they are. System messages are never
       truncated.
    6. With ``headroom``, the kept conversation moves in steps: once something must go, whole
       units go in blocks of ``headroom`` of the budget (:func:`step_start`), so the kept
       part starts at the same message until the conversation has grown by that much again,
       and a provider's prompt cache keeps serving the prefix of the requests in between.

    Everything else is returned as the same objects in the same order, so the result is a
    subsequence of ``messages`` except for truncated copies, which keep their ids. Tool-call
    pairing is preserved: a trim never creates an orphaned tool result or an unanswered
    call that was not already there (see :func:`~hookloop.context.repair`).

    Time is linear in ``len(messages)``: each message is counted once (none when ``counts``
    is given), units are walked once from the newest, and only kept messages are copied.

    Args:
        messages: The conversation, oldest first.
        budget: The most tokens the kept messages may take, as the counter counts them.
        counter: Counts messages (and truncated copies).
        counts: Each message's count, if the caller keeps them (as
            :class:`~hookloop.ChatHistory` does); same length as ``messages``.
        headroom: The fraction of ``budget`` a step of the kept conversation frees (rule
            6); ``0`` keeps the most that fits, moving one unit at a time.

    Raises:
        UsageError: ``counts`` does not match ``messages`` in length, or ``headroom`` is
            not in ``[0, 1)``.
    """
    if not 0 <= headroom < 1:
        raise UsageError(f"headroom must be in [0, 1), got {headroom}")
    n = len(messages)
    if counts is None:
        counts = _LazyCounts(messages, counter)  # only what the walk reaches gets counted
    elif len(counts) != n:
        raise UsageError(f"counts has {len(counts)} items for {n} messages")

    last_user = n - 1
    while last_user >= 0 and not isinstance(messages[last_user], UserMessage):
        last_user -= 1
    pinned = _system_positions(messages)
    if last_user >= 0:
        pinned.append(last_user)
        pinned.sort()
    room = budget - sum(counts[i] for i in pinned)
    if room < 0:
        return _pinned_only(messages, counts, pinned, last_user, budget, counter)

    start = n  # the kept suffix is messages[start:], plus the pinned messages before it
    replacement: tuple[int, list[Message]] | None = None
    kept_any = False
    end = n
    while end > 0:
        if _is_pinned(messages, end - 1, last_user):
            end -= 1
            start = end
            continue
        first = _unit_start(messages, end)
        size = sum(counts[first:end])
        if size <= room:
            room -= size
            start = end = first
            kept_any = True
            continue
        if not kept_any and first > last_user:  # the newest unit of the current turn
            cut = _truncate_unit(messages[first:end], counts[first:end], room, counter)
            if cut is not None:
                replacement = (first, cut)
                start = first
            else:
                logger.warning(
                    "the newest messages of the current turn (%d tokens) cannot be cut to fit "
                    "the %d tokens left; dropping them",
                    size,
                    room,
                )
        break
    else:
        return _as_tuple(messages)  # everything fits

    step = int(budget * headroom)
    if step > 0 and replacement is None:
        start = step_start(messages, counts, start, sum(counts[:start]), step, last_user)
    while start < last_user and not isinstance(messages[start], UserMessage):
        start += 1  # rule 4: only whole units are skipped, since a user message starts one

    kept: list[Message] = [messages[i] for i in pinned if i < start]
    if replacement is None:
        kept.extend(messages[start:])
    else:
        at, cut = replacement
        kept.extend(messages[start:at])
        kept.extend(cut)
        kept.extend(messages[at + len(cut) :])
    return tuple(kept)


class _LazyCounts(Sequence[int]):
    """Message counts taken on first access: a trim walks only the newest messages."""

    __slots__ = ("_counter", "_messages", "_values")

    def __init__(self, messages: Sequence[Message], counter: TokenCounter) -> None:
        self._messages = messages
        self._counter = counter
        self._values: list[int | None] = [None] * len(messages)

    def __len__(self) -> int:
        return len(self._values)

    @overload
    def __getitem__(self, index: int) -> int: ...
    @overload
    def __getitem__(self, index: slice) -> list[int]: ...
    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._values)))]
        value = self._values[index]
        if value is None:
            value = self._values[index] = self._counter.count_message(self._messages[index])
        return value


def _system_positions(messages: Sequence[Message]) -> list[int]:
    """Where the system messages are; the search runs at C speed (``list.index``)."""
    kinds = list(map(type, messages))
    positions: list[int] = []
    at = -1
    with contextlib.suppress(ValueError):
        while True:
            at = kinds.index(SystemMessage, at + 1)
            positions.append(at)
    return positions


def _is_pinned(messages: Sequence[Message], index: int, last_user: int) -> bool:
    return index == last_user or type(messages[index]) is SystemMessage


def _pinned_only(
    messages: Sequence[Message],
    counts: Sequence[int],
    pinned: list[int],
    last_user: int,
    budget: int,
    counter: TokenCounter,
) -> tuple[Message, ...]:
    kept = [messages[i] for i in pinned]
    if last_user >= 0:
        others = sum(counts[i] for i in pinned if i != last_user)
        user = messages[last_user]
        cut = _shrink(user, budget - others, counter)
        if cut is not None and cut[1] <= budget - others:
            kept[pinned.index(last_user)] = cut[0]
            return tuple(kept)
    logger.warning(
        "the system prompt and the last user message (%d tokens) exceed the budget of %d "
        "tokens even when cut; the request will not fit",
        sum(counts[i] for i in pinned),
        budget,
    )
    return tuple(kept)


def cut_to_fit(
    messages: Sequence[Message], budget: int, *, counter: TokenCounter
) -> tuple[Message, ...] | None:
    """All of ``messages``, texts cut until they fit ``budget`` tokens; ``None`` if they cannot.

    Tool results are cut first, the largest first, then other texts, each cut message ending
    in a visible ``[truncated: ...]`` marker and keeping its id. No message is dropped, so
    every tool call keeps its result. What cannot be cut (framing, tool calls, images) may
    alone exceed the budget: then ``None``.
    """
    counts = [counter.count_message(m) for m in messages]
    if sum(counts) <= budget:
        return _as_tuple(messages)
    cut = _truncate_unit(messages, counts, budget, counter)
    return None if cut is None else tuple(cut)


def _truncate_unit(
    unit: Sequence[Message], counts: Sequence[int], room: int, counter: TokenCounter
) -> list[Message] | None:
    """Cut a unit's contents until it fits in ``room``: tool results first, largest first."""
    messages = list(unit)
    sizes = list(counts)
    excess = sum(sizes) - room
    order = sorted(
        range(len(messages)),
        key=lambda i: (not isinstance(messages[i], ToolMessage), -sizes[i]),
    )
    for i in order:
        if excess <= 0:
            break
        cut = _shrink(messages[i], sizes[i] - excess, counter)
        if cut is not None:
            messages[i] = cut[0]
            excess -= sizes[i] - cut[1]
            sizes[i] = cut[1]
    return messages if excess <= 0 else None


def _shrink(message: Message, target: int, counter: TokenCounter) -> tuple[Message, int] | None:
    """A copy of the message, text cut with a marker, that takes at most ``target`` tokens.

    When no cut gets that small, the smallest copy found; ``None`` when cutting does not
    make the message any smaller. Counts a bounded number of copies.
    """
    length = _text_length(message)
    if length == 0:
        return None
    original = counter.count_message(message)
    keep = length if original <= 0 else int(length * min(1.0, target / original))
    best: tuple[Message, int] | None = None
    for _ in range(_SHRINK_ATTEMPTS):
        keep = max(0, min(keep, length - 1))
        copy = _cut_text(message, keep)
        size = counter.count_message(copy)
        if best is None or size < best[1]:
            best = (copy, size)
        if size <= target or keep == 0:
            break
        keep = int(keep * target / size * 0.9)  # aim a little under, counts are not linear
    return best if best is not None and best[1] < original else None


def _text_length(message: Message) -> int:
    content = message.content
    if isinstance(content, str):
        return len(content)
    return sum(len(p.text) for p in content if isinstance(p, TextPart))


def _marker(removed: int) -> str:
    return f"\n[truncated: {removed} characters removed to fit the context window]"


def _cut_text(message: Message, keep: int) -> Message:
    """The message with its text cut to its first ``keep`` characters plus a marker."""
    content = message.content
    if isinstance(content, str):
        return dataclasses.replace(message, content=content[:keep] + _marker(len(content) - keep))
    parts: list[ContentPart] = []
    budget = keep
    removed = 0
    for part in content:
        if not isinstance(part, TextPart):
            parts.append(part)
        elif budget >= len(part.text):
            parts.append(part)
            budget -= len(part.text)
        else:
            removed += len(part.text) - budget
            if budget:
                parts.append(TextPart(text=part.text[:budget]))
            budget = 0
    parts.append(TextPart(text=_marker(removed).lstrip("\n")))
    assert isinstance(message, UserMessage)  # only user messages have parts
    return dataclasses.replace(message, content=tuple(parts))


def truncate_tool_results(
    messages: Sequence[Message], *, max_chars: int, keep_recent: int = 1
) -> tuple[Message, ...]:
    """Cut old tool results to ``max_chars`` characters, each with a visible marker.

    The cheapest way to shrink an agent's context: old tool output is rarely read again.
    Results of the newest ``keep_recent`` tool-calling assistant messages are left whole
    (the model is probably still working with them). A result is only cut when that makes
    it shorter. Cut copies keep their ids; everything else is the same object.

    Args:
        messages: The conversation, oldest first.
        max_chars: How many characters of each old result to keep.
        keep_recent: How many of the newest tool-call units to leave alone.

    Raises:
        UsageError: ``max_chars`` or ``keep_recent`` is negative.
    """
    if max_chars < 0 or keep_recent < 0:
        raise UsageError("max_chars and keep_recent must be >= 0")
    protect_from = len(messages)
    seen = 0
    while protect_from > 0 and seen < keep_recent:
        protect_from -= 1
        message = messages[protect_from]
        if isinstance(message, AssistantMessage) and message.tool_calls:
            seen += 1
    if seen < keep_recent:
        protect_from = 0
    out: list[Message] | None = None
    for index in range(protect_from):
        message = messages[index]
        if not isinstance(message, ToolMessage):
            continue
        content = message.content
        if len(content) <= max_chars:
            continue
        cut = content[:max_chars] + _marker(len(content) - max_chars)
        if len(cut) >= len(content):
            continue
        if out is None:
            out = list(messages)
        out[index] = dataclasses.replace(message, content=cut)
    return _as_tuple(messages) if out is None else tuple(out)


def _as_tuple(messages: Sequence[Message]) -> tuple[Message, ...]:
    return messages if isinstance(messages, tuple) else tuple(messages)
