"""Test doubles for your own agents: no network, no keys, no waiting, exact control.

:class:`ScriptedModel` answers from a list you give it, one step per model call, and records
every request it received. :class:`FunctionModel` answers with a function of the request.
:class:`FakeClock` is a clock and a sleep that never wait, for retry strategies and stores.
:func:`text_response`, :func:`tool_call` and :func:`tool_calls` make a script's answers.

Example:
    >>> from hookloop.testing import ScriptedModel, tool_call
    >>> model = ScriptedModel([tool_call("add", {"a": 1, "b": 2}), "The sum is 3."])
"""

from ._publish import publish as _publish
from ._testing import (
    FakeClock,
    FunctionModel,
    ScriptedModel,
    ScriptStep,
    text_response,
    tool_call,
    tool_calls,
)

__all__ = [
    "FakeClock",
    "FunctionModel",
    "ScriptStep",
    "ScriptedModel",
    "text_response",
    "tool_call",
    "tool_calls",
]

_publish(globals(), __all__)
