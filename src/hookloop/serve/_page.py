"""The chat page at ``/``: one self-contained HTML file (no CDN, no network but this server)."""

from __future__ import annotations

import html
from functools import cache
from importlib.resources import files

__all__ = ["chat_page"]


@cache
def _part(name: str) -> str:
    return files(__package__).joinpath(name).read_text(encoding="utf-8")


def chat_page(title: str, *, trace: bool) -> str:
    """The page, its style and script inlined; ``trace``: the server records trace pages."""
    page = _part("_page.html")
    return (
        page.replace("/*STYLE*/", _part("_page.css"))
        .replace("/*SCRIPT*/", _part("_page.js"))
        .replace("{{TITLE}}", html.escape(title))
        .replace("{{TRACE}}", "1" if trace else "0")
    )
