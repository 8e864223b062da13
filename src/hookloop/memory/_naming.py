"""Names that end up inside SQL text or Redis keys, checked once at the edge."""

from __future__ import annotations

import re
from typing import Final

from ..errors import UsageError

_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,47}$")


def check_identifier(name: object, what: str) -> str:
    """Return ``name`` if it is safe as a SQL table name, else raise UsageError."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise UsageError(
            f"{what} {name!r} is invalid: use 1-48 letters, digits or '_', not starting "
            "with a digit"
        )
    return name
