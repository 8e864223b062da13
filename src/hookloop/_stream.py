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
import sys
import types
import typing
import weakref
from collections.abc import Awaitable, Coroutine, Generator
from typing import TYPE_CHECKING, Any

from ._events import AgentEvent, AgentResponse

if TYPE_CHECKING:
    from ._loop import ChatRun

__all__ = ["STREAM_CLOSED", "StreamedChat", "handoff"]

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
    # with the loop given); called for every event, the function call cost about 0.4 us an
    # iteration (bench/loop.py, stream_ratio).
    _current_task = asyncio.tasks._current_tasks.get  # type: ignore[attr-defined]


def _is_event(yielded: object) -> bool:
    """Whether the chat yielded an event (``handoff``) rather than what asyncio waits for.

    A task takes only futures (``_asyncio_future_blocking``) and ``None`` (a bare yield);
    anything else comes from ``handoff`` (an event of a type not in the union, too: a part
    subclassed by a model's stream).
    """
    return yielded is not None and not hasattr(yielded, "_asyncio_future_blocking")


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

    def pull(self) -> Awaitable[AgentEvent | None]:
        """The consumer's next event; ``None`` once the chat has ended (see ``response``).

        To await at once. Without a helper or kept events it is the chat's own next step:
        one generator an event, not a layer more over ``next_event`` (0.1 us an event,
        bench/loop.py ``stream_ratio``).

        Raises:
            Exception: What the chat raised.
            asyncio.CancelledError: The consumer's task was cancelled; the chat has closed.
        """
        self._holding = False
        if self._ahead is None and not self._buffer and self._error is None and not self.done:
            return self.next_event(consumer=True)
        return self._pull_kept()

    @types.coroutine
    def _pull_kept(self) -> Generator[Any, Any, AgentEvent | None]:
        """``pull`` after the helper ran: its events and error first, then the chat."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            # It stops at its next event now. A cancellation of ours meanwhile goes on to
            # the chat through it; the chat then closes, here, before we raise it.
            cancelled = yield from _settle(ahead).__await__()
            if cancelled is not None:
                yield from self.close().__await__()
                raise cancelled
        if self._buffer:
            event = self._buffer.popleft()
        elif self._error is not None:
            error, self._error = self._error, None
            raise error
        elif self.done:
            return None
        else:
            return (yield from self.next_event(consumer=True))
        self._holding = True
        if not self._scheduled:
            self._schedule_ahead()
        return event

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
                    self.response = stop.value
                    return None
                except BaseException:
                    self.done = True
                    raise
                error = None
                if type(yielded) in _EVENT_TYPES or _is_event(yielded):
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
