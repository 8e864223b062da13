"""An idle agent holds only what it uses: a restored history is counted when first needed.

Many agents may sit idle with a restored conversation each (a server's sessions):
``bench/context.py`` measures one with 100 messages (``agent_kb_100_messages_rss``, aim
30 KB). Counting is lazy, as it is for appended messages, and the counter given to a
history is the one it uses.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from hookloop import Agent, AssistantMessage, ChatHistory, Message, SystemMessage, UserMessage
from hookloop.context import CachingCounter
from hookloop.testing import ScriptedModel
from tests.context.test_trim import LenCounter


def conversation(count: int) -> list[Message]:
    return [
        UserMessage(content=f"question {i}") if i % 2 == 0 else AssistantMessage(content=f"a{i}")
        for i in range(count)
    ]


def test_a_history_counts_with_the_caching_counter_it_was_given() -> None:
    # A new CachingCounter is empty, so falsy: it was once replaced by a default estimate.
    given_counter = CachingCounter(LenCounter())
    history = ChatHistory(max_context_tokens=1_000, token_counter=given_counter)
    history.add_message(UserMessage(content="hello"))
    assert history.token_counter is given_counter
    assert history.conversation_tokens == 1 + len("hello")


def test_an_imported_history_is_counted_when_a_count_is_first_needed() -> None:
    counter = LenCounter()
    history = ChatHistory(max_context_tokens=100_000, token_counter=counter)
    messages = conversation(100)
    history.import_history(messages)
    assert counter.calls == 0  # idle: nothing counted, nothing held
    expected = sum(1 + len(m.content) for m in messages if isinstance(m.content, str))
    assert history.conversation_tokens == expected
    assert counter.calls == 100
    assert history.total_tokens == expected
    assert counter.calls == 100  # once each


@given(
    imported=st.integers(min_value=0, max_value=30),
    added=st.integers(min_value=0, max_value=10),
    removed=st.integers(min_value=0, max_value=5),
)
def test_lazy_counts_always_add_up_to_counting_everything(
    imported: int, added: int, removed: int
) -> None:
    history = ChatHistory(max_context_tokens=100_000, token_counter=LenCounter())
    history.import_history(conversation(imported))
    for i in range(added):
        history.add_message(UserMessage(content=f"more {i}" * (i + 1)))
    gone = history.messages[:removed]
    if gone:
        history.delete_message_range(gone[0].id, gone[-1].id)
    if history.messages:
        history.edit_message(history.messages[-1].id, "edited")
    fresh = LenCounter()
    assert history.conversation_tokens == sum(fresh.count_message(m) for m in history.messages)


def test_an_idle_agent_with_a_restored_history_answers_with_it() -> None:
    model = ScriptedModel(["fine"])
    agent = Agent(model, retry=None)
    agent.history.import_history(conversation(100))
    response = agent.chat_sync("and now?")
    assert response.message.content == "fine"
    assert [m.content for m in model.requests[0].messages] == [
        *(m.content for m in conversation(100)),
        "and now?",
    ]
    assert agent.history.conversation_tokens == sum(
        agent.history.token_counter.count_message(m) for m in agent.history.messages
    )


def test_histories_that_have_counted_nothing_hold_no_counts_of_their_own() -> None:
    # Until its first count a history holds the shared empty counts; the first count (an
    # added message, or a restored conversation's first count) makes its own, so no count
    # ever lands in another history.
    first = ChatHistory(max_context_tokens=1_000, token_counter=LenCounter())
    second = ChatHistory(max_context_tokens=1_000, token_counter=LenCounter())
    restored = ChatHistory(max_context_tokens=1_000, token_counter=LenCounter())
    restored.import_history(conversation(4))
    assert first._counts is second._counts is restored._counts  # idle: nothing held
    first.add_message(UserMessage(content="hello"))
    assert (first.conversation_tokens, second.conversation_tokens) == (6, 0)
    assert restored.conversation_tokens == sum(1 + len(str(m.content)) for m in conversation(4))
    second.add_message(UserMessage(content="hi"))
    first.clear_history()
    first.add_message(UserMessage(content="again"))
    assert [h.conversation_tokens for h in (first, second)] == [6, 3]
    assert first._counts is not second._counts


def test_a_history_counts_its_system_prompt_once_and_leaves_the_cache_to_requests() -> None:
    # The history keeps its system prompt's count itself; the caching counter it hands to
    # the policies remembers the prompt when a request is first counted with it.
    counter = CachingCounter(LenCounter())
    history = ChatHistory(max_context_tokens=1_000, token_counter=counter)
    history.add_system_prompt("be brief")
    history.import_history([SystemMessage(content="be briefer"), UserMessage(content="hi")])
    assert counter._system is None  # idle: the cache holds nothing
    assert history.total_tokens == (1 + len("be briefer")) + (1 + len("hi"))
    assert counter.count_system("be briefer") == 1 + len("be briefer")
    history.edit_message(history.system_message.id, "longer now")  # type: ignore[union-attr]
    assert history.total_tokens == (1 + len("longer now")) + (1 + len("hi"))
