"""hookloop: an LLM agent runtime whose whole lifecycle is under your control.

Every public name has one public path. The root holds what a program writes every day: the
agent (:class:`Agent`, its answer and stream events), messages, tools (:func:`tool`,
:class:`Scope`, :class:`RunContext`), approvals, the plugin and hook types of the events
every turn fires, :class:`TracePlugin` and :class:`ChatHistory`, and the whole error tree.
The rest lives in its family's package only:

- ``hookloop.models``: the model protocol and the provider adapters (``OpenAIModel``...).
- ``hookloop.context``: context policies (``SlidingWindow``, ``Compaction``), token
  counting and the pure steps over message sequences.
- ``hookloop.hooks``: the hook kernel: the event table, the registry and phases, and the
  contexts of the events that fire outside the plain turn.
- ``hookloop.sessions``: session stores and the recorder, and messages as JSON.
- ``hookloop.memory``: memory stores, the memory tool and memory hooks.
- ``hookloop.retry``: retry strategies and backoff.
- ``hookloop.limits``: model prices and the repeat limit (``UsageLimits`` is here).
- ``hookloop.observe``: OpenTelemetry, the JSON-lines trace and its page.
- ``hookloop.durable``: durable chat turns and their workers.
- ``hookloop.mcp``: MCP servers' tools as hookloop tools, and hookloop tools served over MCP.
- ``hookloop.serve``: agents behind HTTP: AG-UI over SSE, a JSON API, a chat page.
- ``hookloop.guardrails``: guardrails (input, output, tool call, tool result), their
  contexts, ready checks (personal data, length, tool arguments) and their session records.
- ``hookloop.testing``: test doubles for your own agents.

Every other module is private (``_``-prefixed). The model adapters, the trace and
telemetry plugins and the PostgreSQL and Redis stores load their client libraries on first
use, so ``import hookloop`` needs none of the optional extras. See ``docs/`` for the guides.
"""

from ._agent import Agent
from ._approval import (
    ApprovalDecision,
    ApprovalEditError,
    ApprovalMismatchError,
    Defer,
    PendingApproval,
    UnknownApprovalError,
)
from ._builtin_tools import calculator, clock
from ._errors import (
    AuthenticationError,
    BadRequestError,
    ChatCancelledError,
    CircuitOpenError,
    ConcurrentChatError,
    ContextOverflowError,
    CorruptSessionError,
    CorruptStoreError,
    DuplicateMessageIdError,
    DuplicateNameError,
    DurableRecordError,
    GuardrailTripped,
    HistoryError,
    HookloopError,
    HookRegistrationError,
    HookReturnError,
    InvalidMessageError,
    InvalidRangeError,
    InvalidResponseError,
    LocalModelError,
    MaxIterationsError,
    MCPConnectionError,
    MCPServerError,
    MCPTimeoutError,
    MCPToolError,
    MemoryNotFoundError,
    MemoryRequestError,
    MessageNotFoundError,
    MissingExtraError,
    ModelSpecError,
    NotFoundError,
    OutputValidationError,
    OverloadedError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    RunError,
    ScopeNotFoundError,
    ScriptExhaustedError,
    ServerError,
    SessionConflictError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    SessionSchemaError,
    StoreError,
    ToolDefinitionError,
    ToolDisabledError,
    ToolError,
    ToolExecutionError,
    ToolResultLostError,
    ToolValidationError,
    TraceFileError,
    UnknownToolError,
    UsageError,
    UsageLimitExceeded,
    WaitingForApprovalError,
    WorkerFencedError,
)
from ._limits import UsageLimits
from ._messages import (
    AssistantMessage,
    ContentPart,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    Usage,
    UserMessage,
)
from ._output import OUTPUT_TOOL_NAME, OutputMode
from ._publish import publish as _publish
from ._run_context import MissingDepsError, RunContext
from ._stream import ChatStream
from ._stream_events import (
    AgentEvent,
    AgentResponse,
    ChatDone,
    MessageCommitted,
    ModelCallRestarted,
    ModelRetry,
    PartialOutput,
    TextDelta,
    ToolCallDelta,
    ToolCallFinished,
    ToolCallStarted,
)
from ._tools import Scope, ScopeRegistry, Tool, tool
from ._trace import TracePlugin
from ._verdict import Verdict
from ._version import VERSION as _VERSION
from .context._history import ChatHistory
from .hooks._contexts import (
    AfterModelCallContext,
    ChatAbortContext,
    ChatDoneContext,
    ChatErrorContext,
    ChatStartContext,
    MessageContext,
    PreRequestContext,
    PreToolCallContext,
    ResponseContext,
    ToolErrorContext,
    ToolResultContext,
    ToolReturn,
)
from .hooks._dispatch import Disposer
from .hooks._events import HookEvent
from .hooks._host import AgentHost, Plugin
from .models._base import ModelSettings
from .models._provider_errors import ContentBlockedError

