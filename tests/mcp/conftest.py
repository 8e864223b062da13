"""Fixtures of the MCP tests.

- ``http_url``: the demo server (``mcp_demo_server.py``) over streamable HTTP on a free
  loopback port, in a process of its own, killed after the test.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

DEMO = Path(__file__).with_name("mcp_demo_server.py")


@pytest.fixture
def http_url() -> Iterator[str]:
    """The demo server's URL (``http://127.0.0.1:PORT/mcp``), for one test."""
    server = subprocess.Popen(
        [sys.executable, str(DEMO), "--http"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.kill()
        server.wait()
        assert server.stdout is not None
        server.stdout.close()
