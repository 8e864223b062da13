"""The 0.1 module paths: nothing of ours uses them, and each still offers all of its names.

The lists below are the ``__all__`` of every public module of 0.1 (release commit
573b1db), frozen: an old path must keep offering each of its names, by name and by
``import *``, for the one release it is deprecated.
"""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from hookloop._deprecated import MOVED_MODULES
from tests._old_paths import old_paths_forgotten

ROOT = Path(__file__).resolve().parent.parent

ALL_IN_0_1: dict[str, list[str]] = {
    "hookloop": [
        "DEFAULT_SCOPE",
        "EVENT_TABLE",
        "OVERFLOW_MARKERS",
        "TRANSIENT_ERRORS",
        "AfterModelCallContext",
        "Agent",
        "AgentEvent",
        "AgentResponse",
        "AssistantMessage",
        "AuthenticationError",
        "Backoff",
        "BackoffKind",
        "BadRequestError",
        "ChatAbortContext",
        "ChatCancelledError",
        "ChatDone",
        "ChatDoneContext",
        "ChatErrorContext",
        "ChatStartContext",
        "ChatStream",
        "CircuitBreaker",
        "CircuitOpenError",
        "ConcurrentChatError",
        "ContentPart",
        "ContextBeforeRequestResult",
        "ContextHooks",
        "ContextOnErrorResult",
        "ContextOverflowError",
        "CorruptSessionError",
        "CorruptStoreError",
        "Default",
        "DefaultRetryStrategy",
        "DelegationContext",
        "Disposer",
        "DuplicateMessageIdError",
        "DuplicateNameError",
        "EventSpec",
        "FallbackStrategy",
        "FinishReason",
        "HistoryError",
        "HistoryReplacement",
        "HookEvent",
        "HookHost",
        "HookRegistrationError",
        "HookRegistry",
        "HookReturnError",
        "HookloopError",
        "ImagePart",
        "InvalidMessageError",
        "InvalidRangeError",
        "InvalidResponseError",
        "JitterKind",
        "MaxIterationsError",
        "MemoryNotFoundError",
        "MemoryRequestError",
        "MemoryWriteContext",
        "Message",
        "MessageCommitted",
        "MessageContext",
        "MessageNotFoundError",
        "MissingExtraError",
        "Model",
        "ModelRetry",
        "ModelRetryStrategy",
        "ModelSettings",
        "NotFoundError",
        "OverloadedError",
        "Phase",
        "Plugin",
        "PreCompressContext",
        "PreRequestContext",
        "PreToolCallContext",
        "ProviderConnectionError",
        "ProviderError",
        "ProviderRequest",
        "ProviderResponse",
        "ProviderTimeoutError",
        "RateLimitError",
        "ResponseAccumulator",
        "ResponseContext",
        "RetryAttempt",
        "RetryDecision",
        "RunError",
        "Scope",
        "ScopeContext",
        "ScopeNotFoundError",
        "ScopeRegistry",
        "ScriptExhaustedError",
        "ServerError",
        "SessionConflictError",
        "SessionError",
        "SessionExistsError",
        "SessionNotFoundError",
        "SessionSchemaError",
        "SessionSwitchContext",
        "Sleep",
        "StoreError",
        "StreamEnd",
        "StreamPart",
        "SubAgentEventContext",
        "SystemMessage",
        "TextDelta",
        "TextPart",
        "Tool",
        "ToolCall",
        "ToolCallDelta",
        "ToolCallFinished",
        "ToolCallStarted",
        "ToolDefinition",
        "ToolDefinitionError",
        "ToolDisabledError",
        "ToolError",
        "ToolErrorContext",
        "ToolExecutionError",
        "ToolMessage",
        "ToolResultContext",
        "ToolRetryStrategy",
        "ToolReturn",
        "ToolValidationError",
        "TraceFormat",
        "TracePlugin",
        "UnknownToolError",
        "Usage",
        "UsageError",
        "UserMessage",
        "__version__",
        "apply_jitter",
        "attach_once",
        "backoff_delay",
        "dump_messages",
        "is_context_overflow",
        "load_messages",
        "messages_from_json",
        "messages_to_json",
        "new_id",
        "retry_after_seconds",
        "tool",
    ],
    "hookloop.agent": ["DEFAULT_SCOPE", "Agent", "ChatStream", "Default"],
    "hookloop.cli": ["main"],
    "hookloop.context": [
        "IMAGE_TOKENS",
        "MESSAGE_OVERHEAD",
        "MISSING_RESULT_TEXT",
        "REPLY_PRIMING",
        "SUMMARY_HEADER",
        "SUMMARY_PROMPT",
        "CachingCounter",
        "Calibration",
        "ChatHistory",
        "Compaction",
        "EstimateCounter",
        "SlidingWindow",
        "TiktokenCounter",
        "TokenCounter",
        "count_overhead",
        "count_request",
        "counter_for_model",
        "cut_to_fit",
        "encoding_for_model",
        "group_units",
        "repair",
        "trim_to_budget",
        "truncate_tool_results",
    ],
    "hookloop.context.history": ["ChatHistory"],
    "hookloop.context.policies": [
        "SUMMARY_HEADER",
        "SUMMARY_PROMPT",
        "Compaction",
        "SlidingWindow",
    ],
    "hookloop.context.repair": ["MISSING_RESULT_TEXT", "repair"],
    "hookloop.context.tokens": [
        "IMAGE_TOKENS",
        "MESSAGE_OVERHEAD",
        "REPLY_PRIMING",
        "CachingCounter",
        "Calibration",
        "EstimateCounter",
        "TiktokenCounter",
        "TokenCounter",
        "count_overhead",
        "count_request",
        "counter_for_model",
        "encoding_for_model",
    ],
    "hookloop.context.trim": [
        "cut_to_fit",
        "group_units",
        "trim_to_budget",
        "truncate_tool_results",
    ],
    "hookloop.context_hooks": [
        "OVERFLOW_MARKERS",
        "ContextBeforeRequestResult",
        "ContextHooks",
        "ContextOnErrorResult",
        "is_context_overflow",
    ],
    "hookloop.errors": [
        "AuthenticationError",
        "BadRequestError",
        "ChatCancelledError",
        "CircuitOpenError",
        "ConcurrentChatError",
        "ContextOverflowError",
        "CorruptSessionError",
        "CorruptStoreError",
        "DuplicateMessageIdError",
        "DuplicateNameError",
        "HistoryError",
        "HookRegistrationError",
        "HookReturnError",
        "HookloopError",
        "InvalidMessageError",
        "InvalidRangeError",
        "InvalidResponseError",
        "MaxIterationsError",
        "MemoryNotFoundError",
        "MemoryRequestError",
        "MessageNotFoundError",
        "MissingExtraError",
        "NotFoundError",
        "OverloadedError",
        "ProviderConnectionError",
        "ProviderError",
        "ProviderTimeoutError",
        "RateLimitError",
        "RetryAttempt",
        "RunError",
        "ScopeNotFoundError",
        "ScriptExhaustedError",
        "ServerError",
        "SessionConflictError",
        "SessionError",
        "SessionExistsError",
        "SessionNotFoundError",
        "SessionSchemaError",
        "StoreError",
        "ToolDefinitionError",
        "ToolDisabledError",
        "ToolError",
        "ToolExecutionError",
        "ToolValidationError",
        "UnknownToolError",
        "UsageError",
    ],
    "hookloop.events": [
        "AgentEvent",
        "AgentResponse",
        "ChatDone",
        "MessageCommitted",
        "ModelRetry",
        "TextDelta",
        "ToolCallDelta",
        "ToolCallFinished",
        "ToolCallStarted",
    ],
    "hookloop.hooks": [
        "EVENT_TABLE",
        "AfterModelCallContext",
        "ChatAbortContext",
        "ChatDoneContext",
        "ChatErrorContext",
        "ChatStartContext",
        "DelegationContext",
        "Disposer",
        "EventSpec",
        "HistoryReplacement",
        "HookEvent",
        "HookHost",
        "HookRegistry",
        "MemoryWriteContext",
        "MessageContext",
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
        "attach_once",
    ],
    "hookloop.memory": [
        "MEMORY_ACTIONS",
        "MEMORY_HOOK_NAMES",
        "MEMORY_TYPES",
        "MemoryAction",
        "MemoryEntry",
        "MemoryHooks",
        "MemoryHooksPlugin",
        "MemoryStore",
        "MemoryTarget",
        "MemoryType",
        "PostgresMemoryStore",
        "ProviderMemoryStore",
        "RedisMemoryStore",
        "SQLiteMemoryStore",
        "implements_memory_hooks",
        "is_memory_provider",
        "memory_tool",
    ],
    "hookloop.memory.base": [
        "MEMORY_ACTIONS",
        "MEMORY_TYPES",
        "MemoryAction",
        "MemoryEntry",
        "MemoryStore",
        "MemoryTarget",
        "MemoryType",
    ],
    "hookloop.memory.hooks": [
        "MEMORY_HOOK_NAMES",
        "MemoryHooks",
        "MemoryHooksPlugin",
        "implements_memory_hooks",
    ],
    "hookloop.memory.postgres": ["PostgresMemoryStore"],
    "hookloop.memory.provider": ["ProviderMemoryStore", "is_memory_provider"],
    "hookloop.memory.redis": ["RedisMemoryStore"],
    "hookloop.memory.sqlite": ["SQLiteMemoryStore"],
    "hookloop.memory.tool": ["memory_tool"],
    "hookloop.messages": [
        "AssistantMessage",
        "ContentPart",
        "ImagePart",
        "Message",
        "SystemMessage",
        "TextPart",
        "ToolCall",
        "ToolMessage",
        "Usage",
        "UserMessage",
        "dump_messages",
        "load_messages",
        "messages_from_json",
        "messages_to_json",
        "new_id",
    ],
    "hookloop.models": [
        "AnthropicModel",
        "FinishReason",
        "LocalModel",
        "Model",
        "ModelSettings",
        "OpenAIModel",
        "OpenAIResponsesModel",
        "ProviderRequest",
        "ProviderResponse",
        "ResponseAccumulator",
        "StreamEnd",
        "StreamPart",
        "TextDelta",
        "ToolCallDelta",
        "ToolDefinition",
        "model_from_spec",
    ],
    "hookloop.models.anthropic": [
        "ANTHROPIC_URL",
        "DEFAULT_MAX_TOKENS",
        "AnthropicModel",
        "anthropic_messages",
    ],
    "hookloop.models.base": [
        "FinishReason",
        "Model",
        "ModelSettings",
        "ProviderRequest",
        "ProviderResponse",
        "ResponseAccumulator",
        "StreamEnd",
        "StreamPart",
        "TextDelta",
        "ToolCallDelta",
        "ToolDefinition",
    ],
    "hookloop.models.local": [
        "DEFAULT_GGUF",
        "LocalModel",
        "LocalModelError",
        "default_model_path",
    ],
    "hookloop.models.openai": [
        "OPENAI_URL",
        "OpenAIModel",
        "image_url",
        "openai_client",
        "openai_messages",
        "openai_tools",
    ],
    "hookloop.models.openai_responses": ["OpenAIResponsesModel", "responses_input"],
    "hookloop.models.spec": ["ModelSpecError", "model_from_spec"],
    "hookloop.models.testing": [
        "FunctionModel",
        "ScriptStep",
        "ScriptedModel",
        "text_response",
        "tool_call",
        "tool_calls",
    ],
    "hookloop.retry": [
        "TRANSIENT_ERRORS",
        "Backoff",
        "BackoffKind",
        "CircuitBreaker",
        "DefaultRetryStrategy",
        "FallbackStrategy",
        "JitterKind",
        "ModelRetryStrategy",
        "RetryDecision",
        "Sleep",
        "ToolRetryStrategy",
        "apply_jitter",
        "backoff_delay",
        "retry_after_seconds",
    ],
    "hookloop.retry.backoff": [
        "Backoff",
        "BackoffKind",
        "JitterKind",
        "apply_jitter",
        "backoff_delay",
    ],
    "hookloop.retry.default": ["TRANSIENT_ERRORS", "DefaultRetryStrategy"],
    "hookloop.retry.fallback": ["CircuitBreaker", "FallbackStrategy"],
    "hookloop.retry.hints": ["retry_after_seconds"],
    "hookloop.retry.model": ["ModelRetryStrategy", "RetryDecision", "Sleep"],
    "hookloop.retry.tools": ["ToolRetryStrategy"],
    "hookloop.sessions": [
        "EXPORT_FORMAT",
        "MESSAGE_FORMAT",
        "SCHEMA_VERSION",
        "CorruptSessionError",
        "ExportedMessage",
        "ExportedSession",
        "PostgresSessionStore",
        "RedisSessionStore",
        "Retention",
        "SQLiteSessionStore",
        "SessionConflictError",
        "SessionError",
        "SessionExistsError",
        "SessionInfo",
        "SessionNotFoundError",
        "SessionRecorder",
        "SessionSchemaError",
        "SessionStore",
        "StoredMessage",
        "UnreadableMessage",
    ],
    "hookloop.toolbox": ["BUILTIN_TOOLS", "calculator", "clock"],
    "hookloop.tools": ["Scope", "ScopeRegistry", "Tool", "tool"],
    "hookloop.trace": ["TracePlugin"],
}
"""The ``__all__`` of each public module of 0.1, in its order."""

