"""The test doubles of :mod:`hookloop.testing`: scripted and function models, a fake clock."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TypeAlias

from ._errors import ScriptExhaustedError, UsageError
from ._messages import ToolCall, Usage
from .models._base import (
    Model,
    ProviderRequest,
    ProviderResponse,
    StreamPart,
    TextDelta,
    ToolCallDelta,
)
from .models._base import (
    WholeAnswerStream as _WholeAnswerStream,
)
from .models._base import make_response as _make_response
from .models._base import response_parts as _response_parts

__all__ = [
    "FakeClock",
    "FunctionModel",
    "ScriptStep",
    "ScriptedModel",
    "text_response",
    "tool_call",
    "tool_calls",
]


class FakeClock:
    """A clock whose time moves only when something sleeps on it or the test advances it.

    Pass the clock itself where a clock is taken (it returns the current time) and its
    :meth:`sleep` where a sleep is: :class:`~hookloop.retry.DefaultRetryStrategy` (``clock=``,
    ``sleep=``), the other retry strategies, and the session stores (``clock=``). A sleep
    returns at once, moves the time on by its length and records it in :attr:`waits`, so a
    test of retries runs in no time and can assert every wait.

    Args:
        now: The time to start at, in seconds (a monotonic or a POSIX time, as the user of
            the clock expects).

    Example:
        >>> import asyncio
        >>> from hookloop import Agent, ServerError
        >>> from hookloop.retry import Backoff, DefaultRetryStrategy
        >>> from hookloop.testing import FakeClock, ScriptedModel
        >>> clock = FakeClock()
        >>> retry = DefaultRetryStrategy(
        ...     clock=clock, sleep=clock.sleep, backoff=Backoff(jitter="none")
        ... )
        >>> model = ScriptedModel([ServerError("busy", status=503), "done"])
        >>> asyncio.run(Agent(model, retry=retry).chat("hi")).message.content
        'done'
        >>> clock.waits, clock.now
        ([0.5], 0.5)
    """

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self.waits: list[float] = []
        """The length of every sleep, in order."""

    def __call__(self) -> float:
        """The current time, in seconds."""
        return self.now

    async def sleep(self, seconds: float) -> None:
        """Move the time on by ``seconds`` and return at once, never yielding to the loop."""
        self.waits.append(seconds)
        self.now += seconds

    def advance(self, seconds: float) -> None:
        """Move the time on by ``seconds`` (a sleep of someone the test stands for)."""
        self.now += seconds

    def __repr__(self) -> str:
        return f"FakeClock(now={self.now!r}, waits={self.waits!r})"


def text_response(content: str, *, usage: Usage | None = None) -> ProviderResponse:
    """A response that answers with text and calls no tool."""
    return _make_response(content, (), "stop", usage, None, None)


def tool_call(
    name: str,
    arguments: Mapping[str, object] | str | None = None,
    *,
    id: str | None = None,
    content: str = "",
) -> ProviderResponse:
    """A response that calls one tool. ``arguments`` may be raw text, even invalid JSON."""
    return tool_calls(_make_call(name, arguments, id), content=content)


def tool_calls(*calls: ToolCall, content: str = "") -> ProviderResponse:
    """A response that calls several tools at once."""
    return _make_response(content, calls, "tool_calls", None, None, None)


def _make_call(name: str, arguments: Mapping[str, object] | str | None, id: str | None) -> ToolCall:
    if isinstance(arguments, str):
        return (
            ToolCall(name=name, arguments=arguments, id=id)
            if id
            else ToolCall(name=name, arguments=arguments)
        )
    return ToolCall.create(name, arguments, id=id)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptStep:
    """One scripted model call.

    Attributes:
        response: The answer to give, a :class:`~hookloop.models.ProviderResponse` (a text answer
            is ``text_response("...")``).
        error: An exception to raise instead (or, with ``fail_after``, mid-stream).
        chunk_size: When streamed, split text and tool arguments into pieces of this many
            characters, so consumers see several deltas.
        fail_after: When streamed, raise ``error`` after this many parts were yielded.

    Raises:
        UsageError: ``response`` is not a response (a ``str``, say) or ``error`` not an
            exception, or neither is given, or ``fail_after`` lacks one of them.
    """

    response: ProviderResponse | None = None
    error: Exception | None = None
    chunk_size: int | None = None
    fail_after: int | None = None

    def __post_init__(self) -> None:
        response: object = self.response  # a str slips past the annotation at run time
        if response is not None and not isinstance(response, ProviderResponse):
            hint = (
                f" (for a text answer: text_response({response!r:.40}))"
                if isinstance(response, str)
                else ""
            )
            raise UsageError(
                "ScriptStep(response=...) takes a ProviderResponse, got "
                f"{type(response).__name__}{hint}"
            )
        error: object = self.error
        if error is not None and not isinstance(error, Exception):
            raise UsageError(f"ScriptStep(error=...) takes an exception, got {error!r:.80}")
        if self.response is None and self.error is None:
            raise UsageError("ScriptStep needs a response=, an error=, or both")
        if self.fail_after is not None and (self.error is None or self.response is None):
            raise UsageError("ScriptStep(fail_after=...) needs both response= and error=")


ScriptItem: TypeAlias = str | ProviderResponse | Exception | ScriptStep


class ScriptedModel(Model):
    """A model that answers from a script, one step per call.

    Args:
        script: The answers in order. A ``str`` is a text answer, a
            :class:`~hookloop.models.ProviderResponse` is given as it is, an exception is raised,
            and a :class:`ScriptStep` says all of that plus how to stream.
        name: The model name reported in requests.
        context_window: The context window to report.
        chunk_size: The default ``chunk_size`` for streamed steps.

    Attributes:
        requests: Every request received, in order.

    Raises:
        UsageError: ``script`` is a ``str`` (a list of steps is meant) or holds something
            that is not a step.
    """

    native_output = True  # it answers what the script says, whatever the request asks

    def __init__(
        self,
        script: Iterable[ScriptItem],
        *,
        name: str = "scripted",
        context_window: int | None = None,
        chunk_size: int | None = None,
    ) -> None:
        if isinstance(script, (str, bytes)):
            raise UsageError(
                f"ScriptedModel takes a list of steps, got a {type(script).__name__}: write "
                f"ScriptedModel([{script!r}]) for one answer"
            )
        self.name = name
        self.context_window = context_window
        self._steps = [_as_step(item) for item in script]
        self._chunk_size = chunk_size
        self._next = 0
        self.requests: list[ProviderRequest] = []

    @property
    def remaining(self) -> int:
        """How many steps are left."""
        return len(self._steps) - self._next

    def _take(self, request: ProviderRequest) -> ScriptStep:
        self.requests.append(request)
        if self._next >= len(self._steps):
            raise ScriptExhaustedError(
                f"ScriptedModel {self.name!r} was called {len(self.requests)} times "
                f"but its script has only {len(self._steps)} "
                f"step{'' if len(self._steps) == 1 else 's'}"
            )
        step = self._steps[self._next]
        self._next += 1
        return step

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        """Return the next scripted answer, or raise its error."""
        step = self._take(request)
        if step.error is not None:
            raise step.error
        assert step.response is not None
        return step.response

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Stream the next scripted answer in chunks, or raise its error."""
        if self._next < len(self._steps):
            step = self._steps[self._next]
            if step.fail_after is None and not (step.chunk_size or self._chunk_size):
                return _WholeAnswerStream(self.request(request))
        return self._stream(request)

    async def _stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        step = self._take(request)
        if step.response is None:
            assert step.error is not None
            raise step.error
        size = step.chunk_size or self._chunk_size
        for count, part in enumerate(_chunked(step.response, size)):
            if step.fail_after is not None and count >= step.fail_after:
                assert step.error is not None
                raise step.error
            yield part


