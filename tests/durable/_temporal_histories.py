"""Record the Temporal histories the replay tests read: python -m tests.durable._temporal_histories.

Runs four turns on the Temporal server at ADDRESS (the first argument, ``host:port``; by
default the one of ``scripts/test-services``) and writes each one's history to
``tests/durable/histories/<name>.json``:

- ``tools``: a batch of three tool calls (two not idempotent), then the answer;
- ``failed``: a turn that fails (a ``pre_tool_call`` handler raises), not retried;
- ``retry_later``: the session store fails once, so the first activity runs again after a pause;
- ``cancelled``: a turn cancelled from outside while its model call runs;
- ``approval``: a call waits for approval in the workflow; a refused decision, then an
  approval, arrive as signals, and the turn goes on.

Further arguments name the histories to record (all by default).

Record them again only on purpose: a change of the workflow that no longer replays them breaks
the turns in flight of a deployment that upgrades.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import sys
from collections.abc import Sequence
from pathlib import Path

from hookloop import ChatCancelledError, Message, StoreError, UsageError
from hookloop.durable import DurableChats, TemporalEngine, workflow_id
from hookloop.sessions import SQLiteSessionStore
from tests.durable import _agents
from tests.durable._temporal_support import history_json, quick_engine
from tests.durable.test_turns import until

HISTORIES = Path(__file__).resolve().parent / "histories"


class FailingOnce(SQLiteSessionStore):
    """Its first append fails as a store that cannot be reached does."""

    failed = False

    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        if not self.failed:
            self.failed = True
            raise StoreError("the store is away for a moment", store="test")
        return await super()._append_message(session_id, message, expected_seq)


async def record(engine: TemporalEngine, name: str, session: str) -> None:
    text = await history_json(engine, workflow_id(session, name))
    (HISTORIES / f"{name}.json").write_text(text)


NAMES = ("tools", "failed", "retry_later", "cancelled", "approval")


async def main(address: str, directory: Path, names: Sequence[str] = NAMES) -> None:
    HISTORIES.mkdir(exist_ok=True)
    for name in names:
        engine = quick_engine(address)
        session = engine.task_queue
        agent = {
            "tools": _agents.batch_agent,
            "failed": _agents.refusing_agent,
            "retry_later": _agents.echo_agent,
            "cancelled": _agents.gated_agent,
            "approval": _agents.remove_agent,
        }[name]
        store_type = FailingOnce if name == "retry_later" else SQLiteSessionStore
        store = store_type(directory / f"{name}.db")
        chats = DurableChats(engine, agent, sessions=store)
        async with engine:
            if name == "cancelled":
                _agents.gate = asyncio.Event()
                handle = await chats.submit(session, "first", turn_id=name)
                await until(lambda: _agents.calls[-1:] == ["model first"])
                await handle.cancel()
                with contextlib.suppress(ChatCancelledError):
                    await handle.result()
            elif name == "approval":
                [pending] = (await chats.chat(session, "go", turn_id=name)).pending_approvals
                stranger = dataclasses.replace(pending, call_id="call-other")
                refused = await chats.resume(session, [stranger.approve()], turn_id="refused")
                with contextlib.suppress(UsageError):
                    await refused.result()
                handle = await chats.resume(session, [pending.approve()], turn_id="approved")
                await handle.result()
            else:
                try:
                    await chats.chat(session, "go", turn_id=name)
                except UsageError:
                    assert name == "failed"
            await record(engine, name, session)
        await store.close()


if __name__ == "__main__":
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as place:
        asyncio.run(main(sys.argv[1], Path(place), sys.argv[2:] or NAMES))
    sys.stdout.flush()
    os._exit(0)  # the Temporal SDK can abort at interpreter exit
