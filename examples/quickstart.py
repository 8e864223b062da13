from hookloop import Agent, TracePlugin, tool
from hookloop.testing import ScriptedModel, tool_call


@tool
def multiply(a: float, b: float) -> float:
    """Multiply two numbers."""
    return a * b


model = ScriptedModel([tool_call("multiply", {"a": 17, "b": 23}), "17 x 23 = 391"])
agent = Agent(model, tools=[multiply], plugins=[TracePlugin()])
agent.add_hook("pre_tool_call", lambda ctx: print(f"          (about to run {ctx.tool.name})"))
print(agent.chat_sync("What is 17 * 23?").text)
