"""Durable chat turns: a turn survives its worker dying, and no tool runs twice by accident.

Needs the ``dbos`` extra (``pip install 'hookloop[dbos]'``) for :class:`DBOSEngine`, or the
``temporal`` extra for :class:`TemporalEngine`; importing this module needs neither. See
``docs/durable.md``, and ``docs/scaling.md`` for many workers on PostgreSQL (``hookloop
worker``, :class:`SessionQueue`).
"""

from .._publish import publish as _publish
from ._dbos import APPLICATION_VERSION, DBOSEngine
from ._engine import DurableEngine, WorkflowBody
from ._queue import SessionQueue
from ._replay import replaying
from ._temporal import TemporalEngine
from ._temporal_worker import run_temporal_worker
from ._turn import DurableChats, TurnHandle, workflow_id
from ._workers import Worker, WorkerTimings, run_worker

__all__ = [
    "APPLICATION_VERSION",
    "DBOSEngine",
    "DurableChats",
    "DurableEngine",
    "SessionQueue",
    "TemporalEngine",
    "TurnHandle",
    "Worker",
    "WorkerTimings",
    "WorkflowBody",
    "replaying",
    "run_temporal_worker",
    "run_worker",
    "workflow_id",
]

_publish(globals(), __all__)
