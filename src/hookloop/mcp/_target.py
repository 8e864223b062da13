"""Where an MCP server is: the one place that reads what a user passes as ``server``."""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from .._errors import UsageError
from .._extras import import_extra

if TYPE_CHECKING:
    from mcp import StdioServerParameters

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """An MCP server as ``mcp.Client`` takes it, with names for messages and for tools.

    Attributes:
        server: What ``mcp.Client(server)`` connects to: a URL, stdio parameters, or an
            in-process server.
        label: The server for messages: its URL, command line, or name.
        name: A default toolset name: letters, digits, ``_`` and ``-`` only.
        kind: ``"http"``, ``"stdio"`` or ``"in-process"``.
        secrets: Texts that must not reach messages or logs: a URL's password and the
            values of its query (where API keys often are).
    """

    server: object
    label: str
    name: str
    kind: str
    secrets: tuple[str, ...] = ()

    def redact(self, text: str) -> str:
        """``text`` with every secret of the server replaced by ``***``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text


def target_of(server: object) -> Target:
    """Read ``server``: a URL, a command line, an argv list, stdio parameters or a server.

    Raises:
        MissingExtraError: The ``mcp`` extra is not installed.
        UsageError: ``server`` is none of those.
    """
    sdk = import_extra("mcp", extra="mcp", by="MCPToolset")
    if isinstance(server, str):
        if server.strip().startswith(("http://", "https://")):
            return _url(server.strip())
        return _stdio(sdk.StdioServerParameters, _split(server))
    if isinstance(server, Sequence) and not isinstance(server, bytes):
        return _stdio(sdk.StdioServerParameters, [_argument(a) for a in server])
    if isinstance(server, sdk.StdioServerParameters):
        argv = [server.command, *server.args]
        return Target(server=server, label=shlex.join(argv), name=_stem(argv), kind="stdio")
    lowlevel = import_extra("mcp.server", extra="mcp", by="MCPToolset")
    mcpserver = import_extra("mcp.server.mcpserver", extra="mcp", by="MCPToolset")
    if isinstance(server, (lowlevel.Server, mcpserver.MCPServer)):
        name = str(server.name)
        return Target(server=server, label=name, name=_safe(name), kind="in-process")
    raise UsageError(
        "an MCP server is a URL (http://...), a command line ('python server.py'), a list of "
        "arguments, mcp.StdioServerParameters, or an in-process mcp server; got "
        f"{type(server).__name__}"
    )


def _url(url: str) -> Target:
    parts = urlsplit(url)
    if not parts.hostname:
        raise UsageError(f"the MCP server URL {url!r} has no host")
    # Credentials in the URL (a password, a key in the query) must not reach messages or
    # logs: the label keeps the query's names only.
    netloc = parts.hostname + (f":{parts.port}" if parts.port else "")
    query = parse_qsl(parts.query, keep_blank_values=True)
    masked = urlencode([(key, "***") for key, _ in query], safe="*")
    label = parts._replace(netloc=netloc, query=masked, fragment="").geturl()
    raw = [parts.password or "", parts.query, *(v for _, v in query)]
    raw += [unquote(text) for text in raw]
    secrets = tuple(sorted({text for text in raw if len(text) >= 4}))
    return Target(server=url, label=label, name=_safe(parts.hostname), kind="http", secrets=secrets)


def _split(command: str) -> list[str]:
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise UsageError(f"cannot read the MCP server command {command!r}: {exc}") from exc
    return argv


def _argument(value: object) -> str:
    if not isinstance(value, str):
        raise UsageError(f"an MCP server command is a list of str, not {type(value).__name__}")
    return value


def _stdio(parameters: type[StdioServerParameters], argv: list[str]) -> Target:
    if not argv or not argv[0]:
        raise UsageError("the MCP server command is empty")
    # The command runs as the user's shell would run it: with the user's environment (the
    # SDK's default passes only a few variables). Pass StdioServerParameters to choose.
    server = parameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    return Target(server=server, label=shlex.join(argv), name=_stem(argv), kind="stdio")


def _stem(argv: Sequence[str]) -> str:
    """``python server.py`` is "server", ``npx -y @org/files-mcp`` is "files-mcp"."""
    words = [a for a in argv[1:] if not a.startswith("-")] or [argv[0]]
    return _safe(PurePath(words[0]).stem or PurePath(argv[0]).name)


def _safe(text: str) -> str:
    name = _UNSAFE.sub("_", text).strip("_")[:40]
    return name or "mcp"
