"""hookloop tools served over MCP, used by the official MCP client (and by hookloop's own).

In process through ``mcp_server()``, and through ``hookloop mcp serve`` as a real process
over stdio and over streamable HTTP on a loopback port.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters

from hookloop import (
    Agent,
    DuplicateNameError,
    RunContext,
    ToolMessage,
    UsageError,
    tool,
)
from hookloop._builtin_tools import calculator
from hookloop.mcp import MCPToolset, mcp_server
from hookloop.mcp._serve import tcp_listener
from hookloop.testing import ScriptedModel, tool_call
from tests.mcp.mcp_served_tools import TOOLS, agent

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}
SERVE = [sys.executable, "-m", "hookloop", "mcp", "serve"]


def summary(result: Any) -> tuple[list[str], object, bool]:
    return [block.text for block in result.content], result.structured_content, result.is_error


async def check_the_tools(client: Client) -> None:
    """What every transport must show: the tools, their schemas, results and errors."""
    listed = {t.name: t for t in (await client.list_tools()).tools}
    assert sorted(listed) == ["broken", "calculator", "profile", "shout"]
    assert listed["shout"].description == "Say it louder."
    assert listed["shout"].input_schema == dict(TOOLS[1].parameters)
    assert summary(await client.call_tool("shout", {"text": "hi", "times": 2})) == (
        ["HI!!"],
        None,
        False,
    )
    assert summary(await client.call_tool("calculator", {"expression": "17 * 23"})) == (
        ["391"],
        None,
        False,
    )
    assert summary(await client.call_tool("profile", {"name": "Ada"})) == (
        ['{"name":"Ada","letters":3}'],
        {"name": "Ada", "letters": 3},
        False,
    )
    assert summary(await client.call_tool("broken", {})) == (
        ["tool 'broken' failed: RuntimeError: the disk is on fire"],
        None,
        True,
    )
    assert summary(await client.call_tool("shout", {"text": 3})) == (
        ["invalid arguments for tool 'shout': text: Input should be a valid string"],
        None,
        True,
    )
    assert summary(await client.call_tool("nope", {})) == (
        ["unknown tool 'nope'; available tools: broken, calculator, profile, shout"],
        None,
        True,
    )


async def test_the_official_client_uses_served_tools_in_process() -> None:
    async with Client(mcp_server(TOOLS)) as client:
        await check_the_tools(client)


async def test_an_agents_served_tools_are_those_of_its_enabled_scopes() -> None:
    async with Client(mcp_server(agent)) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == [
            "calculator",
            "profile",
            "shout",
        ]
        people = agent.scopes.get("people")
        assert people is not None
        people.enabled = False
        try:
            names = sorted(t.name for t in (await client.list_tools()).tools)
        finally:
            people.enabled = True
        assert names == ["calculator", "shout"]


async def test_the_command_serves_over_stdio_to_the_official_client() -> None:
    command = StdioServerParameters(
        command=SERVE[0], args=[*SERVE[1:], "mcp_served_tools:TOOLS"], env=ENV, cwd=HERE
    )
    async with Client(command) as client:
        await check_the_tools(client)


@pytest.fixture
def served_over_http() -> Iterator[str]:
    server = subprocess.Popen(
        [*SERVE, "mcp_served_tools:TOOLS", "--http", "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=HERE,
    )
    try:
        assert server.stderr is not None
        line = server.stderr.readline()
        assert line.startswith("hookloop: serving MCP at http://127.0.0.1:"), line
        yield line.rsplit(" ", 1)[1].strip()
    finally:
        server.terminate()
        server.wait()
        assert server.stderr is not None
        server.stderr.close()


async def test_the_command_serves_streamable_http_on_loopback(served_over_http: str) -> None:
    assert served_over_http.endswith("/mcp")
    async with Client(served_over_http) as client:
        await check_the_tools(client)


async def test_a_hookloop_agent_uses_served_hookloop_tools_through_mcp(
    served_over_http: str,
) -> None:
    model = ScriptedModel([tool_call("t_shout", {"text": "hey"}), "Shouted."])
    async with Agent(model, plugins=[MCPToolset(served_over_http, name="t")]) as user:
        await user.chat("Shout hey.")
    [result] = [m for m in user.messages if isinstance(m, ToolMessage)]
    assert (result.content, result.is_error) == ("HEY!", False)


def test_what_cannot_be_served_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="cannot serve int"):
        mcp_server(42)  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="cannot serve int: it is not a tool"):
        mcp_server([calculator, 42])  # type: ignore[list-item]
    with pytest.raises(DuplicateNameError, match="two tools to serve are named 'calculator'"):
        mcp_server([calculator, calculator])


def test_the_command_says_in_one_line_what_it_cannot_load() -> None:
    done = subprocess.run(
        [*SERVE, "mcp_served_tools:nothing"], capture_output=True, text=True, env=ENV, cwd=HERE
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "hookloop: cannot load tools 'mcp_served_tools:nothing': module 'mcp_served_tools' has "
        "no attribute 'nothing'\n"
    )


async def test_the_http_listener_turns_nagle_off_for_accepted_connections() -> None:
    # With Nagle's algorithm on, every call over HTTP waited for a delayed ACK: 48 ms
    # instead of 3 (bench/mcp_overhead.py). asyncio turns it off only when the listening
    # socket says it is TCP.
    accepted: list[int] = []
    done = asyncio.Event()

    def connected(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        accepted.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()
        done.set()

    listener = tcp_listener(0)
    server = await asyncio.start_server(connected, sock=listener)
    async with server:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        await done.wait()
        writer.close()
        await writer.wait_closed()
    assert accepted == [1]


def test_the_mcp_package_exports_exactly_its_public_names_each_documented() -> None:
    import inspect

    import hookloop.mcp

    names = hookloop.mcp.__all__
    assert names == ["MCPToolset", "ToolSource", "mcp_server", "serve"]  # ruff's order
    public = {
        name
        for name, value in vars(hookloop.mcp).items()
        if not name.startswith("_") and (inspect.isclass(value) or inspect.isfunction(value))
    }
    assert public <= set(names)
    for name in ("MCPToolset", "mcp_server", "serve"):
        obj = getattr(hookloop.mcp, name)
        assert inspect.getdoc(obj), name
        for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
            if not attr.startswith("_") and inspect.isfunction(member):
                assert inspect.getdoc(member), f"{name}.{attr}"


def texts(result: Any) -> tuple[list[str], bool]:
    return [block.text for block in result.content], result.is_error


# -- serving: approval, disabled tools, RunContext ------------------------------------------


async def test_a_served_call_that_needs_approval_is_refused_unless_allowed() -> None:
    ran: list[str] = []

    @tool(requires_approval=True)
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return f"deleted {path}"

    @tool(requires_approval=lambda arguments: arguments["amount"] > 100)
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(str(amount))
        return f"paid {amount}"

    refused = "needs a person's approval; not available over MCP"
    async with Client(mcp_server([delete_file, pay])) as client:
        assert texts(await client.call_tool("delete_file", {"path": "/etc/passwd"})) == (
            [f"tool 'delete_file' {refused}"],
            True,
        )
        assert texts(await client.call_tool("pay", {"amount": 500})) == (
            [f"tool 'pay' {refused}"],
            True,
        )
        assert texts(await client.call_tool("pay", {"amount": 5})) == (["paid 5"], False)
    assert ran == ["5"]
    async with Client(mcp_server([delete_file, pay], allow_unapproved=True)) as client:
        assert texts(await client.call_tool("delete_file", {"path": "x"})) == (
            ["deleted x"],
            False,
        )
    assert ran == ["5", "x"]


async def test_disabled_tools_are_neither_listed_nor_run_whatever_is_served() -> None:
    switch = {"on": False}

    @tool(enabled=False)
    def wipe(path: str) -> str:
        """Wipe (switched off)."""
        return f"wiped {path}"

    @tool(enabled=lambda: switch["on"])
    def sometimes() -> str:
        """On when switched on."""
        return "ran"

    async with Client(mcp_server([wipe, sometimes])) as client:
        assert [t.name for t in (await client.list_tools()).tools] == []
        assert texts(await client.call_tool("wipe", {"path": "/dev/sda"})) == (
            ["unknown tool 'wipe'; available tools: none"],
            True,
        )
        switch["on"] = True
        assert [t.name for t in (await client.list_tools()).tools] == ["sometimes"]
        assert texts(await client.call_tool("sometimes", {})) == (["ran"], False)


@dataclass
class Shop:
    owner: str


@tool
def whoami(ctx: RunContext[Shop], greeting: str = "hi") -> str:
    """Greet as the shop's owner."""
    return f"{greeting} from {ctx.deps.owner} ({ctx.agent.name}, {ctx.session_id})"


