"""hookloop tools for ``hookloop mcp serve`` in the tests: a list, and an agent holding them."""

from __future__ import annotations

from hookloop import Agent, Scope, tool
from hookloop._builtin_tools import calculator
from hookloop.testing import ScriptedModel


@tool
def shout(text: str, times: int = 1) -> str:
    """Say it louder.

    Args:
        text: What to say.
        times: How many exclamation marks.
    """
    return text.upper() + "!" * times


@tool
def profile(name: str) -> dict[str, object]:
    """A person's profile, as a JSON object."""
    return {"name": name, "letters": len(name)}


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("the disk is on fire")


TOOLS = [calculator, shout, profile, broken]

agent = Agent(ScriptedModel([]), tools=[calculator, shout])
agent.scopes.register(Scope("people", tools=[profile]))

extras = {"on": False}


@tool
def unlock() -> str:
    """Offer the extra tools."""
    extras["on"] = True
    return "unlocked"


@tool
def handshake() -> str:
    """An extra tool."""
    return "shaken"


growing = Agent(ScriptedModel([]), tools=[unlock])  # its list grows when unlock() runs
growing.scopes.register(Scope("extras", tools=[handshake], enabled=lambda: extras["on"]))
