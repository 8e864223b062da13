"""``hookloop serve`` in the durable mode: real ``hookloop worker`` processes on PostgreSQL, a
real server over HTTP, an SSE client that stays connected while a worker is killed."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from tests.durable._workers_support import (
    DEAD_AFTER,
    GUARD,
    HEARTBEAT,
    ROOT,
    OwnPostgres,
    Workers,
    wait_for,
)
from tests.serve._support import SseEvent, parse_sse, post_agui, run_input, served, types

AGENT = "tests.durable._serve_turn:build"


def worker_processes(database_url: str, runs: Path, agent: str = AGENT) -> Workers:
    """``hookloop worker`` processes running ``agent`` (not started yet)."""

    def argv(executor_id: str) -> list[str]:
        timings = ("--heartbeat", str(HEARTBEAT), "--dead-after", str(DEAD_AFTER))
        return [
            *("worker", "--database", database_url, "--agent", agent),
            *("--executor-id", executor_id, *timings, "--pool-size", "4", "--sessions-pool", "2"),
        ]

    return Workers("hookloop", database_url, runs, command=argv, ready="taking turns")


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Iterator[Workers]:
    """``hookloop worker`` processes running AGENT (not started yet)."""
    found = worker_processes(database_url, tmp_path)
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


def said_by(process: subprocess.Popen[str], words: str) -> list[str]:
    """The lines ``process`` writes on its standard error until one holds ``words``."""
    stream = process.stderr
    assert stream is not None
    said: list[str] = []
    deadline = time.monotonic() + GUARD
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], deadline - time.monotonic())
        line = stream.readline() if ready else ""
        said.append(line)
        if words in line or not line:
            break
    return said


def check_ids(events: list[SseEvent]) -> None:
    assert [e.id for e in events] == list(range(1, len(events) + 1))


def killed_mid_turn(
    database_url: str, workers: Workers, session: str, step: str, at: str
) -> list[SseEvent]:
    """One run's events, read by a client that stays connected while the worker running the
    turn is killed in ``step`` (held there until then), once the client has seen ``at``."""
    workers.start("w1", "w2")
    hold = workers.hold(step, session)
    seen: list[SseEvent] = []
    with (
        served(AGENT, durable=database_url) as server,
        httpx2.Client(base_url=server.url, timeout=GUARD) as client,
    ):
        for event in stream(client, run_input(session, "r1", f"{session} 1")):
            seen.append(event)
            if event.type == at:
                [running] = wait_for(step, lambda: workers.ran(step, session, 1))
                workers.kill(workers.by_pid(running.pid))
                hold.unlink()
    check_ids(seen)
    return seen


def test_a_run_goes_on_when_its_worker_is_killed_and_the_client_sees_each_event_once(
    database_url: str, workers: Workers
) -> None:
    # Killed in the answer's model call; the other worker takes the turn over.
    seen = killed_mid_turn(database_url, workers, "s1", "answer", "TOOL_CALL_RESULT")
    with (
        served(AGENT, durable=database_url) as server,
        httpx2.Client(base_url=server.url, timeout=GUARD) as client,
    ):
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


def test_a_worker_killed_in_a_tool_call_gets_it_answered_once_as_lost(
    database_url: str, workers: Workers
) -> None:
    seen = killed_mid_turn(database_url, workers, "s2", "tool", "TOOL_CALL_END")
    [result] = [e for e in seen if e.type == "TOOL_CALL_RESULT"]
    assert result.data["content"].startswith("result lost in a crash: the worker running tool")
    assert types(seen).count("TOOL_CALL_START") == 1
    assert seen[-1].type == "RUN_FINISHED"
    assert seen[-1].data["result"].startswith("charged 1: result lost")
    assert workers.ran("tool-done", "s2", 1) == []  # not run a second time


def test_cancel_a_durable_run_and_bad_requests(database_url: str, workers: Workers) -> None:
    workers.start("w1")
    hold = workers.hold("tool", "s3")
    with (
        served(AGENT, durable=database_url) as server,
        httpx2.Client(base_url=server.url, timeout=GUARD) as client,
    ):
        started = client.post("/api/threads/s3/runs", json={"message": "s3 1"})
        assert started.status_code == 202
        run_id = started.json()["runId"]
        wait_for("the tool", lambda: workers.ran("tool", "s3", 1))
        # A second run on the busy thread is refused, and so is a decision.
        busy = client.post("/api/threads/s3/runs", json={"message": "s3 2"})
        assert busy.status_code == 409
        decide = client.post("/api/threads/s3/approvals", json={"decisions": []})
        assert decide.status_code == 409
        cancel = client.post(f"/api/runs/{run_id}/cancel")
        assert cancel.json() == {"runId": run_id, "cancelled": True}
        ended = client.get(f"/api/runs/{run_id}/events?wait=true").json()
        hold.unlink()
        assert ended["status"] == "cancelled"
        outcome = ended["events"][-1]["event"]
        assert (outcome["type"], outcome["outcome"]["type"]) == ("RUN_FINISHED", "cancelled")

        # A run with a line separator in its text: each event one SSE line all the same.
        status, events = post_agui(client, run_input("s4", "r1", "s4 1 a\u2028b\u2029c\x85d"))
        assert status == 200
        assert events[-1].data["result"] == "charged 1: ok a\u2028b\u2029c\x85d"

        # Reconnecting with a Last-Event-ID that is no number, or to no such run.
        bad = client.post(
            "/agui", json=run_input("s4", "r1", "s4 1"), headers={"last-event-id": "x"}
        )
        assert (bad.status_code, bad.json()["type"]) == (400, "invalid_input")
        gone = client.post(
            "/agui", json=run_input("s4", "nope", "s4 1"), headers={"last-event-id": "3"}
        )
        assert (gone.status_code, gone.json()["type"]) == (404, "not_found")
        # Past the run's last event: nothing more, the stream ends.
        status, after_end = post_agui(
            client, run_input("s4", "r1", "s4 1"), **{"last-event-id": "9999"}
        )
        assert (status, after_end) == (200, [])
        messages = client.get("/api/threads/s4/messages").json()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert client.get("/api/threads/nobody/messages").status_code == 404


def start_server(database_url: str) -> tuple[subprocess.Popen[str], str]:
    """``hookloop serve AGENT --durable URL`` on a free port; the process and its URL."""
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookloop",
            "serve",
            AGENT,
            "--durable",
            database_url,
            "--port",
            "0",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert server.stderr is not None
    for line in server.stderr:
        if "serving at" in line:
            return server, line.split("serving at ")[1].strip().rstrip("/")
    pytest.fail(f"the server stopped with status {stop_server(server)}")


def stop_server(server: subprocess.Popen[str], sig: int = signal.SIGTERM) -> int:
    """Signal the server (if it runs) and reap it; its exit status."""
    if server.poll() is None:
        server.send_signal(sig)
    try:
        return server.wait(GUARD)
    finally:
        assert server.stderr is not None
        server.stderr.close()


def test_a_stopped_server_leaves_its_runs_to_the_workers_and_a_new_one_serves_them(
    database_url: str, workers: Workers
) -> None:
    workers.start("w1")
    hold = workers.hold("answer", "s5")
    seen: list[SseEvent] = []
    server, url = start_server(database_url)
    try:
        with httpx2.Client(base_url=url, timeout=GUARD) as client:
            for event in stream(client, run_input("s5", "r1", "s5 1")):
                seen.append(event)
                if event.type == "TOOL_CALL_RESULT":
                    server.send_signal(signal.SIGTERM)
        # The stream ended without an end: the run goes on in the worker.
        assert stop_server(server) == 0
        assert seen[-1].type == "TOOL_CALL_RESULT"
        assert workers.ran("answer", "s5", 1)
        assert not workers.ran("answer-done", "s5", 1)
    finally:
        stop_server(server, signal.SIGKILL)
    server, url = start_server(database_url)
    try:
        hold.unlink()
        with httpx2.Client(base_url=url, timeout=GUARD) as client:
            last = str(seen[-1].id)
            rest = list(stream(client, run_input("s5", "r1", "s5 1"), **{"last-event-id": last}))
    finally:
        stop_server(server)
    check_ids(seen + rest)
    assert rest[-1].type == "RUN_FINISHED"
    assert rest[-1].data["result"] == "charged 1: ok"


def test_a_run_outlives_a_restart_of_its_database(
    own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    url = own_postgres.url
    workers = worker_processes(url, tmp_path)
    try:
        workers.start("w1")
        hold = workers.hold("answer", "s6")
        seen: list[SseEvent] = []
        with (
            served(AGENT, durable=url) as server,
            httpx2.Client(base_url=server.url, timeout=GUARD) as client,
        ):
            for event in stream(client, run_input("s6", "r1", "s6 1")):
                seen.append(event)
                if event.type == "TOOL_CALL_RESULT":
                    wait_for("the answer", lambda: workers.ran("answer", "s6", 1))
                    own_postgres.stop()
                    own_postgres.start()
                    hold.unlink()
        check_ids(seen)
        assert seen[-1].type == "RUN_FINISHED", types(seen)
        assert seen[-1].data["result"] == "charged 1: ok"
        assert types(seen).count("TOOL_CALL_RESULT") == 1
        assert workers.procs["w1"].poll() is None
    finally:
        workers.close()


def test_a_call_that_needs_approval_is_an_interrupt_and_the_next_run_decides_it(
    database_url: str, tmp_path: Path
) -> None:
    agent = "tests.durable._serve_turn:build_approval"
    workers = worker_processes(database_url, tmp_path, agent)
    try:
        workers.start("w1")
        with (
            served(agent, durable=database_url) as server,
            httpx2.Client(base_url=server.url, timeout=GUARD) as client,
        ):
            status, events = post_agui(client, run_input("t", "r1", "/tmp/report.txt"))
            assert status == 200
            finished = events[-1].data
            assert finished["outcome"]["type"] == "interrupt"
            [interrupt] = finished["outcome"]["interrupts"]
            assert interrupt["id"] == "call-delete"
            assert interrupt["metadata"]["arguments"] == '{"path": "/tmp/report.txt"}'
            assert client.get("/api/runs/r1").json()["status"] == "interrupted"
            pending = client.get("/api/threads/t/approvals").json()["pending"]
            assert [p["callId"] for p in pending] == ["call-delete"]

            # A decision for no waiting call is refused before anything starts.
            wrong = run_input(
                "t",
                "r2",
                resume=[
                    {"interruptId": "nope", "status": "resolved", "payload": {"action": "approve"}}
                ],
            )
            refused = client.post("/agui", json=wrong)
            assert (refused.status_code, refused.json()["type"]) == (422, "UnknownApprovalError")
            # A new message while a call waits is refused too, and a message id sent again.
            assert client.post("/agui", json=run_input("t", "r3", "hi")).status_code == 400
            again = run_input("t", "r5", "hi") | {
                "messages": [{"id": "r1-user", "role": "user", "content": "again"}]
            }
            assert client.post("/agui", json=again).status_code == 409

            decision = {"action": "approve", "digest": interrupt["metadata"]["digest"]}
            resume = run_input(
                "t",
                "r4",
                resume=[{"interruptId": "call-delete", "status": "resolved", "payload": decision}],
            )
            status, events = post_agui(client, resume)
            assert status == 200
            [result] = [e for e in events if e.type == "TOOL_CALL_RESULT"]
            assert result.data["content"] == "deleted /tmp/report.txt"
            assert events[-1].data["result"] == "Done: deleted /tmp/report.txt"
            messages = client.get("/api/threads/t/messages").json()
            assert [m["role"] for m in messages["messages"]] == [
                "user",
                "assistant",
                "tool",
                "assistant",
            ]
            assert messages["pending"] == []
    finally:
        workers.close()


def test_a_database_away_while_the_answer_streams_loses_no_text(
    own_postgres: OwnPostgres, tmp_path: Path
) -> None:
    workers = worker_processes(own_postgres.url, tmp_path)
    try:
        workers.start("w1")
        hold = workers.hold("answer", "s7")
        seen: list[SseEvent] = []
        with (
            served(AGENT, durable=own_postgres.url) as server,
            httpx2.Client(base_url=server.url, timeout=GUARD) as client,
        ):
            for event in stream(client, run_input("s7", "r1", "s7 1")):
                seen.append(event)
                if event.type == "TOOL_CALL_RESULT":
                    # Once the worker is in the answer's model call (held there), the
                    # database goes away; the answer then streams while it is away: its
                    # pieces cannot be stored (the worker says so), are kept back, and are
                    # stored later.
                    wait_for("the answer", lambda: workers.ran("answer", "s7", 1))
                    own_postgres.stop()
                    hold.unlink()
                    said = said_by(workers.procs["w1"], "kept back")
                    own_postgres.start()
                    assert any("kept back" in line for line in said), said
        check_ids(seen)
        assert seen[-1].type == "RUN_FINISHED", types(seen)
        assert seen[-1].data["result"] == "charged 1: ok"
        text = "".join(e.data["delta"] for e in seen if e.type == "TEXT_MESSAGE_CONTENT")
        assert text == "charged 1: ok"
    finally:
        workers.close()


def test_a_server_started_before_any_worker_takes_runs_that_a_later_worker_runs(
    database_url: str, workers: Workers
) -> None:
    # A fresh database no worker has used yet: the server makes the queue's tables itself
    # (it answered every run with a 500 when DBOS's tables were missing).
    with (
        served(AGENT, durable=database_url) as server,
        httpx2.Client(base_url=server.url, timeout=GUARD) as client,
    ):
        started = client.post("/api/threads/s9/runs", json={"message": "s9 1"})
        assert started.status_code == 202, started.text
        workers.start("w1")
        ended = client.get(f"/api/runs/{started.json()['runId']}/events?wait=true").json()
        assert ended["status"] == "finished"


def test_the_durable_mode_says_it_serves_dbos_workers_not_temporal_ones() -> None:
    from hookloop import UsageError
    from hookloop.serve import create_app

    with pytest.raises(UsageError, match="not of Temporal workers"):
        create_app(AGENT, durable="temporal://127.0.0.1:7233")
