"""Guardrails: checks that stop a chat on bad input or output, as rows of the event table.

A guardrail checks the user's message before the model sees it (or beside the first model
call), the final answer (and typed output) before it is committed, a tool call before it
runs, or a tool result before the model sees it, and returns a :class:`~hookloop.Verdict`.
A block ends the chat with :class:`~hookloop.GuardrailTripped`; a guardrail that fails is a
trip, never a pass. ``agent.use(input_guardrail(check))`` (or ``Agent(plugins=[...])``) adds
one; ``agent.add_hook("on_input_guardrail", handler)`` is the same thing underneath.

- The registration API: :func:`input_guardrail`, :func:`output_guardrail`,
  :func:`tool_call_guardrail`, :func:`tool_result_guardrail` (also decorators) and the
  :class:`Guardrail` plugin they make; an :class:`~hookloop.Agent` can be the check (a
  judge, asked with :data:`JUDGE_PROMPT`).
- The contexts a check receives: :class:`InputGuardrailContext`,
  :class:`OutputGuardrailContext`, :class:`ToolCallGuardrailContext`,
  :class:`ToolResultGuardrailContext`; and :class:`GuardrailVerdictContext`, which
  ``on_guardrail_verdict`` observers see for every verdict that stopped or changed something.
- Ready checks that need no download: :func:`pii` (with :func:`find_pii`),
  :func:`max_length`, :func:`denied_arguments`.
- The session log: :func:`read_verdicts` reads the verdicts a session recorder kept.

See ``docs/guardrails.md``.
"""

from .._guardrail_log import VerdictRecord, read_verdicts
from .._publish import publish as _publish
from .._verdict import GuardrailPosition, VerdictAction
from ..hooks._contexts import (
    GuardrailVerdictContext,
    InputGuardrailContext,
    OutputGuardrailContext,
    ToolCallGuardrailContext,
    ToolResultGuardrailContext,
)
from ._api import (
    JUDGE_PROMPT,
    Check,
    Guardrail,
    input_guardrail,
    output_guardrail,
    tool_call_guardrail,
    tool_result_guardrail,
)
from ._ready import PII_KINDS, PIIKind, denied_arguments, find_pii, max_length, pii

__all__ = [
    "JUDGE_PROMPT",
    "PII_KINDS",
    "Check",
    "Guardrail",
    "GuardrailPosition",
    "GuardrailVerdictContext",
    "InputGuardrailContext",
    "OutputGuardrailContext",
    "PIIKind",
    "ToolCallGuardrailContext",
    "ToolResultGuardrailContext",
    "VerdictAction",
    "VerdictRecord",
    "denied_arguments",
    "find_pii",
    "input_guardrail",
    "max_length",
    "output_guardrail",
    "pii",
    "read_verdicts",
    "tool_call_guardrail",
    "tool_result_guardrail",
]

_publish(globals(), __all__)
