"""The hook kernel: events and their contexts, the registry and dispatch, the plugin API.

- ``_events.py``: every event's name and its row of :data:`EVENT_TABLE`; ``_contexts.py``:
  the context object each event's handlers receive.
- ``_dispatch.py``: the registry of handlers, the one function that calls them, and the
  :class:`Phase` built-in plugins sit in.
- ``_host.py``: :class:`~hookloop.Plugin` and what a plugin may use of an agent
  (:class:`~hookloop.AgentHost`), ``add_hook``'s typed overloads, and the one-agent guard
  :func:`attach_once`.

The names a program writes every day are at the root: :class:`~hookloop.Plugin`,
:class:`~hookloop.AgentHost`, :data:`~hookloop.HookEvent`, :class:`~hookloop.Disposer`, and
the contexts of the events of the plain turn (the chat's start and end, ``on_message``,
the model call's ``pre_request``, ``on_response`` and ``after_model_call``, the tool call's
``pre_tool_call``, ``on_tool_call_result`` and ``on_tool_call_error``, with
:class:`~hookloop.ToolReturn`). Here are the kernel's own types and the contexts of the
events that fire outside the plain turn: approvals, context policies, retries' waits,
scopes, memory, delegation, sessions and typed output.

The full contract, with the firing order drawn once, is in ``docs/hooks.md``.
"""

from .._publish import publish as _publish
from ._contexts import (
    ApprovalDecisionContext,
    ApprovalRequestContext,
    BackoffWaitContext,
    CompactionContext,
    DelegationContext,
    FirstChunkContext,
    HistoryReplacement,
    MemoryWriteContext,
    OutputReturn,
    OutputValidationErrorContext,
    PreCompressContext,
    ScopeContext,
    SessionSwitchContext,
    SubAgentEventContext,
    TrimContext,
)
from ._dispatch import HookRegistry, Phase
from ._events import EVENT_TABLE, EventSpec, TraceFormat
from ._host import HookHost, attach_once

__all__ = [
    "EVENT_TABLE",
    "ApprovalDecisionContext",
    "ApprovalRequestContext",
    "BackoffWaitContext",
    "CompactionContext",
    "DelegationContext",
    "EventSpec",
    "FirstChunkContext",
    "HistoryReplacement",
    "HookHost",
    "HookRegistry",
    "MemoryWriteContext",
    "OutputReturn",
    "OutputValidationErrorContext",
    "Phase",
    "PreCompressContext",
    "ScopeContext",
    "SessionSwitchContext",
    "SubAgentEventContext",
    "TraceFormat",
    "TrimContext",
    "attach_once",
]

_publish(globals(), __all__)
