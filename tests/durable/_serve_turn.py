"""The agent of the durable-serve tests, run by ``hookloop worker --agent``.

A user message ``"SESSION TURN"`` gets a model call that asks for the tool ``charge`` (not
idempotent), then a model call that answers ``"charged TURN: <tool result>"`` in pieces of 4
characters. The first model call notes the step ``model``, the tool ``tool`` and the answer
``answer`` in ``$HOOKLOOP_TEST_RUNS/runs`` (``tests.durable._dbos_worker``'s format), and each
waits while its ``hold-STEP-SESSION`` file exists, so a test can kill a worker there.
"""

from __future__ import annotations

from hookloop import Agent, ToolMessage
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, text_response, tool_call
from tests.durable._dbos_worker import step_body
from tests.durable._workers_turn import _turn, charge


def answer(request: ProviderRequest) -> ProviderResponse:
    session_id, turn = _turn(request)
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        step_body("answer", session_id, turn)
        return text_response(f"charged {turn}: {last.content}")
    step_body("model", session_id, turn)
    return tool_call("charge", {"session_id": session_id, "turn": turn}, id=f"call-{turn}")


def build() -> Agent:
    """A new agent for one turn."""
    return Agent(FunctionModel(answer, chunk_size=4), tools=[charge])
