"""Costly set-up done once per test run, whichever pytest-xdist worker needs it first.

A module-scoped fixture runs once per worker that runs one of the module's tests, and the
workers share tests freely (``--dist worksteal``); pytest-xdist's ``xdist_group`` cannot pin a
module to one worker with pytest 9.2 (xdist 3.8 renames the node id, which pytest now
ignores). ``once_per_run`` puts the result in the run's shared temporary directory instead:
the first worker to get there builds it under a file lock, the others wait and reuse it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest


def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]
) -> Path:
    """The directory ``name`` of this run, filled by ``build(directory)`` once for the run.

    Under pytest-xdist each worker's temporary root is a folder of the run's root, where the
    directory is made; without xdist it is the session's own root. A ``build`` that raises
    leaves nothing behind, so the next caller builds again (and fails the same way).
    """
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    directory = root / name
    done = root / f"{name}.done"
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        if not done.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
            build(directory)
            done.touch()
    return directory
