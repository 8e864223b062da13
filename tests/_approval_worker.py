"""A process for the approval tests: python _approval_worker.py SPEC SESSION MODE [ARGS].

- ``ask``: chat with an agent that records into the session; its model calls five tools at
  once, three of which need approval. Prints the pending calls as JSON and exits.
- ``resume DECISIONS [STOP REACHED]``: a new agent restores the session, prints the pending
  calls it finds, resumes with the decisions given as JSON, and prints the answer. With
  ``STOP``, it instead writes the file ``REACHED`` and waits for ever (for the test to
  SIGKILL it) at that point: ``decision`` once the first decision is recorded, ``transfer``
  once the transfer tool runs.

Each tool prints ``ran NAME ARGS`` when it runs, so the test sees which process ran what.
``delete`` is idempotent (deleting twice leaves the same state); ``transfer`` is not.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
import threading
from pathlib import Path

from hookloop import Agent, ApprovalDecision, ToolCall, tool
from hookloop.hooks import ApprovalDecisionContext, Phase
from hookloop.sessions import SessionStore
from hookloop.testing import ScriptedModel, tool_calls
from tests.sessions._backends import open_store

STOP: dict[str, str] = {}  # the stop of a resume, and the file that says it was reached


def reached(stop: str) -> bool:
    """Whether this process stops at ``stop``; if so, say so in the file the test watches."""
    if STOP.get("at") != stop:
        return False
    Path(STOP["reached"]).write_text(stop, encoding="utf-8")
    return True


def say(line: str) -> None:
    # One write per line: sync tools run in worker threads at once, and print() writes the
    # text and its newline separately.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


@tool(requires_approval=lambda arguments: arguments["amount"] > 100)
def transfer(amount: int, to: str) -> str:
    """Transfer money; more than 100 needs approval."""
    say(f"ran transfer {amount} {to}")
    if reached("transfer"):
        threading.Event().wait()  # until the test kills the process
    return f"sent {amount} to {to}"


@tool(requires_approval=True, idempotent=True)
def delete(path: str) -> str:
    """Delete a file; always needs approval."""
    say(f"ran delete {path}")
    return f"deleted {path}"


@tool
def balance() -> int:
    """The balance."""
    say("ran balance")
    return 1000


BATCH = tool_calls(
    ToolCall.create("transfer", {"amount": 500, "to": "bob"}, id="c1"),
    ToolCall.create("balance", {}, id="c2"),
    ToolCall.create("delete", {"path": "/tmp/x"}, id="c3"),
    ToolCall.create("transfer", {"amount": 50, "to": "carol"}, id="c4"),
    ToolCall.create("delete", {"path": "/tmp/y"}, id="c5"),
)


def make_agent(store: SessionStore, session_id: str, script: list[object]) -> Agent:
    """The agent of every step (the tests make it in their own process too)."""
    model = ScriptedModel(script)  # type: ignore[arg-type]
    return Agent(model, tools=[transfer, delete, balance], plugins=[store.session(session_id)])


async def ask(spec: dict[str, str], session_id: str) -> None:
    async with open_store(spec) as store:
        agent = make_agent(store, session_id, [BATCH])
        response = await agent.chat("pay bob, tidy up")
    pending = [dataclasses.asdict(p) for p in response.pending_approvals]
    print(json.dumps(pending), flush=True)


async def resume(spec: dict[str, str], session_id: str, decisions: str) -> None:
    async with open_store(spec) as store:
        agent = make_agent(store, session_id, ["All done."])

        async def stop_after_the_first(ctx: ApprovalDecisionContext) -> None:
            if reached("decision"):
                await asyncio.Event().wait()  # until the test kills the process

        # After the recorder (Phase.RECORD): the decision is stored when the file appears.
        agent.add_hook("on_approval_decision", stop_after_the_first, order=Phase.RECORD + 1)
        pending = await agent.pending_approvals()
        print(json.dumps([dataclasses.asdict(p) for p in pending]), flush=True)
        response = await agent.resume([ApprovalDecision(**d) for d in json.loads(decisions)])
    print(json.dumps({"text": response.text, "pending": len(response.pending_approvals)}))


def main() -> None:
    spec, session_id, mode = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
    if mode == "ask":
        asyncio.run(ask(spec, session_id))
    elif mode == "resume":
        if len(sys.argv) > 5:
            STOP.update(at=sys.argv[5], reached=sys.argv[6])
        asyncio.run(resume(spec, session_id, sys.argv[4]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()
