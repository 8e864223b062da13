"""Fixtures of the durable-turn tests: DBOS's system database on SQLite or PostgreSQL."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest


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
