"""Fixtures of the durable-turn tests: DBOS's system database on SQLite or PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from hookloop.durable import DBOSEngine
from tests.durable import _agents


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[DBOSEngine]:
    """An engine on a SQLite file; the test makes its DurableChats, then launches it."""
    engine = DBOSEngine(f"sqlite:///{tmp_path / 'dbos.db'}", executor_id="test")
    _agents.calls.clear()
    yield engine
    await engine.shutdown()


@pytest.fixture
def dbos_postgres_url(postgres_dsn: str) -> Iterator[str]:
    """A PostgreSQL URL for DBOS's system database: a fresh database, dropped after the test."""
    import asyncpg

    name = f"dbos_{uuid.uuid4().hex[:12]}"
    parts = urlsplit(postgres_dsn)
    yield urlunsplit(parts._replace(path=f"/{name}"))

    async def drop() -> None:
        conn = await asyncpg.connect(postgres_dsn)
        try:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await conn.close()

    asyncio.run(drop())
