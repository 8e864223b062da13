"""Public names show the one public path they are imported from, as httpx's do.

``hookloop.UsageError`` is defined in ``hookloop._errors`` and ``hookloop.context.SlidingWindow``
in ``hookloop.context._sliding_window``; each public module sets the ``__module__`` of its
classes and functions to its own name, so tracebacks, ``repr`` and pickles name the path
users import, never a private module that may be renamed. Pickle finds a class by
``__module__`` and ``__qualname__``, and the public module holds the name, so pickles load.
"""

from __future__ import annotations

import dataclasses
import inspect
import typing
from collections.abc import Iterable, Mapping

__all__ = ["is_private", "publish", "publish_one"]


def is_private(module: str) -> bool:
    """Whether a module path names a private module (one of its parts starts with ``_``)."""
    return any(part.startswith("_") for part in module.split("."))


def publish(namespace: Mapping[str, object], names: Iterable[str]) -> None:
    """Give each of ``names`` defined in a private module the public module's name.

    Args:
        namespace: The public module's namespace, which holds the names.
        names: The names to publish (lazy names not loaded yet are left alone: the
            package's ``__getattr__`` publishes each when it loads it).
    """
    package = namespace["__name__"]
    assert isinstance(package, str)
    for name in names:
        if name in namespace:
            publish_one(namespace[name], package)


def publish_one(value: object, package: str) -> None:
    """Set ``value.__module__`` to ``package`` if it is a class or function of a private module."""
    if not (inspect.isclass(value) or inspect.isfunction(value)):
        return
    module = value.__module__
    if not (module.startswith("hookloop.") and is_private(module)):
        return
    if isinstance(value, type) and dataclasses.is_dataclass(value):
        _resolve_annotations(value)
    value.__module__ = package


def _resolve_annotations(cls: type) -> None:
    """Evaluate the class's string annotations while its own module can still resolve them.

    pydantic and ``typing.get_type_hints`` evaluate a dataclass's annotations in the
    namespace of ``cls.__module__``: the public module does not hold the private module's
    helper names (``Literal``, ``ClassVar``...), so they must be objects already. A class
    whose annotations name types imported only for type checking (the hook contexts name
    ``Tool``, ``Scope``...) keeps them as strings, as it had them: nothing evaluates those.
    """
    try:
        hints = typing.get_type_hints(cls, include_extras=True)
    except NameError:
        return
    own = vars(cls).get("__annotations__", {})
    cls.__annotations__ = {name: hints[name] for name in own}
    for field in dataclasses.fields(cls):
        field.type = hints[field.name]
