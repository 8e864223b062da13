"""The tools and helpers the approval tests share (``test_approval.py``, ``test_approval_log.py``).

Each tool appends what it ran to :data:`ran`; the test modules empty it before each test.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hookloop import Message, ToolCall, ToolMessage, tool
from hookloop.testing import tool_calls

ran: list[str] = []
"""What the tools ran, in order (``"transfer 50 carol"``)."""


@tool(requires_approval=lambda arguments: arguments["amount"] > 100)
def transfer(amount: int, to: str) -> str:
    """Transfer money; more than 100 needs approval."""
    ran.append(f"transfer {amount} {to}")
    return f"sent {amount} to {to}"


@tool(requires_approval=True)
def delete(path: str) -> str:
    """Delete a file; always needs approval."""
    ran.append(f"delete {path}")
    return f"deleted {path}"


@tool
def balance() -> int:
    """The balance."""
    ran.append("balance")
    return 1000


@tool(requires_approval=True)
def pay(amount: int, to: str) -> str:
    """Pay someone; always needs approval.

    Args:
        amount: How much, in cents.
        to: Whom.
    """
    ran.append(f"pay {amount} {to}")
    return f"paid {amount} to {to}"


@tool(name="pay", requires_approval=True)
def pay_amount(amount: int) -> str:
    """Pay an amount; always needs approval.

    Args:
        amount: How much.
    """
    ran.append(f"pay {amount}")
    return f"paid {amount}"


def batch() -> Any:
    """Five calls at once: transfer 500 and both deletes wait, the others run."""
    return tool_calls(
        ToolCall.create("transfer", {"amount": 500, "to": "bob"}, id="c1"),
        ToolCall.create("balance", {}, id="c2"),
        ToolCall.create("delete", {"path": "/tmp/x"}, id="c3"),
        ToolCall.create("transfer", {"amount": 50, "to": "carol"}, id="c4"),
        ToolCall.create("delete", {"path": "/tmp/y"}, id="c5"),
    )


def results(messages: Any) -> list[tuple[str, str, bool]]:
    """Each tool result's call id, content and whether it is an error."""
    return [(m.tool_call_id, m.content, m.is_error) for m in messages if isinstance(m, ToolMessage)]


def answers(messages: Any) -> list[tuple[str, str]]:
    """Each tool result's call id and content."""
    return [(m.tool_call_id, m.content) for m in messages if isinstance(m, ToolMessage)]


def approval_records(side: Sequence[Message]) -> list[dict[str, Any]]:
    """The approval records of a side session's messages, in order (its spend records left out)."""
    records = [json.loads(m.content) for m in side if isinstance(m.content, str)]
    return [r for r in records if r.get("record") == "hookloop.approval"]
