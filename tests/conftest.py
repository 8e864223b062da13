"""Test-wide settings and the database fixtures.

PostgreSQL and Redis are real servers on loopback, started by ``scripts/test-services``
(``make test`` runs it). Their addresses come from the environment or from the
``.services/env`` file the script writes:

- ``postgres_dsn`` / ``redis_url`` (session-scoped): the server addresses.
- ``postgres_isolated_dsn`` (per test): a DSN whose ``search_path`` is a fresh schema,
  dropped after the test, so tests never see each other's tables.
- ``redis_namespace`` (per test): a unique key prefix; every key under it is deleted after
  the test.
- ``backend`` (per test, parametrised): a fresh place for session stores on SQLite,
  PostgreSQL and Redis in turn (``tests/sessions/_backends.py``); used by the session, store
  and cancellation tests.

And the two model servers:

- ``server`` (per test): the session's :class:`ProviderServer` (a real HTTP server on
  loopback speaking the providers' wire formats), emptied for the test. Commands the test
  starts in child processes reach it too.
- ``local_model`` (session-scoped): the real local model (llama.cpp serving SmolLM2-135M),
  loaded once per session (per xdist worker). A test that takes it runs in the session's
  event loop, where the model's HTTP client lives: this file marks it so.

Every official client loads one CA certificate instead of the system bundle
(``quick_client_tls``, autouse for the session): the tests speak plain HTTP on loopback.

Under pytest-xdist each worker is a session of its own: its own servers, its own local model;
the databases are per test already (a schema, a key prefix, a database), so workers never
share rows, keys or files.

Without a server the fixtures skip the test on a developer's machine; under CI (``CI`` set
to anything truthy) a missing server is a hard failure, never a skip.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import uuid
from collections.abc import AsyncIterator, Coroutine, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
import pytest_asyncio
from hypothesis import HealthCheck, settings

from hookloop.models import LocalModel
from tests.models._provider_server import ProviderServer, quick_client_tls
from tests.sessions._backends import BACKENDS, Backend, backend_for

# Property tests build histories of thousands of messages: on a loaded 2-core CI machine a
# single example can take longer than hypothesis's default 200 ms deadline, which would make
# the suite flaky without saying anything about the code. Correctness is what they check;
# speed is measured in bench/.
settings.register_profile("hookloop", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("hookloop")

POSTGRES_ENV = "HOOKLOOP_TEST_POSTGRES_DSN"
REDIS_ENV = "HOOKLOOP_TEST_REDIS_URL"
TEMPORAL_ENV = "HOOKLOOP_TEST_TEMPORAL_ADDRESS"
_SERVICES_ENV_FILE = Path(__file__).resolve().parent.parent / ".services" / "env"


def _under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _service_address(name: str) -> str:
    """The address in the environment, else in ``.services/env``; skip or fail without one."""
    value = os.environ.get(name)
    if not value and _SERVICES_ENV_FILE.is_file():
        for line in _SERVICES_ENV_FILE.read_text().splitlines():
            key, _, found = line.partition("=")
            if key.strip() == name:
                value = found.strip()
    if value:
        return value
    message = f"{name} is not set and .services/env has no entry: run `scripts/test-services start`"
    if _under_ci():
        pytest.fail(f"{message} (CI is set, so a missing server is a failure)", pytrace=False)
    pytest.skip(message)


def _driver(module: str) -> Any:
    """Import a database driver; a missing one skips, or fails under CI."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        message = f"{module} is not installed (make test installs the dev extras): {exc}"
        if _under_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


def _check_reachable(what: str, probe: Coroutine[Any, Any, None], *errors: type[Exception]) -> None:
    try:
        asyncio.run(probe)
    except (OSError, TimeoutError, *errors) as exc:
        message = f"{what} is configured but unreachable: {exc}"
        if _under_ci():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The DSN of the test PostgreSQL server (superuser ``postgres``, database ``postgres``)."""
    dsn = _service_address(POSTGRES_ENV)
    asyncpg = _driver("asyncpg")

    async def probe() -> None:
        conn = await asyncpg.connect(dsn, timeout=10)
        await conn.close()

    _check_reachable("PostgreSQL", probe())
    return dsn


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The URL of the test Redis server (database 0)."""
    url = _service_address(REDIS_ENV)
    redis = _driver("redis.asyncio")

    async def probe() -> None:
        client = redis.Redis.from_url(url, socket_connect_timeout=10)
        try:
            await client.ping()
        finally:
            await client.aclose()

    _check_reachable("Redis", probe(), _driver("redis.exceptions").ConnectionError)
    return url


@pytest.fixture(scope="session")
def temporal_address() -> str:
    """``host:port`` of the test Temporal dev server (one per test session, in memory).

    Tests on it keep apart by task queue and workflow id (:func:`unique_name`), not by server.
    """
    address = _service_address(TEMPORAL_ENV)
    _driver("temporalio")

    async def probe() -> None:
        from temporalio.client import Client

        async with asyncio.timeout(10):
            await Client.connect(address)

    _check_reachable("Temporal", probe(), RuntimeError)
    return address


