"""A streamed chat run inside its consumer's task, one event at a time.

:class:`ChatStream` is what ``agent.chat_stream()`` returns; :class:`StreamedChat` drives it.

The chat's coroutine is driven from the consumer's own ``__anext__``: emitting an event
suspends the chat right where it is and hands the event to the consumer; the next
``__anext__`` resumes the chat. What the chat awaits meanwhile (the model, tools, stores) is
passed through to the consumer's task, as a plain ``await`` would. A task and a queue per
stream cost one pass of the event loop per event instead: ``chat_stream()`` took 5.3x
``chat()`` per iteration that way (bench/loop.py, ``stream_ratio``).

An event costs what the chat's resumption costs and little more: the chat yields the event
itself, and the consumer's ``__anext__`` is that resumption (one generator), with no async
generator or other layer between them.

While the consumer handles an event and waits for something else, the chat goes on in a
helper task, which keeps its events for the consumer (scheduled with ``call_soon`` when an
event is handed over: a no-op when the consumer is back first). So the chat never stalls
behind a consumer that waits for the chat's own progress, as with a task of its own, and
the helper stops at its next event once the consumer asks for one.

Cancellation, as for a chat in a task of its own:

- the consumer's task cancelled: the chat gets the cancellation where it waits, as
  ``chat()`` would, and the consumer gets its ``CancelledError`` once the chat has closed;
- ``agent.cancel()`` while nobody drives the chat: only its flag is set (``ChatRun.task``
  is ``None`` then), and the cancellation is raised where the chat waits once it resumes;
- the consumer leaving early (:meth:`StreamedChat.aclose`, or the stream dropped unclosed):
  the same, then the chat runs to its end with its remaining events dropped.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import sys
import types
import typing
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, TypeAlias

from ._run_context import NO_DEPS
from ._stream_events import AgentEvent, AgentResponse

if TYPE_CHECKING:
    from types import TracebackType

    from ._chat_slot import ChatHost
    from ._limits import ChatLimits
    from ._loop import ChatRun
    from ._messages import UserMessage
    from ._output import OutputSpec

__all__ = ["STREAM_CLOSED", "Begin", "ChatStream", "StreamedChat", "handoff"]

STREAM_CLOSED = "the stream was closed before the chat finished"
"""The reason of a chat that ended because its consumer left the stream."""


@types.coroutine
def handoff(event: AgentEvent) -> Generator[AgentEvent, None, None]:
    """The ``emit`` of a streamed chat: hand ``event`` to the consumer, resume after it.

    The event itself is what the chat yields (no wrapper around it): the driver tells it
    from what the chat waits for by its type (``_is_event``).
    """
    yield event  # caught by StreamedChat.next_event, never seen by the event loop


_EVENT_TYPES = frozenset(typing.get_args(AgentEvent))

if sys.version_info >= (3, 12):
    _current_task = asyncio.current_task  # in C
else:
    # 3.11's asyncio.current_task is a Python function around this lookup (its whole body
    # with the loop given); called for every event, the function call cost about 0.3 us an
    # iteration (bench/loop.py, stream_ratio).
    _current_task = asyncio.tasks._current_tasks.get  # type: ignore[attr-defined]


Begin: TypeAlias = Callable[[], Awaitable[tuple["ChatRun", Coroutine[Any, Any, AgentResponse]]]]
"""What claims a streamed chat: its run, and the coroutine that runs it to its end."""


def _is_event(yielded: object) -> bool:
    """Whether the chat yielded an event (``handoff``) rather than what asyncio waits for.

    A task takes only futures (``_asyncio_future_blocking``) and ``None`` (a bare yield);
    anything else comes from ``handoff`` (an event of a type not in the union, too: a part
    subclassed by a model's stream).
    """
    return yielded is not None and not hasattr(yielded, "_asyncio_future_blocking")


class StreamedChat:
    """The events of one streamed chat: an async iterator driving the chat's coroutine.

    The chat starts at the first ``__anext__`` (``begin`` claims it, then). To the event
    loop the iterator is an async generator: the loop's hooks for those see it first
    iterated and finalized, so a stream dropped unclosed is closed in a task of its own,
    and ``asyncio.run()`` closes those still open when it ends. It is no async generator
    around the chat's steps (one more frame and object per event: 0.5 us an iteration,
    bench/loop.py ``stream_ratio``).

    Attributes:
        done: Whether the chat has ended.
        response: The chat's response, once the consumer has seen the stream end.
    """

    __slots__ = (
        "__weakref__",
        "_ahead",
        "_begin",
        "_buffer",
        "_closed",
        "_closing",
        "_context",
        "_coro",
        "_error",
        "_finalizer",
        "_holding",
        "_loop",
        "_parked",
        "_parked_asked",
        "_reading",
        "_result",
        "_run",
        "_scheduled",
        "done",
        "response",
    )

    _run: ChatRun
    _coro: Coroutine[Any, Any, AgentResponse]
    _context: contextvars.Context
    _loop: asyncio.AbstractEventLoop

    def __init__(self, begin: Begin) -> None:
        self._begin: Begin | None = begin
        self._parked = False  # started, and parked at an event: nobody drives it
        self._reading = False  # an __anext__ is under way
        self._parked_asked = False  # whether a cancel was asked for when the chat parked
        self._ahead: asyncio.Task[None] | None = None  # the helper, if any
        self._buffer: collections.deque[AgentEvent] = collections.deque()  # its events
        self._error: BaseException | None = None  # what the chat raised in it
        self._holding = False  # whether the consumer holds an event (is not pulling)
        self._scheduled = False  # whether a _run_ahead is scheduled
        self._closing = False
        self._closed = False  # aclose() was called, or the chat could not start
        self._finalizer: Callable[[Any], object] | None = None
        self._result: AgentResponse | None = None
        self.done = False
        self.response: AgentResponse | None = None

    def __aiter__(self) -> StreamedChat:
        return self

    def __anext__(self) -> Awaitable[AgentEvent]:
        """The consumer's next event, to await at once.

        Parked with nothing kept, it is the chat's own next step: one generator an event.

        Raises:
            StopAsyncIteration: The chat has ended (see ``response``), or the stream was
                closed.
            RuntimeError: Another ``__anext__`` or ``aclose()`` of the stream is under way.
            Exception: What the chat raised.
            asyncio.CancelledError: The consumer's task was cancelled; the chat has closed.
        """
        self._holding = False
        if self._parked and self._ahead is None and not self._buffer and not self._reading:
            self._parked = False  # taken: a second reader goes the other way, and is refused
            return self.next_event(consumer=True)  # type: ignore[return-value]  # never None
        return self._pull_kept()

    async def aclose(self) -> None:
        """Leave the stream: a chat still running is cancelled, and closed before this returns.

        Raises:
            RuntimeError: An ``__anext__`` of the stream is under way.
            asyncio.CancelledError: The consumer's task was cancelled while the chat closed
                (it closed all the same).
        """
        if self._closed:
            return
        self._refuse_second("aclose")
        self._closed = True
        if self._begin is None:
            await self.close()

    def __del__(self) -> None:
        # As the event loop does with an async generator left unfinished: aclose() in a
        # task of its own.
        if self._finalizer is not None and not (self.done or self._closed):
            self._finalizer(self)

    def _refuse_second(self, action: str) -> None:
        # Read now: by _pull_kept, or by next_event (the chat neither parked, nor ended,
        # nor driven by the helper or a close).
        if self._reading or not (
            self._begin is not None
            or self._parked
            or self.done
            or self._ahead is not None
            or self._closing
        ):
            raise RuntimeError(f"{action}(): the stream is already being read")

    async def _start(self) -> None:
        """Claim the chat (``begin``) in the consumer's first ``__anext__``."""
        begin, self._begin = self._begin, None
        assert begin is not None
        firstiter, self._finalizer = sys.get_asyncgen_hooks()
        if firstiter is not None:
            firstiter(self)  # type: ignore[arg-type]  # the hooks need aclose() only
        try:
            self._run, self._coro = await begin()
        except BaseException:
            self._closed = True  # as an async generator that raised: ended
            raise
        # The chat's context variables are its own, as in a task of its own: the consumer's
        # code between two events does not see them (the current chat slot, say).
        self._context = contextvars.copy_context()
        self._loop = asyncio.get_running_loop()

    @types.coroutine
    def _pull_kept(self) -> Generator[Any, Any, AgentEvent]:
        """``__anext__`` otherwise: the start, the helper's events and error, the end."""
        if self._closed:
            raise StopAsyncIteration
        self._refuse_second("anext")
        self._reading = True
        try:
            if self._begin is not None:
                yield from self._start().__await__()
            else:
                ahead, self._ahead = self._ahead, None
                if ahead is not None:
                    # It stops at its next event now. A cancellation of ours meanwhile goes
                    # on to the chat through it; the chat then closes, here, before we
                    # raise it.
                    cancelled = yield from _settle(ahead).__await__()
                    if cancelled is not None:
                        yield from self.close().__await__()
                        raise cancelled
                if self._buffer:
                    event = self._buffer.popleft()
                    self._holding = True
                    if not self._scheduled:
                        self._schedule_ahead()
                    return event
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                if self.done:
                    self.response = self._result
                    raise StopAsyncIteration
        finally:
            self._reading = False
        self._parked = False
        return (yield from self.next_event(consumer=True))  # type: ignore[return-value]

    def _schedule_ahead(self) -> None:
        # One callback at a time, holding the stream weakly: a consumer that never waits
        # (nothing in the chat does) piles up neither callbacks nor chats.
        self._scheduled = True
        self._loop.call_soon(_run_ahead, weakref.ref(self))

    async def _go_on(self) -> None:
        """The helper: run the chat on, keeping its events, until the consumer is back."""
        try:
            while self._holding and not (self.done or self._closing):
                event = await self.next_event()
                if event is not None:
                    self._buffer.append(event)
        except (Exception, asyncio.CancelledError) as exc:
            # The consumer gets it after the events before it (a cancellation too: the
            # chat has ended, and the stream must not look finished).
            self._error = exc

    @types.coroutine
    def next_event(self, *, consumer: bool = False) -> Generator[Any, Any, AgentEvent | None]:
        """Run the chat to its next event; ``None`` once it has ended (see ``response``).

        ``consumer``: the consumer asks (not the helper, nor ``close``); it holds the event
        then.

        Raises:
            Exception: What the chat raised.
            asyncio.CancelledError: The consumer's task was cancelled; the chat has closed.
        """
        run = self._run
        run.task = _current_task(self._loop)
        self._parked = False
        error: BaseException | None = None
        if run.cancel_requested and not self._parked_asked:
            # Cancelled while the consumer held an event: where a chat in its own task
            # would have been cancelled, at the handoff.
            run.cancel_delivered = True
            error = asyncio.CancelledError()
        value: object = None
        context = self._context
        coro = self._coro
        try:
            while True:
                try:
                    if error is None:
                        yielded = context.run(coro.send, value)
                    else:
                        yielded = context.run(coro.throw, error)
                except StopIteration as stop:
                    self.done = True
                    self._result = stop.value
                    if consumer:
                        self.response = stop.value
                        raise StopAsyncIteration from None
                    return None
                except BaseException:
                    self.done = True
                    raise
                error = None
                if type(yielded) in _EVENT_TYPES or _is_event(yielded):
                    self._parked = True
                    self._parked_asked = run.cancel_requested
                    if consumer:
                        self._holding = True
                        if not self._scheduled:
                            self._schedule_ahead()
                    return yielded  # type: ignore[no-any-return]
                try:
                    value = yield yielded  # a future the chat waits for: the task's business
                except GeneratorExit:
                    self.done = True
                    context.run(coro.close)
                    raise
                except BaseException as exc:  # thrown in by the task: forwarded, as `await` does
                    # A cancellation too: the consumer's task cancelled, agent.cancel(), or a
                    # cancel scope inside the chat (anyio's, in an HTTP client) that the chat
                    # itself catches.
                    error, value = exc, None
        finally:
            run.task = None  # parked or ended: cancel() only sets the flag

    async def close(self) -> None:
        """End a chat the consumer left: cancel it and run it to its end, events dropped.

        Raises:
            asyncio.CancelledError: The consumer's task was cancelled while the chat closed
                (it closed all the same).
        """
        if self.done:
            return
        self._closing = True
        self._run.cancel(STREAM_CLOSED)
        cancelled: asyncio.CancelledError | None = None
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            cancelled = await _settle(ahead)
        self._buffer.clear()
        self._error = None
        while not self.done:
            try:
                await self.next_event()
            except asyncio.CancelledError:
                raise
            except Exception:  # the consumer chose to leave: the outcome is not theirs to see
                break
        if cancelled is not None:
            raise cancelled


