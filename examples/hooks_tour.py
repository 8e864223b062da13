"""The hookloop loop, step by step, on the scripted test model (no network, no keys).

Run it with ``python examples/hooks_tour.py``. Every hook event is printed as a timeline by
``TracePlugin``; a few hooks of our own show what interceptors can do: a permission check that
short-circuits a tool call, and a redaction of a tool's result.
"""

from __future__ import annotations

import asyncio

from hookloop import (
    Agent,
    ChatCancelledError,
    PreToolCallContext,
    Scope,
    TextDelta,
    ToolCall,
    ToolResultContext,
    ToolReturn,
    TracePlugin,
    tool,
)
from hookloop.testing import FunctionModel, ScriptedModel, tool_call, tool_calls


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers.

    Args:
        a: The first factor.
        b: The second factor.
    """
    return a * b


@tool
async def weather(city: str) -> dict[str, object]:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return {"reporter_email": "ops@example.com", "city": city, "temperature_c": 18}


@tool
def delete_everything() -> str:
    """Delete all the user's files."""
    return "deleted"


def section(title: str) -> None:
    print(f"\n=== {title} " + "=" * (70 - len(title)))


async def main() -> None:
    model = ScriptedModel(
        [
            # Iteration 0: arguments of the wrong type. The model sees a validation error.
            tool_call("multiply", '{"a": "seventeen", "b": 23}'),
            # Iteration 1: two calls at once; they run concurrently, results commit in order.
            tool_calls(
                ToolCall(name="multiply", arguments='{"a": 17, "b": 23}'),
                ToolCall(name="weather", arguments='{"city": "Paris"}'),
            ),
            # Iteration 2: a dangerous tool; our permission hook refuses it.
            tool_call("delete_everything", {}),
            "17 x 23 = 391, and Paris is clear at 18 °C. I did not delete anything.",
            # The second chat, streamed in small pieces.
            "You are welcome!",
        ],
        chunk_size=6,
    )
    agent = Agent(
        model,
        name="demo",
        system_prompt="You are a careful assistant.",
        tools=[multiply, delete_everything],
    )
    agent.use(TracePlugin())

    @agent.hook("pre_tool_call")
    def permission_check(ctx: PreToolCallContext) -> PermissionError | None:
        if ctx.tool.name == "delete_everything":
            return PermissionError("the user did not allow deleting files")
        return None

    @agent.hook("on_tool_call_result")
    def redact_emails(ctx: ToolResultContext) -> ToolReturn | None:
        if isinstance(ctx.result, dict) and "reporter_email" in ctx.result:
            return ToolReturn({**ctx.result, "reporter_email": "<redacted>"})
        return None

    section("registering a scope fires on_scope_register")
    agent.scopes.register(Scope("weather", tools=[weather], context="Temperatures are in °C."))

    section("chat 1: a validation error, two parallel calls, a refused call")
    response = await agent.chat("What is 17 * 23, and how is the weather in Paris?")
    print(f"\nanswer: {response.text}")

    section("chat 2: the same loop, streamed")
    async with agent.chat_stream("Thanks!") as stream:
        async for event in stream:
            if isinstance(event, TextDelta):
                print(f"{'':10}token      {event.text!r}")

    section("chat 3: cancelled while the model is thinking")
    thinking = asyncio.Event()

    async def slow_model(request: object) -> str:
        thinking.set()
        await asyncio.Event().wait()  # never answers
        return "unreachable"

    agent.model = FunctionModel(slow_model, name="slow")
    chat = asyncio.create_task(agent.chat("Think about it forever."))
    await thinking.wait()
    agent.cancel("the user pressed stop")
    try:
        await chat
    except ChatCancelledError as exc:
        print(f"\nchat() raised ChatCancelledError: {exc}")

    section("the history the next chat will send")
    for message in agent.messages:
        text = getattr(message, "content", "")
        calls = getattr(message, "tool_calls", ())
        shown = ", ".join(f"{c.name}(...)" for c in calls) if calls else str(text)[:60]
        print(f"  {message.role:<9} {shown}")


if __name__ == "__main__":
    asyncio.run(main())
