"""What an idle history holds besides its messages (bench/context.py has the figures)."""

from __future__ import annotations

import gc
import tracemalloc

from hookloop import AssistantMessage, ChatHistory, Message, UserMessage

HISTORIES = 200


def conversation(size: int) -> list[Message]:
    out: list[Message] = []
    for i in range(size // 2):
        out.append(UserMessage(content=f"Where is order {i}? It was due on Tuesday."))
        out.append(AssistantMessage(content=f"Order {i} left the warehouse and ships Friday."))
    return out


def test_an_idle_history_of_100_messages_holds_under_2_kb_besides_the_messages() -> None:
    """Its counts and positions, once each: no second copy of every count in a cache, no id
    index until an id is looked up."""
    messages = [conversation(100) for _ in range(HISTORIES)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        histories = []
        for batch in messages:
            history = ChatHistory(max_context_tokens=100_000)
            history.import_history(batch)
            histories.append(history)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown / HISTORIES < 2_048


def test_a_lazily_made_id_index_finds_every_message_after_any_change() -> None:
    history = ChatHistory(max_context_tokens=100_000)
    history.import_history(conversation(10))
    first, *_, last = history.messages
    assert history.get_message_by_id(last.id) is last
    history.delete_message_range(first.id, first.id)
    extra = UserMessage(content="one more")
    history.append_committed(extra)
    assert [history.get_message_by_id(m.id) for m in history.messages] == list(history.messages)
    assert history.get_message_by_id(first.id) is None
    history.clear_history()
    assert history.get_message_by_id(extra.id) is None
