"""The executors table: each worker's heartbeat, and the atomic claim of a dead one's work.

One row per live executor of an application, in the PostgreSQL database the workers share.
Times come from the database's clock, so the workers' clocks never have to agree. A claim is a
single ``UPDATE ... RETURNING``: PostgreSQL's row lock makes the second of two racing claimers
re-check the row after the first commits, see a fresh heartbeat, and take nothing.
"""

from __future__ import annotations

import re
from types import TracebackType
from typing import Any

TABLE = "hookloop_executors"

_CREATE = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    app_name text NOT NULL,
    executor_id text NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    claimed_by text,
    PRIMARY KEY (app_name, executor_id)
)"""
# Two workers starting at once would race on CREATE TABLE IF NOT EXISTS (a duplicate pg_type
# row), so creation takes a transaction-scoped advisory lock first.
_CREATE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('hookloop_executors'))"
_JOIN = f"""
INSERT INTO {TABLE} (app_name, executor_id, heartbeat_at, claimed_by)
VALUES (%(app)s, %(me)s, clock_timestamp(), NULL)
ON CONFLICT (app_name, executor_id)
DO UPDATE SET heartbeat_at = clock_timestamp(), claimed_by = NULL"""
_RENEW = f"""
UPDATE {TABLE} SET heartbeat_at = clock_timestamp()
WHERE app_name = %(app)s AND executor_id = %(me)s AND claimed_by IS NULL
RETURNING executor_id"""
_CLAIM = f"""
UPDATE {TABLE} SET claimed_by = %(me)s, heartbeat_at = clock_timestamp()
WHERE app_name = %(app)s AND executor_id <> %(me)s
  AND heartbeat_at < clock_timestamp() - make_interval(secs => %(dead_after)s)
RETURNING executor_id"""
_RELEASE = f"""
DELETE FROM {TABLE} WHERE app_name = %(app)s AND executor_id = %(dead)s AND claimed_by = %(me)s"""
# A graceful exit dates the heartbeat back to the beginning of time: the next sweep of any
# live worker claims the row at once instead of waiting for ``dead_after``.
_LEAVE = f"""
UPDATE {TABLE} SET heartbeat_at = '-infinity'
WHERE app_name = %(app)s AND executor_id = %(me)s AND claimed_by IS NULL"""

_DRIVER = re.compile(r"^(postgres(?:ql)?)\+[a-z0-9_]+://")


def libpq_url(database_url: str) -> str:
    """``database_url`` without a SQLAlchemy driver suffix (``postgresql+psycopg://``)."""
    return _DRIVER.sub(r"\1://", database_url)


class ExecutorLease:
    """One executor's row in the executors table, and its claims on dead executors' rows.

    Blocking (psycopg, one autocommit connection): it runs on the worker's heartbeat thread.
    """

    def __init__(
        self, database_url: str, *, app_name: str, executor_id: str, dead_after: float
    ) -> None:
        self._url = libpq_url(database_url)
        self._params: dict[str, Any] = {
            "app": app_name,
            "me": executor_id,
            "dead_after": dead_after,
        }
        self._conn: Any = None

    def join(self) -> None:
        """Create the table if needed and (re)start this executor's heartbeat."""
        conn = self._connection()
        with conn.transaction():
            conn.execute(_CREATE_LOCK)
            conn.execute(_CREATE)
        conn.execute(_JOIN, self._params)

    def renew(self) -> bool:
        """Beat once; False when another worker has declared this executor dead."""
        return self._connection().execute(_RENEW, self._params).fetchone() is not None

    def claim_dead(self) -> list[str]:
        """Claim every executor whose heartbeat is older than ``dead_after``; their ids."""
        rows = self._connection().execute(_CLAIM, self._params).fetchall()
        return sorted(row[0] for row in rows)

    def release(self, executor_id: str) -> None:
        """Forget a claimed executor once its workflows are back on their queues."""
        self._connection().execute(_RELEASE, {**self._params, "dead": executor_id})

    def leave(self) -> None:
        """Mark this executor as gone, so a live worker takes what it left at once."""
        self._connection().execute(_LEAVE, self._params)

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed:
            import psycopg

            self._conn = psycopg.connect(self._url, autocommit=True, connect_timeout=10)
        return self._conn

    def __enter__(self) -> ExecutorLease:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
