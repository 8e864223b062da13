"""Safe by default: tokens, bounds, limits, CORS, and errors that are JSON, never a traceback."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from hookloop import Agent, UsageError, tool
from hookloop.serve import create_app
from hookloop.testing import ScriptedModel, tool_call
from tests.serve._support import GUARD, post_agui, run_input, served

gate = threading.Event()

ROOT = Path(__file__).resolve().parents[2]


@tool
async def wait_for_gate() -> str:
    """Waits until the test opens the gate."""
    await asyncio.to_thread(gate.wait, GUARD)
    return "open"


def _agent() -> Agent:
    return Agent(ScriptedModel([tool_call("wait_for_gate", {}), "done"]), tools=[wait_for_gate])


@pytest.fixture(autouse=True)
def _gate() -> Iterator[None]:
    gate.clear()
    yield
    gate.set()


def _error(response: httpx2.Response, status: int, kind: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"type", "message"}
    assert body["type"] == kind
    assert "Traceback" not in body["message"]
    return str(body["message"])


def test_a_token_is_needed_when_the_server_has_one() -> None:
    with served(_agent, token="s3cret") as s, httpx2.Client(base_url=s.url, timeout=GUARD) as c:
        body = run_input("t", "r1", "hi")
        _error(c.post("/agui", json=body), 401, "unauthorized")
        wrong = c.post("/agui", json=body, headers={"Authorization": "Bearer nope"})
        _error(wrong, 401, "unauthorized")
        assert wrong.headers["www-authenticate"] == "Bearer"
        _error(c.get("/api/threads/t/messages"), 401, "unauthorized")
        # the page holds no secret: it loads, and asks for the token
        assert c.get("/").status_code == 200
        gate.set()
        status, events = post_agui(c, body, Authorization="Bearer s3cret")
        assert status == 200
        assert events[-1].type == "RUN_FINISHED"


def test_bad_requests_get_a_json_error() -> None:
    with (
        served(_agent, max_body=2_000, max_message=50) as s,
        httpx2.Client(base_url=s.url, timeout=GUARD) as c,
    ):
        _error(c.post("/agui", content=b"{not json"), 400, "invalid_input")
        _error(c.post("/agui", json={"threadId": "t"}), 400, "invalid_input")
        no_user = run_input("t", "r1") | {
            "messages": [{"id": "a", "role": "assistant", "content": "x"}]
        }
        message = _error(c.post("/agui", json=no_user), 400, "UsageError")
        assert "user" in message
        _error(c.post("/agui", json=run_input("t", "r1", "x" * 51)), 413, "too_large")
        big = run_input("t", "r1", "hi") | {"forwardedProps": {"pad": "x" * 3_000}}
        _error(c.post("/agui", json=big), 413, "too_large")
        _error(c.get("/api/threads/nobody/messages"), 404, "not_found")
        _error(c.get("/api/runs/nothing"), 404, "not_found")
        _error(c.get("/api/runs/nothing/events"), 404, "not_found")
        _error(c.get("/nowhere"), 404, "not_found")
        _error(c.get("/agui"), 405, "method_not_allowed")
        _error(c.post("/api/threads/t/runs", json={"message": ""}), 400, "invalid_input")
        line_break = run_input("t", "r1\ndata: {}", "hi")
        assert "runId" in _error(c.post("/agui", json=line_break), 400, "invalid_input")
        long_thread = run_input("t" * 257, "r1", "hi")
        assert "threadId" in _error(c.post("/agui", json=long_thread), 400, "invalid_input")
        body = {"message": "hi", "runId": "a\rb"}
        _error(c.post("/api/threads/t/runs", json=body), 400, "invalid_input")
        _error(c.get("/api/threads/a%0Ab/messages"), 400, "invalid_input")
        bad_offset = c.post(
            "/agui", json=run_input("t", "r9", "hi"), headers={"Last-Event-ID": "x"}
        )
        _error(bad_offset, 400, "invalid_input")
        _error(c.get("/api/runs/r9"), 404, "not_found")  # no run was started


def test_a_chunked_body_over_the_bound_is_refused_as_it_arrives() -> None:
    with served(_agent, max_body=1_000) as s:
        host, port = s.url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=GUARD) as raw:
            raw.sendall(
                b"POST /agui HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            chunk = b"x" * 600
            for _ in range(2):
                raw.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            answer = b""
            while b"}" not in answer:  # the head, then the JSON body
                piece = raw.recv(4096)
                assert piece, answer
                answer += piece
        assert answer.startswith(b"HTTP/1.1 413")
        assert b'"type":"too_large"' in answer


def test_beyond_max_runs_the_server_answers_503_with_retry_after() -> None:
    with served(_agent, max_runs=1) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as c:
        assert c.post("/api/threads/a/runs", json={"message": "go"}).status_code == 202
        refused = c.post("/agui", json=run_input("b", "r2", "go"))
        _error(refused, 503, "overloaded")
        assert refused.headers["retry-after"] == "1"
        gate.set()


def test_a_factory_that_fails_is_a_json_500_not_a_traceback() -> None:
    def broken() -> Agent:
        raise RuntimeError("secret detail of the server")

    with served(broken) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as c:
        message = _error(c.post("/agui", json=run_input("t", "r", "hi")), 500, "internal_error")
        assert "secret detail" not in message


def test_cors_is_off_unless_origins_are_listed() -> None:
    preflight = {
        "Origin": "https://app.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    with served(_agent) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as c:
        answer = c.options("/agui", headers=preflight)
        assert "access-control-allow-origin" not in answer.headers
    with (
        served(_agent, cors_origins=["https://app.example"]) as s,
        httpx2.Client(base_url=s.url, timeout=GUARD) as c,
    ):
        answer = c.options("/agui", headers=preflight)
        assert answer.status_code == 200
        assert answer.headers["access-control-allow-origin"] == "https://app.example"
        other = c.options("/agui", headers=preflight | {"Origin": "https://evil.example"})
        assert other.headers.get("access-control-allow-origin") != "https://evil.example"


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"max_body": 0}, "max_body"),
        ({"max_message": -1}, "max_message"),
        ({"max_runs": True}, "max_runs"),
        ({"keepalive": 0}, "keepalive"),
        ({"token": " "}, "token"),
    ],
)
def test_create_app_refuses_bounds_that_cannot_work(
    options: dict[str, object], problem: str
) -> None:
    with pytest.raises(UsageError, match=problem):
        create_app(_agent, **options)  # type: ignore[arg-type]


def test_the_command_listens_on_loopback_unless_told_otherwise() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "hookloop",
            "serve",
            "tests.serve.test_safety:_agent",
            "--host",
            "0.0.0.0",
        ],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert done.returncode == 2
    assert "--token" in done.stderr
    assert "--insecure" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_command_checks_its_options_before_loading_a_model() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hookloop", "serve", "--max-body", "0"],
        capture_output=True,
        text=True,
        timeout=GUARD,
    )
    assert done.returncode == 2
    assert done.stderr == "hookloop: max_body must be a positive int, got 0\n"


@pytest.mark.parametrize(
    ("arguments", "status", "said"),
    [
        (["--durable", "postgresql://u@127.0.0.1:1/db"], 2, "give their --agent as TARGET"),
        (["tests.durable._serve_turn:build", "--durable", "sqlite:///x.db"], 2, "postgresql://"),
        (
            ["tests.durable._serve_turn:build", "--durable", "postgresql://u@127.0.0.1:1/db"],
            1,
            "hookloop: StoreError: the durable turns' database postgresql://u@127.0.0.1:1/db "
            "cannot be used",
        ),
    ],
)
def test_the_durable_mode_refuses_what_cannot_work_in_one_line(
    arguments: list[str], status: int, said: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hookloop", "serve", *arguments],
        capture_output=True,
        text=True,
        timeout=GUARD,
        cwd=ROOT,
    )
    assert done.returncode == status
    assert said in done.stderr
    assert "Traceback" not in done.stderr
