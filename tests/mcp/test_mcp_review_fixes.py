"""MCP behaviour a review found wrong: approval, resuming, list changes over HTTP, timeouts,
disabled and RunContext tools served, tool names, secrets in URLs, signals, SDK results."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from hookloop import (
    Agent,
    Defer,
    MCPConnectionError,
    MCPTimeoutError,
    MCPToolError,
    PreRequestContext,
    PreToolCallContext,
    RunContext,
    ToolCall,
    ToolMessage,
    UsageError,
    tool,
)
from hookloop._cli import _toolsets
from hookloop.mcp import MCPToolset, mcp_server
from hookloop.mcp import _connection as connection_module
from hookloop.mcp._serve import tcp_listener
from hookloop.models import ProviderRequest
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import ScriptedModel, tool_call, tool_calls
from tests.mcp.mcp_demo_server import build

HERE = Path(__file__).parent
DEMO = HERE / "mcp_demo_server.py"
SRC = HERE.parent.parent / "src"
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), str(HERE)])}


def texts(result: Any) -> tuple[list[str], bool]:
    return [block.text for block in result.content], result.is_error


def tool_results(messages: Any) -> list[tuple[str, bool]]:
    return [(m.content, m.is_error) for m in messages if isinstance(m, ToolMessage)]


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


# -- the toolset: resuming, list changes over HTTP, connecting --------------------------------


async def test_an_approved_mcp_call_resumes_with_a_new_agent_on_the_same_session(
    tmp_path: Path,
) -> None:
    shop = MCPServer("shop")

    @shop.tool(structured_output=False)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    def gate(ctx: PreToolCallContext) -> Defer | None:
        return Defer(reason="a person decides") if ctx.tool.name == "shop_refund" else None

    path = tmp_path / "s.db"
    call = tool_calls(ToolCall.create("shop_refund", {"order": "A-17"}, id="c1"))
    async with SQLiteSessionStore(path) as store:  # the first process
        first = Agent(ScriptedModel([call]), plugins=[MCPToolset(shop)])
        first.add_hook("pre_tool_call", gate)
        first.use(store.session("s"))
        async with first:
            assert [p.tool_name for p in (await first.chat("Refund A-17.")).pending_approvals] == [
                "shop_refund"
            ]
    async with SQLiteSessionStore(path) as store:  # a later one: no chat has started
        later = Agent(ScriptedModel(["Refunded."]), plugins=[MCPToolset(shop)])
        later.add_hook("pre_tool_call", gate)
        later.use(store.session("s"))
        async with later:
            (pending,) = await later.pending_approvals()
            response = await later.resume([pending.approve()])
    assert tool_results(response.messages) == [("refunded A-17", False)]
    assert response.text == "Refunded."


async def test_a_list_change_arriving_late_over_http_reaches_the_next_model_call(
    http_url: str,
) -> None:
    model = ScriptedModel([tool_call("demo_grow"), tool_call("demo_shout", {"text": "hi"}), "ok"])
    toolset = MCPToolset(http_url, name="demo")
    announced = asyncio.Event()
    changed = toolset._changed

    def spy() -> None:
        changed()
        announced.set()

    toolset._changed = spy  # type: ignore[method-assign]
    agent = Agent(model, plugins=[toolset])

    async def thinking(ctx: PreRequestContext) -> None:
        # The request was built before the announcement arrived (over HTTP it comes after
        # the tool result was committed): the toolset must still give the model the new list.
        if ctx.iteration == 1:
            await announced.wait()

    agent.add_hook("pre_request", thinking)
    async with agent:
        await agent.chat("Grow, then shout.")
    assert tool_results(agent.messages) == [("added shout", False), ("HI!", False)]
    assert "demo_shout" in [d.name for d in model.requests[1].tools]


async def test_connect_timeout_ends_a_server_that_never_answers_without_the_close_grace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the close grace out of reach, waiting for it would hang: the owner must be
    # cancelled at once (and the process ended) when the client never became ready.
    monkeypatch.setattr(connection_module, "_CLOSE_GRACE", 3600.0)
    pid_file = tmp_path / "pid"
    mute = MCPToolset(
        [
            sys.executable,
            "-c",
            "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(600)",
            str(pid_file),
        ],
        connect_timeout=1,
    )
    async with asyncio.timeout(120):  # a hang detector only
        with pytest.raises(MCPTimeoutError, match="did not finish connecting within 1s"):
            await mute.list_tools()
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# -- tool names ----------------------------------------------------------------------------


@pytest.mark.parametrize("prefix", ["wx.", "a b_", "x" * 57, "ü_"])
def test_a_prefix_no_tool_name_can_start_with_is_a_usage_error(prefix: str) -> None:
    with pytest.raises(UsageError, match=f"prefix {prefix!r} cannot start a tool name"):
        MCPToolset(build(), prefix=prefix)


async def test_long_tool_names_are_shortened_to_distinct_valid_names() -> None:
    server = MCPServer("long")
    for suffix in ("one", "two"):
        server.add_tool(
            lambda s=suffix: s, name="x" * 70 + suffix, description="d", structured_output=False
        )
    toolset = MCPToolset(server)
    try:
        made = await toolset.list_tools()
        names = [t.name for t in made]
        assert [len(n) for n in names] == [64, 64]
        assert len(set(names)) == 2
        assert all(n.startswith("long_" + "x" * 50) for n in names)
        assert [await t.invoke({}) for t in made] == ["one", "two"]
    finally:
        await toolset.aclose()


# -- secrets in URLs -------------------------------------------------------------------------


def test_a_urls_password_and_query_values_stay_out_of_its_label() -> None:
    toolset = MCPToolset("https://me:pw-1234@example.com:8443/mcp?api_key=SECRET-9&region=eu#frag")
    assert toolset.server == "https://example.com:8443/mcp?api_key=***&region=***"


async def test_a_urls_secrets_stay_out_of_connection_errors() -> None:
    async def refuse(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    listener = await asyncio.start_server(refuse, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    async with listener:
        toolset = MCPToolset(f"http://127.0.0.1:{port}/mcp?token=SECRET-9", connect_timeout=30)
        with pytest.raises(MCPConnectionError) as caught:
            await toolset.list_tools()
        await toolset.aclose()
    assert "SECRET-9" not in str(caught.value)
    assert f"http://127.0.0.1:{port}/mcp?token=***" in str(caught.value)


# -- headers for HTTP servers -----------------------------------------------------------------


async def test_headers_reach_an_http_server_and_their_values_stay_out_of_messages() -> None:
    guarded = MCPServer("guarded")

    @guarded.tool(structured_output=False)
    def secret(ctx: Context) -> str:
        """Only for those who show the token."""
        given = (ctx.headers or {}).get("authorization")
        if given != "Bearer tok-4242":
            raise ToolError(f"refused {given}")
        return "the secret"

    listener = tcp_listener(0)
    web = uvicorn.Server(uvicorn.Config(guarded.streamable_http_app(), log_level="warning"))
    web.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    serving = asyncio.create_task(web.serve(sockets=[listener]))
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"
    try:
        with_token = MCPToolset(url, headers={"Authorization": "Bearer tok-4242"})
        bare = MCPToolset(url)
        try:
            assert await with_token.call_tool("secret", {}) == "the secret"
            with pytest.raises(MCPToolError, match="refused None"):
                await bare.call_tool("secret", {})
            wrong = MCPToolset(url, headers={"Authorization": "Bearer wrong-1"})
            with pytest.raises(MCPToolError) as caught:
                await wrong.call_tool("secret", {})
            await wrong.aclose()
            assert str(caught.value) == "Error executing tool secret: refused ***"
        finally:
            await with_token.aclose()
            await bare.aclose()
    finally:
        web.should_exit = True
        await serving
        listener.close()


def test_headers_for_a_server_that_is_not_a_url_are_a_usage_error() -> None:
    with pytest.raises(UsageError, match="headers are sent to an MCP server at a URL"):
        MCPToolset(build(), headers={"Authorization": "x"})
    with pytest.raises(UsageError, match="headers must map str names to str values"):
        MCPToolset("http://127.0.0.1:9/mcp", headers={"X-N": 1})  # type: ignore[dict-item]


# -- SDK results ---------------------------------------------------------------------------


async def test_an_sdk_tools_single_result_wrapper_is_unwrapped() -> None:
    server = MCPServer("sdk")

    @server.tool()
    def echo(text: str) -> str:
        """Echo."""
        return text

    @server.tool()
    def numbers() -> list[int]:
        """Numbers."""
        return [1, 2]

    @server.tool()
    def point() -> dict[str, int]:
        """A point."""
        return {"x": 1, "y": 2}

    toolset = MCPToolset(server)
    try:
        assert await toolset.call_tool("echo", {"text": "hi"}) == "hi"
        assert await toolset.call_tool("numbers", {}) == [1, 2]
        assert await toolset.call_tool("point", {}) == {"x": 1, "y": 2}
    finally:
        await toolset.aclose()


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


# -- names of servers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "name"),
    [
        ("uv run x.py", "x"),
        ("uv run --with httpx server.py", "server"),
        ("python server.py --port 3", "server"),
        ("npx -y @org/files-mcp", "files-mcp"),
        ("docker run -i --rm mcp/fetch", "fetch"),
        ("pnpm dlx @a/b-mcp", "b-mcp"),
        ("deno run --allow-net srv.ts", "srv"),
    ],
)
def test_a_launchers_subcommand_does_not_name_the_server(command: str, name: str) -> None:
    assert MCPToolset(command).name == name


def test_command_line_servers_are_named_as_given_or_by_their_script() -> None:
    made = _toolsets(
        [
            "files=python server.py --opt=1",
            "uv run x.py",
            "python server.py",
            "http://h:1/mcp?a=b=c",
            "python s.py --k=v",
            "files_2=uv run y.py",
        ]
    )
    assert [(t.name, t.server) for t in made] == [
        ("files", "files"),  # a command is named by its name, never by its arguments
        ("x", "x"),
        ("server", "server"),
        ("h", "http://h:1/mcp?a=***"),
        ("s", "s"),
        ("files_2", "files_2"),
    ]
    with pytest.raises(UsageError, match="--mcp: two servers are named 'files'"):
        _toolsets(["files=python a.py", "files=python b.py"])


@pytest.mark.parametrize("offered", [True, False])
async def test_a_late_list_change_refreshes_only_the_tools_the_request_offers(
    offered: bool,
) -> None:
    server = build()
    toolset = MCPToolset(server, name="demo")
    model = ScriptedModel([tool_call("demo_pid"), "done"])
    agent = Agent(model, tools=[tool(lambda: "x", name="local")], plugins=[toolset])

    def late_change(ctx: PreRequestContext) -> ProviderRequest | None:
        if ctx.iteration != 1:
            return None
        server.add_tool(lambda: "new", name="extra", description="d", structured_output=False)
        toolset._changed()  # announced after the request was built
        if offered:
            return None
        local = tuple(d for d in ctx.request.tools if not d.name.startswith("demo_"))
        return dataclasses.replace(ctx.request, tools=local)  # this hook offers none of them

    agent.add_hook("pre_request", late_change)
    async with agent:
        await agent.chat("Pid?")
    first, second = ([d.name for d in r.tools] for r in model.requests)
    assert second == ([*first, "demo_extra"] if offered else ["local"])
    assert "demo_pid" in first
