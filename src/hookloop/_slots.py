"""Making frozen dataclasses on a hot path: each field written through its slot.

A frozen dataclass's ``__init__`` writes every field with ``object.__setattr__``; the
slot's own setter costs less than half as much (a tool call delta: 0.6 against 1.4 us).
:func:`slot_init` gives a class an ``__init__`` that does so (the same parameters, defaults
and ``__post_init__``); :func:`new` and :func:`slot_setter` make an instance field by field,
only for classes whose ``__init__`` checks nothing, or followed by the class's own checks;
:func:`frozen_maker` makes one from every field at once, cheaper still.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar, cast

__all__ = ["frozen_maker", "new", "slot_init", "slot_setter"]

_T = TypeVar("_T")

new = object.__new__
"""An instance of a class, no field set yet."""


class _Factory:
    """The default of a field made by its factory, shown as dataclasses show it."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY = _Factory()


def slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    """The slot's own setter: it writes a frozen dataclass's field without __setattr__."""
    return cast("Callable[[object, object], None]", vars(cls)[name].__set__)


def slot_init(cls: type[_T]) -> type[_T]:
    """Give a frozen, slotted, keyword-only dataclass an ``__init__`` that writes slots.

    The same signature as the dataclass's own (keyword-only fields, their defaults and
    default factories) and the same ``__post_init__`` call after the fields are written;
    every field is written through its slot's setter instead of ``object.__setattr__``:
    about 35% less per object made (a six-field ``ProviderResponse``: 0.9 against 1.4 us).
    Messages, tool calls, requests and responses are made several times per iteration.
    """
    scope: dict[str, Any] = {"FACTORY": _FACTORY}
    parameters: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cast("Any", cls)):
        if not (f.init and f.kw_only):
            raise TypeError(f"slot_init: {cls.__name__}.{f.name} must be a keyword-only field")
        name = f.name
        scope[f"set_{name}"] = slot_setter(cls, name)
        if f.default is not dataclasses.MISSING:
            scope[f"default_{name}"] = f.default
            parameters.append(f"{name}=default_{name}")
        elif f.default_factory is not dataclasses.MISSING:
            scope[f"factory_{name}"] = f.default_factory
            parameters.append(f"{name}=FACTORY")
            body.append(f"    if {name} is FACTORY:\n        {name} = factory_{name}()")
        else:
            parameters.append(name)
        body.append(f"    set_{name}(self, {name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, *, {', '.join(parameters)}):\n" + "\n".join(body or ["    pass"])
    exec(source, scope)  # as dataclasses builds __init__: one plain function
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    setattr(cls, "__init__", init)  # noqa: B010 - a method assigned, as dataclasses do
    return cls


def frozen_maker(cls: type[_T]) -> Callable[..., _T]:
    """A function making a ``cls`` from every one of its fields, positional, in order.

    For the loop's hot path, with fields it knows to be right: nothing is checked and no
    ``__post_init__`` runs. The fields are written into an instance of a plain twin class
    with the same slots, which then becomes a ``cls`` (``__class__`` assignment between two
    classes of the same layout): an attribute store costs a fraction of a slot setter's
    call, so a six-field request or response takes about half as many instructions (2.9k
    against 5.7k). ``cls`` is a slotted dataclass with no ``__dict__`` or ``__weakref__``.
    """
    slots = cast("tuple[str, ...]", vars(cls)["__slots__"])
    names = [f.name for f in dataclasses.fields(cast("Any", cls))]
    if list(slots) != names or cls.__bases__ != (object,):
        raise TypeError(f"frozen_maker: {cls.__name__} must be a slotted dataclass of object")
    twin = type(f"_{cls.__name__}Twin", (), {"__slots__": slots})
    scope: dict[str, Any] = {"new": new, "twin": twin, "cls": cls}
    body = [f"    self.{name} = {name}" for name in names]
    source = (
        f"def make({', '.join(names)}):\n    self = new(twin)\n"
        + "\n".join(body)
        + "\n    self.__class__ = cls\n    return self"
    )
    exec(source, scope)  # as dataclasses builds __init__: one plain function
    make = cast("Callable[..., _T]", scope["make"])
    make.__qualname__ = f"{cls.__qualname__}.make"
    return make
