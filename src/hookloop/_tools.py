"""Tools the model can call, and scopes that group them.

A :class:`Tool` is built from a typed function with :func:`tool`: its name, description and
JSON schema come from the signature and the Google-style docstring, and the model's
arguments are validated with pydantic before the function runs. A :class:`Scope` groups tools
with a piece of context for the prompt; the :class:`ScopeRegistry` (``agent.scopes``) holds
the scopes of one agent.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import re
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, get_type_hints, overload

import pydantic
import pydantic_core
from pydantic_core import SchemaValidator

from ._docstrings import parse_docstring
from ._errors import (
    DuplicateNameError,
    ScopeNotFoundError,
    ToolDefinitionError,
    ToolValidationError,
)
from ._messages import ToolCall
from ._run_context import context_kind
from .hooks._dispatch import is_async_callable
from .models._base import ToolDefinition

if TYPE_CHECKING:
    from .hooks._dispatch import Disposer, HookRegistry

__all__ = ["Scope", "ScopeRegistry", "Tool", "tool"]

logger = logging.getLogger(__name__)

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

Enabled: TypeAlias = bool | Callable[[], bool]
"""Either a fixed flag or a callable asked before every model call."""

NeedsApproval: TypeAlias = bool | Callable[[Mapping[str, Any]], bool]
"""Either a fixed flag or a predicate over a call's validated arguments."""


