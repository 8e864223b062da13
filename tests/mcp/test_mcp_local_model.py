"""The real local model (SmolLM2-135M under llama.cpp) calling a tool of an MCP server.

The server is written with the official SDK and runs in process; the tool choice is forced,
as in tests/models/test_local.py, so the small model's call is the same on every run.
"""

from __future__ import annotations

from typing import Annotated

import pytest
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from hookloop import Agent, AssistantMessage, ModelSettings, ToolMessage
from hookloop._builtin_tools import calculator as local_calculator
from hookloop.mcp import MCPToolset
from hookloop.models._local import LocalModel


def calculator_server() -> MCPServer:
    server = MCPServer("arithmetic")

    @server.tool(structured_output=False)
    def calculator(
        expression: Annotated[str, Field(pattern=r"^[0-9+\-*/%(). eE]+$", max_length=80)],
    ) -> str:
        """Evaluate an arithmetic expression exactly, e.g. "17 * 23".

        Args:
            expression: Numbers with + - * / // % ** and parentheses.
        """
        return str(local_calculator.function(expression=expression))

    return server


async def test_the_local_model_calls_an_mcp_servers_tool(local_model: LocalModel) -> None:
    agent = Agent(
        local_model,
        plugins=[MCPToolset(calculator_server(), prefix="")],
        settings=ModelSettings(tool_choice="calculator", max_tokens=60),
        max_iterations=2,
    )
    async with agent:
        response = await agent.chat("What is 17 * 23? Use the calculator.")
    call = response.messages[1]
    assert isinstance(call, AssistantMessage)
    assert [c.name for c in call.tool_calls] == ["calculator"]
    expression = call.tool_calls[0].parsed_arguments()["expression"]
    result = response.messages[2]
    assert isinstance(result, ToolMessage)
    assert (result.tool_name, result.is_error) == ("calculator", False)
    assert float(result.content) == pytest.approx(local_calculator.function(expression=expression))
    assert response.iterations == 2
    assert isinstance(response.messages[3], AssistantMessage)
