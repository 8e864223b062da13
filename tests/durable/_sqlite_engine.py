"""python -m tests.durable._sqlite_engine FILE: a DBOSEngine on a SQLite file, in its own process.

Prints ``ready`` once launched and runs a turn when a line comes on standard input; exits when
standard input ends. If the launch fails, prints ``refused <error class>: <message>`` and exits 3.
"""

from __future__ import annotations

import asyncio
import sys

from hookloop import HookloopError
from hookloop.durable import DurableChats
from hookloop.sessions import SQLiteSessionStore
from tests.durable._quick_dbos import dbos_engine


async def main(path: str) -> int:
    sessions = SQLiteSessionStore(f"{path}.sessions")
    engine = dbos_engine(f"sqlite:///{path}", executor_id="one")
    chats = DurableChats(engine, "tests.durable._agents:echo_agent", sessions=sessions)
    try:
        await engine.launch()
    except HookloopError as exc:
        print(f"refused {type(exc).__name__}: {exc}", flush=True)
        return 3
    try:
        print("ready", flush=True)
        while line := await asyncio.to_thread(sys.stdin.readline):
            response = await chats.chat("s1", line.strip())
            print(response.text, flush=True)
    finally:
        await engine.shutdown()
        await sessions.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1])))
