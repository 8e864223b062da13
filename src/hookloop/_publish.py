"""Public names show the public path they are imported from, as httpx's do.

``hookloop.UsageError`` is defined in ``hookloop._errors``; its ``__module__`` is set to
``"hookloop"``, so tracebacks, ``repr`` and pickles name the path users import, never a
private module. Pickle finds a class by ``__module__`` and ``__qualname__``, and the root
holds every one of these names, so pickles still load.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterable, Mapping

__all__ = ["publish"]


def publish(namespace: Mapping[str, object], names: Iterable[str], *, of: tuple[str, ...]) -> None:
    """Set ``__module__`` of each of ``names`` defined in one of the modules ``of``.

    Args:
        namespace: The public module's namespace, which holds the names.
        names: The names to publish (lazy names not loaded yet are left alone).
        of: The private modules whose names move; the public module's name is taken from
            ``namespace["__name__"]``.
    """
    package = namespace["__name__"]
    assert isinstance(package, str)
    for name in names:
        value = namespace.get(name)
        if getattr(value, "__module__", None) not in of:
            continue
        if isinstance(value, type) and dataclasses.is_dataclass(value):
            _resolve_annotations(value)
        value.__module__ = package


def _resolve_annotations(cls: type) -> None:
    """Evaluate the class's string annotations while its own module can still resolve them.

    pydantic and ``typing.get_type_hints`` evaluate a dataclass's annotations in the
    namespace of ``cls.__module__``: the public module does not hold the private module's
    helper names (``Literal``, ``ClassVar``...), so they must be objects already.
    """
    hints = typing.get_type_hints(cls, include_extras=True)
    own = vars(cls).get("__annotations__", {})
    cls.__annotations__ = {name: hints[name] for name in own}
    for field in dataclasses.fields(cls):
        field.type = hints[field.name]
