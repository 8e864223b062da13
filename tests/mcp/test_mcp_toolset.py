"""MCPToolset against real MCP servers: in-process, a stdio process, streamable HTTP.

The servers are written with the official SDK (mcp_demo_server.py); the agent runs the
scripted model, so every test knows which tool the model calls and what it must see.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp
import mcp.types
import pytest
import uvicorn
from hypothesis import given
from hypothesis import strategies as st
from mcp.server import Server
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver import exceptions as sdk_exceptions

from hookloop import (
    Agent,
    ChatCancelledError,
    Defer,
    DuplicateNameError,
    MCPConnectionError,
    MCPServerError,
    MCPTimeoutError,
    MCPToolError,
    PreRequestContext,
    PreToolCallContext,
    RunError,
    ToolCall,
    ToolError,
    ToolMessage,
    UsageError,
    tool,
)
from hookloop._tools import check_name
from hookloop.mcp import MCPToolset
from hookloop.mcp import _connection as connection_module
from hookloop.mcp._serve import tcp_listener
from hookloop.models import ProviderRequest
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import ScriptedModel, tool_call, tool_calls
from tests.mcp.mcp_demo_server import build

DEMO = Path(__file__).with_name("mcp_demo_server.py")
STDIO = [sys.executable, str(DEMO)]


def results(agent: Agent) -> list[tuple[str, str, bool]]:
    return [
        (m.tool_name, m.content, m.is_error) for m in agent.messages if isinstance(m, ToolMessage)
    ]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_an_in_process_servers_tools_are_called_like_local_ones() -> None:
    model = ScriptedModel(
        [
            tool_call("demo_add", {"a": 17, "b": 23}),
            tool_call("demo_greet", {"name": "Ada"}),
            "Done.",
        ]
    )
    async with Agent(model, plugins=[MCPToolset(build())]) as agent:
        response = await agent.chat("Add, then greet.")

    assert response.text == "Done."
    assert results(agent) == [
        ("demo_add", "40", False),  # the SDK's {"result": 40}, unwrapped
        ("demo_greet", "Hello, Ada!", False),  # text content when there is none
    ]
    listed = {t.name: t for t in await build().list_tools()}
    sent = {d.name: d for d in model.requests[0].tools}
    assert sorted(sent) == sorted(f"demo_{n.replace('.', '_')}" for n in listed)
    assert sent["demo_add"].parameters == listed["add"].input_schema  # passed through as is
    assert sent["demo_add"].description == "Add two integers."


async def test_prefix_allow_and_deny_choose_the_tools_and_their_names() -> None:
    toolset = MCPToolset(build(), name="calc", prefix="", allow=["add", "gre*", "files.*"])
    assert [t.name for t in await toolset.list_tools()] == ["add", "greet", "files_read"]
    await toolset.aclose()
    toolset = MCPToolset(build(), deny=["g*", "pid", "grow", "die", "hang"])
    assert [t.name for t in await toolset.list_tools()] == ["demo_add", "demo_files_read"]
    await toolset.aclose()


async def test_every_tool_hook_fires_for_an_mcp_tool_as_for_a_local_one() -> None:
    @tool
    def greet(name: str) -> str:
        """Greet someone by name."""
        return f"Hello, {name}!"

    async def events(agent: Agent) -> list[tuple[str, str, object]]:
        seen: list[tuple[str, str, object]] = []
        agent.add_hook(
            "pre_tool_call", lambda c: seen.append(("pre", c.tool.name, c.call.arguments))
        )
        agent.add_hook(
            "on_tool_call_result", lambda c: seen.append(("result", c.tool.name, c.result))
        )
        agent.add_hook("on_message", lambda c: seen.append(("message", c.message.role, "")))
        async with agent:
            await agent.chat("Greet Ada.")
        return seen

    script = [tool_call("greet", {"name": "Ada"}), "Done."]
    local = await events(Agent(ScriptedModel(script), tools=[greet]))
    remote = await events(Agent(ScriptedModel(script), plugins=[MCPToolset(build(), prefix="")]))
    assert (
        remote
        == local
        == [
            ("message", "user", ""),
            ("message", "assistant", ""),
            ("pre", "greet", '{"name": "Ada"}'),
            ("result", "greet", "Hello, Ada!"),
            ("message", "tool", ""),
            ("message", "assistant", ""),
        ]
    )


async def test_pre_tool_call_can_refuse_an_mcp_tool_before_the_server_sees_it() -> None:
    server = build()
    called: list[str] = []
    original = server.call_tool

    async def watched(name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        called.append(name)
        return await original(name, arguments, context)

    server.call_tool = watched  # type: ignore[method-assign]
    agent = Agent(
        ScriptedModel([tool_call("demo_add", {"a": 1, "b": 2}), "Refused."]),
        plugins=[MCPToolset(server)],
    )

    def refuse(ctx: PreToolCallContext) -> Exception | None:
        return PermissionError("not allowed here") if ctx.scope.name == "demo" else None

    agent.add_hook("pre_tool_call", refuse)
    async with agent:
        await agent.chat("Add.")
    assert results(agent) == [("demo_add", "not allowed here", True)]
    assert called == []


async def test_a_tool_that_reports_an_error_is_a_tool_error_the_model_sees() -> None:
    errors: list[BaseException | None] = []
    agent = Agent(
        ScriptedModel([tool_call("demo_files_read", {"path": "a.txt"}), "No file."]),
        plugins=[MCPToolset(build())],
    )
    agent.add_hook("on_tool_call_error", lambda c: errors.append(c.error.__cause__))
    async with agent:
        response = await agent.chat("Read a.txt.")
    assert response.text == "No file."
    assert results(agent) == [
        (
            "demo_files_read",
            "tool 'demo_files_read' failed: MCPToolError: Error executing tool files.read: "
            "no such file: a.txt",
            True,
        )
    ]
    [cause] = errors
    assert isinstance(cause, MCPToolError)
    assert (cause.server, cause.tool_name, cause.code) == ("demo", "files.read", None)


@pytest.mark.parametrize("era", ["2026-07-28", "legacy"])
async def test_the_tool_list_is_cached_until_the_server_says_it_changed(
    era: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if era == "legacy":  # the client as a pre-2026 one: the initialize handshake
        monkeypatch.setattr(mcp, "Client", functools.partial(mcp.Client, mode="legacy"))
    server = build()
    listings = 0
    original = server.list_tools

    async def counted() -> list[mcp.types.Tool]:
        nonlocal listings
        listings += 1
        return await original()

    server.list_tools = counted  # type: ignore[method-assign]
    model = ScriptedModel(
        [
            "Hello.",
            tool_call("demo_grow"),
            tool_call("demo_shout", {"text": "hi"}),
            "Shouted.",
            "Bye.",
        ]
    )
    async with Agent(model, plugins=[MCPToolset(server)]) as agent:
        await agent.chat("Hi.")
        await agent.chat("Grow, then shout.")
        await agent.chat("Bye.")

    names = [sorted(d.name for d in request.tools) for request in model.requests]
    assert "demo_shout" not in names[1]
    assert names[2] == names[3] == names[4] == sorted([*names[1], "demo_shout"])
    assert results(agent) == [
        ("demo_grow", "added shout", False),
        ("demo_shout", "HI!", False),  # in the same chat, right after the change
    ]
    assert listings == 2  # once at the start, once after list_changed


async def test_a_call_past_the_timeout_is_a_tool_error_and_the_next_call_works() -> None:
    errors: list[BaseException | None] = []
    toolset = MCPToolset(build(), timeout=0.05)
    agent = Agent(
        ScriptedModel(
            [tool_call("demo_hang"), "Gave up.", tool_call("demo_add", {"a": 1, "b": 1}), "2."]
        ),
        plugins=[toolset],
    )
    agent.add_hook("on_tool_call_error", lambda c: errors.append(c.error.__cause__))
    async with agent:
        await agent.chat("Hang.")  # never answers: 0.05 s pass on any machine
        toolset.timeout = None  # no race with a loaded machine for the call that must work
        await agent.chat("Add.")
    assert results(agent) == [
        ("demo_hang", "tool 'demo_hang' failed: MCPTimeoutError: the MCP server demo did "
         "not answer within 0.05s", True),
        ("demo_add", "2", False),  # the same connection, after the cancelled call
    ]  # fmt: skip
    [cause] = errors
    assert isinstance(cause, MCPTimeoutError)
    assert cause.timeout == 0.05


async def test_a_stdio_server_runs_while_the_agent_needs_it_and_ends_with_aclose() -> None:
    agent = Agent(
        ScriptedModel([tool_call("mcp_demo_server_pid"), "Ok."]),
        plugins=[MCPToolset(STDIO)],
    )
    async with agent:
        await agent.chat("Your pid?")
        [(_, pid, _)] = results(agent)
        assert alive(int(pid))
    assert not alive(int(pid))


async def test_a_stdio_server_killed_mid_call_is_a_typed_error_and_the_next_call_restarts_it() -> (
    None
):
    causes: list[BaseException | None] = []
    both = tool_calls(ToolCall.create("demo_pid", {}), ToolCall.create("demo_pid", {}))
    model = ScriptedModel([tool_call("demo_pid"), tool_call("demo_die"), "It died.", both, "Back."])
    agent = Agent(model, plugins=[MCPToolset(" ".join(STDIO), name="demo")])
    agent.add_hook("on_tool_call_error", lambda c: causes.append(c.error.__cause__))
    async with agent:
        assert (await agent.chat("Die.")).text == "It died."
        assert (await agent.chat("Again.")).text == "Back."
    [first, died, second, third] = results(agent)
    assert second == third  # two calls at once found it dead: one new process serves both
    assert died == (
        "demo_die",
        "tool 'demo_die' failed: MCPConnectionError: the connection to the MCP server demo "
        "closed (did the server exit?); the next call reconnects",
        True,
    )
    [cause] = causes
    assert isinstance(cause, MCPConnectionError)
    assert first[1] != second[1]  # a new process
    assert not alive(int(first[1]))
    assert not alive(int(second[1]))


async def test_streamable_http_tools_work_and_a_dead_server_stays_a_tool_error(
    http_url: str,
) -> None:
    causes: list[BaseException | None] = []
    model = ScriptedModel(
        [
            tool_call("local_greet", {"name": "Ada"}),
            tool_call("local_die"),
            "It died.",
            tool_call("local_greet", {"name": "Bob"}),
            "Still down.",
        ]
    )
    agent = Agent(model, plugins=[MCPToolset(http_url, name="local")])
    agent.add_hook("on_tool_call_error", lambda c: causes.append(c.error.__cause__))
    async with agent:
        assert (await agent.chat("Greet, then die.")).text == "It died."
        assert (await agent.chat("Greet again.")).text == "Still down."
    assert [r[0:3:2] for r in results(agent)] == [
        ("local_greet", False),
        ("local_die", True),
        ("local_greet", True),
    ]
    assert results(agent)[0][1] == "Hello, Ada!"
    assert [type(c) for c in causes] == [MCPConnectionError, MCPConnectionError]
    assert str(causes[1]).startswith(f"cannot connect to the MCP server {http_url}: ")


async def test_a_server_that_cannot_start_fails_the_chat_with_a_typed_error() -> None:
    agent = Agent(ScriptedModel(["never"]), plugins=[MCPToolset("no-such-mcp-command --x")])
    seen: list[BaseException] = []
    agent.add_hook("on_chat_error", lambda c: seen.append(c.error))
    with pytest.raises(MCPConnectionError) as caught:
        await agent.chat("Hi.")
    assert caught.value.server == "no-such-mcp-command"  # its name: never its arguments
    assert str(caught.value).startswith(
        "cannot connect to the MCP server no-such-mcp-command: FileNotFoundError: "
    )
    assert seen == [caught.value]
    assert not agent.is_running


def _malformed_server() -> Server[Any]:
    """A server whose tool answers do not match what it declared."""
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def list_tools(ctx: Any, params: Any) -> mcp.types.ListToolsResult:
        return mcp.types.ListToolsResult(
            tools=[
                mcp.types.Tool(name="count", input_schema={"type": "object"}, output_schema=schema)
            ]
        )

    async def call_tool(ctx: Any, params: Any) -> mcp.types.CallToolResult:
        return mcp.types.CallToolResult(content=[], structured_content={"n": "many"})

    return Server("odd", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_malformed_tool_result_is_a_tool_error_and_the_connection_stays() -> None:
    causes: list[BaseException | None] = []
    agent = Agent(
        ScriptedModel([tool_call("odd_count"), tool_call("odd_count"), "Odd."]),
        plugins=[MCPToolset(_malformed_server())],
    )
    agent.add_hook("on_tool_call_error", lambda c: causes.append(c.error.__cause__))
    async with agent:
        await agent.chat("Count.")
    assert [c.__class__ for c in causes] == [MCPToolError, MCPToolError]
    assert str(causes[0]).startswith(
        "the MCP server odd sent an unusable answer: RuntimeError: Invalid structured content "
        "returned by tool count: 'many' is not of type 'integer'"
    )


async def test_a_result_that_breaks_the_protocol_is_a_tool_error_from_the_same_server() -> None:
    causes: list[BaseException | None] = []
    model = ScriptedModel(
        [tool_call("m_pid"), tool_call("m_bad"), tool_call("m_pid"), "Odd server."]
    )
    server = [sys.executable, str(DEMO.with_name("mcp_malformed_server.py"))]
    agent = Agent(model, plugins=[MCPToolset(server, name="m")])
    agent.add_hook("on_tool_call_error", lambda c: causes.append(c.error.__cause__))
    async with agent:
        await agent.chat("Try.")
    [before, bad, after] = results(agent)
    assert before == after  # the same process answered: the connection was not dropped
    assert bad[0] == "m_bad"
    assert bad[1].startswith(
        "tool 'm_bad' failed: MCPToolError: the MCP server m sent a malformed answer: "
        "ValidationError: "
    )
    [cause] = causes
    assert isinstance(cause, MCPToolError)
    assert cause.tool_name == "bad"


async def test_a_tool_name_taken_by_another_scope_is_refused_with_the_fix() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    agent = Agent(ScriptedModel(["never"]), tools=[add], plugins=[MCPToolset(build(), prefix="")])
    with pytest.raises(DuplicateNameError, match="give the toolset another prefix"):
        await agent.chat("Hi.")


def test_chat_sync_opens_and_closes_the_connection_within_each_call() -> None:
    agent = Agent(
        ScriptedModel([tool_call("s_pid"), "One.", tool_call("s_pid"), "Two."]),
        plugins=[MCPToolset(STDIO, name="s")],
    )
    assert agent.chat_sync("Pid?").text == "One."
    assert agent.chat_sync("Pid?").text == "Two."
    pids = [int(content) for _, content, _ in results(agent)]
    assert pids[0] != pids[1]
    assert not any(alive(pid) for pid in pids)


@pytest.mark.parametrize(
    ("server", "options", "message"),
    [
        (42, {}, "an MCP server is a URL"),
        ("", {}, "the MCP server command is empty"),
        ("http://", {}, "has no host"),
        (STDIO, {"allow": "add"}, "allow takes a list of tool names"),
        (STDIO, {"timeout": 0}, "timeout must be a positive number"),
        (STDIO, {"name": "a b"}, "scope name 'a b' is invalid"),
    ],
)
def test_a_malformed_toolset_is_a_usage_error(
    server: object, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(UsageError, match=message):
        MCPToolset(server, **options)


def test_the_errors_sit_in_the_run_error_branch() -> None:
    assert issubclass(MCPConnectionError, MCPServerError)
    assert issubclass(MCPTimeoutError, MCPServerError)
    assert issubclass(MCPToolError, MCPServerError)
    assert issubclass(MCPServerError, RunError)
    assert not issubclass(MCPServerError, ToolError)  # the cause of one, not one itself


def test_without_the_sdk_hookloop_mcp_imports_and_its_use_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['mcp'] = None\n"  # as if the mcp extra were not installed
        "import hookloop.mcp\n"
        "for use in (lambda: hookloop.mcp.MCPToolset('python s.py'),"
        " lambda: hookloop.mcp.mcp_server([])):\n"
        "    try:\n"
        "        use()\n"
        "    except hookloop.MissingExtraError as exc:\n"
        "        print(exc)\n"
    )
    src = str(DEMO.parent.parent.parent / "src")
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": src},
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "MCPToolset needs the 'mcp' extra: pip install 'hookloop[mcp]'\n"
        "mcp_server needs the 'mcp' extra: pip install 'hookloop[mcp]'\n"
    )


async def test_removing_the_toolset_takes_its_scope_and_it_can_serve_another_agent() -> None:
    toolset = MCPToolset(build(), allow=["greet"])
    first = Agent(ScriptedModel(["Hi."]))
    dispose = first.use(toolset)
    await first.chat("Hi.")
    assert [t.name for t in first.scopes.get("demo").tools] == ["demo_greet"]  # type: ignore[union-attr]
    dispose()
    assert "demo" not in first.scopes
    second = Agent(ScriptedModel([tool_call("demo_greet", {"name": "Bo"}), "Done."]))
    second.use(toolset)
    await second.chat("Greet Bo.")
    await toolset.aclose()
    assert results(second) == [("demo_greet", "Hello, Bo!", False)]


@given(st.lists(st.text(), min_size=1, max_size=4).filter(lambda argv: argv[0] != ""))
def test_every_command_gives_a_toolset_a_valid_name(argv: list[str]) -> None:
    toolset = MCPToolset(argv)  # no connection is made until a chat needs the tools
    assert check_name("scope", toolset.name) == toolset.name
    assert toolset.server == toolset.name  # never the arguments, which may hold secrets


@given(st.text(min_size=1, max_size=120))
async def test_every_server_tool_name_becomes_a_valid_tool_name(name: str) -> None:
    server = MCPServer("any", log_level="WARNING")
    server.add_tool(lambda: "x", name=name, description="d", structured_output=False)
    toolset = MCPToolset(server)
    tools = await toolset.list_tools()
    await toolset.aclose()
    [made] = tools  # never left out: a name too long is shortened
    assert check_name("tool", made.name) == made.name
    full = "any_" + re.sub(r"[^A-Za-z0-9_-]", "_", name)
    assert made.name == full if len(full) <= 64 else made.name.startswith(full[:55] + "_")


@pytest.mark.parametrize("where", ["in-process", "stdio"])
async def test_cancelling_a_chat_during_an_mcp_call_leaves_the_session_usable(where: str) -> None:
    server: object = build() if where == "in-process" else STDIO
    model = ScriptedModel([tool_call("demo_hang"), tool_call("demo_greet", {"name": "Al"}), "Hi."])
    agent = Agent(model, plugins=[MCPToolset(server, name="demo")])

    def cancel_soon(ctx: PreToolCallContext) -> None:
        # From outside the chat's task (a loop callback), as a caller would: the hang is cut.
        asyncio.get_running_loop().call_soon(agent.cancel)

    dispose = agent.add_hook("pre_tool_call", cancel_soon)
    async with agent:
        with pytest.raises(ChatCancelledError):
            await agent.chat("Hang.")
        dispose()
        assert (await agent.chat("Greet Al.")).text == "Hi."
    assert results(agent) == [
        ("demo_hang", "cancelled: the chat ended before this tool call finished", True),
        ("demo_greet", "Hello, Al!", False),
    ]


def tool_results(messages: Any) -> list[tuple[str, bool]]:
    return [(m.content, m.is_error) for m in messages if isinstance(m, ToolMessage)]


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
            raise sdk_exceptions.ToolError(f"refused {given}")
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
