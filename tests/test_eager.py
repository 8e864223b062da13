"""A coroutine's first step at once, the rest in a task (``_eager.py``): what a task would do."""

from __future__ import annotations

import asyncio
import contextvars

import pytest

from hookloop._eager import Rest, first_step

where: contextvars.ContextVar[str] = contextvars.ContextVar("where", default="caller")


async def test_a_coroutine_that_does_not_wait_finishes_in_its_first_step() -> None:
    async def quick() -> int:
        where.set("quick")
        return 7

    context = contextvars.copy_context()
    assert first_step(quick(), context) == (True, 7)
    assert context[where] == "quick"  # it ran in the context given
    assert where.get() == "caller"  # not in the caller's


async def test_the_rest_runs_in_a_task_in_the_same_context() -> None:
    gate: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    seen: list[str] = []

    async def waits() -> int:
        where.set("task")
        value = await gate
        seen.append(where.get())
        await asyncio.sleep(0)  # a bare yield too
        return value * 2

    context = contextvars.copy_context()
    done, rest = first_step(waits(), context)
    assert not done
    assert isinstance(rest, Rest)
    task = asyncio.get_running_loop().create_task(rest, context=context)
    await asyncio.sleep(0)
    assert not task.done()  # it waits for the future of its first step
    gate.set_result(21)
    assert await task == 42
    assert seen == ["task"]
    assert where.get() == "caller"


async def test_a_task_cancelled_before_it_drove_the_rest_cancels_the_coroutine_where_it_waits() -> (
    None
):
    cleaned: list[str] = []

    async def waits() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cleaned.append("cancelled")
            raise

    context = contextvars.copy_context()
    _, rest = first_step(waits(), context)
    assert isinstance(rest, Rest)
    task = asyncio.get_running_loop().create_task(rest, context=context)
    task.cancel()  # before its first step
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == ["cancelled"]


async def test_an_exception_in_the_first_step_propagates() -> None:
    async def fails() -> None:
        raise ValueError("at once")

    with pytest.raises(ValueError, match="at once"):
        first_step(fails(), contextvars.copy_context())


async def test_the_rest_can_be_awaited_and_closed() -> None:
    gate: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    closed: list[bool] = []

    async def waits() -> str:
        try:
            return await gate
        finally:
            closed.append(True)

    _, rest = first_step(waits(), contextvars.copy_context())
    assert isinstance(rest, Rest)
    asyncio.get_running_loop().call_soon(gate.set_result, "ok")
    assert await rest == "ok"
    assert closed == [True]

    gate = asyncio.get_running_loop().create_future()
    _, other = first_step(waits(), contextvars.copy_context())
    assert isinstance(other, Rest)
    other.close()  # a rest nobody drives: closing it closes the coroutine
    assert closed == [True, True]
