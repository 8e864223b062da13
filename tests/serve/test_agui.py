"""AG-UI over real HTTP: the events of a run, approvals as interrupts, and resuming them."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx2
import pydantic
import pytest

from hookloop import Agent, RateLimitError
from hookloop.retry import DefaultRetryStrategy
from hookloop.testing import FakeClock, ScriptedModel, ScriptStep, text_response, tool_call
from tests.serve._support import (
    GUARD,
    Served,
    add,
    delete,
    post_agui,
    run_input,
    served,
    types,
)


def _agent() -> Agent:
    script = [
        ScriptStep(response=tool_call("add", {"a": 2, "b": 3}, id="c1"), chunk_size=4),
        ScriptStep(response=text_response("The sum is 5."), chunk_size=5),
        tool_call("delete", {"path": "/tmp/x"}, id="d1"),
        "Deleted.",
        tool_call("delete", {"path": "/tmp/y"}, id="d2"),
        "Not deleted.",
    ]
    return Agent(ScriptedModel(script), tools=[add, delete])


@pytest.fixture
def server() -> Iterator[Served]:
    with served(_agent) as s:
        yield s


@pytest.fixture
def client(server: Served) -> Iterator[httpx2.Client]:
    with httpx2.Client(base_url=server.url, timeout=GUARD) as c:
        yield c


def test_a_run_streams_its_events_in_the_protocols_order(client: httpx2.Client) -> None:
    status, events = post_agui(client, run_input("t1", "r1", "What is 2 + 3?"))
    assert status == 200
    assert [e.id for e in events] == list(range(1, len(events) + 1))
    kinds = types(events)
    assert kinds[0] == "RUN_STARTED"
    assert kinds[-1] == "RUN_FINISHED"
    assert events[0].data["threadId"] == "t1"
    assert events[0].data["runId"] == "r1"
    # the tool call streamed: start, its arguments in pieces, end, then its result
    calls = [k for k in kinds if k.startswith("TOOL_CALL")]
    assert calls[0] == "TOOL_CALL_START"
    assert calls[-2:] == ["TOOL_CALL_END", "TOOL_CALL_RESULT"]
    args = "".join(e.data["delta"] for e in events if e.type == "TOOL_CALL_ARGS")
    assert json.loads(args) == {"a": 2, "b": 3}
    result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
    assert result.data["toolCallId"] == "c1"
    assert result.data["content"] == "5"
    # the answer streamed in pieces between a start and an end
    text = [e for e in events if e.type.startswith("TEXT_MESSAGE")]
    assert text[0].type == "TEXT_MESSAGE_START"
    assert text[-1].type == "TEXT_MESSAGE_END"
    assert "".join(e.data.get("delta", "") for e in text) == "The sum is 5."
    assert len([e for e in text if e.type == "TEXT_MESSAGE_CONTENT"]) > 1
    snapshot = next(e for e in events if e.type == "MESSAGES_SNAPSHOT")
    roles = [m["role"] for m in snapshot.data["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert snapshot.data["messages"][0]["id"] == "r1-user"  # the client's id is kept
    usage = next(e for e in events if e.type == "CUSTOM" and e.data["name"] == "hookloop.usage")
    assert set(usage.data["value"]) == {"inputTokens", "outputTokens", "cost"}
    assert events[-1].data["result"] == "The sum is 5."
    assert "outcome" not in events[-1].data or events[-1].data["outcome"]["type"] == "success"


def test_a_call_waiting_for_approval_ends_the_run_with_an_interrupt(
    client: httpx2.Client,
) -> None:
    post_agui(client, run_input("t2", "r1", "add"))
    status, events = post_agui(client, run_input("t2", "r2", "delete /tmp/x"))
    assert status == 200
    finished = events[-1].data
    assert finished["type"] == "RUN_FINISHED"
    assert finished["outcome"]["type"] == "interrupt"
    [interrupt] = finished["outcome"]["interrupts"]
    assert interrupt["id"] == "d1"
    assert interrupt["toolCallId"] == "d1"
    assert interrupt["reason"] == "tool_approval"
    assert interrupt["metadata"]["toolName"] == "delete"
    assert interrupt["metadata"]["arguments"] == '{"path": "/tmp/x"}'
    pending = client.get("/api/threads/t2/approvals").json()["pending"]
    assert [p["callId"] for p in pending] == ["d1"]

    # the next run's resume entry is the decision
    resume = [{"interruptId": "d1", "status": "resolved", "payload": {"action": "approve"}}]
    status, events = post_agui(client, run_input("t2", "r3", resume=resume))
    assert status == 200
    result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
    assert result.data["content"] == "deleted /tmp/x"
    assert events[-1].data["result"] == "Deleted."
    assert client.get("/api/threads/t2/approvals").json()["pending"] == []


def test_a_cancelled_interrupt_is_a_denial_and_a_bad_decision_is_refused(
    client: httpx2.Client,
) -> None:
    post_agui(client, run_input("t3", "r1", "add"))
    post_agui(client, run_input("t3", "r2", "delete /tmp/x"))
    post_agui(
        client,
        run_input(
            "t3",
            "r3",
            resume=[{"interruptId": "d1", "status": "resolved", "payload": {"action": "approve"}}],
        ),
    )
    post_agui(client, run_input("t3", "r4", "delete /tmp/y"))
    # checked exactly as agent.resume() checks: unknown calls, wrong digests, bad edits
    wrong = [{"interruptId": "nope", "status": "resolved", "payload": {"action": "approve"}}]
    response = client.post("/agui", json=run_input("t3", "r5", resume=wrong))
    assert response.status_code == 422
    assert response.json()["type"] == "UnknownApprovalError"
    stale = [
        {
            "interruptId": "d2",
            "status": "resolved",
            "payload": {"action": "approve", "digest": "0" * 64},
        }
    ]
    response = client.post("/agui", json=run_input("t3", "r6", resume=stale))
    assert response.status_code == 422
    assert response.json()["type"] == "ApprovalMismatchError"
    bad_edit = [
        {
            "interruptId": "d2",
            "status": "resolved",
            "payload": {"action": "edit", "arguments": {"nope": 1}},
        }
    ]
    response = client.post("/agui", json=run_input("t3", "r7", resume=bad_edit))
    assert response.status_code == 422
    assert response.json()["type"] == "ApprovalEditError"
    no_reason = [{"interruptId": "d2", "status": "resolved", "payload": {"action": "deny"}}]
    response = client.post("/agui", json=run_input("t3", "r8", resume=no_reason))
    assert response.status_code == 400
    assert "reason" in response.json()["message"]
    # the call still waits; a cancelled interrupt denies it
    cancelled = [{"interruptId": "d2", "status": "cancelled"}]
    status, events = post_agui(client, run_input("t3", "r9", resume=cancelled))
    assert status == 200
    result = next(e for e in events if e.type == "TOOL_CALL_RESULT")
    assert "cancelled" in result.data["content"]
    assert events[-1].data["result"] == "Not deleted."


def test_a_failed_run_ends_with_run_error() -> None:
    def failing() -> Agent:
        return Agent(ScriptedModel([RuntimeError("the model broke")]), retry=None)

    with served(failing) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        status, events = post_agui(client, run_input("t", "r", "hi"))
    assert status == 200
    assert types(events)[0] == "RUN_STARTED"
    assert events[-1].data["type"] == "RUN_ERROR"
    assert "the model broke" in events[-1].data["message"]


def test_a_typed_answer_is_the_runs_result_and_streams_as_custom_events() -> None:
    class City(pydantic.BaseModel):
        name: str
        population: int

    def typed() -> Agent:
        answer = tool_call("final_result", {"name": "Lyon", "population": 522000})
        model = ScriptedModel([ScriptStep(response=answer, chunk_size=8)])
        return Agent(model, output_type=City)

    with served(typed) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        status, events = post_agui(client, run_input("t", "r", "Biggest city near here?"))
    assert status == 200
    partial = [
        e.data["value"]["output"]
        for e in events
        if e.type == "CUSTOM" and e.data["name"] == "hookloop.partial_output"
    ]
    assert partial
    assert partial[-1] == {"name": "Lyon", "population": 522000}
    assert events[-1].data["result"] == {"name": "Lyon", "population": 522000}


def test_hookloop_events_without_an_agui_name_are_custom_events() -> None:
    clock = FakeClock()

    def flaky() -> Agent:
        model = ScriptedModel([RateLimitError("slow down", status=429, retry_after=2.0), "ok"])
        return Agent(model, retry=DefaultRetryStrategy(sleep=clock.sleep, clock=clock))

    with served(flaky) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        status, events = post_agui(client, run_input("t", "r", "hi"))
    assert status == 200
    custom = [(e.data["name"], e.data["value"]) for e in events if e.type == "CUSTOM"]
    names = [name for name, _ in custom]
    # the wait is announced before it starts, the retry when the next attempt begins
    assert names == ["hookloop.backoff_wait", "hookloop.model_retry", "hookloop.usage"]
    wait = custom[0][1]
    assert wait["seconds"] == 2.0
    assert wait["attempt"] == 1
    assert wait["error"].startswith("RateLimitError")
    assert events[-1].data["result"] == "ok"
