"""The agent of the durable-serve tests, run by ``hookloop worker --agent``.

A user message ``"SESSION TURN [WORDS]"`` gets a model call that asks for the tool
``charge`` (not idempotent), then a model call that answers
``"charged TURN: <tool result>[ WORDS]"`` in pieces of 4 characters. The first model call
notes the step ``model``, the tool ``tool`` and the answer ``answer`` in
``$HOOKLOOP_TEST_RUNS/runs`` (``tests.durable._dbos_worker``'s format), and each waits while
its ``hold-STEP-SESSION`` file exists, so a test can kill a worker there.
"""

from __future__ import annotations

from hookloop import Agent, ToolMessage, UserMessage, tool
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, text_response, tool_call
from tests.durable._dbos_worker import step_body
from tests.durable._workers_turn import charge


def answer(request: ProviderRequest) -> ProviderResponse:
    user = next(m for m in reversed(request.messages) if isinstance(m, UserMessage))
    session_id, turn, *words = str(user.content).split(" ", 2)
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        step_body("answer", session_id, int(turn))
        return text_response(" ".join([f"charged {turn}: {last.content}", *words]))
    step_body("model", session_id, int(turn))
    return tool_call("charge", {"session_id": session_id, "turn": int(turn)}, id=f"call-{turn}")


def build() -> Agent:
    """A new agent for one turn."""
    return Agent(FunctionModel(answer, chunk_size=4), tools=[charge])


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file: a person approves each call.

    Args:
        path: The file.
    """
    return f"deleted {path}"


def approve(request: ProviderRequest) -> ProviderResponse:
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return text_response(f"Done: {last.content}")
    return tool_call("delete", {"path": str(last.content)}, id="call-delete")


def build_approval() -> Agent:
    """An agent whose one tool needs approval: it deletes the path the user names."""
    return Agent(FunctionModel(approve, chunk_size=4), tools=[delete])
