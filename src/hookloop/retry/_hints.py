"""Read how long a provider asked us to wait from its response headers."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from .._errors import ProviderError

__all__ = ["provider_hint", "retry_after_seconds"]


def retry_after_seconds(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Seconds to wait according to ``retry-after-ms`` or ``Retry-After``, or ``None``.

    ``retry-after-ms`` (milliseconds, sent by OpenAI and Anthropic) wins because it is more
    precise. ``Retry-After`` may be seconds or an HTTP date (RFC 9110); a date in the past
    means zero. Header names are matched case-insensitively; unreadable values are ignored.

    Example:
        >>> retry_after_seconds({"Retry-After": "7"})
        7.0
        >>> retry_after_seconds({"retry-after-ms": "1500", "retry-after": "2"})
        1.5
    """
    lowered = {key.lower(): value for key, value in headers.items()}
    millis = _number(lowered.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    return number if math.isfinite(number) and number >= 0 else None


def provider_hint(error: BaseException | None) -> float | None:
    """Seconds the provider asked to wait, from the error's field or its headers."""
    if not isinstance(error, ProviderError):
        return None
    if error.retry_after is not None:
        return error.retry_after
    return retry_after_seconds(error.headers)
