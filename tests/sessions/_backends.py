"""The three session store backends for the parametrised session tests.

A :class:`Backend` says where one test's store lives (a SQLite file in the test's tmp dir, a
fresh PostgreSQL schema, or a fresh Redis key prefix), opens any number of store objects on
that same place (a "restart" is a new object), hands its address to subprocesses as JSON,
and writes raw rows behind the store's back to make corrupt data.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from hookloop.sessions import (
    PostgresSessionStore,
    RedisSessionStore,
    Retention,
    SessionStore,
    SQLiteSessionStore,
)

BACKENDS = ["sqlite", "postgres", "redis"]
ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True, kw_only=True)
class Backend:
    """Where one test's sessions live."""

    kind: str
    address: str  # a file path, a DSN (search_path set), or a Redis URL
    prefix: str = ""  # Redis only

    def store(
        self, *, retention: Retention | None = None, clock: Callable[[], float] | None = None
    ) -> SessionStore:
        return open_store(self.spec(), retention=retention, clock=clock)

    def spec(self) -> dict[str, str]:
        return {"kind": self.kind, "address": self.address, "prefix": self.prefix}

    def spec_json(self) -> str:
        return json.dumps(self.spec())

    # --- behind the store's back ------------------------------------------------------------

    async def set_row(self, session_id: str, seq: int, **columns: object) -> None:
        """Overwrite columns (``data``, ``format``, ``message_id``) of one stored message."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.address) as conn:
                for column, value in columns.items():
                    conn.execute(
                        f"UPDATE hookloop_messages SET {column} = ? "
                        "WHERE session_id = ? AND seq = ?",
                        (value, session_id, seq),
                    )
        elif self.kind == "postgres":
            for column, value in columns.items():
                await _pg(
                    self.address,
                    f"UPDATE hookloop_messages SET {column} = $1 "
                    "WHERE session_id = $2 AND seq = $3",
                    value,
                    session_id,
                    seq,
                )
        else:
            field = {"data": "d", "format": "f", "message_id": "i"}
            key = f"{self.prefix}log:{session_id}"

            async def rewrite(client: Any) -> None:
                # A stream entry cannot be edited, nor added again under its id: rebuild it.
                entries = await client.xrange(key)
                await client.delete(key)
                for entry_id, fields in entries:
                    if entry_id == f"{seq}-0".encode():
                        for column, value in columns.items():
                            fields[field[column].encode()] = str(value).encode()
                    await client.xadd(key, fields, id=entry_id)

            await _redis(self.address, rewrite)

    async def set_schema_version(self, version: str) -> None:
        if self.kind == "sqlite":
            with sqlite3.connect(self.address) as conn:
                conn.execute(
                    "UPDATE hookloop_meta SET value = ? WHERE key = 'sessions_schema'", (version,)
                )
        elif self.kind == "postgres":
            await _pg(
                self.address,
                "UPDATE hookloop_meta SET value = $1 WHERE key = 'sessions_schema'",
                version,
            )
        else:

            async def set_version(client: Any) -> None:
                await client.set(f"{self.prefix}schema", version)

            await _redis(self.address, set_version)

    async def break_record(self, session_id: str) -> None:
        """Make the session's own record unreadable (its last_seq not a number)."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.address) as conn:
                conn.execute(
                    "UPDATE hookloop_sessions SET last_seq = 'many' WHERE session_id = ?",
                    (session_id,),
                )
        elif self.kind == "postgres":  # typed columns: the closest is a counter gone back
            await _pg(
                self.address,
                "UPDATE hookloop_sessions SET last_seq = 1 WHERE session_id = $1",
                session_id,
            )
        else:

            async def set_field(client: Any) -> None:
                await client.hset(f"{self.prefix}session:{session_id}", "last_seq", "many")

            await _redis(self.address, set_field)

    async def set_record(self, session_id: str, last_seq: int | None) -> None:
        """Set the session record's ``last_seq``; ``None`` deletes the record (not the log)."""
        if self.kind == "sqlite":
            with sqlite3.connect(self.address) as conn:
                if last_seq is None:
                    conn.execute(
                        "DELETE FROM hookloop_sessions WHERE session_id = ?", (session_id,)
                    )
                else:
                    conn.execute(
                        "UPDATE hookloop_sessions SET last_seq = ? WHERE session_id = ?",
                        (last_seq, session_id),
                    )
        elif self.kind == "postgres":
            if last_seq is None:
                await _pg(
                    self.address, "DELETE FROM hookloop_sessions WHERE session_id = $1", session_id
                )
            else:
                await _pg(
                    self.address,
                    "UPDATE hookloop_sessions SET last_seq = $1 WHERE session_id = $2",
                    last_seq,
                    session_id,
                )
        else:
            record = f"{self.prefix}session:{session_id}"

            async def set_field(client: Any) -> None:
                if last_seq is None:
                    await client.delete(record)
                    await client.zrem(f"{self.prefix}sessions", session_id)
                else:
                    await client.hset(record, "last_seq", str(last_seq))

            await _redis(self.address, set_field)


def open_store(
    spec: dict[str, str],
    *,
    retention: Retention | None = None,
    clock: Callable[[], float] | None = None,
) -> SessionStore:
    """A new store object on the place ``spec`` names (also used by the subprocesses)."""
    extra: dict[str, Any] = {"retention": retention}
    if clock is not None:
        extra["clock"] = clock
    kind, address = spec["kind"], spec["address"]
    if kind == "sqlite":
        return SQLiteSessionStore(address, **extra)
    if kind == "postgres":
        return PostgresSessionStore(address, max_connections=4, **extra)
    return RedisSessionStore(address, prefix=spec["prefix"], **extra)


async def _pg(dsn: str, sql: str, *args: object) -> None:
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(sql, *args)
    finally:
        await conn.close()


async def _redis(url: str, action: Callable[[Any], Any]) -> None:
    from redis.asyncio import Redis

    client = Redis.from_url(url)
    try:
        await action(client)
    finally:
        await client.aclose()


def backend_for(kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """The place for one test: the database fixtures make each one fresh and clean it up."""
    if kind == "sqlite":
        return Backend(kind=kind, address=str(tmp_path / "sessions.db"))
    if kind == "postgres":
        return Backend(kind=kind, address=request.getfixturevalue("postgres_isolated_dsn"))
    return Backend(
        kind=kind,
        address=request.getfixturevalue("redis_url"),
        prefix=request.getfixturevalue("redis_namespace"),
    )


def start_worker(backend: Backend, *args: str) -> subprocess.Popen[str]:
    """Start ``_worker.py`` (``SESSION MODE N TAG`` in ``args``) on ``backend``'s place."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.sessions._worker", backend.spec_json(), *args],
        cwd=ROOT,  # where ``tests`` is importable as a package
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def kill(process: subprocess.Popen[str]) -> tuple[str, str]:
    """SIGKILL the process; what it wrote to stdout (not read yet) and stderr.

    Reads through the pipes' text wrappers (not ``communicate()``, which would skip what a
    ``readline()`` had buffered already).
    """
    os.kill(process.pid, signal.SIGKILL)
    assert process.stdout is not None
    assert process.stderr is not None
    with process.stdout, process.stderr:
        rest, errors = process.stdout.read(), process.stderr.read()
    process.wait()
    return rest, errors


POSIX_START = 1_800_000_000.0
"""Where the session tests' FakeClock starts: 2027-01-15T08:00:00Z, as POSIX seconds."""