class FunctionModel(Model):
    """A model whose answers come from your function.

    Args:
        function: Called with each request; returns a response or a text answer, sync or
            async. Raise from it to simulate a provider failure.
        name: The model name reported in requests.
        context_window: The context window to report.
        chunk_size: When streamed, split the answer into pieces of this many characters.

    Attributes:
        requests: Every request received, in order.
    """

    native_output = True  # the function sees the request's output_format

    def __init__(
        self,
        function: Callable[
            [ProviderRequest], ProviderResponse | str | Awaitable[ProviderResponse | str]
        ],
        *,
        name: str = "function",
        context_window: int | None = None,
        chunk_size: int | None = None,
    ) -> None:
        self.name = name
        self.context_window = context_window
        self._function = function
        self._chunk_size = chunk_size
        self.requests: list[ProviderRequest] = []

    async def request(self, request: ProviderRequest) -> ProviderResponse:
        """Call the function and return its answer."""
        self.requests.append(request)
        result = self._function(request)
        if inspect.isawaitable(result):
            result = await result
        return text_response(result) if isinstance(result, str) else result

    def stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        """Call the function and stream its answer in chunks."""
        if not self._chunk_size:
            return _WholeAnswerStream(self.request(request))
        return self._stream(request)

    async def _stream(self, request: ProviderRequest) -> AsyncIterator[StreamPart]:
        for part in _chunked(await self.request(request), self._chunk_size):
            yield part


def _as_step(item: ScriptItem) -> ScriptStep:
    if isinstance(item, ScriptStep):
        return item
    if isinstance(item, str):
        return ScriptStep(response=text_response(item))
    if isinstance(item, ProviderResponse):
        return ScriptStep(response=item)
    if isinstance(item, Exception):
        return ScriptStep(error=item)
    raise TypeError(
        f"cannot script {item!r}: give a str, ProviderResponse, exception or ScriptStep"
    )


def _chunked(response: ProviderResponse, size: int | None) -> list[StreamPart]:
    if not size:
        return _response_parts(response)
    parts: list[StreamPart] = [
        TextDelta(text=response.content[i : i + size])
        for i in range(0, len(response.content), size)
    ]
    for index, call in enumerate(response.tool_calls):
        pieces = [call.arguments[i : i + size] for i in range(0, len(call.arguments), size)] or [""]
        parts.append(ToolCallDelta(index=index, id=call.id, name=call.name, arguments=pieces[0]))
        parts.extend(ToolCallDelta(index=index, arguments=p) for p in pieces[1:])
    parts.append(_response_parts(response)[-1])
    return parts
