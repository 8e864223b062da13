"""A streamed chat run inside its consumer's task, one event at a time.

The chat's coroutine is driven from the consumer's own ``__anext__``: emitting an event
suspends the chat right where it is and hands the event to the consumer; the next
``__anext__`` resumes the chat. What the chat awaits meanwhile (the model, tools, stores) is
passed through to the consumer's task, as a plain ``await`` would. A task and a queue per
stream cost one pass of the event loop per event instead: ``chat_stream()`` took 5.3x
``chat()`` per iteration that way (bench/loop.py, ``stream_ratio``).

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
- the consumer leaving early (:meth:`StreamedChat.close`): the same, then the chat runs to
  its end with its remaining events dropped.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import types
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._events import AgentEvent, AgentResponse
    from ._loop import ChatRun

__all__ = ["STREAM_CLOSED", "StreamedChat", "handoff"]

STREAM_CLOSED = "the stream was closed before the chat finished"
"""The reason of a chat that ended because its consumer left the stream."""


class _Handoff:
    """An event on its way out: awaiting it suspends the chat until the consumer is back."""

    __slots__ = ("event",)

    def __init__(self, event: AgentEvent) -> None:
        self.event = event

    def __await__(self) -> Generator[Any, None, None]:
        yield self  # caught by StreamedChat.next_event, never seen by the event loop


handoff: Callable[[AgentEvent], Awaitable[None]] = _Handoff
"""The ``emit`` of a streamed chat: hand ``event`` to the consumer, resume after it."""


class StreamedChat:
    """The coroutine of one streamed chat, driven by its consumer.

    Attributes:
        done: Whether the chat has ended.
        response: The chat's response, once it ended successfully.
    """

    __slots__ = (
        "__weakref__",
        "_ahead",
        "_buffer",
        "_closing",
        "_context",
        "_coro",
        "_error",
        "_holding",
        "_loop",
        "_parked_asked",
        "_run",
        "_scheduled",
        "done",
        "response",
    )

    def __init__(self, run: ChatRun, coro: Coroutine[Any, Any, AgentResponse]) -> None:
        self._run = run
        self._coro = coro
        # The chat's context variables are its own, as in a task of its own: the consumer's
        # code between two events does not see them (the current chat slot, say).
        self._context = contextvars.copy_context()
        self._parked_asked = False  # whether a cancel was asked for when the chat parked
        self._loop = asyncio.get_running_loop()
        self._ahead: asyncio.Task[None] | None = None  # the helper, if any
        self._buffer: collections.deque[AgentEvent] = collections.deque()  # its events
        self._error: BaseException | None = None  # what the chat raised in it
        self._holding = False  # whether the consumer holds an event (is not pulling)
        self._scheduled = False  # whether a _run_ahead is scheduled
        self._closing = False
        self.done = False
        self.response: AgentResponse | None = None

    @types.coroutine
    def pull(self) -> Generator[Any, Any, AgentEvent | None]:
        """The consumer's next event; ``None`` once the chat has ended (see ``response``).

        Raises:
            Exception: What the chat raised.
            asyncio.CancelledError: The consumer's task was cancelled; the chat has closed.
        """
        self._holding = False
        ahead, self._ahead = self._ahead, None
        # A generator, like next_event: an `async def` layer more costs 0.5 us an event
        # (bench/loop.py, stream_ratio).
        if ahead is not None:
            # It stops at its next event now. A cancellation of ours meanwhile goes on to
            # the chat through it; the chat then closes, here, before we raise it.
            cancelled = yield from _settle(ahead).__await__()
            if cancelled is not None:
                yield from self.close().__await__()
                raise cancelled
        if self._buffer:
            event: AgentEvent | None = self._buffer.popleft()
        elif self._error is not None:
            error, self._error = self._error, None
            raise error
        elif self.done:
            return None
        else:
            event = yield from self.next_event()
        if event is not None:
            self._holding = True
            if not self._scheduled:
                # One callback at a time, holding the stream weakly: a consumer that never
                # waits (nothing in the chat does) piles up neither callbacks nor chats.
                self._scheduled = True
                self._loop.call_soon(_run_ahead, weakref.ref(self))
        return event

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
    def next_event(self) -> Generator[Any, Any, AgentEvent | None]:
        """Run the chat to its next event; ``None`` once it has ended (see ``response``).

        Raises:
            Exception: What the chat raised.
            asyncio.CancelledError: The consumer's task was cancelled; the chat has closed.
        """
        run = self._run
        run.task = asyncio.current_task(self._loop)  # the loop given: 0.1 us less an event
        error: BaseException | None = None
        if run.cancel_requested and not self._parked_asked:
            # Cancelled while the consumer held an event: where a chat in its own task
            # would have been cancelled, at the handoff.
            run.cancel_delivered = True
            error = asyncio.CancelledError()
        value: object = None
        try:
            while True:
                try:
                    if error is None:
                        yielded = self._context.run(self._coro.send, value)
                    else:
                        yielded = self._context.run(self._coro.throw, error)
                except StopIteration as stop:
                    self.done = True
                    self.response = stop.value
                    return None
                except BaseException:
                    self.done = True
                    raise
                error = None
                if type(yielded) is _Handoff:
                    self._parked_asked = run.cancel_requested
                    return yielded.event
                try:
                    value = yield yielded  # a future the chat waits for: the task's business
                except GeneratorExit:
                    self.done = True
                    self._context.run(self._coro.close)
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
    consumer waits elsewhere, not in :meth:`StreamedChat.pull`.
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
