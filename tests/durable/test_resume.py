"""A durable turn resumed after a SIGKILL at the edge of a commit: each message stored once.

Each test runs ``_resume_worker.py`` in a child process until its stop, kills it, and
starts it again, which resumes the turn (see ``test_recovery.py`` for the calls' steps).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hookloop.sessions import SQLiteSessionStore, dump_messages
from tests._processes import finish, kill_at_stop
from tests.conftest import unique_name
from tests.sessions._backends import ROOT

ENGINES = ["dbos", "temporal"]


@pytest.fixture
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The tests' engine: DBOS on a SQLite file, or a fresh task queue on the Temporal server."""
    if request.param == "temporal":
        address = request.getfixturevalue("temporal_address")
        return f"temporal://{address}/{unique_name('resume')}"
    return f"sqlite:///{tmp_path / 'dbos.db'}"


def session_of(engine: str) -> str:
    """The session of the test's turns: its own on the shared Temporal server."""
    return engine.rpartition("/")[2] if engine.startswith("temporal://") else "s-1"


def start(tmp_path: Path, spec: dict[str, object]) -> subprocess.Popen[str]:
    """A worker on the test's files; ``spec`` gives ``agent``, ``stop`` and the options."""
    engine = str(spec.get("engine", f"sqlite:///{tmp_path / 'dbos.db'}"))
    full = {
        "dir": str(tmp_path / "run"),
        "engine": engine,
        "session": session_of(engine),
        "sessions": str(tmp_path / "s.db"),
        **spec,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tests.durable._resume_worker", json.dumps(full)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run(
    tmp_path: Path,
    agent: str,
    stop: str,
    then: str = "",
    restart: dict[str, object] | None = None,
    engine: str | None = None,
    approve: bool = False,
) -> Path:
    """The turn killed at ``stop`` and run again (``then`` first, or as ``restart`` says)."""
    directory = tmp_path / "run"
    directory.mkdir()
    on: dict[str, object] = {} if engine is None else {"engine": engine}
    if approve:
        on["approve"] = True
    kill_at_stop(start(tmp_path, {"agent": agent, "stop": stop, **on}), directory / "reached")
    if restart is None:
        finish(start(tmp_path, {"agent": agent, "stop": "none", "then": then, **on}))
    else:
        finish(start(tmp_path, {"stop": "none", "watch": True, **restart}))
    return directory


def outcome(directory: Path) -> dict[str, Any]:
    """What the turn returned (``text``, ``tokens``) or raised (``error``)."""
    result: dict[str, Any] = json.loads((directory / "outcome.json").read_text())
    return result


def stored(tmp_path: Path, session: str = "s-1") -> list[tuple[int, dict[str, Any]]]:
    async def read() -> list[tuple[int, dict[str, Any]]]:
        store = SQLiteSessionStore(tmp_path / "s.db")
        try:
            records = await store.records(session)
        finally:
            await store.close()
        return list(
            zip([r.seq for r in records], dump_messages(r.message for r in records), strict=True)
        )

    return asyncio.run(read())


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_turn_resumed_after_its_error_answers_each_call_once(tmp_path: Path, engine: str) -> None:
    # The turn fails (a handler raises) and its worker dies in on_chat_error, after
    # the "not run" answer was stored: the resumed turn stores nothing again.
    directory = run(tmp_path, "unrun", "on_chat_error", engine=engine)
    assert outcome(directory)["error"] == "UsageError"
    log = [
        (seq, m["role"], m.get("tool_call_id")) for seq, m in stored(tmp_path, session_of(engine))
    ]
    assert log == [
        (1, "user", None),
        (2, "assistant", None),
        (3, "tool", "call-lookup"),
        (4, "tool", "call-wipe"),
    ]
    assert (directory / "log").read_text().splitlines().count("tool lookup") == 1


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_message_first_stored_by_the_resumed_turn_is_not_a_replay(
    tmp_path: Path, engine: str
) -> None:
    # Killed while the store appended the answer (the model call recorded, the answer not
    # stored): the resumed turn stores it for the first time, so its hooks are told so.
    directory = run(tmp_path, "answer", "append:the answer", engine=engine)
    assert outcome(directory)["text"] == "the answer"
    log = [(seq, m["role"]) for seq, m in stored(tmp_path, session_of(engine))]
    assert log == [(1, "user"), (2, "assistant")]
    first = [  # on Temporal, the model call's activity; the answer is stored in the next
        "on_chat_start replaying False",
        "on_message user replaying False",
    ]
    if engine.startswith("temporal://"):  # the finish activity, killed, then run again
        first += ["on_chat_start replaying True", "on_message user replaying True"]
    assert (directory / "log").read_text().splitlines() == [
        *first,
        "on_chat_start replaying True",
        "on_message user replaying True",
        "on_message assistant replaying False",
    ]


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_resume_killed_after_its_decided_call_ran_goes_on_without_running_it_again(
    tmp_path: Path, engine: str
) -> None:
    # Killed in the model call after the approved call ran: run again, the resume does not
    # take its own tool message for the conversation it resumes (nor its own decision for
    # an earlier one), and the call is not run again.
    directory = run(tmp_path, "charges", "model:1", engine=engine, approve=True)
    assert outcome(directory)["text"] == "charged"
    log = [(m["role"], m.get("content")) for _, m in stored(tmp_path, session_of(engine))]
    assert log == [
        ("user", "hi"),
        ("assistant", ""),
        ("tool", "charged 5"),
        ("assistant", "charged"),
    ]
    assert (directory / "log").read_text().splitlines().count("tool charge") == 1


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_new_turn_of_a_session_waits_for_the_turn_being_resumed(
    tmp_path: Path, engine: str
) -> None:
    # Killed while the first turn's tool ran; restarted, the worker at once runs a second
    # turn of the session, which waits until the first one (resumed) has ended.
    directory = run(tmp_path, "looks_up", "tool:lookup", then="second", engine=engine)
    assert outcome(directory)["text"] == "looked up"
    records = stored(tmp_path, session_of(engine))
    log = [(m["role"], m.get("content"), m.get("tool_call_id")) for _, m in records]
    assert log == [
        ("user", "hi", None),
        ("assistant", "", None),
        ("tool", "tea costs 5", "call-lookup"),
        ("assistant", "looked up", None),
        ("user", "second", None),
        ("assistant", "answer to second", None),
    ]


def test_a_worker_without_the_turns_agent_leaves_the_turn_for_one_that_has_it(
    tmp_path: Path,
) -> None:
    # Killed mid-turn; restarted with another agent factory, the worker cannot run the turn
    # and leaves it unfinished (DBOS logs that it has no such workflow); restarted with
    # the turn's factory, it resumes and finishes it.
    directory = run(tmp_path, "looks_up", "tool:lookup", restart={"agent": "answer"})
    assert (directory / "log").read_text().splitlines()[-1] == "status PENDING"
    finish(start(tmp_path, {"agent": "looks_up", "stop": "none"}))
    assert outcome(directory)["text"] == "looked up"
    assert [m.get("content") for _, m in stored(tmp_path)] == ["hi", "", "tea costs 5", "looked up"]


@pytest.mark.parametrize("engine", ENGINES, indirect=True)
def test_a_resumed_turn_counts_the_tokens_of_a_recorded_sub_agent_call(
    tmp_path: Path, engine: str
) -> None:
    # Killed at the second model call, after the call that ran a sub-agent (1100 tokens):
    # the resumed turn takes that call from its record, the tokens with it.
    directory = run(tmp_path, "delegates", "model:1", engine=engine)
    assert outcome(directory) == {"text": "done", "tokens": 11 + 1100 + 11}
