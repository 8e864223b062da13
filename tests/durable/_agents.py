"""Agent factories for the in-process durable-turn tests, importable by path."""

from __future__ import annotations

import asyncio

from hookloop import Agent, PreToolCallContext, RunContext, ToolCall, UsageError, tool
from hookloop.models import ProviderRequest, ProviderResponse
from hookloop.testing import FunctionModel, tool_call, tool_calls

calls: list[str] = []
"""What the models and tools of this module did, in order (cleared by each test)."""


@tool(idempotent=True)
def echo(ctx: RunContext, text: str) -> str:
    """Say it back.

    Args:
        text: What to say.
    """
    calls.append(f"echo {ctx.idempotency_key}")
    return text


@tool(requires_approval=True)
def delete_all() -> str:
    """Delete everything."""
    return "deleted"


def answer(request: ProviderRequest) -> ProviderResponse | str:
    calls.append("model")
    if not any(m.role == "tool" for m in request.messages):
        return tool_call("echo", {"text": "hi"}, id="call-1")
    return "said hi"


@tool
def note(text: str) -> str:
    """Write a note (not idempotent).

    Args:
        text: The note.
    """
    calls.append(f"note {text}")
    return "noted"


def batch_answer(request: ProviderRequest) -> ProviderResponse | str:
    if not any(m.role == "tool" for m in request.messages):
        return tool_calls(
            ToolCall.create("note", {"text": "a"}, id="call-a"),
            ToolCall.create("echo", {"text": "b"}, id="call-b"),
            ToolCall.create("note", {"text": "c"}, id="call-c"),
        )
    return "done"


def batch_agent() -> Agent:
    return Agent(FunctionModel(batch_answer), tools=[echo, note])


def echo_agent() -> Agent:
    return Agent(FunctionModel(answer), tools=[echo])


def approval_agent() -> Agent:
    def answer(request: ProviderRequest) -> ProviderResponse | str:
        if request.messages[-1].role == "tool":
            return "deleted everything"
        return tool_call("delete_all", {}, id="call-1")

    return Agent(FunctionModel(answer), tools=[delete_all])


def refusing_agent() -> Agent:
    """Its one call is refused by a ``pre_tool_call`` handler that raises: the turn fails."""

    def refuse(ctx: PreToolCallContext) -> None:
        raise UsageError(f"{ctx.call.name} is refused")

    def answer(request: ProviderRequest) -> ProviderResponse | str:
        return tool_call("delete_all", {}, id="call-1")

    agent = Agent(FunctionModel(answer), tools=[delete_all])
    agent.add_hook("pre_tool_call", refuse)
    return agent


def typed_agent() -> Agent:
    return Agent(FunctionModel(lambda r: "{}"), output_type=dict)


def not_an_agent() -> object:
    return "an agent"


NOT_CALLABLE = 42


gate: asyncio.Event | None = None
"""While set to an unset event, the gated agent's answer to "first" waits for it."""


async def gated_answer(request: ProviderRequest) -> ProviderResponse | str:
    text = request.messages[-1].content
    calls.append(f"model {text}")
    if text == "first" and gate is not None:
        await gate.wait()
    return f"answer to {text}"


def gated_agent() -> Agent:
    return Agent(FunctionModel(gated_answer))


def odd_answer(request: ProviderRequest) -> ProviderResponse | str:
    """Echoes the user's text through the ``echo`` tool, then answers with the tool's result."""
    last = request.messages[-1]
    if last.role == "tool":
        return last.content
    return tool_call("echo", {"text": last.content}, id="call-odd")


def odd_agent() -> Agent:
    return Agent(FunctionModel(odd_answer), tools=[echo])


@tool
async def slow_note(text: str) -> str:
    """Write a note (not idempotent) once the gate opens.

    Args:
        text: The note.
    """
    calls.append(f"slow_note {text}")
    if gate is not None:
        await gate.wait()
    calls.append(f"slow_note {text} done")
    return "noted"


def slow_note_answer(request: ProviderRequest) -> ProviderResponse | str:
    if request.messages[-1].role == "tool":
        return f"after: {request.messages[-1].content}"
    return tool_call("slow_note", {"text": "x"}, id="call-note")


def slow_note_agent() -> Agent:
    return Agent(FunctionModel(slow_note_answer), tools=[slow_note])


def big_agent() -> Agent:
    """``odd_agent`` without a context window: for messages of megabytes."""
    return Agent(FunctionModel(odd_answer), tools=[echo], context=None)


@tool(requires_approval=True)
def remove(path: str) -> str:
    """Remove a file (a person approves each call).

    Args:
        path: The file.
    """
    calls.append(f"remove {path}")
    return f"removed {path}"


def remove_answer(request: ProviderRequest) -> ProviderResponse | str:
    """Asks to remove /a, then echoes (a second call after the decision), then answers."""
    last = request.messages[-1]
    if last.role == "user":
        return tool_call("remove", {"path": "/a"}, id="call-rm")
    if last.role == "tool" and last.tool_call_id == "call-rm":
        return tool_call("echo", {"text": last.content}, id="call-echo")
    return f"done: {last.content}"


def remove_agent() -> Agent:
    """An agent whose call needs approval, with a call and an answer after the decision."""
    return Agent(FunctionModel(remove_answer), tools=[remove, echo])


ends: list[bool] = []
"""``replaying()`` as each ``on_chat_done`` / ``on_chat_error`` of the logged agents saw it."""


def _logs_its_end(agent: Agent) -> Agent:
    from hookloop.durable import replaying

    def on_end(ctx: object) -> None:
        ends.append(replaying())

    agent.add_hook("on_chat_done", on_end)
    agent.add_hook("on_chat_error", on_end)
    return agent


def remove_agent_logged() -> Agent:
    """:func:`remove_agent`, logging ``replaying()`` at the chat's end."""
    return _logs_its_end(remove_agent())


def refusing_agent_logged() -> Agent:
    """:func:`refusing_agent`, logging ``replaying()`` at the chat's end."""
    return _logs_its_end(refusing_agent())
