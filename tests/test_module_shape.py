"""The shape of the source tree: what names ``Agent``, what imports the root, how long a module is.

Plugins, the loop, a tool's run context and the chat slot program against
:class:`~hookloop.AgentHost` (delegation and durable turns against ``ChatHost``), so only
the facade's own module and the package root name ``Agent``; no module imports the package
root (it imports them all: the version comes from ``_version.py``); and no module grows past
what a reader takes in at one sitting.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "hookloop"
MODULES = sorted(SRC.rglob("*.py"))
MAX_LINES = 900

# Where ``Agent`` may be imported: its module, the root that exports it, and the `hookloop`
# command (and its `serve`), an application of the library that builds agents as a user's
# program does.
MAY_NAME_AGENT = {"_agent.py", "__init__.py", "_cli.py", "_cli_serve.py"}


def _name(path: Path) -> str:
    return path.relative_to(SRC).as_posix()


def _imports_agent(tree: ast.AST) -> list[int]:
    """The lines of every import of the name ``Agent``, ``TYPE_CHECKING`` blocks included."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and any(a.name == "Agent" for a in node.names)
    ]


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_only_the_facade_and_the_root_import_agent(path: Path) -> None:
    if _name(path) in MAY_NAME_AGENT:
        return
    lines = _imports_agent(ast.parse(path.read_text(encoding="utf-8")))
    assert lines == [], f"{_name(path)} imports Agent (line {lines}): type against AgentHost"


def _imports_the_root(path: Path, tree: ast.AST) -> list[int]:
    """The lines of every import of a name of the package root itself (not of a submodule)."""
    depth = len(path.relative_to(SRC).parts) - 1  # 0 for a module of the root package
    submodules = {p.stem for p in SRC.iterdir() if not p.name.startswith("__")}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name == "hookloop" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom):
            root = node.module == "hookloop" or (node.level == depth + 1 and node.module is None)
            if root and any(a.name not in submodules for a in node.names):
                lines.append(node.lineno)
    return lines


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_imports_a_name_of_the_package_root(path: Path) -> None:
    if _name(path) == "__init__.py":
        return
    lines = _imports_the_root(path, ast.parse(path.read_text(encoding="utf-8")))
    assert lines == [], f"{_name(path)} imports from the package root (line {lines})"


def test_only_one_module_reads_the_package_metadata() -> None:
    readers = [_name(p) for p in MODULES if "importlib.metadata" in p.read_text(encoding="utf-8")]
    assert readers == ["_version.py"]


@pytest.mark.parametrize("path", MODULES, ids=_name)
def test_no_module_is_over_900_lines(path: Path) -> None:
    lines = path.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_LINES, f"{_name(path)} has {lines} lines: split it by what it does"


def test_the_checks_see_an_import_of_agent_under_type_checking() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .._agent import Agent\n"
    assert _imports_agent(ast.parse(source)) == [3]
