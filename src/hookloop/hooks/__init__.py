"""The hook kernel: events and their contexts, the registry and dispatch, the plugin API.

- ``_events.py``: every event's name and its row of :data:`EVENT_TABLE`; ``_contexts.py``:
  the context object each event's handlers receive.
- ``_dispatch.py``: the registry of handlers, the one function that calls them, and the
  :class:`Phase` built-in plugins sit in.
- ``_host.py``: :class:`Plugin` and what a plugin may use of an agent, ``add_hook``'s typed
  overloads, and the one-agent guard :func:`attach_once`.

The full contract, with the firing order drawn once, is in ``docs/hooks.md``. Every name
here is also importable from ``hookloop``.
"""

from ._contexts import (
    AfterModelCallContext,
    ApprovalDecisionContext,
    ApprovalRequestContext,
    BackoffWaitContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    CompactionContext,
    DelegationContext,
    FirstChunkContext,
    HistoryReplacement,
    MemoryWriteContext,
    MessageContext,
    OutputReturn,
    OutputValidationErrorContext,
    PreCompressContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    ScopeContext,
    SessionSwitchContext,
    SubAgentEventContext,
    ToolErrorContext,
    ToolResultContext,
    ToolReturn,
    TrimContext,
)
from ._dispatch import Disposer, HookRegistry, Phase
from ._events import EVENT_TABLE, EventSpec, HookEvent, TraceFormat
from ._host import AgentHost, HookHost, Plugin, attach_once

__all__ = [
    "EVENT_TABLE",
    "AfterModelCallContext",
    "AgentHost",
    "ApprovalDecisionContext",
    "ApprovalRequestContext",
    "BackoffWaitContext",
    "ChatAbortContext",
    "ChatDoneContext",
    "ChatErrorContext",
    "ChatStartContext",
    "CompactionContext",
    "DelegationContext",
    "Disposer",
    "EventSpec",
    "FirstChunkContext",
    "HistoryReplacement",
    "HookEvent",
    "HookHost",
    "HookRegistry",
    "MemoryWriteContext",
    "MessageContext",
    "OutputReturn",
    "OutputValidationErrorContext",
    "Phase",
    "Plugin",
    "PreCompressContext",
    "PreRequestContext",
    "PreToolCallContext",
    "ResponseContext",
    "ScopeContext",
    "SessionSwitchContext",
    "SubAgentEventContext",
    "ToolErrorContext",
    "ToolResultContext",
    "ToolReturn",
    "TraceFormat",
    "TrimContext",
    "attach_once",
]
