"""Argument checks shared by every store, raising a :class:`~hookloop.UsageError`."""

from __future__ import annotations

import re
from typing import Final

from .._errors import UsageError

__all__ = ["check_identifier", "check_int", "check_limit", "check_text"]

_IDENTIFIER: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,47}$")


def check_identifier(name: object, what: str) -> str:
    """Return ``name`` if it is safe as a SQL table name, else raise UsageError."""
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise UsageError(
            f"{what} {name!r} is invalid: use 1-48 letters, digits or '_', not starting "
            "with a digit"
        )
    return name


def check_limit(limit: object, *, error: type[UsageError] = UsageError) -> int | None:
    """Return ``limit`` if it is ``None`` (no limit) or a positive int, else raise ``error``.

    Args:
        limit: The value a caller passed as ``limit=``.
        error: The :class:`~hookloop.UsageError` subclass to raise (the memory
            stores raise :class:`~hookloop.MemoryRequestError`).
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise error(f"limit must be None or a positive int, got {limit!r}")
    return limit


def check_text(value: object, what: str, *, empty: bool = True) -> str:
    """Return ``value`` if it is a str (non-empty unless ``empty``), else raise UsageError."""
    if not isinstance(value, str):
        raise UsageError(f"{what} must be a str, got {type(value).__name__}")
    if not empty and not value:
        raise UsageError(f"{what} must not be empty")
    return value


def check_int(value: object, what: str, *, minimum: int) -> int:
    """Return ``value`` if it is an int of at least ``minimum``, else raise UsageError."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{what} must be an int, got {value!r}")
    if value < minimum:
        raise UsageError(f"{what} must be at least {minimum}, got {value}")
    return value
