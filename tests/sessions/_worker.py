"""A writer process for the session tests: python -m tests.sessions._worker SPEC SESSION MODE N TAG.

- ``append``: append N user messages (ids ``TAG-0`` ...), printing ``seq id`` after each
  append has returned (so the parent knows it was committed); N = 0 means forever.
- ``agent``: chat with an agent that records into the session; its model calls the tool
  ``wait``, which prints ``tool started`` and then waits forever.
"""

from __future__ import annotations

import asyncio
import json
import sys

from hookloop import Agent, UserMessage, tool
from hookloop.testing import ScriptedModel, tool_call
from tests.sessions._backends import open_store


async def append(spec: dict[str, str], session_id: str, count: int, tag: str) -> None:
    store = open_store(spec)
    i = 0
    while count == 0 or i < count:
        message = UserMessage(content=f"{tag} says {i}", id=f"{tag}-{i}")
        seq = await store.append(session_id, message)
        print(seq, message.id, flush=True)
        i += 1
    await store.close()


@tool
async def wait() -> str:
    """Wait for ever."""
    print("tool started", flush=True)
    await asyncio.Event().wait()
    return "never"


async def agent(spec: dict[str, str], session_id: str) -> None:
    store = open_store(spec)
    model = ScriptedModel([tool_call("wait", {}, id="call-wait"), "done"])
    bot = Agent(model, tools=[wait], plugins=[store.session(session_id)])
    await bot.chat("please wait")


def main() -> None:
    spec, session_id, mode, count, tag = sys.argv[1:6]
    if mode == "append":
        asyncio.run(append(json.loads(spec), session_id, int(count), tag))
    elif mode == "agent":
        asyncio.run(agent(json.loads(spec), session_id))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