__version__ = _VERSION

__all__ = [
    "OUTPUT_TOOL_NAME",
    "AfterModelCallContext",
    "Agent",
    "AgentEvent",
    "AgentHost",
    "AgentResponse",
    "ApprovalDecision",
    "ApprovalEditError",
    "ApprovalMismatchError",
    "AssistantMessage",
    "AuthenticationError",
    "BadRequestError",
    "ChatAbortContext",
    "ChatCancelledError",
    "ChatDone",
    "ChatDoneContext",
    "ChatErrorContext",
    "ChatHistory",
    "ChatStartContext",
    "ChatStream",
    "CircuitOpenError",
    "ConcurrentChatError",
    "ContentBlockedError",
    "ContentPart",
    "ContextOverflowError",
    "CorruptSessionError",
    "CorruptStoreError",
    "Defer",
    "Disposer",
    "DuplicateMessageIdError",
    "DuplicateNameError",
    "DurableRecordError",
    "GuardrailTripped",
    "HistoryError",
    "HookEvent",
    "HookRegistrationError",
    "HookReturnError",
    "HookloopError",
    "ImagePart",
    "InvalidMessageError",
    "InvalidRangeError",
    "InvalidResponseError",
    "LocalModelError",
    "MCPConnectionError",
    "MCPServerError",
    "MCPTimeoutError",
    "MCPToolError",
    "MaxIterationsError",
    "MemoryNotFoundError",
    "MemoryRequestError",
    "Message",
    "MessageCommitted",
    "MessageContext",
    "MessageNotFoundError",
    "MissingDepsError",
    "MissingExtraError",
    "ModelCallRestarted",
    "ModelRetry",
    "ModelSettings",
    "ModelSpecError",
    "NotFoundError",
    "OutputMode",
    "OutputValidationError",
    "OverloadedError",
    "PartialOutput",
    "PendingApproval",
    "Plugin",
    "PreRequestContext",
    "PreToolCallContext",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "ResponseContext",
    "RunContext",
    "RunError",
    "Scope",
    "ScopeNotFoundError",
    "ScopeRegistry",
    "ScriptExhaustedError",
    "ServerError",
    "SessionConflictError",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionSchemaError",
    "StoreError",
    "SystemMessage",
    "TextDelta",
    "TextPart",
    "Tool",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolDefinitionError",
    "ToolDisabledError",
    "ToolError",
    "ToolErrorContext",
    "ToolExecutionError",
    "ToolMessage",
    "ToolResultContext",
    "ToolResultLostError",
    "ToolReturn",
    "ToolValidationError",
    "TraceFileError",
    "TracePlugin",
    "UnknownApprovalError",
    "UnknownToolError",
    "Usage",
    "UsageError",
    "UsageLimitExceeded",
    "UsageLimits",
    "UserMessage",
    "Verdict",
    "WaitingForApprovalError",
    "WorkerFencedError",
    "__version__",
    "calculator",
    "clock",
    "tool",
]

_publish(globals(), __all__)
