"""Repairing tool-call pairing, so that a provider accepts the conversation.

Providers reject a conversation in which a tool result answers no call, or a tool call has
no result, and they keep rejecting every later request of it. Edits, range deletions,
restores and other people's trimming can all leave one behind; :func:`repair` fixes it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._messages import AssistantMessage, Message, ToolCall, ToolMessage

__all__ = ["MISSING_RESULT_TEXT", "repair"]

MISSING_RESULT_TEXT = (
    "no result: the result of this tool call was lost (removed from the history or never "
    "recorded); call the tool again if you still need it"
)
"""The content of the error result :func:`repair` adds for an unanswered tool call."""


def repair(messages: Sequence[Message]) -> Sequence[Message]:
    """Return the conversation with every tool call answered and every tool result expected.

    Tool results are valid only in the run of tool messages right after an assistant message
    with tool calls (the open turn), and only for a call of that message not answered yet.
    So:

    - A tool result for no call of the open turn (an orphan) is dropped, and so is a second
      result for the same call.
    - A call still unanswered when the turn closes (at the next non-tool message or the end)
      gets an error result, :data:`MISSING_RESULT_TEXT`, right after the turn's last result,
      in call order. Its id is derived from the call's, so repairing the same history twice
      gives equal messages.

    Everything kept stays the same object in the same order. When nothing is wrong the input
    itself is returned, so ``repair(x) is x`` tells a caller that ``x`` was valid. Repairing
    is idempotent and linear in the number of messages.

    Example:
        >>> from hookloop import AssistantMessage, ToolCall, ToolMessage, UserMessage
        >>> fixed = repair([
        ...     ToolMessage(tool_call_id="gone", tool_name="f", content="orphan"),
        ...     AssistantMessage(tool_calls=(ToolCall(name="f", id="c1"),)),
        ...     UserMessage(content="next"),
        ... ])
        >>> [(m.role, getattr(m, "is_error", None)) for m in fixed]
        [('assistant', None), ('tool', True), ('user', None)]
    """
    out: list[Message] | None = None  # made at the first change; until then, nothing copied
    pending: dict[str, ToolCall] = {}  # the open turn's calls not answered yet, in call order
    made: set[str] = set()  # ids of the results added, to keep them unique
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if pending.pop(message.tool_call_id, None) is not None:
                if out is not None:
                    out.append(message)
            elif out is None:
                out = list(messages[:index])
            continue
        if pending:
            if out is None:
                out = list(messages[:index])
            out.extend(_missing_results(pending, made))
        pending = (
            {call.id: call for call in message.tool_calls}
            if isinstance(message, AssistantMessage) and message.tool_calls
            else {}
        )
        if out is not None:
            out.append(message)
    if pending:
        if out is None:
            out = list(messages)
        out.extend(_missing_results(pending, made))
    return messages if out is None else tuple(out)


def _missing_results(pending: dict[str, ToolCall], made: set[str]) -> list[ToolMessage]:
    results: list[ToolMessage] = []
    for call in pending.values():
        message_id = base = f"msg_noresult_{call.id}"
        suffix = 1
        while message_id in made:  # the same call id unanswered in two turns
            suffix += 1
            message_id = f"{base}_{suffix}"
        made.add(message_id)
        results.append(
            ToolMessage(
                tool_call_id=call.id,
                tool_name=call.name,
                content=MISSING_RESULT_TEXT,
                is_error=True,
                id=message_id,
            )
        )
    pending.clear()
    return results
