"""Read a function's summary and parameter descriptions from its Google-style docstring."""

from __future__ import annotations

import inspect
import re

_SECTION = re.compile(r"^(\w[\w ]*):\s*$")
_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_ARG_SECTIONS = frozenset({"args", "arguments", "parameters", "params"})


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a docstring into its description and a map of parameter descriptions.

    The description is the text before the first section header (``Args:``, ``Returns:``,
    ...). Parameter entries are ``name: text`` or ``name (type): text`` lines under an
    ``Args:`` section, with indented continuation lines.
    """
    lines = inspect.cleandoc(doc or "").splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    entry_indent = 0
    for line in lines:
        header = _SECTION.match(line)
        if header and not line.startswith(" "):
            section = header.group(1).strip().lower()
            current = None
            continue
        if section is None:
            summary.append(line)
        elif section in _ARG_SECTIONS and line.strip():
            indent = len(line) - len(line.lstrip())
            entry = _PARAM.match(line.strip())
            if entry and (current is None or indent <= entry_indent):
                current = entry.group(1).lstrip("*")
                entry_indent = indent
                params[current] = entry.group(2).strip()
            elif current is not None:
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(summary).strip(), params
