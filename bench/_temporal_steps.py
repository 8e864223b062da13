"""Temporal's own cost, for bench/durable.py: a workflow of empty activities, one after another."""

from __future__ import annotations

from datetime import timedelta

from temporalio import activity, workflow


@activity.defn(name="bench.empty")
async def nothing() -> str:
    """An activity that does nothing."""
    return ""


@workflow.defn(name="bench.steps", sandboxed=False)
class Steps:
    """``count`` empty activities, one after another."""

    @workflow.run
    async def run(self, count: int) -> str:
        for _ in range(count):
            await workflow.execute_activity(nothing, start_to_close_timeout=timedelta(seconds=60))
        return ""
