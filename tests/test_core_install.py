"""A core-only install (``pip install hookloop``, no extras) in a fresh virtual environment.

The quick start with the scripted model works; a hosted model says which extra to install,
in one line, from Python and from the command. The environment is made without pip (the
running interpreter's pip installs into it), and the build backend and pydantic come from
pip's cache or the package index, so this takes a few seconds.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._once import once_per_run

ROOT = Path(__file__).resolve().parent.parent
EXTRA_MESSAGES = {
    "OpenAIModel": "OpenAIModel needs the 'openai' extra: pip install 'hookloop[openai]'",
    "OpenAIResponsesModel": (
        "OpenAIResponsesModel needs the 'openai' extra: pip install 'hookloop[openai]'"
    ),
    "AnthropicModel": (
        "AnthropicModel needs the 'anthropic' extra: pip install 'hookloop[anthropic]'"
    ),
    "BedrockModel": "BedrockModel needs the 'bedrock' extra: pip install 'hookloop[bedrock]'",
}


@pytest.fixture(scope="module")
def core(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ``bin`` directory of a fresh environment holding hookloop and its core only.

    Built once for the whole run, whichever workers run these tests (``tests/_once.py``).
    """
    return once_per_run(tmp_path_factory, "core-install", _make_core) / "venv" / "bin"


def _make_core(directory: Path) -> None:
    venv = directory / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install"]
    install += ["--quiet", "--disable-pip-version-check", "--no-input", str(ROOT)]
    done = subprocess.run(install, capture_output=True, text=True, env=_env(), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr


def _env() -> dict[str, str]:
    # Nothing of this process's environment that could import the worktree or hold a key,
    # nor the one CA certificate the tests' loopback clients use (pip may reach the index).
    dropped = (
        "PYTHONPATH",
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "HOOKLOOP_API_KEY",
        "SSL_CERT_FILE",
    )
    return {key: value for key, value in os.environ.items() if key not in dropped}


def run(
    core: Path, *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(core / args[0]), *args[1:]],
        capture_output=True,
        text=True,
        env={**_env(), **(env or {})},
        cwd=cwd,
        timeout=120,
    )


def test_the_environment_holds_no_extra(core: Path, tmp_path: Path) -> None:
    code = (
        "import importlib.util as u, hookloop, hookloop.models;"
        "print([m for m in ('openai', 'anthropic', 'httpx2', 'aiobotocore') if u.find_spec(m)],"
        f" hookloop.__file__.startswith({str(ROOT)!r}))"
    )
    done = run(core, "python", "-c", code, cwd=tmp_path)

    assert (done.returncode, done.stdout, done.stderr) == (0, "[] False\n", "")


def test_the_scripted_quick_start_runs(core: Path, tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    quick_start = next(block for block in blocks if "ScriptedModel(" in block)
    (tmp_path / "quick_start.py").write_text(quick_start)

    done = run(core, "python", "quick_start.py", cwd=tmp_path)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "17 x 23 = 391"


def test_a_hosted_model_names_its_extra_in_one_line(core: Path, tmp_path: Path) -> None:
    code = """
from hookloop import MissingExtraError, UsageError
from hookloop.models import AnthropicModel, BedrockModel, OpenAIModel, OpenAIResponsesModel

for make in (
    lambda: OpenAIModel("m", api_key="k"),
    lambda: OpenAIResponsesModel("m", api_key="k"),
    lambda: AnthropicModel("m", api_key="k"),
    lambda: BedrockModel("m"),
):
    try:
        make()
    except MissingExtraError as exc:
        assert isinstance(exc, UsageError) and isinstance(exc, ImportError)
        print(exc)
"""
    done = run(core, "python", "-c", code, cwd=tmp_path)

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == list(EXTRA_MESSAGES.values())


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("openai:gpt-4o-mini", EXTRA_MESSAGES["OpenAIModel"]),
        ("anthropic:claude-sonnet-4-5", EXTRA_MESSAGES["AnthropicModel"]),
        ("http://127.0.0.1:9/v1#m", EXTRA_MESSAGES["OpenAIModel"]),
        ("bedrock:amazon.nova-micro-v1:0", EXTRA_MESSAGES["BedrockModel"]),
    ],
)
@pytest.mark.parametrize("keys", [{}, {"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}])
def test_the_command_names_the_extra_in_one_line(
    core: Path, tmp_path: Path, spec: str, message: str, keys: dict[str, str]
) -> None:
    # The extra is named first: no one should set a key only to learn the client is missing.
    done = run(core, "hookloop", "run", "--model", spec, "hi", cwd=tmp_path, env=keys)

    assert (done.returncode, done.stdout) == (2, "")
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.rstrip().endswith(message)


@pytest.mark.parametrize(
    "module",
    [
        "hookloop",
        "hookloop.context",
        "hookloop.durable",
        "hookloop.hooks",
        "hookloop.mcp",
        "hookloop.memory",
        "hookloop.models",
        "hookloop.observe",
        "hookloop.retry",
        "hookloop.sessions",
        "hookloop.testing",
    ],
)
def test_a_star_import_of_every_public_module_works_without_extras(
    core: Path, tmp_path: Path, module: str
) -> None:
    # Every name of __all__ is loaded: the stores import their driver only to connect.
    code = f"from {module} import *; import {module} as m; print(len(m.__all__) > 0)"
    done = run(core, "python", "-c", code, cwd=tmp_path)

    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n", "")


def test_a_server_store_names_its_extra_when_it_connects(core: Path, tmp_path: Path) -> None:
    code = """
import asyncio
from hookloop import MissingExtraError
from hookloop.sessions import PostgresSessionStore, RedisSessionStore

stores = [PostgresSessionStore("postgresql://u@127.0.0.1:9/d"), RedisSessionStore("redis://h:9")]
for store in stores:
    try:
        asyncio.run(store.list_sessions())
    except MissingExtraError as exc:
        print(exc)
"""
    done = run(core, "python", "-c", code, cwd=tmp_path)

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "PostgresSessionStore needs the 'postgres' extra: pip install 'hookloop[postgres]'",
        "RedisSessionStore needs the 'redis' extra: pip install 'hookloop[redis]'",
    ]


def test_the_durable_engine_names_its_extra(core: Path, tmp_path: Path) -> None:
    code = """
from hookloop import MissingExtraError
from hookloop.durable import DBOSEngine

try:
    DBOSEngine("sqlite:///turns.db")
except MissingExtraError as exc:
    print(exc)
"""
    done = run(core, "python", "-c", code, cwd=tmp_path)

    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "DBOSEngine needs the 'dbos' extra: pip install 'hookloop[dbos]'\n"
