"""The Temporal workflow of a durable turn: its activities one after another, nothing more.

Temporal replays a workflow's code against its history, so this code is deterministic and
does no I/O: it only schedules activities (``hookloop.model``, ``hookloop.tool``,
``hookloop.finish``) and keeps their records, the JSON text of hookloop's steps. The turn's
own code (the agent, its hooks, the session store) runs inside the activities (see
``_temporal.py``). It imports the standard library and ``temporalio`` only, so Temporal's
sandbox can load it; a change here that alters the commands it issues breaks the replay of
turns in flight, which ``tests/durable/test_temporal_replay.py`` catches against recorded
histories.

A turn whose calls wait for approval does not end: it waits here, running no activity, for
the decisions (the signal ``hookloop.decide``), then runs them as a part of its own (its
activities replay that part's records only) and goes on. Each part's output is kept under
its key (``""`` for the first, the resume's turn id for the others), which the update
``hookloop.outcome`` waits for.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Final

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

__all__ = [
    "DECIDE",
    "ENDED",
    "FINISH",
    "MODEL",
    "NOT_WAITING",
    "OUTCOME",
    "RETRY_LATER",
    "SETTLED",
    "STATE",
    "TOOL",
    "TURN_FAILED",
    "TURN_WORKFLOW",
    "TurnWorkflow",
]

TURN_WORKFLOW: Final = "hookloop.turn"
MODEL: Final = "hookloop.model"  # a model call (its pre-request chain and retries inside)
TOOL: Final = "hookloop.tool"  # a tool call
FINISH: Final = "hookloop.finish"  # the code after the last call: commits, on_chat_done
# An activity that stopped before its call ran (a store away, no agent of that name here):
# the workflow runs it again as a new activity after a pause.
RETRY_LATER: Final = "hookloop.RetryLater"
# What the turn raised: the workflow fails with it.
TURN_FAILED: Final = "hookloop.TurnFailed"
DECIDE: Final = "hookloop.decide"  # signal: (key, payload) the decisions on the waiting calls
OUTCOME: Final = "hookloop.outcome"  # update: (key) the output of that part of the turn
SETTLED: Final = "hookloop.settled"  # update: returns once the turn waits or has ended
STATE: Final = "hookloop.state"  # query: whether it waits, and the keys it knows
NOT_WAITING: Final = "hookloop.NotWaiting"  # decisions that came when no call waited
ENDED: Final = "hookloop.Ended"  # the turn ended without that part's output
_LONGEST_PAUSE: Final = 30.0  # seconds between two runs of an activity that must wait


@workflow.defn(name=TURN_WORKFLOW)
class TurnWorkflow:
    """A durable turn: each activity replays the records so far and runs the next call."""

    def __init__(self) -> None:
        self._outputs: dict[str, str] = {}  # key of a part -> its output
        self._refused: dict[str, tuple[str, str, list[str]]] = {}  # key -> type, message, details
        self._decisions: list[tuple[str, str]] = []  # (key, payload) to run next
        self._current = ""  # the key of the part running
        self._waiting = False
        self._ended = False

    @workflow.run
    async def run(self, name: str, payload: str, options: str) -> str:
        """Run the turn's parts until one ends without calls waiting; its output.

        ``options`` (JSON): ``heartbeat`` (seconds), ``retry`` (the first pause, seconds)
        and ``call_timeout`` (seconds an activity may take).
        """
        settings = json.loads(options)
        closed = False
        try:
            while True:
                output = await self._part(name, payload, settings)
                if output is not None:
                    self._outputs[self._current] = output
                    if not json.loads(output).get("pending"):
                        return output
                # Calls wait for approval (or the decisions were refused): no activity runs
                # until the next decisions come, however long that takes.
                self._waiting = True
                await workflow.wait_condition(lambda: bool(self._decisions))
                self._waiting = False
                self._current, payload = self._decisions.pop(0)
        except GeneratorExit:
            # The garbage collector closes a turn that a stopped worker kept (Temporal evicts
            # no idle cached workflow at shutdown) outside the workflow's loop, where no
            # workflow function may run; the turn goes on on another worker.
            closed = True
            raise
        finally:
            self._ended = True
            if not closed and not workflow.all_handlers_finished():
                await workflow.wait_condition(workflow.all_handlers_finished)

    async def _part(self, name: str, payload: str, settings: dict[str, float]) -> str | None:
        """One part's activities until one returns its output (``None``: decisions refused)."""
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
                    details = [str(d) for d in cause.details]
                    if self._current and not records:
                        # Decisions refused before any call ran (as agent.resume() refuses
                        # them): the calls wait on; the resume's caller gets the error.
                        self._refused[self._current] = (TURN_FAILED, cause.message, details)
                        return None
                    raise ApplicationError(
                        cause.message, *details, type=TURN_FAILED, non_retryable=True
                    ) from None
                raise
            pause = float(settings["retry"])
            outcome = json.loads(text)
            records.extend(outcome["records"])
            if outcome["next"] is None:
                return str(outcome["output"])
            kind = outcome["next"]

    @workflow.signal(name=DECIDE)
    def decide(self, key: str, payload: str) -> None:
        """The decisions on the waiting calls, under the resume's ``key``.

        A key seen before (a resume sent again) changes nothing; decisions that come when
        no call waits are refused (the update of their key says so).
        """
        if key in self._outputs or key in self._refused or key == self._current:
            return
        if any(k == key for k, _ in self._decisions):
            return
        if not self._waiting or self._decisions:
            message = "nothing to resume: no tool call of this turn waits for approval"
            self._refused[key] = (NOT_WAITING, message, [])
            return
        self._decisions.append((key, payload))

    @workflow.update(name=OUTCOME)
    async def outcome(self, key: str) -> str:
        """The output of the part under ``key`` once it has ended (it may wait for approval)."""
        await workflow.wait_condition(
            lambda: key in self._outputs or key in self._refused or self._ended
        )
        if key in self._outputs:
            return self._outputs[key]
        if key in self._refused:
            kind, message, details = self._refused[key]
            raise ApplicationError(message, *details, type=kind, non_retryable=True)
        raise ApplicationError("the turn ended without this part", type=ENDED, non_retryable=True)

    @workflow.update(name=SETTLED)
    async def settled(self) -> None:
        """Returns once the turn waits for decisions or has ended."""
        await workflow.wait_condition(lambda: self._waiting or self._ended)

    @workflow.query(name=STATE)
    def state(self) -> str:
        """JSON: ``waiting`` (calls wait for decisions) and ``keys`` (the parts it knows)."""
        keys = [*self._outputs, *self._refused, *(k for k, _ in self._decisions), self._current]
        return json.dumps({"waiting": self._waiting and not self._decisions, "keys": keys})
