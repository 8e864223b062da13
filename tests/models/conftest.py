"""Fixtures for the provider adapter tests.

- ``make_model``: builds adapters talking to ``server`` (the session's provider test server,
  ``tests/conftest.py``; 10 s timeout unless given), closed after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from tests.models._provider_server import ProviderServer, adapter


@pytest.fixture
async def make_model(server: ProviderServer) -> AsyncIterator[Callable[..., Any]]:
    """Builds adapters talking to ``server``; closed afterwards with ``aclose()``."""
    made: list[Any] = []

    def make(api: str, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", 10)
        made.append(adapter(api, server, **kwargs))
        return made[-1]

    yield make
    for model in made:
        await model.aclose()  # an unclosed connection would fail the test (ResourceWarning)
