"""An idle agent holds what it uses: the parts a chat needs are made when first needed.

Many agents may sit idle with a conversation each (a server's sessions; the peer
benchmark's scenario C, ``bench/round3.py``'s ``agents_kb_rss``). What an agent only needs
once it chats (its approval book, its background tasks) is made then, and works as if it
had always been there; an agent without limits shares the one set of no limits.
"""

from __future__ import annotations

import pytest

from hookloop import Agent, UsageError
from hookloop._limits import NO_LIMITS
from hookloop.context import SlidingWindow
from hookloop.retry import DefaultRetryStrategy
from hookloop.testing import ScriptedModel, tool_call
from tests._approval_tools import delete, ran


class _Quiet:
    """A plugin that registers nothing."""

    name = "quiet"

    def init_agent(self, agent: object) -> None:
        pass


async def test_the_approval_book_is_made_by_the_first_chat_and_keeps_its_waiting_calls() -> None:
    ran.clear()
    agent = Agent(ScriptedModel([tool_call("delete", {"path": "/tmp/x"}, id="c1")]), tools=[delete])
    assert agent._approvals is None  # idle: no book yet
    assert await agent.pending_approvals() == ()
    response = await agent.chat("tidy up")
    assert [p.call_id for p in response.pending_approvals] == ["c1"]
    assert await agent.pending_approvals() == response.pending_approvals
    assert ran == []


async def test_background_tasks_are_made_when_first_asked_for_and_drained_by_aclose() -> None:
    agent = Agent(ScriptedModel([]))
    assert agent._background is None  # idle: nothing started, nothing held
    done: list[str] = []

    async def work() -> None:
        done.append("work")

    tasks = agent.background
    assert agent.background is tasks
    tasks.spawn(work(), "work")
    assert len(agent.background) == 1
    await agent.aclose()
    assert done == ["work"]
    assert len(agent.background) == 0


def test_an_agent_without_limits_shares_no_limits_and_its_plugins_are_a_tuple() -> None:
    agent = Agent(ScriptedModel([]))
    assert agent._limits is NO_LIMITS
    assert isinstance(agent.retry_strategy, DefaultRetryStrategy)
    assert isinstance(agent.context_policy, SlidingWindow)
    assert agent.plugins == (agent.retry_strategy, agent.context_policy)
    extra = _Quiet()
    dispose = agent.use(extra)
    assert agent.plugins == (agent.retry_strategy, agent.context_policy, extra)
    dispose()
    assert agent.plugins == (agent.retry_strategy, agent.context_policy)


def test_the_session_id_is_made_when_first_read_and_a_given_one_is_checked_at_once() -> None:
    agent = Agent(ScriptedModel([]))
    assert agent._session_id is None  # idle: no id made yet
    first = agent.session_id
    assert first.startswith("session_")
    assert agent.session_id is first  # the same id from then on
    assert Agent(ScriptedModel([])).session_id != first
    assert Agent(ScriptedModel([]), session_id="mine").session_id == "mine"
    with pytest.raises(UsageError, match="session id"):
        Agent(ScriptedModel([]), session_id="")
    fresh = Agent(ScriptedModel([]))
    fresh.switch_session_sync("next")  # an idle agent switches without an id of its own
    assert fresh.session_id == "next"


async def test_the_chat_slot_is_made_by_the_first_chat() -> None:
    agent = Agent(ScriptedModel(["hi", "again"]))
    assert agent.is_running is False
    assert agent._chat_slot is None  # asking made nothing
    assert agent.cancel() is False  # nothing runs
    assert (await agent.chat("hello")).message.content == "hi"
    slot = agent._slot
    assert (await agent.chat("more")).message.content == "again"
    assert agent._slot is slot
    assert agent.is_running is False


async def test_a_chat_makes_no_session_id_unless_its_model_sends_one_as_a_cache_key() -> None:
    agent = Agent(ScriptedModel(["hi"]))
    assert agent.model.prompt_cache_key is False
    await agent.chat("hello")
    assert agent._session_id is None  # nothing asked for it
    keyed = Agent(ScriptedModel(["hi"]))
    keyed.model.prompt_cache_key = True  # a model that sends the session as its cache key
    await keyed.chat("hello")
    assert keyed._session_id is not None
    assert keyed.model.requests[0].settings.cache_key == keyed.session_id
