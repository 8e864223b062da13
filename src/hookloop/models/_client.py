"""What the OpenAI and Anthropic adapters share about their official clients.

Both clients come from the same generator and raise the same family of exceptions
(``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``, ``APIError`` for an error
inside a stream). :func:`translated_errors` turns any of them, and a body that is not the
JSON it should be, into hookloop's error tree, so nothing from the client leaks past an
adapter.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Generic, Protocol, TypeVar

import httpx2

from .._loopbound import LoopBound
from ..errors import (
    InvalidResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
)
from ._errors import provider_error

__all__ = ["DEFAULT_TIMEOUT", "LoopClient", "translated_errors"]

DEFAULT_TIMEOUT = 600.0
"""Seconds one model call may take before it counts as timed out (the clients' default)."""


class _Closable(Protocol):
    async def close(self) -> None: ...


_C = TypeVar("_C", bound=_Closable)


class LoopClient(Generic[_C]):
    """The official client to use in the running event loop.

    The clients' connection pools belong to the loop they were first used in, and
    ``agent.chat_sync()`` runs each call in a new loop. A client the adapter made is made
    again for each loop (the first one at once, so a missing key fails at construction)
    and closed before a sync call's loop ends; a client the user passed is used as it is.
    """

    def __init__(self, make: Callable[[], _C], given: _C | None = None) -> None:
        self.first: _C = given if given is not None else make()
        self._bound: LoopBound[_C] | None = None
        if given is None:
            spare = [self.first]

            async def factory() -> _C:
                return spare.pop() if spare else make()

            self._bound = LoopBound(factory, _close, _drop)

    async def get(self) -> _C:
        """The client for the running loop."""
        return self.first if self._bound is None else await self._bound.get()

    async def close(self) -> None:
        """Close the client this adapter made for the running loop (not a given one)."""
        if self._bound is not None:
            await self._bound.close()


async def _close(client: _Closable) -> None:
    await client.close()


def _drop(client: object) -> None:
    """A client of a loop that is gone: its loop cannot close it any more."""


# Raised by our own reading of a response when it is not what the provider's API promises
# (a missing field, a wrong type). Only caught around reading, never around the call
# itself, where a TypeError would be a bug of ours rather than the provider's.
_MALFORMED = (ValueError, TypeError, KeyError, IndexError, AttributeError)


@contextmanager
def translated_errors(sdk: ModuleType, model: str, *, reading: bool = True) -> Iterator[None]:
    """Re-raise the client's exceptions from ``sdk`` as hookloop errors for ``model``.

    Args:
        sdk: The client's module (``openai`` or ``anthropic``).
        model: The model's name, for the error.
        reading: Also treat Python errors from reading the response (a missing field, a
            wrong type) as :class:`~hookloop.InvalidResponseError`. Off around the call.

    Raises:
        ProviderError: The matching class of the tree; the client's exception is chained
            as ``__cause__``.
    """
    try:
        yield
    except ProviderError:
        raise
    except json.JSONDecodeError as exc:  # the body, or an SSE data line, is not JSON
        raise InvalidResponseError(f"malformed response: {exc}", model=model) from exc
    except httpx2.TimeoutException as exc:  # anthropic does not wrap errors of a stream read
        raise ProviderTimeoutError(f"the request timed out: {exc!r}", model=model) from exc
    except httpx2.TransportError as exc:
        raise ProviderConnectionError(
            f"the connection failed: {type(exc).__name__}: {exc}", model=model
        ) from exc
    except sdk.APIStatusError as exc:
        status = exc.status_code if exc.status_code != 200 else None  # error inside a stream
        raise provider_error(
            status=status,
            body=exc.body,
            headers=exc.response.headers,
            model=model,
            fallback_message=exc.message,
        ) from exc
    except sdk.APITimeoutError as exc:
        raise ProviderTimeoutError(f"the request timed out: {exc}", model=model) from exc
    except sdk.APIConnectionError as exc:
        cause = exc.__cause__ or exc
        raise ProviderConnectionError(
            f"the connection failed: {type(cause).__name__}: {cause}", model=model
        ) from exc
    except sdk.APIResponseValidationError as exc:
        raise InvalidResponseError(f"malformed response: {exc}", model=model) from exc
    except sdk.APIError as exc:
        raise provider_error(
            status=None, body=exc.body, model=model, fallback_message=exc.message
        ) from exc
    except _MALFORMED as exc:
        if not reading:
            raise
        raise InvalidResponseError(
            f"malformed response: {type(exc).__name__}: {exc}", model=model
        ) from exc
