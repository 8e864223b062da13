"""The Temporal workflow of a durable turn: its activities one after another, nothing more.

Temporal replays a workflow's code against its history, so this code is deterministic and
does no I/O: it only schedules activities (``hookloop.model``, ``hookloop.tool``,
``hookloop.finish``) and keeps their records, the JSON text of hookloop's steps. The turn's
own code (the agent, its hooks, the session store) runs inside the activities (see
``_temporal.py``). It imports the standard library and ``temporalio`` only, so Temporal's
sandbox can load it; a change here that alters the commands it issues breaks the replay of
turns in flight, which ``tests/durable/test_temporal_replay.py`` catches against recorded
histories.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

__all__ = ["FINISH", "MODEL", "RETRY_LATER", "TOOL", "TURN_FAILED", "TURN_WORKFLOW", "TurnWorkflow"]

TURN_WORKFLOW: Final = "hookloop.turn"
MODEL: Final = "hookloop.model"  # a model call (its pre-request chain and retries inside)
TOOL: Final = "hookloop.tool"  # a tool call
FINISH: Final = "hookloop.finish"  # the code after the last call: commits, on_chat_done
# An activity that stopped before its call ran (a store away, no agent of that name here):
# the workflow runs it again as a new activity after a pause.
RETRY_LATER: Final = "hookloop.RetryLater"
# What the turn raised: the workflow fails with it.
TURN_FAILED: Final = "hookloop.TurnFailed"
_LONGEST_PAUSE: Final = 30.0  # seconds between two runs of an activity that must wait


@workflow.defn(name=TURN_WORKFLOW)
class TurnWorkflow:
    """A durable turn: each activity replays the records so far and runs the next call."""

    @workflow.run
    async def run(self, name: str, payload: str, options: str) -> str:
        """Run the turn's activities until one returns its output.

        ``options`` (JSON): ``heartbeat`` (seconds), ``retry`` (the first pause, seconds)
        and ``call_timeout`` (seconds an activity may take).
        """
        settings = json.loads(options)
        records: list[list[str]] = []
        kind: str = MODEL
        pause = float(settings["retry"])
        policy = RetryPolicy(
            initial_interval=timedelta(seconds=pause),
            maximum_interval=timedelta(seconds=_LONGEST_PAUSE),
            non_retryable_error_types=[RETRY_LATER, TURN_FAILED],
        )
        while True:
            task = json.dumps({"workflow": name, "payload": payload, "records": records})
            try:
                text = await workflow.execute_activity(
                    kind,
                    task,
                    result_type=str,
                    start_to_close_timeout=timedelta(seconds=float(settings["call_timeout"])),
                    heartbeat_timeout=timedelta(seconds=float(settings["heartbeat"])),
                    retry_policy=policy,
                    # A cancelled turn ends once its running call stopped (its writes done).
                    cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
                )
            except ActivityError as exc:
                cause = exc.cause
                if not isinstance(cause, ApplicationError):
                    raise
                if cause.type == RETRY_LATER:
                    records.extend(json.loads(str(cause.details[0])))
                    await workflow.sleep(pause)
                    pause = min(pause * 2, _LONGEST_PAUSE)
                    continue
                if cause.type == TURN_FAILED:
                    raise ApplicationError(
                        cause.message, *cause.details, type=TURN_FAILED, non_retryable=True
                    ) from None
                raise
            pause = float(settings["retry"])
            outcome = json.loads(text)
            records.extend(outcome["records"])
            if outcome["next"] is None:
                return str(outcome["output"])
            kind = outcome["next"]
