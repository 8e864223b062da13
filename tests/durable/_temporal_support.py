"""What the Temporal tests share: an engine on the session's dev server, a turn's activities.

Every test gets a task queue of its own on the one dev server of the test session (started by
``scripts/test-services``), so the tests keep apart without a server each.
"""

from __future__ import annotations

import json
from typing import Any

from hookloop.durable import TemporalEngine
from tests.conftest import unique_name

QUICK: dict[str, Any] = {"heartbeat": 1.0, "retry": 0.1, "grace": 0.5}
"""Settings that notice a dead worker within a second and pause a tenth between retries."""


def quick_engine(address: str, **options: Any) -> TemporalEngine:
    """An engine on a fresh task queue with :data:`QUICK` settings (``options`` override)."""
    return TemporalEngine(address, task_queue=unique_name("q"), **{**QUICK, **options})


async def activities(engine: TemporalEngine, workflow_id: str) -> list[str]:
    """The activity types the turn ``workflow_id`` scheduled, in order (from its history)."""
    from temporalio.client import Client

    client = await Client.connect(engine.address, namespace=engine.namespace)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


async def history_json(engine: TemporalEngine, workflow_id: str) -> str:
    """The turn's history as Temporal's JSON (what the replay tests read)."""
    from temporalio.client import Client

    client = await Client.connect(engine.address, namespace=engine.namespace)
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return json.dumps(json.loads(history.to_json()), indent=1) + "\n"
