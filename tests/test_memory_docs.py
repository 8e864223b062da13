"""The examples in docs/memory.md and docs/delegation.md run and print what the docs say.

Every ```python block of a page runs, in order, in one namespace (later blocks may use what
earlier ones defined), in a fresh working directory. A block followed by "prints" and a
``` block must print exactly that.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
_BLOCK = re.compile(r"```python\n(.*?)```(?:\n\nprints\n\n```\n(.*?)```)?", re.DOTALL)


def examples(page: str) -> list[tuple[str, str | None]]:
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer((DOCS / page).read_text())]


@pytest.mark.parametrize("page", ["memory.md", "delegation.md"])
def test_the_examples_of_the_page_print_what_it_shows(page: str, tmp_path: Path) -> None:
    blocks = examples(page)
    assert blocks, f"{page} has no python examples"
    namespace: dict[str, object] = {"__name__": f"docs_{page.split('.')[0]}"}
    cwd = Path.cwd()
    os.chdir(tmp_path)
    try:
        for number, (code, shown) in enumerate(blocks, 1):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                exec(compile(code, f"{page}:example {number}", "exec"), namespace)
            if shown is not None:
                assert out.getvalue() == shown, f"{page}: example {number}"
    finally:
        os.chdir(cwd)
