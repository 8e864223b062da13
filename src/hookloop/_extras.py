"""The one guard around imports of optional dependencies (the package's extras).

``import hookloop`` needs none of them; a class that does imports its library through
:func:`import_extra` or :func:`extra_needed` when it is used, so a missing extra is one
:class:`~hookloop.errors.MissingExtraError` naming the ``pip install`` line, never a
``ModuleNotFoundError`` from deep inside a client library.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from ._errors import MissingExtraError

__all__ = ["extra_needed", "import_extra"]


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
