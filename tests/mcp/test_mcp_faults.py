"""MCP servers that restart, garble their replies, hold secrets in their command lines, or
are closed in the middle of a call: each a fault found from outside (issue 21, items 21-24).

The servers are real: the demo server (official SDK) as a process restarted at the same
address, speaking only the session-based protocol versions; a stdio server written line by
line (mcp_raw_server.py) that breaks the protocol on purpose; in-process SDK servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from hookloop import Agent, MCPConnectionError, MCPToolError, Scope, ToolMessage, tool
from hookloop._cli import main
from hookloop.mcp import MCPToolset, mcp_server
from hookloop.mcp._serve import tcp_listener
from hookloop.observe import JsonLinesTracePlugin
from hookloop.testing import ScriptedModel, tool_call
from tests.mcp.mcp_demo_server import build, legacy_only

HERE = Path(__file__).parent
DEMO = HERE / "mcp_demo_server.py"
RAW = [sys.executable, str(HERE / "mcp_raw_server.py")]


def results(agent: Agent) -> list[tuple[str, str, bool]]:
    return [
        (m.tool_name, m.content, m.is_error) for m in agent.messages if isinstance(m, ToolMessage)
    ]


# -- item 21: a server restarted while the agent is idle ---------------------------------------


_RUNNING: dict[int, asyncio.subprocess.Process] = {}


async def stop(port: int) -> None:
    """Kill the server on ``port`` and wait until it is gone."""
    process = _RUNNING.pop(port)
    process.kill()
    await process.wait()


@contextlib.asynccontextmanager
async def legacy_server(port: int) -> AsyncIterator[int]:
    """The demo server speaking only the session-based versions, on ``port`` (0: a free one)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(DEMO),
        "--http",
        "--legacy",
        "--port",
        str(port),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        assert process.stdout is not None
        port = int(await process.stdout.readline())
        _RUNNING[port] = process
        yield port
    finally:
        _RUNNING.pop(port, None)
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


async def test_an_http_toolset_on_the_older_protocol_recovers_from_a_server_restart() -> None:
    model = ScriptedModel([tool_call("demo_pid"), "First.", tool_call("demo_pid"), "Second."])
    async with legacy_server(0) as port:
        toolset = MCPToolset(f"http://127.0.0.1:{port}/mcp", name="demo", timeout=None)
        agent = Agent(model, plugins=[toolset])
        async with agent:
            assert (await agent.chat("Your pid?")).text == "First."
            connection = await toolset._connections.get()
            assert connection.client.protocol_version in HANDSHAKE_PROTOCOL_VERSIONS
            await stop(port)
            # Started again at the same address while the agent was idle, the server no
            # longer knows the agent's session: it answers the next call with a 404.
            async with legacy_server(port):
                assert (await agent.chat("And now?")).text == "Second."
    [(_, first, failed), (_, second, failed_again)] = results(agent)
    assert (failed, failed_again) == (False, False)
    assert first != second  # the restarted server answered, on a new session