def check_name(kind: str, name: object) -> str:
    """Return ``name`` if it is a valid tool or scope name, else raise ToolDefinitionError."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ToolDefinitionError(
            f"{kind} name {name!r} is invalid: use 1-64 letters, digits, '_' or '-'"
        )
    return name


def _ask(flag: Enabled, kind: str, name: str) -> bool:
    """Evaluate an ``enabled`` flag; a callable that fails counts as disabled."""
    if flag is True or flag is False:
        return flag
    try:
        return bool(flag())
    except Exception:
        logger.warning(
            "enabled() of %s %r raised; treating it as disabled", kind, name, exc_info=True
        )
        return False


@dataclass(eq=False, kw_only=True)
class Tool:
    """A function the model can call.

    Build one with :func:`tool`, or directly with your own JSON schema (then the arguments
    are only checked to be a JSON object before ``function(**arguments)`` runs).

    Attributes:
        name: The name the model calls it by: 1-64 letters, digits, ``_`` or ``-``.
        description: What the tool does, for the model.
        parameters: The JSON schema of the arguments object.
        function: The function to run, sync or async.
        enabled: ``False``, or a callable returning ``False``, hides the tool from the model
            and makes calls to it fail with ``ToolDisabledError``. A callable that raises
            counts as ``False``.
        run_in_thread: Run a sync ``function`` in a worker thread so it cannot block the
            event loop (default). Set ``False`` for quick, pure functions.
        requires_approval: ``True``, or a predicate over the call's validated arguments
            returning ``True``, makes each call wait for a person's decision: the chat ends
            with it in ``response.pending_approvals`` (see ``docs/approval.md``). A
            predicate that raises counts as ``True``.
        idempotent: Whether running the tool twice for one call does no harm (it uses the
            call's ``RunContext.idempotency_key``, say). A durable turn whose worker died
            while the tool ran runs an idempotent tool again; any other tool is answered
            with :class:`~hookloop.ToolResultLostError` (see ``docs/durable.md``).
        context_parameter: The parameter that receives the :class:`~hookloop.RunContext`,
            if any; it is not in ``parameters``.
        needs_deps: Whether that run context names a dependencies type, so the chat must
            have ``deps``.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    function: Callable[..., Any]
    enabled: Enabled = True
    run_in_thread: bool = True
    requires_approval: NeedsApproval = False
    idempotent: bool = False
    context_parameter: str | None = None
    needs_deps: bool = False
    arguments_model: type[pydantic.BaseModel] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_name("tool", self.name)
        if not callable(self.function):
            raise ToolDefinitionError(f"tool {self.name!r}: function must be callable")
        self._is_async = is_async_callable(self.function)
        self._fields = _fields_validator(self.arguments_model)
        self._definition = ToolDefinition(
            name=self.name, description=self.description, parameters=self.parameters
        )

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        enabled: Enabled = True,
        run_in_thread: bool = True,
        requires_approval: NeedsApproval = False,
        idempotent: bool = False,
    ) -> Tool:
        """Build a tool from a typed function; see :func:`tool`."""
        tool_name = check_name(
            "tool", name if name is not None else getattr(function, "__name__", "")
        )
        summary, param_docs = parse_docstring(inspect.getdoc(function))
        model, context, needs_deps = _arguments_model(function, tool_name, param_docs)
        return cls(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=_clean_schema(model.model_json_schema()),
            function=function,
            enabled=enabled,
            run_in_thread=run_in_thread,
            requires_approval=requires_approval,
            idempotent=idempotent,
            context_parameter=context,
            needs_deps=needs_deps,
            arguments_model=model,
        )

    @property
    def definition(self) -> ToolDefinition:
        """The tool as the model sees it."""
        return self._definition

    def is_enabled(self) -> bool:
        """Whether the tool is enabled now (a failing ``enabled`` callable means no)."""
        return self.enabled is True or _ask(self.enabled, "tool", self.name)

    def needs_approval(self, arguments: Mapping[str, Any]) -> bool:
        """Whether a call with these validated arguments waits for a person's decision.

        A predicate that raises counts as ``True``: when in doubt, ask.
        """
        flag = self.requires_approval
        if flag is True or flag is False:
            return flag
        try:
            return bool(flag(arguments))
        except Exception as exc:
            # One line: a predicate that fails is a fact for the log, not a crash of the
            # program (the traceback is there at DEBUG).
            text = " ".join(exception_text(exc).split())
            logger.warning(
                "requires_approval() of tool %r raised %s: %s; asking for approval",
                self.name,
                type(exc).__name__,
                text,
            )
            logger.debug("requires_approval() of tool %r raised", self.name, exc_info=True)
            return True

    def validate(self, call_id: str, arguments: str) -> dict[str, Any]:
        """Parse and validate the model's raw arguments into keyword arguments.

        Raises:
            ToolValidationError: The text is not a JSON object matching the parameters.
        """
        model = self.arguments_model
        if model is None:
            return ToolCall(name=self.name, arguments=arguments, id=call_id).parsed_arguments()
        try:
            if (validator := self._fields) is not None:  # the fields as a dict, no instance
                fields: dict[str, Any] = validator.validate_json(arguments or "{}")[0]
            else:  # the model's validator itself: model_validate_json() is a layer around it
                fields = model.__pydantic_validator__.validate_json(arguments or "{}").__dict__
        except pydantic.ValidationError as exc:
            raise ToolValidationError(
                f"invalid arguments for tool {self.name!r}: {_summarise(exc)}",
                tool_name=self.name,
                call_id=call_id,
            ) from exc
        return fields

    def invoke(self, arguments: Mapping[str, Any]) -> Awaitable[object]:
        """Run the function with validated arguments; await the result.

        Exceptions propagate as they are. An async function's own coroutine is returned,
        with no coroutine of this method's around it: one frame less per tool call.
        """
        if self._is_async:
            coroutine: Awaitable[object] = self.function(**arguments)  # (cast() is a call)
            return coroutine
        return self._invoke_sync(arguments)

    async def _invoke_sync(self, arguments: Mapping[str, Any]) -> object:
        if self.run_in_thread:
            result = await asyncio.to_thread(self.function, **arguments)
            return await result if inspect.isawaitable(result) else result
        result = self.function(**arguments)
        return await result if inspect.isawaitable(result) else result


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    enabled: Enabled = True,
    run_in_thread: bool = True,
    requires_approval: NeedsApproval = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    enabled: Enabled = True,
    run_in_thread: bool = True,
    requires_approval: NeedsApproval = False,
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` from a typed function, as ``@tool`` or ``@tool(...)``.

    The tool's name is the function's name, its description the docstring's summary, and
    each parameter's description comes from the docstring's ``Args:`` section. Every
    parameter needs a type annotation; pydantic validates the model's arguments against them.
    A parameter annotated with :class:`~hookloop.RunContext` receives the run context and
    is left out of the schema. ``requires_approval`` and ``idempotent`` are described on
    :class:`Tool`.

    Example:
        >>> @tool
        ... def add(a: int, b: int) -> int:
        ...     '''Add two integers.
        ...
        ...     Args:
        ...         a: The first number.
        ...         b: The second number.
        ...     '''
        ...     return a + b
        >>> add.definition.parameters["required"]
        ['a', 'b']

    Raises:
        ToolDefinitionError: A parameter has no annotation, the function takes ``*args`` or
            ``**kwargs``, or the name is invalid.
    """

    def build(fn: Callable[..., Any]) -> Tool:
        return Tool.from_function(
            fn,
            name=name,
            description=description,
            enabled=enabled,
            run_in_thread=run_in_thread,
            requires_approval=requires_approval,
            idempotent=idempotent,
        )

    return build if function is None else build(function)


def _arguments_model(
    function: Callable[..., Any], tool_name: str, param_docs: Mapping[str, str]
) -> tuple[type[pydantic.BaseModel], str | None, bool]:
    """The model of the arguments, the run-context parameter, and whether it needs deps."""
    try:
        signature = inspect.signature(function)
        hints = get_type_hints(function, include_extras=True)  # keep Annotated constraints
    except (TypeError, ValueError, NameError) as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: cannot read the signature: {exc}") from exc
    fields: dict[str, Any] = {}
    context: str | None = None
    needs_deps = False
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(
                f"tool {tool_name!r}: *args and **kwargs cannot be described to a model; "
                "name each parameter"
            )
        if param.kind is param.POSITIONAL_ONLY:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} is positional-only; tools are "
                "called with keyword arguments"
            )
        if param.name not in hints:
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} needs a type annotation"
            )
        kind = context_kind(hints[param.name])
        if kind == "union":
            raise ToolDefinitionError(
                f"tool {tool_name!r}: parameter {param.name!r} is a union with a RunContext "
                "in it; annotate it as RunContext[Deps] alone (the loop always passes one)"
            )
        if kind != "none":
            if context is not None:
                raise ToolDefinitionError(
                    f"tool {tool_name!r}: parameters {context!r} and {param.name!r} both take "
                    "a RunContext; one is enough"
                )
            context, needs_deps = param.name, kind == "deps"
            continue
        default = ... if param.default is param.empty else param.default
        described = param.name in param_docs  # else keep an Annotated Field's description
        fields[param.name] = (
            hints[param.name],
            pydantic.Field(default, description=param_docs[param.name])
            if described
            else pydantic.Field(default),
        )
    try:
        model = pydantic.create_model(
            f"{tool_name}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid"),
            **fields,
        )
    except (pydantic.PydanticUserError, TypeError) as exc:
        raise ToolDefinitionError(f"tool {tool_name!r}: unsupported parameter type: {exc}") from exc
    return model, context, needs_deps


def _fields_validator(model: type[pydantic.BaseModel] | None) -> SchemaValidator | None:
    """A validator of ``model``'s fields alone, or ``None`` when the model adds to them.

    It validates exactly as the model does, with the same errors, and hands back the fields
    as ``(dict, extras, fields set)`` without making an instance of the model: a tool call
    needs the keyword arguments only (about a quarter less time per call). A model that
    does more than validate its fields (a model validator, ``model_post_init``, its own
    ``__init__``, a root model) keeps its own validator, and so does a model not complete
    yet (a forward reference defined later: the model builds itself when first used).
    """
    if model is None or not model.__pydantic_complete__:
        return None
    schema: Any = model.__pydantic_core_schema__
    outer = None
    if schema.get("type") == "definitions":  # nested models: their definitions stay around
        outer, schema = schema, schema["schema"]
    if (
        schema.get("type") != "model"
        or schema.get("custom_init")
        or schema.get("root_model")
        or schema.get("post_init")
        or schema["schema"].get("type") != "model-fields"
    ):
        return None
    fields = schema["schema"]
    if outer is not None:
        fields = {**outer, "schema": fields}
    return SchemaValidator(fields, schema.get("config"))


def _clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Drop pydantic's generated titles: they cost tokens and tell the model nothing."""
    _drop_titles(schema)
    schema.setdefault("properties", {})
    return schema


def _drop_titles(node: object) -> None:
    """Remove ``title`` keywords from a schema tree; a *property* named title stays."""
    if isinstance(node, list):
        for item in node:
            _drop_titles(item)
    elif isinstance(node, dict):
        if isinstance(node.get("title"), str):
            del node["title"]
        for key, value in node.items():
            if key in ("properties", "$defs", "patternProperties") and isinstance(value, dict):
                for sub_schema in value.values():
                    _drop_titles(sub_schema)
            elif key not in ("default", "const", "enum", "examples"):
                _drop_titles(value)


def _summarise(exc: pydantic.ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"])
        if err["type"] == "json_invalid":
            parts.append(f"not valid JSON ({err['msg']})")
        elif where:
            parts.append(f"{where}: {err['msg']}")
        else:
            parts.append(err["msg"])
    return "; ".join(parts)


_LONG = 2**63


def serialize_result(value: object) -> str:
    """Turn a tool's return value into the text the model sees (str as is, else JSON).

    Values JSON cannot hold (a circular structure, say) fall back to their ``repr``, and a
    value whose ``repr`` raises to its type's name.
    """
    if isinstance(value, str):
        return value
    if type(value) is int and -_LONG < value < _LONG:  # JSON's text, without the encoder
        return str(value)
    try:
        return pydantic_core.to_json(value, fallback=repr).decode()
    except (ValueError, TypeError, pydantic_core.PydanticSerializationError):
        pass
    try:
        return repr(value)
    except Exception:  # a user's __repr__ that raises must not end the chat
        return f"<{type(value).__name__} object that cannot be shown>"


def exception_text(exc: BaseException) -> str:
    """The exception's message; its type's name when it has none or ``str()`` raises.

    A tool's exception becomes text the model sees, and a broken ``__str__`` must not turn
    a tool failure into the end of the chat.
    """
    try:
        text = str(exc)
    except Exception:
        return type(exc).__name__
    return text or type(exc).__name__


class Scope:
    """A named group of tools with optional context for the prompt.

    Args:
        name: Unique among the agent's scopes: 1-64 letters, digits, ``_`` or ``-``.
        tools: The scope's tools; plain functions are turned into tools with :func:`tool`.
        context: Text for the model, or a callable returning it (``None`` for nothing),
            evaluated before every model call. A callable that raises is skipped.
        context_placement: ``"system"`` appends the context to the system prompt;
            ``"last_user"`` appends it to the last user message of the request. The stored
            history is never changed.
        enabled: ``False``, or a callable returning ``False``, hides the scope's tools and
            context. A callable that raises counts as ``False``.
    """

    __slots__ = ("context", "context_placement", "enabled", "name", "tools")

    def __init__(
        self,
        name: str,
        *,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        context: str | Callable[[], str | None] | None = None,
        context_placement: Literal["system", "last_user"] = "system",
        enabled: Enabled = True,
    ) -> None:
        check_name("scope", name)
        if context_placement not in ("system", "last_user"):
            raise ToolDefinitionError(
                f"scope {name!r}: context_placement must be 'system' or 'last_user'"
            )
        built = tuple(t if isinstance(t, Tool) else tool(t) for t in tools)
        seen: set[str] = set()
        for t in built:
            if t.name in seen:
                raise DuplicateNameError(f"scope {name!r} has two tools named {t.name!r}")
            seen.add(t.name)
        self.name = name
        self.tools: tuple[Tool, ...] = built
        self.context = context
        self.context_placement: Literal["system", "last_user"] = context_placement
        self.enabled: Enabled = enabled

    def __repr__(self) -> str:
        return f"Scope({self.name!r}, tools={[t.name for t in self.tools]})"

    def is_enabled(self) -> bool:
        """Whether the scope is enabled now (a failing ``enabled`` callable means no)."""
        return self.enabled is True or _ask(self.enabled, "scope", self.name)

    def render_context(self) -> str | None:
        """The scope's context now, or ``None`` (also when the callable raises)."""
        if self.context is None or isinstance(self.context, str):
            return self.context or None
        try:
            text: object = self.context()  # typed as str | None; callers do not always obey
        except Exception:
            logger.warning("context() of scope %r raised; leaving it out", self.name, exc_info=True)
            return None
        if text is not None and not isinstance(text, str):
            logger.warning(
                "context() of scope %r returned %s, not a str; leaving it out",
                self.name,
                type(text).__name__,
            )
            return None
        return text or None


class ScopeRegistry:
    """The scopes of one agent (``agent.scopes``); tool names are unique across all of them.

    ``register`` and ``unregister`` fire ``on_scope_register`` / ``on_scope_unregister``
    after the change is committed. Those handlers run synchronously, in the caller's thread;
    an exception from one propagates to the caller, and the change stays committed.
    """

    # One per agent: smaller when idle. The scopes are few and kept in ``ordered`` alone;
    # the map of tool names is made by the first lookup (an idle agent looks nothing up).
    __slots__ = ("_hooks", "_tools", "ordered")

    def __init__(self, hooks: HookRegistry) -> None:
        self._hooks = hooks
        self._tools: dict[str, tuple[Tool, Scope]] | None = None  # see _tool_map
        self.ordered: tuple[Scope, ...] = ()
        """The scopes in registration order (a snapshot, replaced on every change)."""

    def _tool_map(self) -> dict[str, tuple[Tool, Scope]]:
        """Tool name -> (tool, scope), made on first use and kept up to date after it."""
        tools = self._tools
        if tools is None:
            tools = self._tools = {t.name: (t, s) for s in self.ordered for t in s.tools}
        return tools

    def register(self, scope: Scope) -> Disposer:
        """Add a scope; returns a disposer that unregisters it (idempotent).

        Raises:
            DuplicateNameError: The scope's name, or one of its tool names, is taken.
        """
        from .hooks._dispatch import Disposer
        from .hooks._events import ON_SCOPE_REGISTER

        if self.get(scope.name) is not None:
            raise DuplicateNameError(f"a scope named {scope.name!r} is already registered")
        if self.ordered:  # the first scope has nothing to clash with: no map made for it
            taken = self._tool_map()
            for t in scope.tools:
                if t.name in taken:
                    owner = taken[t.name][1].name
                    raise DuplicateNameError(
                        f"tool {t.name!r} of scope {scope.name!r} is already provided by "
                        f"scope {owner!r}"
                    )
        self.ordered = (*self.ordered, scope)
        if self._tools is not None:
            for t in scope.tools:
                self._tools[t.name] = (t, scope)
        self._hooks.fire_sync(ON_SCOPE_REGISTER, scope)

        def dispose() -> None:
            if self.get(scope.name) is scope:
                self.unregister(scope.name)

        return Disposer(dispose)

    def unregister(self, name: str) -> Scope:
        """Remove the scope called ``name`` and return it.

        Raises:
            ScopeNotFoundError: No scope has that name.
        """
        from .hooks._events import ON_SCOPE_UNREGISTER

        scope = self.get(name)
        if scope is None:
            raise ScopeNotFoundError(
                f"no scope named {name!r}; registered: {sorted(s.name for s in self.ordered)}"
            )
        self.ordered = tuple(s for s in self.ordered if s is not scope)
        if self._tools is not None:
            for t in scope.tools:
                self._tools.pop(t.name, None)
        self._hooks.fire_sync(ON_SCOPE_UNREGISTER, scope)
        return scope

    def get(self, name: str) -> Scope | None:
        """The scope called ``name``, or ``None``."""
        for scope in self.ordered:
            if scope.name == name:
                return scope
        return None

    def lookup(self, tool_name: str) -> tuple[Tool, Scope] | None:
        """The tool called ``tool_name`` and its scope, or ``None``."""
        tools = self._tools
        if tools is None:
            tools = self._tool_map()
        return tools.get(tool_name)

    def enabled(self) -> list[Scope]:
        """The scopes enabled now, in registration order."""
        return [s for s in self.ordered if s.is_enabled()]

    def __iter__(self) -> Iterator[Scope]:
        return iter(self.ordered)

    def __len__(self) -> int:
        return len(self.ordered)

    def __contains__(self, name: object) -> bool:
        return any(scope.name == name for scope in self.ordered)

    @property
    def tool_names(self) -> Iterable[str]:
        """Every registered tool name."""
        return self._tool_map().keys()
