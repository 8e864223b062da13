"""A coroutine's first step, run at once; a task takes over only if it has to wait.

Python 3.12 has eager tasks; 3.11 has none. A task costs a turn of the event loop before its
first step runs (about 20 us a chat with a guardrail beside the first model call: a handle,
the loop's poll, the task's step). Work that usually finishes without waiting takes its
first step in the caller, in the task's own copy of the context, and only the rest of it,
if any, goes into a task.
"""

from __future__ import annotations

from collections.abc import Coroutine, Generator
from contextvars import Context
from types import TracebackType
from typing import Any, Final, Generic, TypeVar

__all__ = ["Rest", "first_step"]

_T = TypeVar("_T")
_NOTHING: Final = object()


def first_step(coro: Coroutine[Any, Any, _T], context: Context) -> tuple[bool, _T | Rest[_T]]:
    """Run ``coro`` in ``context`` until it finishes or first waits.

    Returns ``(True, result)`` when it finished, or ``(False, rest)``: a :class:`Rest` for a
    task created with the same ``context`` to drive (``loop.create_task(..., context=...)``).
    An exception it raised in this step propagates.
    """
    try:
        yielded = context.run(coro.send, None)
    except StopIteration as done:
        return True, done.value
    return False, Rest(coro, yielded)


class Rest(Coroutine[Any, Any, _T], Generic[_T]):
    """What is left of a coroutine whose first step ran: a coroutine a task can drive.

    Its first ``send`` hands the task what the coroutine waited on in that step (the
    future, or ``None`` for a bare yield), so the task waits for it as if it had run the
    step itself; later sends and throws go to the coroutine. A task cancelled before it
    drove it throws the cancellation into the coroutine where it waits.
    """

    __slots__ = ("_coro", "_yielded")

    def __init__(self, coro: Coroutine[Any, Any, _T], yielded: object) -> None:
        self._coro = coro
        self._yielded = yielded

    def send(self, value: Any) -> Any:
        """The coroutine's next step (the first: what it waited on already)."""
        if (yielded := self._yielded) is not _NOTHING:
            self._yielded = _NOTHING
            return yielded
        return self._coro.send(value)

    def throw(
        self,
        typ: type[BaseException] | BaseException,
        val: object = None,
        tb: TracebackType | None = None,
    ) -> Any:
        """Raise ``typ`` in the coroutine where it waits."""
        self._yielded = _NOTHING
        if val is None and tb is None:
            return self._coro.throw(typ)
        return self._coro.throw(typ, val, tb)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the coroutine."""
        self._yielded = _NOTHING
        self._coro.close()

    def __await__(self) -> Generator[Any, None, _T]:
        return self

    def __iter__(self) -> Rest[_T]:
        return self

    def __next__(self) -> Any:
        return self.send(None)
