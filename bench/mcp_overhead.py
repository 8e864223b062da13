"""What hookloop adds to an MCP tool call, on top of the MCP client itself, per transport.

For each transport (in-process, stdio, streamable HTTP on 127.0.0.1) the same one-line tool
(``echo``) is called three ways, in alternating rounds so a busy machine weighs on all
three alike:

- ``client_ms``: ``mcp.Client.call_tool`` alone, the floor;
- ``toolset_ms``: ``MCPToolset.call_tool``: the client plus hookloop's timeout, error
  mapping and result conversion;
- ``chat_ms``: one model iteration of a chat on the scripted model whose every step calls
  the MCP tool: the toolset plus the loop (request, hooks, validation, commit).

Each figure is the median over rounds of the mean per call; ``*_overhead_ms`` subtract
``client_ms``. (The file is not called ``mcp.py``: run as a script, it would shadow the
SDK.) Run it from a checkout with the mcp extra installed::

    python bench/mcp_overhead.py             # a table
    python bench/mcp_overhead.py --json      # the same figures as one JSON object
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer

from hookloop import Agent
from hookloop.mcp import MCPToolset
from hookloop.testing import ScriptedModel, tool_call

CALLS = 20  # per round and way
ROUNDS = 15


def build() -> MCPServer:
    server = MCPServer("b", log_level="WARNING")

    @server.tool(structured_output=False)
    def echo(text: str) -> str:
        """Say it back."""
        return text

    return server


async def _serve_http() -> None:
    import uvicorn

    # IPPROTO_TCP: asyncio sets TCP_NODELAY only on connections accepted from such a socket
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    config = uvicorn.Config(build().streamable_http_app(), log_level="warning")
    await uvicorn.Server(config).serve(sockets=[sock])


async def _per_call(run: Callable[[], Awaitable[Any]], calls: int = CALLS) -> float:
    start = time.perf_counter()
    await run()
    return (time.perf_counter() - start) / calls * 1000


async def measure(target: object) -> dict[str, float]:
    """Median per-call milliseconds of the three ways for one server."""
    toolset = MCPToolset(target, name="b")
    async with Client(target) as client:  # type: ignore[arg-type]

        async def alone() -> None:
            for _ in range(CALLS):
                await client.call_tool("echo", {"text": "hi"})

        async def through_toolset() -> None:
            for _ in range(CALLS):
                await toolset.call_tool("echo", {"text": "hi"})

        script = [tool_call("b_echo", {"text": "hi"}) for _ in range(CALLS)]
        agent = Agent(ScriptedModel([]), plugins=[toolset], max_iterations=CALLS + 1, context=None)

        async def in_chat() -> None:
            agent.model = ScriptedModel([*script, "done"])
            agent.history.clear_history()
            await agent.chat("echo")

        await alone()
        await through_toolset()
        await in_chat()  # warm: connected, listed
        rounds: dict[str, list[float]] = {"client_ms": [], "toolset_ms": [], "chat_ms": []}
        for _ in range(ROUNDS):
            rounds["client_ms"].append(await _per_call(alone))
            rounds["toolset_ms"].append(await _per_call(through_toolset))
            rounds["chat_ms"].append(await _per_call(in_chat))
        await agent.aclose()
    figures = {name: statistics.median(values) for name, values in rounds.items()}
    figures["toolset_overhead_ms"] = figures["toolset_ms"] - figures["client_ms"]
    figures["chat_overhead_ms"] = figures["chat_ms"] - figures["client_ms"]
    return {name: round(value, 3) for name, value in figures.items()}


async def main_async(http_url: str) -> dict[str, dict[str, float]]:
    results = {"in-process": await measure(build())}
    stdio = StdioServerParameters(
        command=sys.executable, args=[__file__, "--serve-stdio"], env=dict(os.environ)
    )
    results["stdio"] = await measure(stdio)
    results["http"] = await measure(http_url)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--serve-stdio", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--serve-http", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stdio:
        build().run()
        return
    if args.serve_http:
        asyncio.run(_serve_http())
        return
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve-http"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        results = asyncio.run(main_async(f"http://127.0.0.1:{port}/mcp"))
    finally:
        server.terminate()
        server.wait()
    if args.json:
        print(json.dumps(results))
        return
    columns = ["client_ms", "toolset_ms", "chat_ms", "toolset_overhead_ms", "chat_overhead_ms"]
    print(f"{'transport':<11}" + "".join(f"{c:>21}" for c in columns))
    for transport, figures in results.items():
        print(f"{transport:<11}" + "".join(f"{figures[c]:>21.3f}" for c in columns))


if __name__ == "__main__":
    main()
