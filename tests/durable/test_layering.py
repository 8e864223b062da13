"""The durable package's layering: what imports what, and loading an agent factory."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from hookloop import UsageError
from hookloop.durable import DurableChats
from hookloop.sessions import SQLiteSessionStore

DURABLE = Path(__file__).resolve().parents[2] / "src" / "hookloop" / "durable"


def imported(module: str) -> set[str]:
    """The modules ``durable/<module>.py`` imports, relative ones written as from the package."""
    tree = ast.parse((DURABLE / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_the_engine_and_the_session_queue_do_not_import_each_other() -> None:
    assert "._queue" not in imported("_dbos")
    assert "._dbos" not in imported("_queue")


def test_durable_turns_do_not_import_the_command() -> None:
    for path in DURABLE.glob("*.py"):
        assert not any(name.endswith("_cli") for name in imported(path.stem)), path.name


class Engine:
    """Only what DurableChats calls when it is made."""

    def register(self, name: str, body: object) -> None:
        pass


def test_loading_an_agent_factory_leaves_sys_path_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "here_agents.py").write_text("def build():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "here_agents", raising=False)
    before = list(sys.path)
    store = SQLiteSessionStore(tmp_path / "sessions.db")
    # A library call does not make the current directory importable as a side effect ...
    with pytest.raises(UsageError, match="cannot load agent factory 'here_agents:build'"):
        DurableChats(Engine(), "here_agents:build", sessions=store)  # type: ignore[arg-type]
    assert sys.path == before
    # ... the program (or the command) does, if it wants to.
    monkeypatch.syspath_prepend(str(tmp_path))
    chats = DurableChats(Engine(), "here_agents:build", sessions=store)  # type: ignore[arg-type]
    assert chats.agent_path == "here_agents:build"
