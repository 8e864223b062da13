"""The agent of the cross-worker turn tests, run by ``hookloop worker --agent``.

A user message ``"SESSION TURN"`` gets one model call that asks for the tool ``charge``
(not idempotent), then a model call that answers ``"charged TURN: <tool result>"``. Each model
call and tool run appends ``STEP SESSION TURN PID TIME`` to ``$HOOKLOOP_TEST_RUNS/runs`` (the
same file format and ``hold-STEP-SESSION`` files as ``_dbos_worker``), so a test can catch a
worker inside a model call or the tool and kill it there.
"""

from __future__ import annotations

from hookloop import Agent, ToolMessage, UserMessage, tool
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, text_response, tool_call
from tests.durable._dbos_worker import step_body


def _turn(request: ProviderRequest) -> tuple[str, int]:
    user = next(m for m in reversed(request.messages) if isinstance(m, UserMessage))
    session_id, turn = str(user.content).split()
    return session_id, int(turn)


def answer(request: ProviderRequest) -> ProviderResponse:
    session_id, turn = _turn(request)
    step_body("model", session_id, turn)
    last = request.messages[-1]
    if isinstance(last, ToolMessage):
        return text_response(f"charged {turn}: {last.content}")
    return tool_call("charge", {"session_id": session_id, "turn": turn})


@tool
def charge(session_id: str, turn: int) -> str:
    """Charge the card (not safe to run twice).

    Args:
        session_id: The session.
        turn: The turn.
    """
    step_body("tool", session_id, turn)
    return "ok"


def build() -> Agent:
    """A new agent for one turn."""
    return Agent(FunctionModel(answer), tools=[charge])
