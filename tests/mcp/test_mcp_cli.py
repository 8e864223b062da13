"""``hookloop run --mcp``: the tools of MCP servers from the command line, end to end.

The model is the local provider test server speaking the OpenAI wire format; the MCP servers
are the demo server as a stdio process and over streamable HTTP.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from hookloop import (
    UsageError,
)
from hookloop._cli import _toolsets, main
from tests.mcp.test_mcp_toolset import STDIO
from tests.models._provider_server import ProviderServer, answer

HERE = Path(__file__).parent
SRC = HERE.parent.parent / "src"
COMMAND = " ".join(STDIO)
HOOKLOOP = [sys.executable, "-m", "hookloop"]


def test_run_offers_a_stdio_servers_tools_and_calls_one(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add(
        answer("chat.completions", calls=(("call_1", "mcp_demo_server_greet", '{"name": "Ada"}'),)),
        answer("chat.completions", "It said hello."),
    )
    code = main(["run", "--model", f"{server.url}/v1#m", "--mcp", COMMAND, "Greet Ada."])
    out, _ = capsys.readouterr()
    assert (code, out) == (0, "It said hello.\n")
    first, second = (r.body for r in server.received)
    names = [t["function"]["name"] for t in first["tools"]]
    assert "calculator" not in names  # --mcp names the tools: no default calculator
    assert "mcp_demo_server_greet" in names
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Hello, Ada!",
    }


def test_run_takes_several_servers_and_a_url_with_a_forced_tool_choice(
    server: ProviderServer, http_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    server.add(
        answer("chat.completions", calls=(("call_1", "127_0_0_1_add", '{"a": 2, "b": 3}'),)),
        answer("chat.completions", "5."),
    )
    argv = ["run", "--model", f"{server.url}/v1#m", "--mcp", http_url, "--mcp", COMMAND]
    code = main([*argv, "--tool", "calculator", "--tool-choice", "127_0_0_1_add", "2+3?"])
    out, err = capsys.readouterr()
    assert (code, out, err) == (0, "5.\n", "")
    first, second = (r.body for r in server.received)
    names = [t["function"]["name"] for t in first["tools"]]
    assert names[0] == "calculator"
    assert {"127_0_0_1_add", "mcp_demo_server_add"} <= set(names)
    assert first["tool_choice"] == {"type": "function", "function": {"name": "127_0_0_1_add"}}
    assert second["messages"][-1]["content"] == "5"


def test_a_server_that_cannot_start_is_one_line_and_exit_status_1(
    server: ProviderServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["run", "--model", f"{server.url}/v1#m", "--mcp", "no-such-mcp-server", "Hi"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.startswith(
        "hookloop: MCPConnectionError: cannot connect to the MCP server no-such-mcp-server: "
        "FileNotFoundError: "
    )
    assert err.count("\n") == 1
    assert server.received == []


def test_the_installed_command_runs_with_an_mcp_server(server: ProviderServer) -> None:
    server.add(
        answer("chat.completions", calls=(("call_1", "mcp_demo_server_pid", "{}"),)),
        answer("chat.completions", "Done."),
    )
    done = subprocess.run(
        [*HOOKLOOP, "run", "--model", f"{server.url}/v1#m", "--mcp", COMMAND, "Your pid?"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(SRC)},
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, "Done.\n"), done.stderr
    pid = int(server.received[1].body["messages"][-1]["content"])
    with pytest.raises(ProcessLookupError):  # the server ended with the command
        os.kill(pid, 0)


# -- servers named on the command line ----------------------------------------------------


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
