"""Fixtures for the command-line tests.

- ``server``: a private :class:`ProviderServer` per test (the command runs in this process
  or in a child process, so it gets a server of its own, stopped after the test).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.models._provider_server import ProviderServer


@pytest.fixture
def server() -> Iterator[ProviderServer]:
    with ProviderServer() as running:
        yield running
