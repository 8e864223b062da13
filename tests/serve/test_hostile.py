"""What a hostile or careless client sends, over real HTTP: none of it breaks the server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2

from hookloop import Agent
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import FunctionModel, ScriptedModel, tool_call
from tests.serve._support import GUARD, add, parse_sse, post_agui, run_input, served, types

ROOT = Path(__file__).resolve().parents[2]

# Python's str.splitlines() (so httpx's iter_lines and many SSE clients) breaks lines at these,
# where SSE breaks only at CR and LF: raw in a data line, they cut a JSON text in two.
SEPARATORS = "a\u2028b\u2029c\x85d"


def test_unicode_line_separators_never_split_an_sse_frame() -> None:
    def build() -> Agent:
        script = [tool_call("add", {"a": 1, "b": 2, "note": SEPARATORS}, id="c1"), SEPARATORS]
        return Agent(ScriptedModel(script), tools=[add])

    run_id = "run-1"
    with served(build) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        status, events = post_agui(client, run_input("t", run_id, SEPARATORS))
        assert status == 200
        assert types(events)[-1] == "RUN_FINISHED"
        assert events[0].data["runId"] == run_id
        args = "".join(e.data["delta"] for e in events if e.type == "TOOL_CALL_ARGS")
        assert json.loads(args)["note"] == SEPARATORS
        text = "".join(e.data["delta"] for e in events if e.type == "TEXT_MESSAGE_CONTENT")
        assert text == SEPARATORS
        # the JSON API reads the same events back unchanged
        read = client.get(f"/api/runs/{run_id}/events").json()["events"]
        assert [e["event"] for e in read] == [e.data for e in events]


def _answers() -> Agent:
    return Agent(ScriptedModel(["Hello."] * 4))


def test_a_page_of_another_site_cannot_start_or_cancel_a_run() -> None:
    # A form or a no-cors fetch with text/plain needs no CORS preflight: the browser sends it,
    # only its answer is hidden from the page. Without a token, it would run the agent.
    evil = {"Origin": "http://evil.example", "Content-Type": "text/plain"}
    body = json.dumps(run_input("victim", "r1", "rm -rf"))
    with served(_answers) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        answer = client.post("/agui", content=body, headers=evil)
        assert answer.status_code == 403
        assert answer.json()["type"] == "forbidden_origin"
        answer = client.post("/api/threads/victim/runs", content='{"message": "hi"}', headers=evil)
        assert answer.status_code == 403
        assert client.get("/api/threads/victim/messages").status_code == 404  # nothing ran
        # the server's own page (its origin) and requests with no Origin (scripts) go through
        own = {"Origin": s.url, "Content-Type": "application/json"}
        assert client.post("/agui", content=body, headers=own).status_code == 200
        assert client.post("/api/runs/r1/cancel", headers={"Origin": "null"}).status_code == 403
        assert client.post("/api/runs/r1/cancel").status_code == 200


def test_a_listed_origin_may_call_it() -> None:
    app = {"Origin": "http://app.example"}
    with (
        served(_answers, cors_origins=["http://app.example"]) as s,
        httpx2.Client(base_url=s.url, timeout=GUARD) as client,
    ):
        answer = client.post("/api/threads/t/runs", json={"message": "hi"}, headers=app)
        assert answer.status_code == 202
        assert answer.headers["access-control-allow-origin"] == "http://app.example"
        other = {"Origin": "http://evil.example"}
        answer = client.post("/api/threads/t2/runs", json={"message": "hi"}, headers=other)
        assert answer.status_code == 403


async def _never_answers(request: object) -> str:
    await asyncio.Event().wait()  # until the run is cancelled
    return "never"


def stuck_agent() -> Agent:
    """For ``hookloop serve``: a model that never answers, the session in SQLite."""
    agent = Agent(FunctionModel(_never_answers))
    agent.use(SQLiteSessionStore(Path(os.environ["HOOKLOOP_TEST_DB"])).session())
    return agent


def test_sigterm_ends_open_streams_and_keeps_the_history(tmp_path: Path) -> None:
    db = tmp_path / "sessions.db"
    # no keepalive comment while the test waits: a stream that never ends times the read out
    command = ["serve", f"{__name__}:stuck_agent", "--port", "0", "--keepalive", "600"]
    process = subprocess.Popen(
        [sys.executable, "-m", "hookloop", *command],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "HOOKLOOP_TEST_DB": str(db)},
    )
    try:
        assert process.stderr is not None
        url = process.stderr.readline().split(" at ")[1].strip()
        with (
            httpx2.Client(base_url=url, timeout=GUARD) as client,
            client.stream("POST", "/agui", json=run_input("t", "r1", "hello")) as stream,
        ):
            lines = stream.iter_lines()
            assert [e.type for e in parse_sse(lines, stop_after=1)] == ["RUN_STARTED"]
            process.send_signal(signal.SIGTERM)
            # the stream ends (it kept the server from stopping): the run was cancelled
            rest = parse_sse(lines)
        _, errors = process.communicate(timeout=GUARD)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, errors
    assert rest[-1].type == "RUN_FINISHED"
    assert rest[-1].data["outcome"]["type"] == "cancelled"
    messages = asyncio.run(_stored(db))
    assert [(m.role, m.content) for m in messages] == [("user", "hello")]


async def _stored(db: Path) -> list[object]:
    agent = Agent(FunctionModel(_never_answers))
    agent.use(SQLiteSessionStore(db).session())
    await agent.switch_session("t")
    await agent.pending_approvals()  # restores the session
    messages = list(agent.messages)
    await agent.aclose()
    return messages


def test_a_reconnect_to_a_run_the_server_does_not_have_starts_nothing() -> None:
    # A client that saw events of run r1 (on a server since restarted, or long ago) comes
    # back with Last-Event-ID: running its message again would add it to the thread twice.
    with served(_answers) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        body = run_input("t", "r1", "hello")
        answer = client.post("/agui", json=body, headers={"Last-Event-ID": "5"})
        assert answer.status_code == 404
        assert answer.json()["type"] == "not_found"
        assert client.get("/api/threads/t/messages").status_code == 404
        # a first request may say it saw nothing
        status, events = post_agui(client, body, **{"Last-Event-ID": "0"})
        assert status == 200
        assert [e.id for e in events][:1] == [1]


def test_a_token_that_is_not_ascii_works() -> None:
    token = "pässwörd"
    with (
        served(_answers, token=token) as s,
        httpx2.Client(base_url=s.url, timeout=GUARD) as client,
    ):
        right = {"Authorization": b"Bearer " + token.encode()}
        assert client.post("/api/threads/t/runs", json={"message": "hi"}, headers=right).is_success
        wrong = {"Authorization": b"Bearer " + "passwörd".encode()}
        answer = client.post("/api/threads/t/runs", json={"message": "hi"}, headers=wrong)
        assert answer.status_code == 401


def test_ids_a_session_store_would_refuse_are_refused_before_anything_runs() -> None:
    # A thread id is a session id, and the user message's id is stored with the message:
    # PostgreSQL refuses a NUL in text, so a message with one poisoned its thread for good.
    bad = [
        run_input("t\u2028", "r1", "hi"),
        run_input("t", "r\x85", "hi"),
        {**run_input("t", "r1"), "messages": [{"id": "m\x00", "role": "user", "content": "hi"}]},
        {**run_input("t", "r1"), "messages": [{"id": "m" * 300, "role": "user", "content": "hi"}]},
    ]
    with served(_answers) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        for body in bad:
            answer = client.post("/agui", json=body)
            assert answer.status_code == 400, body
            assert answer.json()["type"] == "invalid_input"
        assert client.get("/api/threads/t/messages").status_code == 404  # nothing ran
        status, events = post_agui(client, run_input("t", "r1", "hi"))
        assert (status, types(events)[-1]) == (200, "RUN_FINISHED")


def test_json_nested_too_deep_is_malformed_input_not_a_server_failure() -> None:
    deep = "[" * 100_000 + "]" * 100_000  # under the body bound; Python's parser recurses
    with served(_answers) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        answer = client.post("/api/threads/t/runs", content='{"message": "hi", "x": ' + deep + "}")
        assert answer.status_code == 400
        assert answer.json()["type"] == "invalid_input"
        answer = client.post("/agui", content='{"threadId": "t", "state": ' + deep + "}")
        assert answer.status_code == 400


def test_once_the_server_is_stopping_no_run_starts() -> None:
    with served(_answers) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        threads = s.app.state.hookloop.threads
        asyncio.run_coroutine_threadsafe(_cancel_all(threads), s.loop).result(GUARD)
        answer = client.post("/agui", json=run_input("t", "r1", "hi"))
        assert answer.status_code == 503
        assert answer.json()["message"] == "the server is stopping"


async def _cancel_all(threads: Any) -> None:
    threads.cancel_all()


def test_a_thread_or_run_id_with_a_slash_is_reachable_through_the_json_api() -> None:
    # Session ids such as "user/1" are usual; AG-UI takes them, the JSON API must find them.
    with served(_answers) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        status, _ = post_agui(client, run_input("user/1", "run/1", "hi"))
        assert status == 200
        messages = client.get("/api/threads/user%2F1/messages")
        assert messages.status_code == 200
        assert messages.json()["threadId"] == "user/1"
        assert client.get("/api/threads/user%2F1/approvals").json() == {"pending": []}
        assert client.get("/api/runs/run%2F1").json()["status"] == "finished"
        assert client.get("/api/runs/run%2F1/events").json()["runId"] == "run/1"
        assert client.post("/api/runs/run%2F1/cancel").json()["cancelled"] is False
        started = client.post("/api/threads/user%2F1/runs", json={"message": "again"})
        assert started.json()["threadId"] == "user/1"


class _Closes:
    """A plugin holding a connection (as an MCP toolset does): closed with its agent."""

    name = "closes"

    def __init__(self, closed: list[str]) -> None:
        self.closed = closed

    def init_agent(self, agent: Any) -> None:
        return None

    async def aclose(self) -> None:
        self.closed.append("closed")


def test_a_lookup_of_an_unknown_thread_closes_the_agent_it_made() -> None:
    # Reading an unknown thread makes an agent to look in its session store; refusing the
    # thread must not leave that agent's connections open (one per request otherwise).
    closed: list[str] = []

    def factory() -> Agent:
        return Agent(ScriptedModel(["Hello."]), plugins=[_Closes(closed)])

    with served(factory) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        assert client.get("/api/threads/nobody/messages").status_code == 404
        assert client.get("/api/threads/nobody/approvals").status_code == 404
        assert closed == ["closed", "closed"]
        status, _ = post_agui(client, run_input("somebody", "r1", "hi"))
        assert status == 200
        assert closed == ["closed", "closed"]  # a thread that is kept keeps its agent open


def test_a_message_id_sent_again_in_a_new_run_is_a_409_and_the_thread_goes_on() -> None:
    with served(_answers) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:
        first = run_input("t", "r1", "hi")
        assert types(post_agui(client, first)[1])[-1] == "RUN_FINISHED"
        again = run_input("t", "r2", "hi") | {"messages": first["messages"]}
        answer = client.post("/agui", json=again)
        assert (answer.status_code, answer.json()["type"]) == (409, "conflict")
        assert "r1-user" in answer.json()["message"]
        status, events = post_agui(client, run_input("t", "r3", "hi again"))
        assert (status, types(events)[-1]) == (200, "RUN_FINISHED")


def test_a_refused_start_on_a_new_thread_keeps_nothing() -> None:
    release = asyncio.Event()

    async def slow(request: object) -> str:
        await release.wait()
        return "done"

    with (
        served(lambda: Agent(FunctionModel(slow)), max_runs=1) as s,
        httpx2.Client(base_url=s.url, timeout=GUARD) as client,
    ):
        started = client.post("/api/threads/busy/runs", json={"message": "hi"})
        assert started.status_code == 202
        refused = client.post("/api/threads/new/runs", json={"message": "hi"})
        assert refused.status_code == 503
        # The refused thread was not kept: it is unknown, as before the request.
        unknown = client.get("/api/threads/new/messages")
        assert (unknown.status_code, unknown.json()["type"]) == (404, "not_found")
        s.loop.call_soon_threadsafe(release.set)
        done = client.get(f"/api/runs/{started.json()['runId']}/events?wait=true").json()
        assert done["status"] == "finished"


def test_two_first_posts_of_one_run_at_once_are_one_run(tmp_path: Path) -> None:
    # With a session store, making a thread's agent waits for the store: the second POST
    # comes in meanwhile, and joins the run instead of getting 409.
    store = SQLiteSessionStore(tmp_path / "s.db")

    def build() -> Agent:
        agent = Agent(ScriptedModel(["Hello."]))
        agent.use(store.session())
        return agent

    async def both(url: str) -> list[tuple[int, list[dict[str, Any]]]]:
        async with httpx2.AsyncClient(base_url=url, timeout=GUARD) as client:

            async def one() -> tuple[int, list[dict[str, Any]]]:
                async with client.stream("POST", "/agui", json=run_input("t", "r1", "hi")) as r:
                    lines = [line async for line in r.aiter_lines()]
                    data = [json.loads(x[6:]) for x in lines if x.startswith("data: ")]
                    return r.status_code, data

            return list(await asyncio.gather(one(), one()))

    with served(build) as s:
        first, second = asyncio.run(both(s.url))
    assert first == second
    assert first[0] == 200
    assert [e["type"] for e in first[1]][-1] == "RUN_FINISHED"


def test_a_refused_cors_preflight_answers_json() -> None:
    preflight = {
        "Origin": "https://evil.example",
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    with (
        served(_answers, cors_origins=["https://app.example"]) as s,
        httpx2.Client(base_url=s.url, timeout=GUARD) as client,
    ):
        answer = client.options("/agui", headers=preflight)
        assert answer.status_code == 400
        assert answer.headers["content-type"] == "application/json"
        assert answer.json() == {
            "type": "cors_refused",
            "message": "Disallowed CORS origin",
        }
