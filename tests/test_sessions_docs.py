"""The example at the top of docs/sessions.md runs and prints what the page shows."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "sessions.md"


def test_the_first_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    page = DOC.read_text()
    code = page.split("```python\n", 1)[1].split("```", 1)[0]
    shown = page.split("prints\n\n```\n", 1)[1].split("```", 1)[0]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown
    assert (tmp_path / "sessions.db").is_file()


def test_the_repair_example_prints_what_the_page_shows(tmp_path: Path) -> None:
    section = DOC.read_text().split("### Repairing a session\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = section.split("prints\n\n```\n", 1)[1].split("```", 1)[0]
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == shown
    assert list(tmp_path.iterdir()) == []  # it leaves nothing behind
