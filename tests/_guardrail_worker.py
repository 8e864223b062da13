"""A process for the guardrail kill test: python -m tests._guardrail_worker DB REACHED.

An agent recording into session ``"s"`` of the SQLite store at ``DB`` calls a tool, then
answers ``"UNCHECKED answer"``; its output guardrail writes the file ``REACHED`` and waits for
ever (for the test to SIGKILL the process) while it checks that answer.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from hookloop import Agent, Verdict, tool
from hookloop.guardrails import OutputGuardrailContext, output_guardrail
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import ScriptedModel, tool_call


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"{key} is 42"


async def main(db: Path, reached: Path) -> None:
    async with SQLiteSessionStore(db) as store:
        model = ScriptedModel([tool_call("lookup", {"key": "a"}), "UNCHECKED answer"])
        agent = Agent(model, tools=[lookup], plugins=[store.session("s")])

        @output_guardrail
        async def slow_review(ctx: OutputGuardrailContext) -> Verdict:
            reached.write_text("output guardrail", encoding="utf-8")  # noqa: ASYNC240
            await asyncio.Event().wait()  # until the test kills the process
            return Verdict.allow()

        agent.use(slow_review)
        await agent.chat("what is a?")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
