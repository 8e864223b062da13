"""The schema-version check every store runs when it first connects."""

from __future__ import annotations

from .._errors import SessionSchemaError

__all__ = ["check_schema_version"]


def check_schema_version(found: object, *, supported: int, store: str) -> int:
    """The version a store's schema records, if this hookloop can read it.

    Args:
        found: What the store holds as its schema version (text, bytes or an int).
        supported: The newest version this hookloop writes and reads.
        store: Where the store is, for the error.

    Raises:
        SessionSchemaError: The version is not a number, or is newer than ``supported``
            (or below 1).
    """
    text = found.decode() if isinstance(found, bytes) else found
    try:
        version = int(str(text))
    except ValueError:
        raise SessionSchemaError(store=store, found=str(text), supported=supported) from None
    if version > supported or version < 1:
        raise SessionSchemaError(store=store, found=version, supported=supported)
    return version
