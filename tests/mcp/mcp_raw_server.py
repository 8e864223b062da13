"""A stdio MCP server written by hand, line by line, to break the protocol on purpose.

It speaks the handshake-era protocol (it refuses the 2026 ``server/discover`` probe, as an
older server does) and offers these tools:

- ``pid``: answers properly with the server's process id;
- ``noisy``: writes a line that is not JSON-RPC (a stray print), then answers properly;
- ``garbled``: answers with its request's id but a ``result`` that is not an object;
- ``misnumbered``: answers with an id that no request had;
- ``die``: kills its own process in the middle of the call.

``python mcp_raw_server.py --mute`` reads its input and never answers anything, not even
the handshake.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from typing import Any

TOOLS = ["pid", "noisy", "garbled", "misnumbered", "die"]


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def answer(request: dict[str, Any]) -> None:
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return  # a notification
    if method == "initialize":
        send(
            {
                "jsonrpc": "2.0",
                "id": ident,
                "result": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "raw", "version": "1"},
                },
            }
        )
    elif method == "tools/list":
        tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": tools}})
    elif method == "tools/call":
        name = request["params"]["name"]
        text = {"content": [{"type": "text", "text": str(os.getpid())}]}
        if name == "die":
            os.kill(os.getpid(), signal.SIGKILL)
        if name == "noisy":
            sys.stdout.write("starting the noisy tool...\n")
        if name == "garbled":
            send({"jsonrpc": "2.0", "id": ident, "result": "not an object"})
        elif name == "misnumbered":
            send({"jsonrpc": "2.0", "id": 7_000_000, "result": text})
        else:
            send({"jsonrpc": "2.0", "id": ident, "result": text})
    else:
        error = {"code": -32601, "message": f"Method not found: {method}"}
        send({"jsonrpc": "2.0", "id": ident, "error": error})


def main() -> None:
    mute = sys.argv[1:] == ["--mute"]
    for line in sys.stdin:
        if not mute and line.strip():
            answer(json.loads(line))


if __name__ == "__main__":
    main()
