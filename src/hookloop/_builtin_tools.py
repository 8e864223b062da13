"""Ready-made tools: the ones the ``hookloop`` command offers a model by default.

Example:
    >>> calculator.function(expression="17 * 23")
    391
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import Field

from ._tools import Tool, tool

__all__ = ["BUILTIN_TOOLS", "calculator", "clock"]

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
_MAX_BITS = 13_000  # about 4,000 digits: Python will not print a longer int, and a much
# longer one (((9**999)**999)**999) would hold the process for minutes before that


Expression = Annotated[str, Field(pattern=r"^[0-9+\-*/%(). eE]{1,80}$", max_length=80)]
"""Arithmetic only. The pattern also bounds what a grammar-constrained local model can write
into the argument, so a small model cannot ramble inside the string: the length is in the
pattern because llama.cpp's grammar of a string with a pattern ignores ``maxLength``."""


# The description holds no example expression: a small model copies one into calls it
# should not make (SmolLM2-135M answered "Hello! What can you do?" with the example's call).
# Its second sentence kept that model from calling it for "Thanks!".
@tool(run_in_thread=False)
def calculator(expression: Expression) -> int | float:
    """Evaluate an arithmetic expression exactly. Only for a calculation the user asks for.

    Args:
        expression: Numbers with + - * / // % ** and parentheses.
    """
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc
    value: int | float = _evaluate(tree.body)
    return value


def _evaluate(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and _too_large(left, right):
            raise ValueError("the result is too large (more than 4,000 digits)")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ValueError(f"unsupported expression: {ast.unparse(node)!r}")


def _too_large(base: Any, exponent: Any) -> bool:
    if abs(base) <= 1 or exponent <= 0:
        return False
    return bool(exponent * math.log2(abs(base)) > _MAX_BITS)


@tool(run_in_thread=False)
def clock() -> str:
    """The current date and time in UTC, ISO 8601."""
    return datetime.now(UTC).isoformat(timespec="seconds")


BUILTIN_TOOLS: dict[str, Tool] = {"calculator": calculator, "clock": clock}
"""The tools the command line offers by name."""
