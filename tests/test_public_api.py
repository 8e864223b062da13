"""Conventions as tests: the root exports, keyword-only dataclasses, docstrings."""

from __future__ import annotations

import dataclasses
import importlib
import inspect

import hookloop

MODULES = [
    "_approval",
    "_agent",
    "_errors",
    "_stream_events",
    "_messages",
    "_run_context",
    "_builtin_tools",
    "_tools",
    "_trace",
    "context",
    "hooks",
    "memory",
    "models",
    "observe",
    "retry",
    "sessions",
]


def test_all_has_no_duplicates() -> None:
    # The order is ruff's (RUF022, isort-style); this checks what ruff does not.
    assert len(hookloop.__all__) == len(set(hookloop.__all__))


def exported(module: object) -> list[str]:
    """A module's public names, less the adapters that load lazily (they need extras)."""
    lazy = getattr(module, "_LAZY", {})
    return [name for name in module.__all__ if name not in lazy]  # type: ignore[attr-defined]


def test_root_exports_exactly_the_public_names_of_the_public_modules() -> None:
    public: set[str] = {"__version__"}
    for name in MODULES:
        module = importlib.import_module(f"hookloop.{name}")
        public.update(module.__all__)
    assert set(hookloop.__all__) == public
    for name in hookloop.__all__:
        assert hasattr(hookloop, name), name


def test_every_exported_name_is_the_same_object_as_in_its_module() -> None:
    for name in MODULES:
        module = importlib.import_module(f"hookloop.{name}")
        for export in exported(module):
            assert getattr(hookloop, export) is getattr(module, export), export


def test_public_dataclasses_are_keyword_only() -> None:
    for name in hookloop.__all__:
        obj = getattr(hookloop, name)
        if inspect.isclass(obj) and dataclasses.is_dataclass(obj):
            if obj is hookloop.ToolReturn:  # ToolReturn(value) reads better positionally
                continue
            params = inspect.signature(obj).parameters.values()
            positional = [p.name for p in params if p.kind is not p.KEYWORD_ONLY]
            assert positional == [], f"{name} takes {positional} positionally"


def test_every_public_class_and_function_has_a_docstring() -> None:
    for name in hookloop.__all__:
        obj = getattr(hookloop, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"
            for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
                if attr.startswith("_") or not inspect.isfunction(member):
                    continue
                assert inspect.getdoc(member), f"{name}.{attr} has no docstring"


def test_version_is_set() -> None:
    assert hookloop.__version__ == "0.1.0"


def test_the_provider_adapters_load_lazily_from_hookloop_models() -> None:
    import hookloop.models

    for name in hookloop.models._LAZY:
        assert getattr(hookloop.models, name).__name__ == name
        assert getattr(hookloop, name) is getattr(hookloop.models, name)  # lazily at the root too