_OLD_PATH = re.compile(
    r"(?<![\w.])("
    + "|".join(re.escape(old) for old in sorted(MOVED_MODULES, key=len, reverse=True))
    + r")(?!\w)"
)


@pytest.fixture(autouse=True)
def _no_old_path_left_behind() -> Iterator[None]:
    with old_paths_forgotten():
        yield


def _ours() -> Iterator[Path]:
    """Every text the project ships besides the migration guide and the old-path tables."""
    tables = {"_deprecated.py", "_old_all.py"}
    yield from (path for path in (ROOT / "src").rglob("*.py") if path.name not in tables)
    yield from (path for path in (ROOT / "docs").glob("*.md") if path.name != "migration.md")
    for folder in ("examples", "bench"):
        yield from (path for path in (ROOT / folder).rglob("*") if path.suffix in (".py", ".md"))
    yield ROOT / "README.md"


def _is_public_name(dotted: str) -> bool:
    # ``hookloop.context.repair`` was a module and is the function ``repair`` now.
    package, _, name = dotted.rpartition(".")
    return name in importlib.import_module(package).__all__


def test_no_docstring_doc_example_or_benchmark_uses_an_old_module_path() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {match}"
        for path in _ours()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        for match in _OLD_PATH.findall(line)
        if not _is_public_name(match)
    ]
    assert found == []


