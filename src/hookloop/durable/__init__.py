"""Durable chat turns: a turn survives its worker dying, and no tool runs twice by accident.

Needs the ``dbos`` extra (``pip install 'hookloop[dbos]'``) for :class:`DBOSEngine`;
importing this module does not. See ``docs/durable.md``.
"""

from ._dbos import APPLICATION_VERSION, DBOSEngine
from ._engine import DurableEngine, WorkflowBody
from ._replay import replaying
from ._turn import DurableChats, TurnHandle, workflow_id

__all__ = [
    "APPLICATION_VERSION",
    "DBOSEngine",
    "DurableChats",
    "DurableEngine",
    "TurnHandle",
    "WorkflowBody",
    "replaying",
    "workflow_id",
]
