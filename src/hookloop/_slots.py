"""Making frozen dataclasses on a hot path: each field written through its slot.

A frozen dataclass's ``__init__`` writes every field with ``object.__setattr__``; the
slot's own setter costs less than half as much (a tool call delta: 0.6 against 1.4 us).
Only for classes whose ``__init__`` checks nothing, or followed by the class's own checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

__all__ = ["new", "slot_setter"]

new = object.__new__
"""An instance of a class, no field set yet."""


def slot_setter(cls: type, name: str) -> Callable[[object, object], None]:
    """The slot's own setter: it writes a frozen dataclass's field without __setattr__."""
    return cast("Callable[[object, object], None]", vars(cls)[name].__set__)
