"""Where an MCP server is: the one place that reads what a user passes as ``server``."""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
from collections.abc import Mapping, Sequence
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
        label: The server for messages: its URL (its secrets masked), or its name. Never a
            command's arguments, which often hold secrets (a database URL, an API key).
        name: A default toolset name: letters, digits, ``_`` and ``-`` only.
        kind: ``"http"``, ``"stdio"`` or ``"in-process"``.
        secrets: Texts that must not reach messages or logs: a URL's password, the
            values of its query (where API keys often are) and of its headers; a command's
            URL passwords and the values of its options named like a key, token, secret or
            password.
        headers: HTTP headers sent with every request to a URL (authorization, say).
    """

    server: object
    label: str
    name: str
    kind: str
    secrets: tuple[str, ...] = ()
    headers: tuple[tuple[str, str], ...] = ()

    def redact(self, text: str) -> str:
        """``text`` with every secret of the server replaced by ``***``."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text


def target_of(server: object, headers: Mapping[str, str] | None = None) -> Target:
    """Read ``server``: a URL, a command line, an argv list, stdio parameters or a server.

    Raises:
        MissingExtraError: The ``mcp`` extra is not installed.
        UsageError: ``server`` is none of those, or ``headers`` are given for a server
            that is not a URL, or are not str names and values.
    """
    sdk = import_extra("mcp", extra="mcp", by="MCPToolset")
    if isinstance(server, str) and server.strip().startswith(("http://", "https://")):
        return _with_headers(_url(server.strip()), headers)
    if headers is not None:
        raise UsageError("headers are sent to an MCP server at a URL (http://...) only")
    if isinstance(server, str):
        return _stdio(sdk.StdioServerParameters, _split(server))
    if isinstance(server, Sequence) and not isinstance(server, bytes):
        return _stdio(sdk.StdioServerParameters, [_argument(a) for a in server])
    if isinstance(server, sdk.StdioServerParameters):
        return _command(server, [server.command, *server.args])
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


def _with_headers(target: Target, headers: Mapping[str, str] | None) -> Target:
    if headers is None:
        return target
    if not isinstance(headers, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise UsageError("headers must map str names to str values")
    pairs = tuple(headers.items())
    secrets = target.secrets + tuple(v for _, v in pairs if len(v) >= 4)
    return dataclasses.replace(target, headers=pairs, secrets=secrets)


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
    return _command(parameters(command=argv[0], args=argv[1:], env=dict(os.environ)), argv)


def _command(server: StdioServerParameters, argv: Sequence[str]) -> Target:
    secrets = _argv_secrets(argv)
    name = _stem(argv, secrets)
    return Target(server=server, label=name, name=name, kind="stdio", secrets=secrets)


_SECRET_OPTION = re.compile(r"key|token|secret|passw|auth|credential", re.IGNORECASE)
_URL_PASSWORD = re.compile(r"://[^/\s:@]*:([^/\s@]+)@")


def _argv_secrets(argv: Sequence[str]) -> tuple[str, ...]:
    """What in a command line looks secret, for redacting what the server's errors echo.

    The password of a URL (``postgresql://app:S3cr3t@db``), and the value of an option or
    variable named like a key, token, secret or password (``--api-key X``,
    ``--token=X``, ``API_KEY=X``).
    """
    found: list[str] = []
    for index, arg in enumerate(argv[1:], start=1):
        found += _URL_PASSWORD.findall(arg)
        option, equals, value = arg.partition("=")
        if equals and _SECRET_OPTION.search(option):
            found.append(value)
        elif arg.startswith("-") and _SECRET_OPTION.search(arg) and index + 1 < len(argv):
            found.append(argv[index + 1])
    raw = found + [unquote(text) for text in found]
    return tuple(sorted({text for text in raw if len(text) >= 4}))


_SUBCOMMANDS = frozenset({"run", "exec", "x", "dlx", "tool"})  # uv run, pnpm dlx, ...
_SCRIPTS = (".py", ".js", ".mjs", ".cjs", ".ts")


def _stem(argv: Sequence[str], secrets: Sequence[str] = ()) -> str:
    """``python server.py`` is "server", ``npx -y @org/files-mcp`` is "files-mcp".

    A launcher's subcommand is not the server (``uv run x.py`` is "x"), and a script
    among the words is (``uv run --with httpx x.py`` is "x" too). A URL or a word holding
    one of ``secrets`` never names it.
    """
    words = [
        a
        for a in argv[1:]
        if not a.startswith("-") and "://" not in a and not any(s in a for s in secrets)
    ]
    if words and words[0] in _SUBCOMMANDS:
        words = words[1:]
    scripts = [w for w in words if w.endswith(_SCRIPTS)]
    chosen = (scripts or words or [argv[0]])[0]
    return _safe(PurePath(chosen).stem or PurePath(argv[0]).name)


def _safe(text: str) -> str:
    name = _UNSAFE.sub("_", text).strip("_")[:40]
    return name or "mcp"
