"""``hookloop serve`` in the durable mode: real ``hookloop worker`` processes on PostgreSQL, a
real server over HTTP, an SSE client that stays connected while a worker is killed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.durable._workers_support import DEAD_AFTER, GUARD, HEARTBEAT, Workers, wait_for
from tests.serve._support import SseEvent, parse_sse, post_agui, run_input, served, types

AGENT = "tests.durable._serve_turn:build"


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Iterator[Workers]:
    """``hookloop worker`` processes running AGENT (not started yet)."""

    def argv(executor_id: str) -> list[str]:
        timings = ("--heartbeat", str(HEARTBEAT), "--dead-after", str(DEAD_AFTER))
        return [
            *("worker", "--database", database_url, "--agent", AGENT),
            *("--executor-id", executor_id, *timings, "--pool-size", "4", "--sessions-pool", "2"),
        ]

    found = Workers("hookloop", database_url, tmp_path, command=argv, ready="taking turns")
    try:
        yield found
    finally:
        found.close()


def stream(client: httpx2.Client, body: dict[str, object], **headers: str) -> Iterator[SseEvent]:
    """POST /agui and yield its events as they come."""
    with client.stream("POST", "/agui", json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        lines = response.iter_lines()
        while True:
            events = parse_sse(lines, stop_after=1)
            if not events:
                return
            yield events[0]


def check_ids(events: list[SseEvent]) -> None:
    assert [e.id for e in events] == list(range(1, len(events) + 1))


def test_a_run_goes_on_when_its_worker_is_killed_and_the_client_sees_each_event_once(
    database_url: str, workers: Workers
) -> None:
    workers.start("w1", "w2")
    hold = workers.hold("answer", "s1")
    seen: list[SseEvent] = []
    with (
        served(AGENT, durable=database_url) as server,
        httpx2.Client(base_url=server.url, timeout=GUARD) as client,
    ):
        for event in stream(client, run_input("s1", "r1", "s1 1")):
            seen.append(event)
            if event.type == "TOOL_CALL_RESULT":
                # The worker is now in the answer's model call: killed there, while the client
                # stays connected; the other one takes the turn over.
                [answering] = wait_for("the answer", lambda: workers.ran("answer", "s1", 1))
                workers.kill(workers.by_pid(answering.pid))
                hold.unlink()
        check_ids(seen)
        assert types(seen) == [
            "RUN_STARTED",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            *(["TOOL_CALL_ARGS"] * (types(seen).count("TOOL_CALL_ARGS") - 1)),
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "CUSTOM",  # hookloop.model_call_restarted: the answer's call runs again
            "TEXT_MESSAGE_START",
            *(["TEXT_MESSAGE_CONTENT"] * types(seen).count("TEXT_MESSAGE_CONTENT")),
            "TEXT_MESSAGE_END",
            "MESSAGES_SNAPSHOT",
            "CUSTOM",
            "RUN_FINISHED",
        ]
        assert seen[-1].data["result"] == "charged 1: ok"
        text = "".join(e.data["delta"] for e in seen if e.type == "TEXT_MESSAGE_CONTENT")
        assert text == "charged 1: ok"
        assert [e.data["name"] for e in seen if e.type == "CUSTOM"] == [
            "hookloop.model_call_restarted",
            "hookloop.usage",
        ]
        snapshot = next(e for e in seen if e.type == "MESSAGES_SNAPSHOT").data["messages"]
        assert [m["role"] for m in snapshot] == ["user", "assistant", "tool", "assistant"]
        # The tool ran once, the answer's model call twice (once in each worker).
        assert len(workers.ran("tool-done", "s1", 1)) == 1
        assert len({r.pid for r in workers.ran("answer", "s1", 1)}) == 2

        # A client that reconnects gets the same events after the one it names.
        status, again = post_agui(client, run_input("s1", "r1", "s1 1"), **{"last-event-id": "4"})
        assert status == 200
        assert [(e.id, e.data) for e in again] == [(e.id, e.data) for e in seen[4:]]

    # A new server (a restart) serves the same run from the database, with the same ids.
    with (
        served(AGENT, durable=database_url) as server,
        httpx2.Client(base_url=server.url, timeout=GUARD) as client,
    ):
        status, again = post_agui(client, run_input("s1", "r1", "s1 1"), **{"last-event-id": "2"})
        assert status == 200
        assert [(e.id, e.data["type"]) for e in again] == [(e.id, e.type) for e in seen[2:]]
