"""A durable-turn worker for the resume tests: python -m tests.durable._resume_worker SPEC.

SPEC is a JSON object: ``dir`` (where the run's files go), ``engine`` (DBOS's database URL, or
``temporal://host:port/queue``), ``session`` (the session id, ``"s-1"``),
``approve`` (when true, turn ``"t-1"``'s calls waiting for approval are approved by a resume
``"t-2"``, whose outcome is the run's),
``sessions`` (a SQLite file), ``agent`` (a factory below), ``stop`` (``"on_chat_error"``,
``"tool:lookup"``, ``"model:<tool results>"``, ``"append:<text>"`` or ``"none"``) and
optionally ``then`` (the text of a turn ``"t-2"`` run first, while turn ``"t-1"`` is
resumed) or ``watch`` (run no turn: log what DBOS's recovery does with turn ``"t-1"``). At
the stop the worker writes ``dir/reached`` and waits for ever (the test kills it). Hooks
write lines to ``dir/log``; the turn's outcome goes to ``dir/outcome.json``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import os
import sys

from hookloop import (
    Agent,
    ChatErrorContext,
    ChatStartContext,
    Message,
    MessageContext,
    PreToolCallContext,
    ToolCall,
    Usage,
    UsageError,
    UserMessage,
    tool,
)
from hookloop.durable import DurableChats, replaying, workflow_id
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.sessions import SQLiteSessionStore
from hookloop.testing import FunctionModel, ScriptedModel, tool_call, tool_calls
from tests.durable._turn_worker import _dir, log, make_engine, stop_here

SESSION = "s-1"


class StoppingStore(SQLiteSessionStore):
    """Stops inside the append of the message whose text the stop names."""

    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        await stop_here(f"append:{message.content}")
        return await super()._append_message(session_id, message, expected_seq)


@tool(idempotent=True)
async def lookup(item: str) -> str:
    """Look an item up.

    Args:
        item: What to look up.
    """
    log("tool lookup")
    await stop_here("tool:lookup")
    return f"{item} costs 5"


@tool
def wipe() -> str:
    """Wipe everything (refused: see ``unrun``)."""
    return "wiped"


def _logged(agent: Agent) -> Agent:
    async def on_chat_start(ctx: ChatStartContext) -> None:
        log("on_chat_start replaying", replaying())

    async def on_message(ctx: MessageContext) -> None:
        log("on_message", ctx.message.role, "replaying", replaying())

    async def on_chat_error(ctx: ChatErrorContext) -> None:
        log("on_chat_error", type(ctx.error).__name__)
        await stop_here("on_chat_error")

    agent.add_hook("on_chat_start", on_chat_start)
    agent.add_hook("on_message", on_message)
    agent.add_hook("on_chat_error", on_chat_error)
    return agent


def unrun() -> Agent:
    """One answer calls ``lookup`` and ``wipe``, whose ``pre_tool_call`` handler raises."""
    answer = tool_calls(
        ToolCall.create("lookup", {"item": "tea"}, id="call-lookup"),
        ToolCall.create("wipe", {}, id="call-wipe"),
    )
    agent = _logged(Agent(ScriptedModel([answer]), tools=[lookup, wipe]))

    def refuse(ctx: PreToolCallContext) -> None:
        if ctx.call.name == "wipe":
            raise UsageError("wipe is refused")  # ends the turn with an error

    agent.add_hook("pre_tool_call", refuse)
    return agent


def answer() -> Agent:
    """Answers at once."""
    return _logged(Agent(ScriptedModel(["the answer"])))


def looks_up() -> Agent:
    """Looks something up, then answers; answers a later message at once."""

    def answer(request: ProviderRequest) -> ProviderResponse | str:
        last = request.messages[-1]
        if last.role == "tool":
            return "looked up"
        if last.content == "hi":
            return tool_call("lookup", {"item": "tea"}, id="call-lookup")
        return f"answer to {last.content}"

    return Agent(FunctionModel(answer), tools=[lookup])


@tool(requires_approval=True)
async def charge(amount: int) -> str:
    """Charge the card (a person approves each call).

    Args:
        amount: How much.
    """
    log("tool charge")
    return f"charged {amount}"


def charges() -> Agent:
    """Charges after approval, then answers; the answer's model call may stop."""

    async def answer(request: ProviderRequest) -> ProviderResponse | str:
        results = sum(1 for m in request.messages if m.role == "tool")
        if results == 0:
            return tool_call("charge", {"amount": 5}, id="call-charge")
        await stop_here(f"model:{results}")
        return "charged"

    return Agent(FunctionModel(answer), tools=[charge])


def delegates() -> Agent:
    """Asks a sub-agent (1100 tokens), then answers (11 tokens a call)."""

    def sub_answer(request: ProviderRequest) -> ProviderResponse:
        return ProviderResponse(content="hi", usage=Usage(input_tokens=1000, output_tokens=100))

    async def answer(request: ProviderRequest) -> ProviderResponse:
        results = sum(1 for m in request.messages if m.role == "tool")
        await stop_here(f"model:{results}")
        response = (
            tool_call("helper", {"task": "say hi"}, id="call-helper")
            if results == 0
            else ProviderResponse(content="done")
        )
        return dataclasses.replace(response, usage=Usage(input_tokens=10, output_tokens=1))

    helper = Agent(FunctionModel(sub_answer), name="helper")
    return Agent(FunctionModel(answer), tools=[helper.as_tool()])


async def watch(wid: str) -> None:
    """Log the turn's DBOS status until recovery failed it or gave up on running it here."""
    from dbos import DBOS

    async with asyncio.timeout(60):  # only a failure guard
        for _ in itertools.count():
            status = await DBOS.get_workflow_status_async(wid)
            assert status is not None
            if status.status == "ERROR" or (status.status == "PENDING" and status.dequeued_at):
                log("status", status.status)
                return
            await asyncio.sleep(0.02)


async def main(spec: dict[str, str]) -> None:
    os.environ["HOOKLOOP_TURN_DIR"] = spec["dir"]
    os.environ["HOOKLOOP_TURN_STOP"] = spec["stop"]
    store = StoppingStore(spec["sessions"])
    engine = make_engine(spec["engine"])
    session = spec.get("session", SESSION)
    chats = DurableChats(engine, f"tests.durable._resume_worker:{spec['agent']}", sessions=store)
    await engine.launch()
    try:
        if spec.get("watch"):  # only see what DBOS's recovery does with turn "t-1"
            await watch(workflow_id(session, "t-1"))
            return
        if spec.get("then"):  # a new turn at once, while the killed one is being resumed
            await chats.chat(session, spec["then"], turn_id="t-2")
        message = UserMessage(content="hi", id="m-1")
        try:
            response = await chats.chat(session, message, turn_id="t-1")
            if spec.get("approve"):  # the calls waiting for approval approved, in turn "t-2"
                decisions = [pending.approve() for pending in response.pending_approvals]
                handle = await chats.resume(session, decisions, turn_id="t-2")
                response = await handle.result()
        except Exception as exc:  # the outcome is what the test checks
            outcome = {"error": type(exc).__name__, "message": str(exc)}
        else:
            outcome = {"text": response.text, "tokens": response.usage.total_tokens}
    finally:
        await engine.shutdown()
        await store.close()
    (_dir() / "outcome.json").write_text(json.dumps(outcome))


if __name__ == "__main__":
    asyncio.run(main(json.loads(sys.argv[1])))
    sys.stdout.flush()
    os._exit(0)  # on purpose: the Temporal SDK can abort at interpreter exit