def test_the_doctests_of_the_package_pass_on_their_own() -> None:
    # Run alone (pytest's warnings are errors), a docstring on an old path failed.
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:randomly",
            "-p",
            "no:cacheprovider",
            "src",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]


@pytest.mark.parametrize("module", sorted(ALL_IN_0_1))
def test_every_name_of_a_0_1_module_is_there_by_name_and_by_star_import(module: str) -> None:
    names = ALL_IN_0_1[module]
    namespace: dict[str, object] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        imported = importlib.import_module(module)
        exec(f"from {module} import *", namespace)
        by_name = {name: getattr(imported, name) for name in names}
    if module in MOVED_MODULES:
        assert imported.__all__ == names  # what ``import *`` gave in 0.1, no more
    else:
        assert set(names) <= set(imported.__all__)
    assert {name: namespace[name] for name in names} == by_name
    root = importlib.import_module("hookloop")
    for name, value in by_name.items():
        # The same object as at its public path today.
        assert value is getattr(root, name, value), f"{module}.{name}"


def test_names_that_moved_to_another_module_are_still_at_the_old_path() -> None:
    import hookloop

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from hookloop.context_hooks import OVERFLOW_MARKERS, is_context_overflow

    assert OVERFLOW_MARKERS is hookloop.models.OVERFLOW_MARKERS
    assert is_context_overflow is hookloop.models.is_context_overflow


