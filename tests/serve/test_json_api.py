"""The plain JSON API, for scripts: start a turn, read its events, the messages, approvals,
decisions and cancelling; and ``hookloop serve`` itself, as a process."""

from __future__ import annotations

import asyncio
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
from tests.models._provider_server import ProviderServer, answer
from tests.serve._support import GUARD, delete, served

ROOT = Path(__file__).resolve().parents[2]
gate = threading.Event()


@tool
async def wait_for_gate() -> str:
    """Waits until the test opens the gate."""
    await asyncio.to_thread(gate.wait, GUARD)
    return "open"


def build_agent() -> Agent:
    script = [
        tool_call("delete", {"path": "/a"}, id="d1"),
        "Done.",
        tool_call("wait_for_gate", {}, id="w1"),
        "never",
    ]
    return Agent(ScriptedModel(script), tools=[delete, wait_for_gate])


@pytest.fixture(autouse=True)
def _gate() -> Iterator[None]:
    gate.clear()
    yield
    gate.set()


def test_a_turn_its_events_its_approvals_and_a_cancel() -> None:
    with served(build_agent) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as c:
        started = c.post("/api/threads/t/runs", json={"message": "delete /a"})
        assert started.status_code == 202
        run = started.json()
        assert run["threadId"] == "t"
        assert run["status"] == "running"
        done = c.get(f"/api/runs/{run['runId']}/events?wait=true").json()
        assert done["status"] == "interrupted"
        assert [e["id"] for e in done["events"]] == list(range(1, len(done["events"]) + 1))
        assert done["events"][-1]["event"]["outcome"]["type"] == "interrupt"
        later = c.get(f"/api/runs/{run['runId']}/events?after=3").json()["events"]
        assert later == done["events"][3:]

        pending = c.get("/api/threads/t/approvals").json()["pending"]
        assert [(p["callId"], p["toolName"], p["arguments"]) for p in pending] == [
            ("d1", "delete", '{"path": "/a"}')
        ]
        wrong = c.post(
            "/api/threads/t/approvals", json={"decisions": [{"callId": "d9", "action": "approve"}]}
        )
        assert wrong.status_code == 422
        assert wrong.json()["type"] == "UnknownApprovalError"
        edited = c.post(
            "/api/threads/t/approvals",
            json={
                "decisions": [
                    {
                        "callId": "d1",
                        "action": "edit",
                        "arguments": {"path": "/b"},
                        "digest": pending[0]["digest"],
                    }
                ],
                "runId": "decided",
            },
        )
        assert edited.status_code == 202
        result = c.get("/api/runs/decided/events?wait=true").json()
        assert result["status"] == "finished"
        tool_result = next(
            e["event"] for e in result["events"] if e["event"]["type"] == "TOOL_CALL_RESULT"
        )
        assert tool_result["content"] == "deleted /b"
        assert c.get("/api/runs/decided").json()["result"] == "Done."

        thread = c.get("/api/threads/t/messages").json()
        assert [m["role"] for m in thread["messages"]] == ["user", "assistant", "tool", "assistant"]
        assert thread["pending"] == []
        assert thread["running"] is None

        c.post("/api/threads/t/runs", json={"message": "wait", "runId": "slow"})
        assert c.get("/api/threads/t/messages").json()["running"]["runId"] == "slow"
        assert c.post("/api/runs/slow/cancel").json() == {"runId": "slow", "cancelled": True}
        ended = c.get("/api/runs/slow/events?wait=true").json()
        assert ended["status"] == "cancelled"
        assert c.post("/api/runs/slow/cancel").json()["cancelled"] is False
        bad = c.get("/api/runs/slow/events", headers={"Last-Event-ID": "-3"})
        assert bad.status_code == 400
        assert bad.json()["type"] == "invalid_input"


def test_hookloop_serve_runs_a_target_and_stops_on_sigterm() -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "hookloop",
            "serve",
            "tests.serve.test_json_api:build_agent",
            "--port",
            "0",
        ],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith("hookloop: serving at http://127.0.0.1:"), line
        url = line.split(" at ")[1].strip()
        with httpx2.Client(base_url=url, timeout=GUARD) as c:
            run = c.post("/api/threads/t/runs", json={"message": "delete /a"}).json()
            done = c.get(f"/api/runs/{run['runId']}/events?wait=true").json()
            assert done["status"] == "interrupted"
            assert c.get("/").headers["content-type"].startswith("text/html")
    finally:
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=GUARD)
    assert process.returncode == 0, errors
    assert "Traceback" not in errors


def test_hookloop_serve_without_a_target_serves_the_model_with_the_calculator(
    server: ProviderServer,
) -> None:
    server.add(
        answer(
            "chat.completions",
            calls=(("c1", "calculator", '{"expression": "17 * 23"}'),),
            stream=True,
        ),
        answer("chat.completions", "17 * 23 = 391", stream=True),
    )
    process = subprocess.Popen(
        [sys.executable, "-m", "hookloop", "serve", "--model", f"{server.url}/v1#m", "--port", "0"],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        assert line.startswith("hookloop: serving at http://127.0.0.1:"), line
        url = line.split(" at ")[1].strip()
        with httpx2.Client(base_url=url, timeout=GUARD) as c:
            run = c.post("/api/threads/t/runs", json={"message": "What is 17 * 23?"}).json()
            done = c.get(f"/api/runs/{run['runId']}/events?wait=true").json()
    finally:
        process.send_signal(signal.SIGTERM)
        _, errors = process.communicate(timeout=GUARD)
    assert done["status"] == "finished", done
    result = next(e["event"] for e in done["events"] if e["event"]["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == "391"
    assert done["events"][-1]["event"]["result"] == "17 * 23 = 391"
    assert process.returncode == 0, errors
