"""Closing and abandoning the per-loop connection pools and clients of the server stores.

Each server store keeps its pool (asyncpg) or client (redis-py) in a
:class:`~hookloop._loopbound.LoopBound`, which calls these: the closers in the resource's own
loop, the abandoners for a resource whose loop is closed already.
"""

from __future__ import annotations

import contextlib
from typing import Any

__all__ = ["abandon_client", "abandon_pool", "close_client", "close_pool"]


async def close_pool(pool: Any) -> None:
    """Close an asyncpg pool, waiting for its connections to be released."""
    await pool.close()


def abandon_pool(pool: Any) -> None:
    """Drop an asyncpg pool of a finished loop without awaiting."""
    # Its event loop may be closed already; then the sockets go with the objects.
    with contextlib.suppress(RuntimeError):
        pool.terminate()


async def close_client(client: Any) -> None:
    """Close a redis-py asyncio client."""
    await client.aclose()


def abandon_client(client: Any) -> None:
    """A redis-py client of a finished loop: its sockets went with that loop; nothing to do."""
