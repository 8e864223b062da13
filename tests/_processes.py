"""Child processes of a test: stopped at a chosen point and killed, or waited for."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

GUARD = 120.0  # seconds: only a failure guard, never a timing the tests rely on


def kill_at_stop(process: subprocess.Popen[str], reached: Path) -> str:
    """Wait until ``process`` writes ``reached`` (it then waits for ever), and SIGKILL it.

    Returns what it printed. Fails the test if the process ends, or takes longer than the
    guard, before it gets there.
    """
    deadline = time.monotonic() + GUARD
    while not reached.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            _, errors = process.communicate()
            pytest.fail(f"the process never reached its stop: {errors}")
        time.sleep(0.02)  # polling a file, not waiting for something to happen
    os.kill(process.pid, signal.SIGKILL)
    out, _ = process.communicate()
    return out


def finish(process: subprocess.Popen[str]) -> None:
    """Wait for ``process`` to exit with status 0; fail the test otherwise."""
    try:
        _, errors = process.communicate(timeout=GUARD)
    except subprocess.TimeoutExpired:
        process.kill()
        _, errors = process.communicate()
        pytest.fail(f"the process did not finish: {errors}")
    assert process.returncode == 0, errors
