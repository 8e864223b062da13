"""The one way hookloop imports something lazily: optional extras and names loaded on use.

``import hookloop`` needs none of the package's extras. Code that needs one imports it
with :func:`import_extra` (or, for imports whose types a module needs, inside
:func:`extra_needed`), so a missing extra is one
:class:`~hookloop.MissingExtraError` naming the ``pip install`` line, never a
``ModuleNotFoundError`` from deep inside a client library. A package whose names need an
extra (or are costly to import) exposes them through :func:`lazy_getattr`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import ModuleType

from ._errors import MissingExtraError, UsageError
from ._publish import publish_one

__all__ = ["extra_needed", "import_attribute", "import_extra", "lazy_dir", "lazy_getattr"]


@contextmanager
def extra_needed(extra: str, *, by: str) -> Iterator[None]:
    """Turn an ``ImportError`` inside the block into :class:`MissingExtraError`.

    Args:
        extra: The extra that provides what the block imports.
        by: What needs it, for the message (a class name).
    """
    try:
        yield
    except MissingExtraError:
        raise
    except ImportError as exc:  # the library, or one it needs (httpx2), is not installed
        raise MissingExtraError(extra=extra, needed_by=by) from exc


def import_extra(module: str, *, extra: str, by: str) -> ModuleType:
    """Import ``module`` of the ``extra``, or raise :class:`MissingExtraError`."""
    with extra_needed(extra, by=by):
        return importlib.import_module(module)


def import_attribute(spec: str, what: str) -> object:
    """The value ``module:attribute`` names (user code: a tool, an agent factory).

    The module is imported from ``sys.path`` as it is: this changes nothing about it. A
    command that loads the user's modules from the current directory (``hookloop run --tool``,
    ``hookloop worker``) puts that directory on ``sys.path`` itself, as ``python -m`` does.

    Args:
        spec: ``"module:attribute"``.
        what: What is being loaded, for the message (``"tool"``, ``"agent factory"``).

    Raises:
        UsageError: ``spec`` is malformed, or the module or attribute cannot be imported (the
            message names ``what`` was being loaded and why).
    """
    module_name, sep, attribute = spec.partition(":")
    if not (sep and module_name and attribute):
        raise UsageError(f"cannot load {what} {spec!r}: write it as module:attribute")
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"cannot load {what} {spec!r}: {exc}") from exc
    except Exception as exc:  # the module itself fails: a syntax error, a raise at import
        raise UsageError(f"cannot load {what} {spec!r}: {type(exc).__name__}: {exc}") from exc


def lazy_getattr(package: str, lazy: Mapping[str, str]) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package``: its names loaded on first use.

    Args:
        package: The package's ``__name__``.
        lazy: Each name loaded on first use -> the module (relative to ``package``) that
            defines it; the value is then kept in the package's namespace, published
            under the package's name (``_publish.py``).
    """

    def __getattr__(name: str) -> object:
        source = lazy.get(name)
        if source is not None:
            value = getattr(importlib.import_module(source, package), name)
            publish_one(value, package)
            setattr(sys.modules[package], name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__


def lazy_dir(package: str, lazy: Mapping[str, str]) -> Callable[[], list[str]]:
    """The module ``__dir__`` of ``package``: its namespace and its lazy names not loaded yet.

    Args:
        package: The package's ``__name__``.
        lazy: The same mapping as :func:`lazy_getattr`'s.
    """

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *lazy})

    return __dir__