async def test_a_run_context_tool_is_served_with_its_agent_and_deps() -> None:
    agent = Agent(
        ScriptedModel([]), name="shopkeeper", tools=[whoami], deps=Shop("Ada"), session_id="s1"
    )
    async with Client(mcp_server(agent)) as client:
        result = await client.call_tool("whoami", {"greeting": "yo"})
    assert texts(result) == (["yo from Ada (shopkeeper, s1)"], False)
    without = Agent(ScriptedModel([]), tools=[whoami])
    async with Client(mcp_server(without)) as client:
        result = await client.call_tool("whoami", {})
    [text], is_error = texts(result)
    assert is_error
    assert text.startswith("tool 'whoami' failed: MissingDepsError: tool 'whoami'")


def test_a_run_context_tool_without_an_agent_is_a_usage_error_at_once() -> None:
    with pytest.raises(UsageError, match="tool 'whoami' takes a RunContext, which only an agent"):
        mcp_server([whoami])


# -- hookloop mcp serve --http and signals -------------------------------------------------


@pytest.mark.parametrize("sigint_at_start", [signal.SIG_DFL, signal.SIG_IGN])
@pytest.mark.parametrize(("number", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 0)])
def test_the_http_server_command_stops_on_a_signal_with_its_exit_code(
    number: signal.Signals, code: int, sigint_at_start: signal.Handlers
) -> None:
    server = subprocess.Popen(
        [sys.executable, "-m", "hookloop", "mcp", "serve", "mcp_served_tools:TOOLS", "--http"],
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        cwd=HERE,
        # A terminal's SIGINT is not ignored; a background job's is.
        preexec_fn=lambda: signal.signal(signal.SIGINT, sigint_at_start),
    )
    try:
        assert server.stderr is not None
        assert server.stderr.readline().startswith("hookloop: serving MCP at http://127.0.0.1:")
        server.send_signal(number)
        assert server.wait(timeout=120) == code
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
        assert server.stderr is not None
        server.stderr.close()
