"""With a session store, a thread outlives its server: a restarted server goes on with it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2

from hookloop import Agent, ToolCall
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import FunctionModel, ScriptedModel, tool_call, tool_calls
from tests.serve._support import GUARD, delete, post_agui, run_input, served, types


def _factory(
    path: Path, script: list[object]
) -> tuple[Callable[[], Agent], list[SQLiteSessionStore]]:
    stores: list[SQLiteSessionStore] = []

    def build() -> Agent:
        if not stores:  # made in the server's loop, at its first thread
            stores.append(SQLiteSessionStore(path))
        agent = Agent(ScriptedModel(list(script)), tools=[delete])
        agent.use(stores[0].session())
        return agent

    return build


def test_a_restarted_server_goes_on_with_a_thread_and_its_waiting_call(tmp_path: Path) -> None:
    path = tmp_path / "sessions.db"
    first = _factory(path, [tool_call("delete", {"path": "/a"}, id="d1")])
    with served(first) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as c:
        status, events = post_agui(c, run_input("t", "r1", "delete /a"))
        assert status == 200
        assert events[-1].data["outcome"]["type"] == "interrupt"

    second = _factory(path, ["Deleted."])
    with served(second) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as c:
        thread = c.get("/api/threads/t/messages").json()
        assert [m["role"] for m in thread["messages"]] == ["user", "assistant"]
        assert [p["callId"] for p in thread["pending"]] == ["d1"]
        resume = [{"interruptId": "d1", "status": "resolved", "payload": {"action": "approve"}}]
        status, events = post_agui(c, run_input("t", "r2", resume=resume))
        assert types(events)[-1] == "RUN_FINISHED"
        assert events[-1].data["result"] == "Deleted."
        snapshot = next(e for e in events if e.type == "MESSAGES_SNAPSHOT").data["messages"]
        assert [m["role"] for m in snapshot] == ["user", "assistant", "tool", "assistant"]


def test_requests_at_once_on_a_new_thread_start_one_run(tmp_path: Path) -> None:
    # The run's model call waits until every request was answered: the others must find it
    # going (409), not ended and waiting for an approval (a new message then is a 400).
    answered = threading.Event()

    async def model(request: ProviderRequest) -> ProviderResponse:
        await asyncio.to_thread(answered.wait, GUARD)
        return tool_calls(ToolCall(name="delete", arguments='{"path": "/a"}'))

    stores: list[SQLiteSessionStore] = []

    def build() -> Agent:
        if not stores:  # made in the server's loop, at its first thread (as _factory's)
            stores.append(SQLiteSessionStore(tmp_path / "sessions.db"))
        agent = Agent(FunctionModel(model), tools=[delete])
        agent.use(stores[0].session())
        return agent

    with served(build) as s, httpx2.Client(base_url=s.url, timeout=GUARD) as client:

        def post(n: int) -> int:
            body = {"message": "go", "runId": f"r{n}"}
            return client.post("/api/threads/fresh/runs", json=body).status_code

        try:
            with ThreadPoolExecutor(8) as pool:
                codes = sorted(pool.map(post, range(8)))
        finally:
            answered.set()
        assert codes == [202] + [409] * 7
