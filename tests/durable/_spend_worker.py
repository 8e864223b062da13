"""A durable worker that runs one turn and exits: python -m tests.durable._spend_worker SPEC.

SPEC is a JSON object: ``dir`` (where the outcome goes), ``engine`` (DBOS's database URL),
``sessions`` (the session store's spec, see ``tests/sessions/_backends.py``), ``executor``
(this worker's executor id), ``message`` (the user message's id, which is the turn's), and
optionally ``agent`` (the factory: ``build`` by default, or ``build_with_helper``) and
``stop`` (``"model:1"``: the lead's second model call waits for ever, for the test to kill).

The turn's agent has ``session_limits=UsageLimits(requests=1)`` and answers in one model
call. The outcome is written to ``dir/<message>.json``: the answer, or the limit that ended
the turn; every model call this worker made is a line of ``dir/calls``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

from hookloop import Agent, Usage, UsageLimitExceeded, UsageLimits, UserMessage
from hookloop.durable import DurableChats
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, tool_call
from tests.durable._quick_dbos import dbos_engine
from tests.sessions._backends import open_store

SESSION = "s-1"


def answer(request: ProviderRequest) -> ProviderResponse:
    # By the environment: the agent's module is imported by path, not as __main__.
    with (Path(os.environ["HOOKLOOP_SPEND_DIR"]) / "calls").open("a") as f:
        f.write("model\n")
    return ProviderResponse(content="done", usage=Usage(input_tokens=100, output_tokens=10))


def build() -> Agent:
    return Agent(FunctionModel(answer), session_limits=UsageLimits(requests=1))


async def lead_answer(request: ProviderRequest) -> ProviderResponse | str:
    if not any(m.role == "tool" for m in request.messages):
        return tool_call("helper", {"task": "help"}, id="call-helper")
    if os.environ.get("HOOKLOOP_SPEND_STOP") == "model:1":  # the first run stops here
        (Path(os.environ["HOOKLOOP_SPEND_DIR"]) / "reached").write_text("model:1")
        await asyncio.Event().wait()
    return ProviderResponse(content="done", usage=Usage(input_tokens=100, output_tokens=10))


def build_with_helper() -> Agent:
    """A lead agent whose tool is a sub-agent (one model request); no limits."""
    helper = Agent(FunctionModel(answer), name="helper")
    return Agent(FunctionModel(lead_answer), tools=[helper.as_tool()])


async def main(spec: dict[str, str]) -> None:
    directory = Path(spec["dir"])
    os.environ["HOOKLOOP_SPEND_DIR"] = str(directory)
    store = open_store(spec["sessions"])  # type: ignore[arg-type]
    engine = dbos_engine(spec["engine"], executor_id=spec["executor"])
    os.environ["HOOKLOOP_SPEND_STOP"] = spec.get("stop", "none")
    factory = f"tests.durable._spend_worker:{spec.get('agent', 'build')}"
    chats = DurableChats(engine, factory, sessions=store)
    await engine.launch()
    try:
        message = UserMessage(content="go", id=spec["message"])
        try:
            response = await chats.chat(SESSION, message)
            outcome: dict[str, object] = {"text": response.text}
        except UsageLimitExceeded as exc:
            outcome = {"limit": exc.limit, "maximum": exc.maximum, "used": exc.used}
    finally:
        await engine.shutdown()
        await store.close()
    (directory / f"{spec['message']}.json").write_text(json.dumps(outcome))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