def _run_ahead(ref: weakref.ref[StreamedChat]) -> None:
    """Let the chat go on while its consumer, holding an event, waits for something else.

    It runs only when the consumer's task is suspended: holding an event then means the
    consumer waits elsewhere, not in :meth:`StreamedChat.__anext__`.
    """
    chat = ref()
    if chat is None:
        return
    chat._scheduled = False
    if chat._holding and chat._ahead is None and not (chat.done or chat._closing):
        chat._ahead = chat._loop.create_task(chat._go_on())


async def _settle(task: asyncio.Task[None]) -> asyncio.CancelledError | None:
    """Wait for the helper to stop; a cancellation meanwhile is passed on and returned."""
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait((task,))
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
            task.cancel()
    if not task.cancelled():
        task.exception()  # retrieved: the consumer chose to leave
    return cancelled


class ChatStream:
    """The events of one streamed chat: an async iterator and an async context manager.

    The chat starts when iteration starts and runs in the consumer's task, one event at a
    time: it waits while the consumer handles an event. Leaving the ``async with`` block (or
    calling :meth:`aclose`) before the end cancels the chat, which then ends as cancelled
    (``on_chat_abort``); so does cancelling the consumer's task. A stream dropped unclosed
    is closed so in a task of its own, as an async generator would be.
    """

    def __init__(
        self,
        agent: ChatHost,
        message: UserMessage,
        deps: object = NO_DEPS,
        output: OutputSpec[Any] | None = None,
        limits: ChatLimits | None = None,
    ) -> None:
        self._agent = agent
        self._message = message
        self._deps = deps
        self._output = output
        self._limits = limits
        self._events: StreamedChat | None = None

    @property
    def response(self) -> AgentResponse[Any] | None:
        """The chat's response, once the stream has ended successfully."""
        return self._events.response if self._events is not None else None

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        if self._events is None:
            self._events = StreamedChat(self._begin)
        return self._events

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop the stream; a chat still running is cancelled, and closed before this returns.

        The chat answers its open tool calls and records them first. Cancelled while it
        waits, it passes the cancellation on to the chat, still waits, and then raises it.
        """
        if self._events is not None:
            await self._events.aclose()

    async def _begin(self) -> tuple[ChatRun, Coroutine[Any, Any, AgentResponse]]:
        """Claim the agent's chat slot for this stream's chat: at its first ``__anext__``."""
        agent = self._agent
        run = await agent._start(
            self._message, handoff, self._deps, self._output, limits=self._limits
        )
        return run, agent._slot.drive(run)