def unique_name(prefix: str) -> str:
    """``prefix`` and a fresh suffix: a task queue or id no other test on a shared server uses."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def with_search_path(dsn: str, schema: str) -> str:
    """``dsn`` with ``search_path`` set to ``schema`` (libpq ``options``; asyncpg and psycopg)."""
    separator = "&" if "?" in dsn else "?"
    return f"{dsn}{separator}options={quote(f'-c search_path={schema}')}"


@pytest.fixture
def postgres_isolated_dsn(postgres_dsn: str) -> Iterator[str]:
    """A DSN whose ``search_path`` is a fresh, empty schema, dropped (cascade) after the test."""
    import asyncpg

    schema = f"t_{uuid.uuid4().hex[:16]}"

    async def run(sql: str) -> None:
        conn = await asyncpg.connect(postgres_dsn)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run(f"CREATE SCHEMA {schema}"))
    try:
        yield with_search_path(postgres_dsn, schema)
    finally:
        asyncio.run(run(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))


@pytest.fixture
def redis_namespace(redis_url: str) -> Iterator[str]:
    """A unique key prefix (``"t:<hex>:"``); every key under it is deleted after the test."""
    from redis.asyncio import Redis

    prefix = f"t:{uuid.uuid4().hex[:16]}:"
    yield prefix

    async def cleanup() -> None:
        client = Redis.from_url(redis_url)
        try:
            keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
            if keys:
                await client.delete(*keys)
        finally:
            await client.aclose()

    asyncio.run(cleanup())


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each test that takes it runs once per backend, on a fresh, private place."""
    return backend_for(request.param, request, tmp_path)


@pytest.fixture(scope="session", autouse=True)
def quick_tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Clients made in this session (and its child processes) load one CA certificate."""
    with quick_client_tls(tmp_path_factory.mktemp("tls")):
        yield


# Fake AWS credentials and region for BedrockModel against the local server: no test reads
# a real profile, a real key or the instance metadata service.
FAKE_AWS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}


@pytest.fixture(scope="session", autouse=True)
def fake_aws() -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in (*FAKE_AWS, "AWS_PROFILE", "AWS_SESSION_TOKEN")}
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    os.environ.update(FAKE_AWS)
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def provider_server() -> Iterator[ProviderServer]:
    """The session's provider test server; tests take ``server``, which empties it first."""
    with ProviderServer() as running:
        yield running


@pytest.fixture
def server(provider_server: ProviderServer) -> ProviderServer:
    """The provider test server, with no reply queued and no request recorded yet."""
    provider_server.reset()
    return provider_server


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def local_model() -> AsyncIterator[LocalModel]:
    """The bundled local model (1,024-token context), loaded once for the session."""
    model = LocalModel(context_window=1024)
    await model.start()
    yield model
    await model.aclose()


# The modules whose tests take longest (the stress runs, the local model, worker processes,
# the docs pages' scripts; measured on 2 cores), longest first. They run before the rest, so
# the run ends on short tests: under `--dist worksteal` the worker that runs out of tests takes
# the end of the other's queue, and neither then waits long for the other's last test.
LONGEST_FIRST = (
    "tests/test_loop_cancel.py::",
    "tests/models/test_local.py::",
    "tests/durable/",
    "tests/test_docs.py::",
    "tests/test_core_install.py::",
    "tests/cli/test_terminal.py::",
    "tests/observe/test_otel_local.py::",
    "tests/models/test_output_providers.py::",
    "tests/test_output.py::",
)


# The tests that run mypy on a snippet (tests/_typecheck.py) run last: `make test` runs the
# mypy gate beside pytest, and by then its cache holds hookloop, so each of them checks its
# snippet alone (about a second); run first, the one that came first checked the whole
# package again (half a minute of a core, beside the gate's own check).
RUN_LAST = (
    "tests/test_output.py::test_a_type_checker_infers_the_output_type_from_the_chat",
    "tests/test_run_context.py::test_mypy_checks_what_a_tool_does_with_its_deps",
)


def _longest_first(item: pytest.Item) -> int:
    if item.nodeid.startswith(RUN_LAST):
        return len(LONGEST_FIRST) + 1
    for rank, prefix in enumerate(LONGEST_FIRST):
        if item.nodeid.startswith(prefix):
            return rank
    return len(LONGEST_FIRST)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest modules first and the mypy tests last; run each test that takes
    ``local_model`` in its loop.

    The order is otherwise pytest's (a stable sort), and the same in every worker, as
    pytest-xdist requires.
    """
    items.sort(key=_longest_first)
    session_loop = pytest.mark.asyncio(loop_scope="session")
    for item in items:
        if "local_model" in getattr(item, "fixturenames", ()):
            item.add_marker(session_loop, append=False)
