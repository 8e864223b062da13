"""The Temporal workflow of a turn replays the recorded histories of ``histories/``.

Temporal replays a workflow's code against its history whenever a worker picks a turn up
again: a change of ``_temporal_workflow.py`` that issues other commands for the same history
would break every turn in flight at an upgrade. These histories were recorded by
``tests/durable/_temporal_histories.py`` (a batch of tools, a failed turn, a store error
waited out, a cancelled turn, a call that waits for approval until signals bring a refused
decision, then an approval); the replay needs no server.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporalio import workflow
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer
from temporalio.workflow import NondeterminismError

from hookloop.durable._temporal import workflow_runner
from hookloop.durable._temporal_workflow import TurnWorkflow

HISTORIES = Path(__file__).resolve().parent / "histories"
NAMES = ["tools", "failed", "retry_later", "cancelled", "approval"]


def history(name: str) -> WorkflowHistory:
    text = (HISTORIES / f"{name}.json").read_text()
    attributes = json.loads(text)["events"][0]["workflowExecutionStartedEventAttributes"]
    return WorkflowHistory.from_json(attributes.get("workflowId", name), text)


@pytest.mark.parametrize("name", NAMES)
async def test_the_workflow_replays_its_recorded_history(name: str) -> None:
    replayer = Replayer(workflows=[TurnWorkflow], workflow_runner=workflow_runner())
    result = await replayer.replay_workflow(history(name))
    assert result.replay_failure is None


@workflow.defn(name="hookloop.turn", sandboxed=False)  # the sandbox would load this module
class ToolFirst:
    """A changed workflow: it schedules a tool call first, as no recorded turn did."""

    @workflow.run
    async def run(self, name: str, payload: str, options: str) -> str:
        return str(
            await workflow.execute_activity(
                "hookloop.tool", "{}", start_to_close_timeout=timedelta(seconds=1)
            )
        )


async def test_a_workflow_that_issues_other_commands_fails_the_replay() -> None:
    replayer = Replayer(workflows=[ToolFirst])
    with pytest.raises(NondeterminismError):
        await replayer.replay_workflow(history("tools"))


def test_the_engine_and_the_workflow_agree_on_the_names() -> None:
    from hookloop.durable import _temporal, _temporal_workflow

    assert (_temporal._MODEL, _temporal._TOOL, _temporal._FINISH) == (
        _temporal_workflow.MODEL,
        _temporal_workflow.TOOL,
        _temporal_workflow.FINISH,
    )
    assert (_temporal._RETRY_LATER, _temporal._TURN_FAILED) == (
        _temporal_workflow.RETRY_LATER,
        _temporal_workflow.TURN_FAILED,
    )
