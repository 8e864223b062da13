"""The executors table: each worker's heartbeat, and the atomic claim of a dead one's work.

One row per live executor of an application version, in the PostgreSQL database the workers
share, with a token per process, so that a second process with a live executor's id is told.
Times come from the database's clock, so the workers' clocks never have to agree. A claim is a
single ``UPDATE ... RETURNING``: PostgreSQL's row lock makes the second of two racing claimers
re-check the row after the first commits, see a fresh heartbeat, and take nothing.
"""

from __future__ import annotations

import re
import time
import uuid
from types import TracebackType
from typing import Any

from .._errors import UsageError

TABLE = "hookloop_executors"

# One row per (application, version, executor): a worker takes over only the executors of its
# own application version, the only ones whose workflows DBOS lets it recover. ``token`` tells
# two processes started with the same executor id apart.
_CREATE = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    app_name text NOT NULL,
    application_version text NOT NULL,
    executor_id text NOT NULL,
    token text NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    claimed_by text,
    PRIMARY KEY (app_name, application_version, executor_id)
)"""
# Two workers starting at once would race on CREATE TABLE IF NOT EXISTS (a duplicate pg_type
# row), so creation takes a transaction-scoped advisory lock first.
_CREATE_LOCK = "SELECT pg_advisory_xact_lock(hashtext('hookloop_executors'))"
_MINE = "app_name = %(app)s AND application_version = %(version)s"
_STALE = "heartbeat_at < clock_timestamp() - make_interval(secs => %(dead_after)s)"
# A row held by another live process (fresh heartbeat, another token, not claimed) is left as
# it is: nothing is returned and the joiner learns it is a duplicate.
_JOIN = f"""
INSERT INTO {TABLE} AS cur (app_name, application_version, executor_id, token, heartbeat_at)
VALUES (%(app)s, %(version)s, %(me)s, %(token)s, clock_timestamp())
ON CONFLICT (app_name, application_version, executor_id)
DO UPDATE SET heartbeat_at = clock_timestamp(), claimed_by = NULL, token = EXCLUDED.token
WHERE cur.token = EXCLUDED.token OR cur.claimed_by IS NOT NULL OR cur.{_STALE}
RETURNING executor_id"""
_HOLDER = f"""
SELECT heartbeat_at FROM {TABLE} WHERE {_MINE} AND executor_id = %(me)s"""
# A claimer keeps the rows it claimed fresh while it recovers them, so that a long recovery is
# not claimed a second time.
_RENEW = f"""
UPDATE {TABLE} SET heartbeat_at = clock_timestamp()
WHERE {_MINE} AND (
    (executor_id = %(me)s AND token = %(token)s AND claimed_by IS NULL) OR claimed_by = %(me)s
)
RETURNING claimed_by"""
_CLAIM = f"""
UPDATE {TABLE} SET claimed_by = %(me)s, heartbeat_at = clock_timestamp()
WHERE {_MINE} AND executor_id <> %(me)s AND {_STALE}
RETURNING executor_id"""
_RELEASE = f"""
DELETE FROM {TABLE} WHERE {_MINE} AND executor_id = %(dead)s AND claimed_by = %(me)s"""
# A graceful exit dates the heartbeat back to the beginning of time: the next sweep of any
# live worker claims the row at once instead of waiting for ``dead_after``.
_LEAVE = f"""
UPDATE {TABLE} SET heartbeat_at = '-infinity'
WHERE {_MINE} AND executor_id = %(me)s AND token = %(token)s AND claimed_by IS NULL"""

_DRIVER = re.compile(r"^(postgres(?:ql)?)\+[a-z0-9_]+://")


def libpq_url(database_url: str) -> str:
    """``database_url`` without a SQLAlchemy driver suffix (``postgresql+psycopg://``)."""
    return _DRIVER.sub(r"\1://", database_url)


class ExecutorLease:
    """One executor's row in the executors table, and its claims on dead executors' rows.

    Blocking (psycopg, one autocommit connection): it runs on the worker's heartbeat thread.
    """

    def __init__(
        self,
        database_url: str,
        *,
        app_name: str,
        application_version: str,
        executor_id: str,
        dead_after: float,
    ) -> None:
        self._url = libpq_url(database_url)
        self.dead_after = dead_after
        self._params: dict[str, Any] = {
            "app": app_name,
            "version": application_version,
            "me": executor_id,
            "token": uuid.uuid4().hex,
            "dead_after": dead_after,
        }
        self._conn: Any = None

    def join(self, *, poll: float = 0.5) -> None:
        """Create the table if needed and (re)start this executor's heartbeat.

        If another process holds this executor id with a fresh heartbeat, it waits (looking
        every ``poll`` seconds): a killed worker's row goes stale within ``dead_after`` and is
        taken over; a live one's heartbeat moves on, and this executor is refused.

        Raises:
            UsageError: A live worker of this application version already uses this id.
        """
        conn = self._connection()
        with conn.transaction():
            conn.execute(_CREATE_LOCK)
            conn.execute(_CREATE)
        seen = None
        while conn.execute(_JOIN, self._params).fetchone() is None:
            row = conn.execute(_HOLDER, self._params).fetchone()
            if row is not None and seen is not None and row[0] != seen:
                raise UsageError(
                    f"executor id {self._params['me']!r} is in use by a live worker of "
                    f"{self._params['app']!r} (version {self._params['version']!r}): "
                    "give each worker its own executor id"
                )
            seen = row[0] if row is not None else None
            time.sleep(poll)

    def renew(self) -> bool:
        """Beat once (and keep claimed rows fresh); False when this executor was taken over."""
        rows = self._connection().execute(_RENEW, self._params).fetchall()
        return any(row[0] is None for row in rows)

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
