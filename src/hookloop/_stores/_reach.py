"""A server store whose database cannot be reached: told apart, named, and raised as StoreError.

The drivers raise their own classes (asyncpg's, redis-py's, ``OSError``); a store turns them
into one :class:`~hookloop.StoreError` that says where the database is (without its
password) and keeps the driver's error as its cause. The drivers are looked up in
``sys.modules`` only: a store that never imported one cannot have an error of it.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar
from urllib.parse import urlsplit, urlunsplit

from .._errors import StoreError, error_line

__all__ = ["cannot_reach", "postgres_lost", "reachable", "redis_lost", "without_password"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class _Located(Protocol):
    def _where(self) -> str: ...


_S = TypeVar("_S", bound=_Located)


def without_password(url: str) -> str:
    """``url`` with the password of its user part, if any, replaced by ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # not a URL (a libpq key=value string, a bad port): as it is
        return url
    if password is None:
        return url
    netloc = parts.netloc.replace(f":{password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def postgres_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the PostgreSQL server cannot be reached or the connection died."""
    lost: tuple[type[BaseException], ...] = (OSError, asyncio.TimeoutError)
    asyncpg = sys.modules.get("asyncpg.exceptions")
    if asyncpg is not None:
        lost += (
            asyncpg.PostgresConnectionError,  # the connection died, or could not be made
            asyncpg.OperatorInterventionError,  # the server shuts down or is starting up
            asyncpg.InsufficientResourcesError,  # too many connections
            asyncpg.InterfaceError,  # the connection is closed
        )
    return isinstance(exc, lost)


def redis_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the Redis server cannot be reached (after redis-py's retries)."""
    lost: tuple[type[BaseException], ...] = (OSError,)
    errors = sys.modules.get("redis.exceptions")
    if errors is not None:
        lost += (errors.ConnectionError, errors.TimeoutError)
    return isinstance(exc, lost)


def cannot_reach(what: str, where: str, exc: BaseException) -> StoreError:
    """The error of ``what`` ("session store") whose database at ``where`` raised ``exc``."""
    return StoreError(
        f"the {what} {where} cannot be reached ({type(exc).__name__}: {error_line(exc)})",
        store=where,
    )


def reachable(
    lost: Callable[[BaseException], bool], what: str
) -> Callable[
    [Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]]],
    Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]],
]:
    """Make a method of ``what`` raise :class:`StoreError` when ``lost`` says unreachable."""

    def decorate(
        call: Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]],
    ) -> Callable[Concatenate[_S, _P], Coroutine[Any, Any, _T]]:
        @functools.wraps(call)
        async def reaching(self: _S, /, *a: _P.args, **k: _P.kwargs) -> _T:
            try:
                return await call(self, *a, **k)
            except Exception as exc:
                if not lost(exc):
                    raise
                raise cannot_reach(what, self._where(), exc) from exc

        return reaching

    return decorate