def test_the_old_path_tests_leave_no_old_module_behind() -> None:
    code = f"""
import sys, pytest

class Check:
    def pytest_sessionfinish(self):
        print("\\nLEFT", sorted(m for m in sys.modules if m in {sorted(MOVED_MODULES)!r}))

code = pytest.main(
    ["-q", "-p", "no:randomly", "-p", "no:cacheprovider", "-k", "old",
     "tests/test_public_surface.py"],
    plugins=[Check()],
)
sys.exit(int(code))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert "LEFT []" in done.stdout.splitlines()


def _python_m(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_python_m_of_the_old_cli_path_warns_and_runs_the_command(tmp_path: Path) -> None:
    done = _python_m("hookloop.cli", "--help", cwd=tmp_path)
    now = _python_m("hookloop", "--help", cwd=tmp_path)

    assert (done.returncode, done.stdout) == (0, now.stdout)
    assert now.stdout.startswith("usage: hookloop ")
    assert done.stderr == (
        "<hookloop.cli>:2: DeprecationWarning: hookloop.cli is deprecated: use the `hookloop` "
        "command or `python -m hookloop`; the old path goes in the next release "
        "(see docs/migration.md)\n"
    )
    wrong = _python_m("hookloop.cli", "nope", cwd=tmp_path)
    assert wrong.returncode == 2  # the command's own usage error, after the warning
    assert wrong.stderr.splitlines()[-1].startswith("hookloop: error: argument COMMAND")


def test_python_m_of_another_old_path_warns_and_does_nothing_else(tmp_path: Path) -> None:
    done = _python_m("hookloop.agent", cwd=tmp_path)

    assert (done.returncode, done.stdout) == (0, "")
    assert done.stderr == (
        "<hookloop.agent>:2: DeprecationWarning: hookloop.agent is deprecated: import from "
        "hookloop; the old path goes in the next release (see docs/migration.md)\n"
    )
