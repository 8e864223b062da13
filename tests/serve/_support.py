"""A real server for the serve tests: uvicorn on 127.0.0.1 (a free port) in a thread of its own,
and an SSE client that checks every event against the AG-UI protocol's own types."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx2
import pydantic
import uvicorn
from ag_ui.core import Event

from hookloop import Agent, tool
from hookloop.serve import create_app

GUARD = 60.0  # seconds: only a failure guard, never a timing the tests rely on

EVENT = pydantic.TypeAdapter(Event)


@dataclass
class Served:
    """A running server: its base URL and the loop its runs happen in."""

    url: str
    loop: asyncio.AbstractEventLoop
    app: Any  # the Starlette application


@contextmanager
def served(factory: Callable[[], Agent], **options: Any) -> Iterator[Served]:
    """``create_app(factory, **options)`` served over real HTTP until the block ends."""
    app = create_app(factory, **options)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    loops: list[asyncio.AbstractEventLoop] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        loops.append(loop)
        loop.run_until_complete(server.serve())
        loop.close()

    thread = threading.Thread(target=run, name="hookloop-test-server", daemon=True)
    thread.start()
    ready = threading.Event()
    while not server.started and thread.is_alive():
        ready.wait(0.01)  # polling the server's flag, not waiting for something to happen
    assert server.started, "the server did not start"
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(url=f"http://127.0.0.1:{port}", loop=loops[0], app=app)
    finally:
        server.should_exit = True
        thread.join(GUARD)
        assert not thread.is_alive(), "the server did not stop"


@dataclass
class SseEvent:
    """One SSE event: its id and its AG-UI event, validated."""

    id: int
    data: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.data["type"])


def parse_sse(lines: Iterator[str], *, stop_after: int | None = None) -> list[SseEvent]:
    """The events of an SSE stream; each data line validated as an AG-UI event."""
    events: list[SseEvent] = []
    event_id: int | None = None
    data: list[str] = []
    for line in lines:
        if line == "":
            if data:
                text = "\n".join(data)
                EVENT.validate_json(text)  # the protocol's own types accept it
                assert event_id is not None, f"an event without an id: {text}"
                events.append(SseEvent(id=event_id, data=json.loads(text)))
                if stop_after is not None and len(events) >= stop_after:
                    return events
            event_id, data = None, []
        elif line.startswith(":"):
            continue  # a comment (keepalive)
        else:
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "id":
                event_id = int(value)
            elif field == "data":
                data.append(value)
    return events


def run_input(thread: str, run: str, text: str | None = None, **extra: Any) -> dict[str, Any]:
    """A RunAgentInput as a client sends it (camelCase)."""
    messages = [] if text is None else [{"id": f"{run}-user", "role": "user", "content": text}]
    return {"threadId": thread, "runId": run, "messages": messages, **extra}


def post_agui(
    client: httpx2.Client, body: dict[str, Any], **headers: str
) -> tuple[int, list[SseEvent]]:
    """POST /agui and read the whole stream (or the error)."""
    with client.stream("POST", "/agui", json=body, headers=headers) as response:
        if response.status_code != 200:
            response.read()
            return response.status_code, []
        assert response.headers["content-type"].startswith("text/event-stream")
        return 200, parse_sse(response.iter_lines())


def types(events: list[SseEvent]) -> list[str]:
    return [e.type for e in events]


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file; always needs approval."""
    return f"deleted {path}"


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b
