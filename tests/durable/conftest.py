"""Fixtures of the durable-turn tests.

- ``engine``: a DBOS engine on a SQLite file in the test's tmp dir (not launched yet).
- ``database_url``: a fresh, empty PostgreSQL database on the test server, dropped after the
  test (DBOS's system tables, the executors table, session stores).
- ``client``: a DBOS client on ``database_url``, to submit turns from the test process.
- ``dbos_workers``: worker processes running the plain DBOS workflow of
  ``tests.durable._dbos_worker``, all killed at the end of the test.
- ``own_postgres``: a PostgreSQL server of the test's own, which the test may stop and start.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from hookloop.durable import DBOSEngine
from tests.durable import _agents
from tests.durable._quick_dbos import dbos_engine
from tests.durable._workers_support import OwnPostgres, Workers


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[DBOSEngine]:
    """An engine on a SQLite file; the test makes its DurableChats, then launches it."""
    engine = dbos_engine(f"sqlite:///{tmp_path / 'dbos.db'}", executor_id="test")
    _agents.calls.clear()
    yield engine
    await engine.shutdown()


@pytest.fixture
def database_url(postgres_dsn: str) -> Iterator[str]:
    """A fresh, empty PostgreSQL database, dropped (its connections ended) after the test."""
    import psycopg

    name = f"w_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(postgres_dsn)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def client(database_url: str) -> Iterator[Any]:
    """A ``DBOSClient`` on ``database_url``."""
    from dbos import DBOSClient

    client = DBOSClient(system_database_url=database_url)
    try:
        yield client
    finally:
        client.destroy()


@pytest.fixture
def dbos_workers(database_url: str, tmp_path: Path) -> Iterator[Workers]:
    """Worker processes of ``tests.durable._dbos_worker`` on ``database_url``."""
    workers = Workers("tests.durable._dbos_worker", database_url, tmp_path)
    try:
        yield workers
    finally:
        workers.close()


@pytest.fixture
def own_postgres() -> Iterator[OwnPostgres]:
    """A PostgreSQL server of the test's own (``OwnPostgres``)."""
    server = OwnPostgres()
    try:
        yield server
    finally:
        server.close()
