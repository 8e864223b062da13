"""What the DBOS engine and the session queue share: names, the pinned version, the output check.

The two sides of one DBOS application (the workers' :class:`~hookloop.durable.DBOSEngine` and
the submitters' :class:`~hookloop.durable.SessionQueue`) agree on these; neither imports the
other.
"""

from __future__ import annotations

from typing import Final

from .._errors import DurableRecordError, StoreError, error_line
from .._stores._reach import without_password

__all__ = [
    "APPLICATION_VERSION",
    "SESSION_QUEUE",
    "dbos_workflow_name",
    "stopped_turn",
    "text_output",
    "unreachable",
]

APPLICATION_VERSION: Final = "hookloop-durable-1"
"""The DBOS application version a :class:`DBOSEngine` runs under unless told otherwise.

DBOS recovers only the workflows of its own application version, and by default derives
that from a hash of the code: any code change would leave the turns in flight unrecovered.
hookloop pins it instead, and changes it only when a release records turns differently.
Pass your own to tell apart deployments whose turns must not resume on each other.
"""

SESSION_QUEUE: Final = "hookloop_sessions"
"""The DBOS queue turns are submitted to; its partition key is the session id."""

_WORKFLOW_NAME: Final = "hookloop.durable_turn"


def dbos_workflow_name(name: str) -> str:
    """The name DBOS records for hookloop's workflow ``name``: ``"hookloop.durable_turn:<name>"``.

    One DBOS workflow per name (a turn's names its agent factory): a worker that does not
    register a name leaves its turns PENDING, for a worker that does, rather than failing them.
    """
    return f"{_WORKFLOW_NAME}:{name}"


def text_output(output: object, workflow_id: str, step: str) -> str:
    """``output`` if it is the JSON text every hookloop step returns, else the record is bad.

    Raises:
        DurableRecordError: ``output`` is not a str (the record was changed).
    """
    if not isinstance(output, str):
        reason = f"a {type(output).__name__}, not JSON text"
        raise DurableRecordError(workflow_id=workflow_id, step=step, reason=reason)
    return output


def unreachable(url: str, exc: BaseException) -> StoreError | None:
    """The :class:`StoreError` for ``exc`` if it says the database at ``url`` cannot be reached.

    DBOS and its client raise the driver's error through SQLAlchemy (``OperationalError``:
    refused, unknown host, bad password, no such database); it becomes one line naming the
    database (without its password). Anything else is None.
    """
    if type(exc).__name__ != "OperationalError" and not isinstance(exc, OSError):
        return None
    where = without_password(url)
    cause = getattr(exc, "orig", None) or exc
    reason = error_line(cause)
    return StoreError(f"the durable turns' database {where} cannot be used: {reason}", store=where)


def stopped_turn(workflow_id: str) -> StoreError:
    """The error of a turn that a store error stopped; a start with its id resumes it."""
    return StoreError(
        f"durable turn {workflow_id!r} stopped: a store it uses could not be used (the "
        "worker's log says which); start it again with the same turn_id to finish it",
        store="unknown",
    )
