"""Importing a 0.1 module path in a test without leaving it behind for the next test."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from hookloop._deprecated import MOVED_MODULES


@contextmanager
def old_paths_forgotten() -> Iterator[None]:
    """Run the block with no old path imported, then put back what was there before.

    An import sets ``sys.modules[old]`` and the attribute ``old`` on its package; both are
    restored (a ``monkeypatch.delitem`` of a key that was missing records nothing, so the
    module a test imported would stay for the tests after it).
    """
    saved = {old: sys.modules.pop(old) for old in MOVED_MODULES if old in sys.modules}
    held: dict[tuple[str, str], object] = {}
    for old in MOVED_MODULES:
        package, _, child = old.rpartition(".")
        namespace = vars(sys.modules[package]) if package in sys.modules else {}
        if isinstance(namespace.get(child), ModuleType):
            held[package, child] = namespace.pop(child)
    try:
        yield
    finally:
        for old in MOVED_MODULES:
            sys.modules.pop(old, None)
            package, _, child = old.rpartition(".")
            if package in sys.modules and isinstance(
                vars(sys.modules[package]).get(child), ModuleType
            ):
                del vars(sys.modules[package])[child]
        sys.modules.update(saved)
        for (package, child), value in held.items():
            vars(sys.modules[package])[child] = value
