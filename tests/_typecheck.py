"""mypy over snippets of user code, with the project's settings and its cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mypy(*files: Path) -> tuple[int, list[str]]:
    """Type-check ``files`` as the project's gate does (strict, from ``pyproject.toml``).

    It runs in the project root, so the cache the gate leaves in ``.mypy_cache`` is reused:
    hookloop is read from the cache and only ``files`` are checked anew, in seconds rather than
    the half minute of a whole check. ``make test`` runs the gate beside pytest, and the tests
    that call this run last (``RUN_LAST`` in ``tests/conftest.py``), after the gate is done.

    Returns:
        mypy's exit status and the lines it printed (one per error, the summary left out).
    """
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", *map(str, files)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return done.returncode, (done.stdout + done.stderr).splitlines()
