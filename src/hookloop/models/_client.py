"""What the OpenAI and Anthropic adapters share about their official clients.

Both clients come from the same generator and raise the same family of exceptions
(``APIStatusError``, ``APITimeoutError``, ``APIConnectionError``, ``APIError`` for an error
inside a stream). :func:`translated_errors` turns any of them, and a body that is not the
JSON (or the UTF-8) it should be, into hookloop's error tree, so nothing from the client
leaks past an adapter. :class:`CallTimer` bounds a whole call and the silences of a stream;
:func:`encodable` and :func:`key_for` shape what goes out: text UTF-8 can carry, and a key
only for the host it belongs to.

Importing this module imports no client library: the adapters do that, through hookloop's
extras guard, when a model is built.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, Protocol, TypeVar
from urllib.parse import urlsplit

from .._errors import (
    InvalidResponseError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    UsageError,
)
from .._loopbound import LoopBound
from .._messages import Message, SystemMessage, ToolCall
from ._base import ProviderRequest, whole_pairs
from ._provider_errors import provider_error

__all__ = [
    "COMPATIBLE_KEY_VARIABLE",
    "DEFAULT_TIMEOUT",
    "CallLimits",
    "CallTimer",
    "LoopClient",
    "SplitPairs",
    "alternating_turns",
    "arguments_object",
    "encodable",
    "hashed_cache_key",
    "key_for",
    "nested_too_deep",
    "sent_cache_key",
    "system_text",
    "translated_errors",
    "transport_errors",
]

DEFAULT_TIMEOUT = 600.0
"""Seconds one model call may take before it counts as timed out (the clients' default)."""

COMPATIBLE_KEY_VARIABLE = "HOOKLOOP_API_KEY"
"""The environment variable whose key goes to a server named by URL (not a provider's own)."""

_T = TypeVar("_T")


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
    with transport_errors(model, reading=reading):
        try:
            yield
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


@contextmanager
def transport_errors(model: str, *, reading: bool = True) -> Iterator[None]:
    """What every client on ``httpx2`` raises, as hookloop errors for ``model``.

    A body (or an SSE data line) that is not JSON or not UTF-8, a timeout or a failed
    connection of ``httpx2`` itself; with ``reading``, Python errors from reading the
    response. :func:`translated_errors` adds the OpenAI-style clients' own exceptions; an
    adapter on another client adds its own inside this.
    """
    import httpx2  # installed with every client: the adapter calling us has imported it

    try:
        yield
    except ProviderError:
        raise
    except json.JSONDecodeError as exc:  # the body, or an SSE data line, is not JSON
        raise InvalidResponseError(f"malformed response: {exc}", model=model) from exc
    except UnicodeDecodeError as exc:  # a body that is not UTF-8: the client decodes it in the call
        raise InvalidResponseError(f"the response is not valid UTF-8: {exc}", model=model) from exc
    except RecursionError as exc:
        raise nested_too_deep(exc, model, reading=reading) from exc
    except httpx2.TimeoutException as exc:  # anthropic does not wrap errors of a stream read
        raise ProviderTimeoutError(f"the request timed out: {exc!r}", model=model) from exc
    except httpx2.TransportError as exc:
        raise ProviderConnectionError(
            f"the connection failed: {type(exc).__name__}: {exc}", model=model
        ) from exc
    except _MALFORMED as exc:
        if not reading:
            raise
        raise InvalidResponseError(
            f"malformed response: {type(exc).__name__}: {exc}", model=model
        ) from exc


def nested_too_deep(exc: RecursionError, model: str, *, reading: bool) -> Exception:
    """The error for a ``RecursionError`` met while a call ran.

    JSON nested deeper than Python's decoder can follow (a broken or hostile server) is an
    :class:`InvalidResponseError`; any other recursion is re-raised unless ``reading``.
    """
    if not reading and "JSON" not in str(exc):  # the decoder's own words
        return exc
    return InvalidResponseError(f"malformed response: {exc}", model=model)


def arguments_object(call: ToolCall) -> dict[str, Any]:
    """A tool call's arguments as the object Anthropic, Bedrock and Gemini want them.

    Arguments that are not a JSON object (a call some other model wrote badly, already
    answered with a validation error) go back empty.

    Example:
        >>> arguments_object(ToolCall(name="f", arguments='{"city": '))
        {}
    """
    try:
        value = json.loads(call.arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def system_text(request: ProviderRequest) -> str | None:
    """The system prompt of an API that takes it apart from the conversation.

    The request's ``system`` and any system message inside the conversation, joined by a
    blank line; ``None`` when there is none.
    """
    extra = [m.content for m in request.messages if isinstance(m, SystemMessage) and m.content]
    parts = [request.system, *extra] if request.system else extra
    return "\n\n".join(parts) if parts else None


def encodable(value: _T) -> _T:
    r"""``value`` (a request body) with every string made encodable as UTF-8.

    Text from a stream whose emoji was split between two chunks holds the two halves of a
    surrogate pair as separate characters; a file name Python could not decode holds
    surrogate escapes. Neither can be sent, and such text stays in the history, so every
    later request would fail. Here a split pair is joined into its character again and any
    other surrogate becomes U+FFFD. Strings that are fine (nearly all) are returned as they
    are; dictionaries, lists and tuples come back as new dictionaries and lists.

    Example:
        >>> encodable({"text": "ok \ud83d\ude00", "name": "report-\udcff.txt"})
        {'text': 'ok 😀', 'name': 'report-�.txt'}
    """
    return _encodable(value)  # type: ignore[no-any-return]


def _encodable(value: Any) -> Any:
    if isinstance(value, str):
        return value if value.isascii() else whole_pairs(value)
    if isinstance(value, dict):
        return {_encodable(key): _encodable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encodable(item) for item in value]
    return value


def alternating_turns(
    messages: tuple[Message, ...],
    blocks: Callable[[Message], tuple[str, list[dict[str, Any]]]],
    is_result: Callable[[dict[str, Any]], bool],
) -> list[dict[str, Any]]:
    """The conversation as alternating ``{"role", "content"}`` turns of content blocks.

    The shape Anthropic's Messages API and Bedrock's Converse API share: ``blocks`` gives a
    message's role and blocks (tool results are blocks of a user turn); messages without
    blocks are left out, neighbouring messages of one role are merged into one turn with
    tool results (``is_result``) first, and system messages are skipped: they are sent as
    the system prompt (:func:`system_text`).
    """
    turns: list[dict[str, Any]] = []
    for message in messages:
        if isinstance(message, SystemMessage):
            continue
        role, content = blocks(message)
        if not content:
            continue
        if turns and turns[-1]["role"] == role:
            previous = turns[-1]["content"]
            if role == "user" and is_result(content[0]):
                # Results must open the turn: put them before any text already there.
                position = sum(1 for block in previous if is_result(block))
                previous[position:position] = content
            else:
                previous.extend(content)
        else:
            turns.append({"role": role, "content": content})
    return turns


def key_for(base_url: str, *, given: str | None, own_host: str, own_variable: str) -> str | None:
    """The API key to send to ``base_url``, or ``None`` when there is none for it.

    A key passed as ``given`` goes wherever the user sent it. Otherwise the provider's own
    variable (``OPENAI_API_KEY``) is read only when ``base_url`` is the provider's own
    host over HTTPS, and :data:`COMPATIBLE_KEY_VARIABLE` only when it is any other server:
    a key meant for one provider never reaches a server someone else runs.
    """
    if given:
        return given
    variable = own_variable if is_host(base_url, own_host) else COMPATIBLE_KEY_VARIABLE
    return os.environ.get(variable) or None


@functools.lru_cache(maxsize=256)
def hashed_cache_key(key: str) -> str:
    """A request's ``cache_key`` as it goes to a provider: a digest of it.

    The same key gives the same digest in every process, so the requests of one session
    share a key whichever worker sends them, and no session id leaves the process.

    Example:
        >>> hashed_cache_key("session-1") == hashed_cache_key("session-1")
        True
        >>> len(hashed_cache_key("session-1"))
        41
    """
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return f"hookloop-{digest[:32]}"


def sent_cache_key(request: ProviderRequest, send: bool) -> str | None:
    """The ``prompt_cache_key`` an OpenAI request carries: its settings' ``cache_key``, hashed.

    ``None`` when ``send`` is off, the settings name no key, or their ``extra`` names a
    ``prompt_cache_key`` of its own (which then goes out as it is).
    """
    settings = request.settings
    if not send or settings.cache_key is None or "prompt_cache_key" in settings.extra:
        return None
    return hashed_cache_key(settings.cache_key)


def is_host(url: str, host: str) -> bool:
    """Whether ``url`` is ``https://`` on ``host`` (and its default port)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a number: not the provider's API, whatever the host says
        return False
    return parts.scheme == "https" and parts.hostname == host and port in (None, 443)


@dataclass(frozen=True, slots=True)
class CallLimits:
    """How long one model call may wait for its provider.

    Attributes:
        total: Seconds a call may spend waiting for the provider in all: a whole request
            with its answer, or a stream from the request to its last part. Time the
            caller spends between the parts of a stream is not counted.
        idle: Seconds a stream may go without sending a part; ``None`` for no bound
            beyond ``total``.
    """

    total: float
    idle: float | None = None

    def __post_init__(self) -> None:
        for name, seconds in (("timeout", self.total), ("stream_idle_timeout", self.idle)):
            if seconds is not None and not seconds > 0:
                raise UsageError(f"{name} must be a positive number of seconds, not {seconds!r}")


class CallTimer:
    """The time one call has left, spent by each wait for the provider.

    The clients' own ``timeout`` bounds each socket read, so a server that sends a byte a
    second never times out with them; this bounds the sum of the waits, and each silence
    of a stream, with ``asyncio.timeout`` (a cancellation of the wait, so nothing is left
    running). Either limit raises :class:`~hookloop.ProviderTimeoutError`.
    """

    __slots__ = ("_left", "_limits", "_model")

    def __init__(self, limits: CallLimits, model: str) -> None:
        self._limits = limits
        self._left = limits.total
        self._model = model

    async def wait(self, awaitable: Awaitable[_T], *, idle: bool = False) -> _T:
        """Await ``awaitable`` within the time left (and the idle limit, if ``idle``).

        Raises:
            ProviderTimeoutError: A limit passed first; the wait was cancelled.
        """
        loop = asyncio.get_running_loop()
        silence = self._limits.idle if idle else None
        by_idle = silence is not None and silence < self._left
        scope = asyncio.timeout(silence if by_idle else self._left)
        started = loop.time()
        try:
            async with scope:
                return await awaitable
        except TimeoutError as exc:
            if not scope.expired():
                raise  # not ours
            if by_idle:
                message = f"the stream sent nothing for {silence:g}s (stream_idle_timeout)"
            else:
                message = f"no whole answer within {self._limits.total:g}s (timeout)"
            raise ProviderTimeoutError(message, model=self._model) from exc
        finally:
            self._left -= loop.time() - started

    def parts(self, stream: AsyncIterator[_T]) -> AsyncIterator[_T]:
        """``stream``, each part awaited with :meth:`wait` under the idle limit."""
        return _TimedParts(self, stream)


class _TimedParts(AsyncIterator[_T]):
    # A class rather than an async generator: nothing to finalise when a consumer stops early.
    __slots__ = ("_stream", "_timer")

    def __init__(self, timer: CallTimer, stream: AsyncIterator[_T]) -> None:
        self._timer = timer
        self._stream = stream

    def __aiter__(self) -> _TimedParts[_T]:
        return self

    async def __anext__(self) -> _T:
        return await self._timer.wait(anext(self._stream), idle=True)


class SplitPairs:
    r"""Mends the text deltas of one stream whose surrogate pairs a server split in two.

    A delta ending in the first half of a pair is held back until the next delta brings
    the second half; what is passed on is always text UTF-8 can carry (see
    :func:`encodable`), so a consumer can print it as it comes.

    Example:
        >>> pairs = SplitPairs()
        >>> pairs.text("ok \ud83d"), pairs.text("\ude00!"), pairs.rest()
        ('ok ', '😀!', '')
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held = ""

    def text(self, piece: str) -> str:
        """The text to pass on for ``piece`` ("" while a half pair is held back)."""
        if self._held:
            piece, self._held = self._held + piece, ""
        if piece and "\ud800" <= piece[-1] <= "\udbff":
            piece, self._held = piece[:-1], piece[-1]
        return encodable(piece)

    def rest(self) -> str:
        """What is still held back when the stream ends (a lone half, as U+FFFD)."""
        held, self._held = self._held, ""
        return encodable(held)
