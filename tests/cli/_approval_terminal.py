"""``hookloop chat`` in a real pseudo-terminal, for the approval tests: one way to start it.

The tools come from a module written into the test's folder (``approval_tools.py``); the
model is a real HTTP server speaking the OpenAI wire format.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect

from tests.models._provider_server import ProviderServer

TOOLS_MODULE = '''
from hookloop import tool


@tool(requires_approval=True)
def delete_file(path: str) -> str:
    """Delete a file.

    Args:
        path: The file.
    """
    return f"deleted {path}"


@tool(requires_approval=lambda arguments: 1 // 0 > 0)
def risky(path: str) -> str:
    """Something whose approval rule is broken.

    Args:
        path: The file.
    """
    return f"risked {path}"
'''

PROMPT = "  run it? [y]es, [n]o, [e]dit: "


@contextmanager
def approval_chat(server: ProviderServer, folder: Path, *tools: str) -> Iterator[pexpect.spawn]:
    """``hookloop chat`` with tools of :data:`TOOLS_MODULE`, at its first ``you>`` prompt.

    Closed (killed if need be) when the block ends; the caller reads ``exitstatus`` then.
    """
    (folder / "approval_tools.py").write_text(TOOLS_MODULE, encoding="utf-8")
    arguments = ["-m", "hookloop", "chat", "--model", f"{server.url}/v1#m"]
    for name in tools or ("delete_file",):
        arguments += ["--tool", f"approval_tools:{name}"]
    child = pexpect.spawn(
        sys.executable,
        arguments,
        cwd=str(folder),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        encoding="utf-8",
        timeout=60,
    )
    try:
        child.expect_exact("you> ")
        yield child
    finally:
        child.close(force=True)
