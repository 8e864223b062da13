"""Fixtures for the provider adapter tests: the local provider server and adapters on it.

- ``quick_tls`` (autouse, per module): new clients build their TLS context from one CA
  certificate instead of the whole system bundle (see ``quick_client_tls``).
- ``server``: the session's shared :class:`ProviderServer`, emptied for each test.
- ``make_model``: builds adapters talking to ``server`` (10 s timeout unless given), closed
  after the test.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from tests.models._provider_server import ProviderServer, adapter, quick_client_tls, shared_server


@pytest.fixture(scope="module", autouse=True)
def quick_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    with quick_client_tls(tmp_path_factory.mktemp("tls")):
        yield


@pytest.fixture
def server() -> ProviderServer:
    return shared_server()


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
