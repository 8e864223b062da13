"""A dropped client loses nothing: the run goes on, and a reconnect gets what it missed."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from hookloop import Agent, tool
from hookloop.testing import ScriptedModel, tool_call
from tests.serve._support import GUARD, parse_sse, post_agui, run_input, served, types

ROOT = Path(__file__).resolve().parents[2]
gate = threading.Event()
started = threading.Event()


@tool
async def slow_step() -> str:
    """A step that waits until the test lets it finish."""
    started.set()
    await asyncio.to_thread(gate.wait, GUARD)
    return "step done"


def _agent() -> Agent:
    script = [tool_call("slow_step", {}, id="s1"), "All done."]
    return Agent(ScriptedModel(script), tools=[slow_step])


@pytest.fixture(autouse=True)
def _gates() -> Iterator[None]:
    gate.clear()
    started.clear()
    yield
    gate.set()  # never leave a tool waiting


def _client_process(url: str, body: dict[str, object]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.serve._sse_client", url, json.dumps(body)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _read_until_call_starts(process: subprocess.Popen[str]) -> int:
    """The id of the last event the client printed once the tool call started."""
    assert process.stdout is not None
    last = 0
    for line in process.stdout:
        line = line.rstrip("\n")
        if line.startswith("id: "):
            last = int(line[4:])
        if line.startswith("data: ") and '"TOOL_CALL_END"' in line:
            return last
    pytest.fail("the client's stream ended before the tool call started")


def test_a_client_killed_mid_stream_reconnects_and_misses_nothing() -> None:
    with served(_agent) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        body = run_input("t", "r1", "go")
        process = _client_process(s.url, body)
        seen = _read_until_call_starts(process)
        assert started.wait(GUARD)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        # the run goes on without its client
        assert client.get("/api/runs/r1").json()["status"] == "running"
        gate.set()
        # the same input again, with the last id seen: what was missed, then the live rest
        status, events = post_agui(client, body, **{"Last-Event-ID": str(seen)})
        assert status == 200
        assert events[0].id == seen + 1
        assert [e.id for e in events] == list(range(seen + 1, seen + 1 + len(events)))
        assert types(events)[-1] == "RUN_FINISHED"
        assert events[-1].data["result"] == "All done."
        # the whole run, read again from the start, is the same events
        everything = client.get("/api/runs/r1/events").json()["events"]
        assert [e["event"] for e in everything[seen:]] == [e.data for e in events]
        # and the session has the run's messages
        messages = client.get("/api/threads/t/messages").json()["messages"]
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant"]


def test_reconnecting_to_the_events_of_a_run_by_offset() -> None:
    with served(_agent) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        started_run = client.post("/api/threads/t/runs", json={"message": "go", "runId": "r1"})
        assert started_run.status_code == 202
        assert started.wait(GUARD)
        gate.set()
        headers = {"Accept": "text/event-stream"}
        with client.stream("GET", "/api/runs/r1/events?after=2", headers=headers) as response:
            events = parse_sse(response.iter_lines())
        assert events[0].id == 3
        assert types(events)[-1] == "RUN_FINISHED"


def test_a_second_run_on_a_busy_thread_gets_409() -> None:
    with served(_agent) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        client.post("/api/threads/t/runs", json={"message": "go", "runId": "r1"})
        assert started.wait(GUARD)
        busy = client.post("/agui", json=run_input("t", "r2", "again"))
        assert busy.status_code == 409
        assert busy.json()["type"] == "conflict"
        assert "r1" in busy.json()["message"]
        # another thread is not busy
        other = client.post("/api/threads/u/runs", json={"message": "go", "runId": "r3"})
        assert other.status_code == 202
        gate.set()
        done = client.get("/api/runs/r1/events?wait=true").json()
        assert done["status"] == "finished"


def test_cancel_on_disconnect_ends_the_run_when_its_client_goes() -> None:
    with (
        served(_agent, cancel_on_disconnect=True) as s,
        httpx2.Client(base_url=s.url, timeout=GUARD) as client,
    ):
        body = run_input("t", "r1", "go")
        process = _client_process(s.url, body)
        _read_until_call_starts(process)
        assert started.wait(GUARD)
        os.kill(process.pid, signal.SIGKILL)
        process.communicate()
        done = client.get("/api/runs/r1/events?wait=true").json()
        assert done["status"] == "cancelled"
        finished = done["events"][-1]["event"]
        assert finished["type"] == "RUN_FINISHED"
        assert finished["outcome"] == {"type": "cancelled"}


def test_quiet_streams_get_keepalive_comments() -> None:
    with (
        served(_agent, keepalive=0.01) as s,
        httpx2.Client(base_url=s.url, timeout=GUARD) as client,
        client.stream("POST", "/agui", json=run_input("t", "r1", "go")) as response,
    ):
        comments = 0
        for line in response.iter_lines():
            if line == ": keepalive":
                comments += 1
                if comments == 2:
                    gate.set()  # the tool has been quiet through two of them
        assert comments >= 2
