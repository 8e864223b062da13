"""A durable-turn worker for the recovery tests: python -m tests.durable._turn_worker SPEC.

SPEC is a JSON object: ``dir`` (where the run's files go), ``engine`` (DBOS's database URL, or
``temporal://host:port/task-queue`` for Temporal), ``turn`` (the turn id, ``"t-1"``),
``sessions`` (the session store's spec, see ``tests/sessions/_backends.py``), ``stop`` (where
to stop: ``"model:<iteration>"``, ``"tool:lookup"``, ``"tool:charge"`` or ``"none"``).

The turn: the model calls ``lookup`` (idempotent), then ``charge`` (not idempotent), then
answers. Every model call, tool run and hook writes a line to ``dir/log``; at the stop the
worker writes ``dir/reached`` and waits for ever (the test kills it). The turn's response is
written to ``dir/response.json``. The agent and its model are built fresh for each turn (by
``build``, found by its import path), the model's answer depending only on the request, as a
real worker's would.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path

from hookloop import (
    Agent,
    AgentEvent,
    ChatStartContext,
    MessageContext,
    PreRequestContext,
    PreToolCallContext,
    RunContext,
    Usage,
    UserMessage,
    tool,
)
from hookloop.durable import DurableChats, DurableEngine, TemporalEngine, replaying
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.sessions import dump_messages
from hookloop.testing import FunctionModel, tool_call
from tests.durable._quick_dbos import dbos_engine
from tests.sessions._backends import open_store

SESSION = "s-1"
TURN = "t-1"
MESSAGE_ID = "m-1"


def _dir() -> Path:
    return Path(os.environ["HOOKLOOP_TURN_DIR"])


def log(*fields: object) -> None:
    with (_dir() / "log").open("a") as f:
        f.write(" ".join(str(x) for x in fields) + "\n")


async def stop_here(point: str) -> None:
    if os.environ.get("HOOKLOOP_TURN_STOP") == point:
        os.environ["HOOKLOOP_TURN_STOP"] = "passed"  # a run stops once
        (_dir() / "reached").write_text(point)
        await asyncio.Event().wait()


@tool(idempotent=True)
async def lookup(ctx: RunContext, item: str) -> str:
    """Look an item up.

    Args:
        item: What to look up.
    """
    log("tool lookup", ctx.idempotency_key)
    await stop_here("tool:lookup")
    return f"{item} costs 5"


@tool
async def charge(ctx: RunContext, amount: int) -> str:
    """Charge the card.

    Args:
        amount: How much.
    """
    log("tool charge", ctx.idempotency_key)
    await stop_here("tool:charge")
    return f"charged {amount}"


async def answer(request: ProviderRequest) -> ProviderResponse | str:
    results = [m for m in request.messages if m.role == "tool"]
    iteration = len(results)
    log("model", iteration)
    await stop_here(f"model:{iteration}")
    if iteration == 0:
        response = tool_call("lookup", {"item": "tea"}, id="call-lookup")
    elif iteration == 1:
        response = tool_call("charge", {"amount": 5}, id="call-charge")
    else:
        response = ProviderResponse(content=f"done after {iteration} tool results")
    # Usage that tells the calls apart: a replay must count each call's own.
    usage = Usage(input_tokens=10 ** (iteration + 1), output_tokens=iteration + 1)
    return dataclasses.replace(response, usage=usage)


def build() -> Agent:
    agent = Agent(FunctionModel(answer), tools=[lookup, charge])

    async def on_chat_start(ctx: ChatStartContext) -> None:
        log("hook on_chat_start replaying", replaying())

    async def on_message(ctx: MessageContext) -> None:
        log("hook on_message", ctx.message.role, "replaying", replaying())

    async def pre_request(ctx: PreRequestContext) -> None:
        log("hook pre_request", ctx.iteration, "replaying", replaying())

    async def pre_tool_call(ctx: PreToolCallContext) -> None:
        log("hook pre_tool_call", ctx.call.name, "replaying", replaying())

    agent.add_hook("on_chat_start", on_chat_start)
    agent.add_hook("on_message", on_message)
    agent.add_hook("pre_request", pre_request)
    agent.add_hook("pre_tool_call", pre_tool_call)
    return agent


async def on_event(event: AgentEvent) -> None:
    if event.type in ("model_call_restarted", "tool_call_started"):
        log("event", event.type, getattr(event, "iteration", ""))


def make_engine(url: str) -> DurableEngine:
    """DBOS on ``url``, or Temporal for ``temporal://host:port/queue`` (quick to notice a kill)."""
    if url.startswith("temporal://"):
        address, _, queue = url.removeprefix("temporal://").partition("/")
        return TemporalEngine(address, task_queue=queue, heartbeat=0.5, retry=0.1, grace=0.5)
    return dbos_engine(url, executor_id="worker-1")


async def main(spec: dict[str, object]) -> None:
    os.environ["HOOKLOOP_TURN_DIR"] = str(spec["dir"])
    os.environ["HOOKLOOP_TURN_STOP"] = str(spec["stop"])
    store = open_store(spec["sessions"])  # type: ignore[arg-type]
    engine = make_engine(str(spec["engine"]))
    chats = DurableChats(
        engine, "tests.durable._turn_worker:build", sessions=store, on_event=on_event
    )
    await engine.launch()
    try:
        message = UserMessage(content="buy tea", id=MESSAGE_ID)
        handle = await chats.submit(SESSION, message, turn_id=str(spec.get("turn", TURN)))
        response = await handle.result()
    finally:
        await engine.shutdown()
        await store.close()
    out = {
        "messages": dump_messages(response.messages),
        "text": response.text,
        "usage": dataclasses.asdict(response.usage),
        "iterations": response.iterations,
    }
    (_dir() / "response.json").write_text(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
    # Ended on purpose: the Temporal SDK can abort at interpreter exit (docs/durable.md).
    sys.stdout.flush()
    os._exit(0)