def forgetful(app: Any, initialized: list[int]) -> Any:
    """``app`` refusing every tool call with 404 "Session not found", as if just restarted."""
    refusal = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'

    async def serve(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        if b'"initialize"' in body:
            initialized.append(1)
        if b'"tools/call"' in body:
            headers = [(b"content-type", b"application/json")]
            await send({"type": "http.response.start", "status": 404, "headers": headers})
            await send({"type": "http.response.body", "body": refusal})
            return
        sent = False

        async def replay() -> dict[str, Any]:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return serve


async def test_a_call_refused_on_the_new_session_too_is_sent_only_twice() -> None:
    initialized: list[int] = []
    listener = tcp_listener(0)
    app = legacy_only(forgetful(build().streamable_http_app(), initialized))
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    web.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    serving = asyncio.create_task(web.serve(sockets=[listener]))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    toolset = MCPToolset(url, name="demo")
    try:
        with pytest.raises(MCPConnectionError) as caught:
            await toolset.call_tool("pid", {})
    finally:
        await toolset.aclose()
        web.should_exit = True
        await serving
        listener.close()
    assert str(caught.value) == (
        f"the MCP server {url} refused the request on a new session too: Session not found"
    )
    assert len(initialized) == 2  # one new session, one second try: never a loop


# -- item 22: secrets in a command line --------------------------------------------------------

DATABASE = "postgresql://app:S3cr3t-pw@db.internal:5432/orders"
API_KEY = "sk-live-4242abcd"


async def test_a_commands_secrets_reach_neither_the_model_nor_a_trace_nor_the_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    command = [*RAW, "--database", DATABASE, "--api-key", API_KEY]
    model = ScriptedModel([tool_call("raw_pid"), tool_call("raw_die"), "Done."])
    toolset = MCPToolset(command, name="raw")
    lines: list[str] = []
    agent = Agent(model, plugins=[toolset])
    agent.use(JsonLinesTracePlugin(lines.append))
    async with agent:
        await agent.chat("Pid, then die.")
    broken = Agent(ScriptedModel(["never"]), plugins=[MCPToolset(["no-such-mcp", DATABASE])])
    broken.use(JsonLinesTracePlugin(lines.append))
    with pytest.raises(MCPConnectionError) as caught:
        await broken.chat("Hi.")
    [_, (_, died, is_error)] = results(agent)
    assert is_error
    assert died == (
        "tool 'raw_die' failed: MCPConnectionError: the connection to the MCP server raw closed "
        "(did the server exit?); the next call reconnects"
    )
    assert str(caught.value).startswith("cannot connect to the MCP server no-such-mcp: ")
    seen = "\n".join([repr(model.requests), *lines, caplog.text, str(caught.value), repr(toolset)])
    for secret in (DATABASE, "S3cr3t-pw", API_KEY):
        assert secret not in seen


def test_what_a_server_echoes_of_its_commands_secrets_is_masked() -> None:
    toolset = MCPToolset(["srv", "--token=tok-abcdef", f"DB={DATABASE}", "--api-key", API_KEY])
    target = toolset._target
    assert target.redact(f"cannot reach {DATABASE} with {API_KEY} or tok-abcdef") == (
        "cannot reach postgresql://app:***@db.internal:5432/orders with *** or ***"
    )


# -- item 23: aclose() during an in-process call -----------------------------------------------


async def test_aclose_during_an_in_process_call_ends_that_call() -> None:
    toolset = MCPToolset(build(), timeout=None)  # nothing but the close can end the hang
    model = ScriptedModel([tool_call("demo_hang"), "It was closed."])
    agent = Agent(model, plugins=[toolset])
    calling = asyncio.Event()
    agent.add_hook("pre_tool_call", lambda ctx: calling.set())
    async with asyncio.timeout(60):  # a hang detector only
        chat = asyncio.create_task(agent.chat("Hang."))
        await calling.wait()
        await asyncio.sleep(0)  # the call is on its way to the server
        await agent.aclose()
        response = await chat
    assert response.text == "It was closed."
    assert results(agent) == [
        (
            "demo_hang",
            "tool 'demo_hang' failed: MCPConnectionError: the connection to the MCP server demo "
            "was closed (aclose()) before it answered",
            True,
        )
    ]


# -- item 24: replies that cannot be matched, handshakes that never come -----------------------


async def test_replies_the_sdk_cannot_match_fail_their_call_at_once_with_a_typed_error() -> None:
    toolset = MCPToolset(RAW, name="raw", timeout=600)  # waiting it out would hang the test
    causes: list[BaseException | None] = []
    calls = ["raw_pid", "raw_garbled", "raw_misnumbered", "raw_noisy", "raw_pid"]
    model = ScriptedModel([*(tool_call(name) for name in calls), "Done."])
    agent = Agent(model, plugins=[toolset])
    agent.add_hook("on_tool_call_error", lambda ctx: causes.append(ctx.error.__cause__))
    async with asyncio.timeout(60), agent:  # a hang detector only
        await agent.chat("Try them all.")
    [pid, garbled, misnumbered, noisy, again] = results(agent)
    assert garbled == (
        "raw_garbled",
        "tool 'raw_garbled' failed: MCPToolError: the MCP server raw sent a reply that is not "
        "valid JSON-RPC (result: Input should be an object)",
        True,
    )
    assert misnumbered == (
        "raw_misnumbered",
        "tool 'raw_misnumbered' failed: MCPToolError: the MCP server raw answered with id "
        "7000000, which matches no request in flight, so its answers cannot be matched to the "
        "calls",
        True,
    )
    assert noisy[1:] == again[1:] == pid[1:]  # a stray line is no reply; the same process
    assert [type(c) for c in causes] == [MCPToolError, MCPToolError]
    assert [c.code for c in causes if isinstance(c, MCPToolError)] == [None, None]


def test_the_mcp_timeouts_are_flags_of_run_and_chat(capsys: pytest.CaptureFixture[str]) -> None:
    mute = " ".join([*RAW, "--mute"])
    with socket.socket() as unused:  # a model URL nothing answers: it is never asked
        unused.bind(("127.0.0.1", 0))
        model = f"http://127.0.0.1:{unused.getsockname()[1]}/v1#m"
        code = main(["run", "--model", model, "--mcp", mute, "--mcp-connect-timeout", "1", "Hi"])
    out, err = capsys.readouterr()
    assert (code, out, err) == (
        1,
        "",
        "hookloop: MCPTimeoutError: the MCP server mcp_raw_server did not finish connecting "
        "within 1s\n",
    )
    for flag in ("--mcp-timeout", "--mcp-connect-timeout"):
        assert main(["run", "--mcp", mute, flag, "0", "Hi"]) == 2
        assert f"{flag} must be a positive number of seconds (got 0)" in capsys.readouterr().err


# -- item 25: hookloop mcp serve ---------------------------------------------------------------

SERVE = [sys.executable, "-m", "hookloop", "mcp", "serve"]
SERVED_ENV = {
    **os.environ,
    "PYTHONPATH": os.pathsep.join([str(HERE.parent.parent / "src"), str(HERE)]),
}


class LineClient:
    """A handshake-era MCP client writing JSON-RPC lines to a served process by hand."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.ids = itertools.count(1)

    async def send(self, method: str, params: dict[str, Any] | None = None) -> int:
        ident = next(self.ids)
        message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params or {}}
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        await self.process.stdin.drain()
        return ident

    async def line(self) -> dict[str, Any]:
        """The next line the server wrote to its standard output, which must be JSON-RPC."""
        assert self.process.stdout is not None
        raw = await self.process.stdout.readline()
        try:
            message: dict[str, Any] = json.loads(raw)
        except ValueError:
            pytest.fail(f"the server wrote a line that is not JSON-RPC: {raw!r}")
        return message

    async def until_answer(self, ident: int) -> tuple[list[str], dict[str, Any]]:
        """The notifications before the answer to request ``ident``, and the answer."""
        notes: list[str] = []
        while "id" not in (message := await self.line()):
            notes.append(message["method"])
        assert message["id"] == ident, message
        return notes, message

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return (await self.until_answer(await self.send(method, params)))[1]["result"]


@contextlib.asynccontextmanager
async def served(source: str) -> AsyncIterator[tuple[LineClient, dict[str, Any]]]:
    """``hookloop mcp serve SOURCE`` over stdio, initialised at 2025-06-18."""
    process = await asyncio.create_subprocess_exec(
        *SERVE,
        source,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=SERVED_ENV,
        cwd=HERE,
    )
    client = LineClient(process)
    try:
        async with asyncio.timeout(60):  # a hang detector only
            hello = {"name": "lines", "version": "1"}
            init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": hello}
            result = await client.request("initialize", init)
            assert process.stdin is not None
            process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
            yield client, result
    finally:
        if process.stdin is not None:
            process.stdin.close()
        await process.wait()


def names(listed: Any) -> list[str]:
    return sorted(t["name"] for t in listed["tools"])


async def test_a_served_list_that_can_change_is_advertised_and_its_changes_announced() -> None:
    async with served("mcp_served_tools:TOOLS") as (_, fixed):
        assert fixed["capabilities"]["tools"] == {"listChanged": False}
    async with served("mcp_served_tools:growing") as (client, result):
        assert result["capabilities"]["tools"] == {"listChanged": True}
        assert names(await client.request("tools/list")) == ["unlock"]
        unlock = await client.send("tools/call", {"name": "unlock", "arguments": {}})
        notes, answer = await client.until_answer(unlock)
        assert answer["result"]["content"][0]["text"] == "unlocked"
        assert notes == ["notifications/tools/list_changed"]  # the call changed the list
        assert names(await client.request("tools/list")) == ["handshake", "unlock"]


async def test_a_hookloop_client_gets_a_served_agents_new_tools_in_the_same_chat() -> None:
    switch = {"on": False}

    @tool
    def unlock() -> str:
        """Offer the extra tools."""
        switch["on"] = True
        return "unlocked"

    served_agent = Agent(ScriptedModel([]), tools=[unlock])
    handshake = tool(lambda: "shaken", name="handshake", description="An extra tool.")
    served_agent.scopes.register(Scope("extras", tools=[handshake], enabled=lambda: switch["on"]))
    model = ScriptedModel([tool_call("s_unlock"), tool_call("s_handshake"), "Done."])
    agent = Agent(model, plugins=[MCPToolset(mcp_server(served_agent), name="s")])
    async with asyncio.timeout(60), agent:  # a hang detector only
        await agent.chat("Unlock, then shake hands.")
    assert results(agent) == [("s_unlock", "unlocked", False), ("s_handshake", "shaken", False)]
    assert [d.name for d in model.requests[1].tools] == ["s_unlock", "s_handshake"]


async def test_prints_at_import_and_in_a_call_stay_off_the_stdio_channel() -> None:
    async with served("mcp_noisy_tools:TOOLS") as (client, result):
        assert result["serverInfo"]["name"] == "hookloop"  # the first line was the answer
        answer = await client.request("tools/call", {"name": "loud", "arguments": {"text": "hi"}})
        assert answer["content"][0]["text"] == "HI"
        process = client.process
        assert process.stdin is not None
        assert process.stderr is not None
        process.stdin.close()
        await process.wait()
        errors = (await process.stderr.read()).decode()
    for line in (
        "loading the noisy tools",
        "a buffered line at import",
        "a write to the descriptor at import",
        "printing during the call",
        "writing during the call",
    ):
        assert line in errors
