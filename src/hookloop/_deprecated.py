"""Old module paths and names that keep working for one release, with a DeprecationWarning.

:data:`MOVED_MODULES` is the one table of the module paths that became private: an import
of an old path is answered by :class:`_MovedModuleFinder` (on ``sys.meta_path`` from the
first ``import hookloop``) with a module that forwards every attribute to the new one, so
``from hookloop.agent import Agent`` gives the very same ``Agent``, and ``import *`` the
names of the module's 0.1 ``__all__`` (``_old_all.OLD_ALL``), those that moved to another
module (:data:`MOVED_NAMES`) included. :data:`RENAMED` lists the names that changed; a
package's ``__getattr__`` (``_extras.lazy_getattr``) answers them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import warnings
from pathlib import Path
from types import CodeType, ModuleType

from ._old_all import OLD_ALL

__all__ = [
    "MOVED_MODULES",
    "MOVED_NAMES",
    "RENAMED",
    "install",
    "run_as_main",
    "warn_deprecated",
]

_ROOT, _CONTEXT, _MEMORY, _MODELS, _RETRY = (
    "hookloop",
    "hookloop.context",
    "hookloop.memory",
    "hookloop.models",
    "hookloop.retry",
)

MOVED_MODULES: dict[str, tuple[str, str]] = {
    # old path: (where the code is now, where to import its names from)
    "hookloop.agent": ("hookloop._agent", _ROOT),
    "hookloop.cli": ("hookloop._cli", "the `hookloop` command or `python -m hookloop`"),
    "hookloop.context.history": ("hookloop.context._history", _CONTEXT),
    "hookloop.context.policies": ("hookloop.context._sliding_window", _CONTEXT),
    "hookloop.context.repair": ("hookloop.context._repair", _CONTEXT),
    "hookloop.context.tokens": ("hookloop.context._tokens", _CONTEXT),
    "hookloop.context.trim": ("hookloop.context._trim", _CONTEXT),
    "hookloop.context_hooks": ("hookloop.context._context_hooks", _CONTEXT),
    "hookloop.errors": ("hookloop._errors", _ROOT),
    "hookloop.events": ("hookloop._events", _ROOT),
    "hookloop.memory.base": ("hookloop.memory._base", _MEMORY),
    "hookloop.memory.hooks": ("hookloop.memory._hooks", _MEMORY),
    "hookloop.memory.postgres": ("hookloop.memory._postgres", _MEMORY),
    "hookloop.memory.provider": ("hookloop.memory._provider", _MEMORY),
    "hookloop.memory.redis": ("hookloop.memory._redis", _MEMORY),
    "hookloop.memory.sqlite": ("hookloop.memory._sqlite", _MEMORY),
    "hookloop.memory.tool": ("hookloop.memory._tool", _MEMORY),
    "hookloop.messages": ("hookloop._messages", _ROOT),
    "hookloop.models.anthropic": ("hookloop.models._anthropic", _MODELS),
    "hookloop.models.base": ("hookloop.models._base", _MODELS),
    "hookloop.models.local": ("hookloop.models._local", _MODELS),
    "hookloop.models.openai": ("hookloop.models._openai", _MODELS),
    "hookloop.models.openai_responses": ("hookloop.models._openai_responses", _MODELS),
    "hookloop.models.spec": ("hookloop.models._spec", _MODELS),
    "hookloop.models.testing": ("hookloop.testing", "hookloop.testing"),
    "hookloop.retry.backoff": ("hookloop.retry._backoff", _RETRY),
    "hookloop.retry.default": ("hookloop.retry._default", _RETRY),
    "hookloop.retry.fallback": ("hookloop.retry._fallback", _RETRY),
    "hookloop.retry.hints": ("hookloop.retry._hints", _RETRY),
    "hookloop.retry.model": ("hookloop.retry._model", _RETRY),
    "hookloop.retry.tools": ("hookloop.retry._tools", _RETRY),
    "hookloop.toolbox": ("hookloop._toolbox", _ROOT),
    "hookloop.tools": ("hookloop._tools", _ROOT),
    "hookloop.trace": ("hookloop._trace", _ROOT),
}
"""Every module path of 0.1 that is now private: its new place and the public path to use."""

MOVED_NAMES: dict[str, str] = {
    # old ``module.name``: the public module that holds the name now
    "hookloop.context_hooks.OVERFLOW_MARKERS": _MODELS,
    "hookloop.context_hooks.is_context_overflow": _MODELS,
}
"""Names of a 0.1 module that now live in another module than its :data:`MOVED_MODULES` one."""

RENAMED: dict[str, str] = {
    "hookloop.sessions.SqliteSessionStore": "SQLiteSessionStore",
}
"""Old ``package.Name`` -> the name it has now in the same package."""

_PACKAGE_DIR = str(Path(__file__).parent) + os.sep
_COMMANDS = frozenset({"hookloop.cli"})  # old paths whose ``python -m`` ran the command
_AFTER_THIS_RELEASE = "the old path goes in the next release (see docs/migration.md)"


def _is_import_machinery(filename: str) -> bool:
    # What ``warnings`` itself leaves out when it counts ``stacklevel``.
    return "importlib" in filename and "_bootstrap" in filename


def warn_deprecated(message: str) -> None:
    """Warn with a ``DeprecationWarning`` blamed on the first caller outside hookloop.

    The import machinery and hookloop's own frames sit between the user's ``import`` and
    this call; blaming the user's line makes Python's default filter show the warning in a
    script (it shows ``DeprecationWarning`` only for code in ``__main__``).
    """
    frame = sys._getframe(1)
    level = 2
    while frame.f_back is not None and (
        _is_import_machinery(frame.f_code.co_filename)
        or frame.f_code.co_filename.startswith(_PACKAGE_DIR)
        or frame.f_code.co_filename == importlib.__file__
    ):
        frame = frame.f_back
        if not _is_import_machinery(frame.f_code.co_filename):
            level += 1
    warnings.warn(message, DeprecationWarning, stacklevel=level)


def _use(old: str) -> str:
    public = MOVED_MODULES[old][1]
    return f"use {public}" if public.startswith("the ") else f"import from {public}"


def _deprecation(old: str) -> str:
    return f"{old} is deprecated: {_use(old)}; {_AFTER_THIS_RELEASE}"


def run_as_main(old: str) -> None:
    """``python -m <old path>``: warn, then run the command if the path was the CLI's.

    ``runpy`` runs a module's code without its loader's ``exec_module``, so the warning
    is given here; running any other old path only imports its module, as in 0.1.
    """
    warn_deprecated(_deprecation(old))
    target = importlib.import_module(MOVED_MODULES[old][0])
    if old in _COMMANDS:
        sys.exit(target.main())


class _KeepsItsNames(ModuleType):
    """A package where an old module path must not replace the public name it shares.

    ``hookloop.context.repair`` was a module in 0.1 and is the function ``repair`` now; the
    import system sets every imported submodule as an attribute of its package, which would
    put the old module where the function is.
    """

    def __setattr__(self, name: str, value: object) -> None:
        kept = self.__dict__.get(name)
        if (
            isinstance(value, ModuleType)
            and f"{self.__name__}.{name}" in MOVED_MODULES
            and kept is not None
            and not isinstance(kept, ModuleType)
        ):
            return
        super().__setattr__(name, value)


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Answers an import of an old module path with a module forwarding to the new one."""

    def find_spec(
        self,
        fullname: str,
        path: object = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED_MODULES:
            return None
        new = importlib.util.find_spec(MOVED_MODULES[fullname][0])
        # ``python -m`` puts the origin in ``sys.argv[0]``: the file the code is in now.
        return importlib.util.spec_from_loader(
            fullname, self, origin=None if new is None else new.origin
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

    def is_package(self, fullname: str) -> bool:
        """No old path is a package (``runpy`` asks, for ``python -m``)."""
        return False

    def get_code(self, fullname: str) -> CodeType:
        """What ``python -m <old path>`` runs as ``__main__``: :func:`run_as_main`."""
        source = f"import hookloop._deprecated\nhookloop._deprecated.run_as_main({fullname!r})\n"
        return compile(source, f"<{fullname}>", "exec")

    def exec_module(self, module: ModuleType) -> None:
        new, _ = MOVED_MODULES[module.__name__]
        warn_deprecated(_deprecation(module.__name__))
        target = importlib.import_module(new)
        package, _, child = module.__name__.rpartition(".")
        parent = sys.modules[package]
        shared = parent.__dict__.get(child)
        if shared is not None and not isinstance(shared, ModuleType):
            parent.__class__ = _KeepsItsNames

        old_all = OLD_ALL[module.__name__]

        def forward(name: str) -> object:
            elsewhere = MOVED_NAMES.get(f"{module.__name__}.{name}")
            source = target if elsewhere is None else importlib.import_module(elsewhere)
            return getattr(source, name)

        module.__getattr__ = forward  # type: ignore[method-assign]
        module.__dir__ = lambda: sorted({*dir(target), *old_all})  # type: ignore[method-assign]
        module.__dict__["__all__"] = list(old_all)  # 0.1's: ``import *`` gives what it gave
        module.__doc__ = f"Deprecated alias of {new}; {_use(module.__name__)}."


_FINDER = _MovedModuleFinder()


def install() -> None:
    """Put the finder of the old module paths on ``sys.meta_path`` (once)."""
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
