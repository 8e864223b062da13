"""What the adapter tests share on the agent's side: a chat run whole or streamed, and an
agent with one tool."""

from __future__ import annotations

from typing import Any

from hookloop import Agent, AgentEvent, AgentResponse, tool


async def chat(agent: Agent, text: str, *, stream: bool) -> tuple[AgentResponse, list[AgentEvent]]:
    """Run one chat, whole or streamed; returns the response and the streamed events."""
    if not stream:
        return await agent.chat(text), []
    async with agent.chat_stream(text) as events:
        seen = [event async for event in events]
    assert events.response is not None
    return events.response, seen


def weather_agent(model: Any) -> tuple[Agent, list[str]]:
    """An agent with one tool; the list records the cities the tool ran for."""
    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Tell the weather in a city.

        Args:
            city: The city.
        """
        ran.append(city)
        return f"Sunny in {city}"

    return Agent(model, tools=[get_weather], system_prompt="Be brief.", retry=None), ran
