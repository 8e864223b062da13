"""Session stores: one suite, run against SQLite, PostgreSQL and Redis (real servers).

Each test gets a private place (a file, a fresh schema, a fresh key prefix) from the
``backend`` fixture; a "restart" is a new store object on the same place, and the crash and
concurrency tests write from separate processes.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hookloop import (
    Agent,
    AssistantMessage,
    CorruptSessionError,
    CorruptStoreError,
    HookloopError,
    ImagePart,
    Message,
    RunError,
    SessionConflictError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
    SessionSchemaError,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UsageError,
    UserMessage,
)
from hookloop._approval_log import approval_session_id
from hookloop.sessions import (
    EXPORT_FORMAT,
    MESSAGE_FORMAT,
    SCHEMA_VERSION,
    Retention,
    SessionInfo,
    SQLiteSessionStore,
    StoredMessage,
    load_messages,
)
from hookloop.sessions._consistency import RecordState
from hookloop.testing import FakeClock, ScriptedModel
from tests.sessions._backends import POSIX_START, Backend, kill, start_worker
from tests.stores._damaged import DAMAGES, check_damaged_file_error, damage_file


def every_kind() -> list[Message]:
    call = ToolCall.create("lookup", {"key": "ação 数据", "n": 3})
    broken = ToolCall(name="lookup", arguments='{"key": ', id="call-broken")
    return [
        SystemMessage(content="You look things up."),
        UserMessage(content="Look up ação and 数据, please."),
        UserMessage(
            content=(
                TextPart(text="What is in these?"),
                ImagePart(url="https://example.com/cat.png"),
                ImagePart(data="iVBORw0KGgo=", media_type="image/png"),
            )
        ),
        AssistantMessage(content="Let me look.", tool_calls=(call, broken)),
        ToolMessage(tool_call_id=call.id, tool_name="lookup", content='{"found": true}'),
        ToolMessage(
            tool_call_id=broken.id,
            tool_name="lookup",
            content="arguments are not valid JSON",
            is_error=True,
        ),
        AssistantMessage(content=""),  # a model may answer with nothing
        AssistantMessage(content='Found it:\n\t"quotes", \\backslashes\\ and \u2028.'),
    ]


async def append_all(store: object, session_id: str, messages: list[Message]) -> list[int]:
    assert hasattr(store, "append")
    return [await store.append(session_id, m) for m in messages]


# --- round trips ------------------------------------------------------------------------


async def test_every_message_kind_round_trips_with_sequence_numbers(backend: Backend) -> None:
    messages = every_kind()
    async with backend.store() as store:
        seqs = await append_all(store, "s1", messages)
        assert seqs == list(range(1, len(messages) + 1))
        assert await store.load("s1") == messages
        assert await store.records("s1") == [
            StoredMessage(seq=n, message=m) for n, m in enumerate(messages, 1)
        ]


async def test_a_new_store_object_reads_the_identical_history_and_goes_on(
    backend: Backend,
) -> None:
    messages = every_kind()
    async with backend.store() as store:
        await append_all(store, "s1", messages)
        before = await store.info("s1")
    async with backend.store() as store:  # a restart
        assert await store.load("s1") == messages
        assert await store.info("s1") == before
        assert await store.append("s1", UserMessage(content="and now?")) == len(messages) + 1


async def test_an_unknown_session_is_empty_and_cannot_be_exported_or_forked(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        assert await store.load("nobody") == []
        assert await store.info("nobody") is None
        assert await store.delete("nobody") is False
        with pytest.raises(SessionNotFoundError) as caught:
            await store.export("nobody")
        assert caught.value.session_id == "nobody"
        with pytest.raises(SessionNotFoundError):
            await store.fork("nobody", "copy")
        assert await store.list_sessions() == []


async def test_sessions_are_independent(backend: Backend) -> None:
    async with backend.store() as store:
        await store.append("a", UserMessage(content="for a", id="m1"))
        await store.append("b", UserMessage(content="for b", id="m1"))  # ids are per session
        await store.append("a", UserMessage(content="for a again", id="m2"))
        assert [m.text for m in await store.load("a")] == ["for a", "for a again"]  # type: ignore[union-attr]
        assert [m.text for m in await store.load("b")] == ["for b"]  # type: ignore[union-attr]


# --- no lost or overwritten message -------------------------------------------------------


async def test_appending_the_same_message_again_writes_nothing(backend: Backend) -> None:
    message = UserMessage(content="once", id="m1")
    async with backend.store() as store:
        assert await store.append("s", message) == 1
        await store.append("s", UserMessage(content="next"))
        assert await store.append("s", message) == 1  # a retried append: same seq
        assert await store.append("s", message, expected_seq=0) == 1  # even with a stale seq
        assert len(await store.load("s")) == 2
        with pytest.raises(SessionConflictError) as caught:
            await store.append("s", UserMessage(content="other text", id="m1"))
        assert "m1" in str(caught.value)
        assert (await store.load("s"))[0] == message


async def test_expected_seq_refuses_an_append_after_another_writer(backend: Backend) -> None:
    async with backend.store() as store:
        assert await store.append("s", UserMessage(content="first"), expected_seq=0) == 1
        assert await store.append("s", UserMessage(content="second"), expected_seq=1) == 2
        with pytest.raises(SessionConflictError) as caught:
            await store.append("s", UserMessage(content="stale"), expected_seq=1)
        error = caught.value
        assert (error.session_id, error.expected_seq, error.actual_seq) == ("s", 1, 2)
        assert isinstance(error, SessionError)
        assert isinstance(error, RunError)
        with pytest.raises(SessionConflictError):
            await store.append("new", UserMessage(content="x"), expected_seq=3)
        assert [m.content for m in await store.load("s")] == ["first", "second"]  # type: ignore[union-attr]
        assert await store.info("new") is None


async def test_two_stores_racing_with_the_same_expected_seq_one_wins(backend: Backend) -> None:
    async with backend.store() as one, backend.store() as two:
        await one.append("s", UserMessage(content="start"))
        results = await asyncio.gather(
            *(
                store.append("s", UserMessage(content=f"writer {n}"), expected_seq=1)
                for n, store in enumerate([one, two, one, two])
            ),
            return_exceptions=True,
        )
        won = [r for r in results if isinstance(r, int)]
        lost = [r for r in results if isinstance(r, BaseException)]
        assert won == [2]
        assert len(lost) == 3
        assert all(isinstance(e, SessionConflictError) for e in lost)
        assert len(await two.load("s")) == 2


async def test_concurrent_appends_without_expected_seq_all_land_in_order(
    backend: Backend,
) -> None:
    async with backend.store() as one, backend.store() as two:
        messages = [UserMessage(content=f"m{n}", id=f"m{n}") for n in range(40)]
        seqs = await asyncio.gather(
            *((one if n % 2 else two).append("s", m) for n, m in enumerate(messages))
        )
        assert sorted(seqs) == list(range(1, 41))
        stored = await one.records("s")
        assert [r.seq for r in stored] == list(range(1, 41))
        assert {r.message.id for r in stored} == {m.id for m in messages}
        assert {r.message.id: r.seq for r in stored} == {
            m.id: s for m, s in zip(messages, seqs, strict=True)
        }


def reported_appends(output: str) -> list[tuple[int, str]]:
    """The ``seq id`` lines a writer printed in full.

    A kill can cut the last line mid-write: that append returned, but it was not reported, so
    it counts as the append in flight.
    """
    complete = output[: output.rfind("\n") + 1]
    return [(int(seq), message_id) for seq, message_id in map(str.split, complete.splitlines())]


def test_a_line_the_kill_cut_is_the_append_in_flight_not_a_report() -> None:
    assert reported_appends("1 w-0\n2 w-1\n3 w-") == [(1, "w-0"), (2, "w-1")]
    assert reported_appends("1 w-0\n2 w-1\n") == [(1, "w-0"), (2, "w-1")]
    assert reported_appends("1 w") == []


@given(st.lists(st.integers(1, 10**6), max_size=30), st.data())
def test_a_cut_anywhere_leaves_exactly_the_lines_printed_in_full(
    seqs: list[int], data: st.DataObject
) -> None:
    lines = [f"{seq} w-{n}\n" for n, seq in enumerate(seqs)]
    output = "".join(lines)
    cut = data.draw(st.integers(0, len(output)))
    whole = output[:cut].count("\n")
    assert reported_appends(output[:cut]) == [(seq, f"w-{n}") for n, seq in enumerate(seqs[:whole])]


def run_writer(backend: Backend, session_id: str, count: int, tag: str) -> subprocess.Popen[str]:
    return start_worker(backend, session_id, "append", str(count), tag)


async def test_a_killed_writer_loses_nothing_it_committed(backend: Backend) -> None:
    writer = run_writer(backend, "crash", 0, "w")  # appends until killed
    assert writer.stdout is not None
    printed = ""
    deadline = time.monotonic() + 60
    while printed.count("\n") < 150 and time.monotonic() < deadline:
        line = await asyncio.to_thread(writer.stdout.readline)
        if not line:
            break
        printed += line
    rest, errors = await asyncio.to_thread(kill, writer)
    assert writer.returncode == -signal.SIGKILL, errors
    reported = reported_appends(printed + rest)  # printed before the kill: committed too
    assert len(reported) >= 150, errors
    async with backend.store() as store:
        stored = [(r.seq, r.message.id) for r in await store.records("crash")]
    assert stored[: len(reported)] == reported
    # At most the append in flight at the kill is there beyond what was reported.
    assert len(stored) - len(reported) in (0, 1)
    assert [seq for seq, _ in stored] == list(range(1, len(stored) + 1))


async def test_two_processes_appending_to_one_session_lose_nothing(backend: Backend) -> None:
    async with backend.store() as store:  # the schema exists before both start
        await store.create("shared")
    writers = [run_writer(backend, "shared", 150, tag) for tag in ("a", "b")]
    outputs = [await asyncio.to_thread(w.communicate, timeout=120) for w in writers]
    for writer, (_, errors) in zip(writers, outputs, strict=True):
        assert writer.returncode == 0, errors
    reported = {
        line.split()[1]: int(line.split()[0]) for out, _ in outputs for line in out.splitlines()
    }
    async with backend.store() as store:
        stored = await store.records("shared")
        info = await store.info("shared")
    assert [r.seq for r in stored] == list(range(1, 301))  # contiguous, no duplicates
    assert {r.message.id: r.seq for r in stored} == reported  # each where it was told
    for tag in ("a", "b"):  # each writer's messages in its own order
        mine = [r.message.id for r in stored if r.message.id.startswith(f"{tag}-")]
        assert mine == [f"{tag}-{n}" for n in range(150)]
    assert info is not None
    assert (info.message_count, info.last_seq) == (300, 300)


# --- sessions as a whole ----------------------------------------------------------------


async def test_create_records_a_parent_and_refuses_a_taken_id(backend: Backend) -> None:
    clock = FakeClock(POSIX_START)
    async with backend.store(clock=clock) as store:
        info = await store.create("child", parent_id="parent")
        assert info.session_id == "child"
        assert info.parent_id == "parent"
        assert (info.message_count, info.last_seq) == (0, 0)
        assert info.created_at.timestamp() == clock.now
        assert await store.info("child") == info
        with pytest.raises(SessionExistsError) as caught:
            await store.create("child")
        assert caught.value.session_id == "child"
        assert await store.append("child", UserMessage(content="hi"), expected_seq=0) == 1


async def test_fork_copies_the_log_under_a_new_id_with_its_parent(backend: Backend) -> None:
    messages = every_kind()
    clock = FakeClock(POSIX_START)
    async with backend.store(clock=clock) as store:
        await append_all(store, "main", messages)
        clock.advance(60)
        fork = await store.fork("main", "branch")
        assert fork.parent_id == "main"
        assert (fork.message_count, fork.last_seq) == (len(messages), len(messages))
        assert fork.created_at.timestamp() == clock.now
        assert await store.records("branch") == await store.records("main")
        assert await store.append("branch", UserMessage(content="only in branch")) == 9
        assert await store.append("main", UserMessage(content="only in main")) == 9
        assert (await store.load("branch"))[-1].content == "only in branch"  # type: ignore[union-attr]
        assert (await store.load("main"))[-1].content == "only in main"  # type: ignore[union-attr]
        assert (await store.load("main"))[:-1] == messages
        with pytest.raises(SessionExistsError):
            await store.fork("main", "branch")
        assert await store.delete("main")
        assert (await store.info("branch")).parent_id == "main"  # type: ignore[union-attr]
        assert len(await store.load("branch")) == 9


async def test_list_sessions_newest_first_with_counts(backend: Backend) -> None:
    clock = FakeClock(POSIX_START)
    async with backend.store(clock=clock) as store:
        for name, count in (("old", 2), ("middle", 1), ("new", 3)):
            for n in range(count):
                await store.append(name, UserMessage(content=f"{name} {n}"))
            clock.advance(10)
        await store.create("empty", parent_id="new")
        listed = await store.list_sessions()
        assert [(i.session_id, i.message_count, i.last_seq) for i in listed] == [
            ("empty", 0, 0),
            ("new", 3, 3),
            ("middle", 1, 1),
            ("old", 2, 2),
        ]
        assert listed[0].parent_id == "new"
        assert all(isinstance(i, SessionInfo) for i in listed)
        assert [i.session_id for i in await store.list_sessions(limit=2)] == ["empty", "new"]
        assert listed[1].updated_at.timestamp() == clock.now - 10
        with pytest.raises(UsageError):
            await store.list_sessions(limit=0)


async def test_export_is_plain_json_that_loads_back(backend: Backend) -> None:
    messages = every_kind()
    clock = FakeClock(POSIX_START)
    async with backend.store(clock=clock) as store:
        await append_all(store, "s", messages)
        exported = await store.export("s")
    text = json.dumps(exported)
    data = json.loads(text)
    assert data == exported
    assert data["format"] == EXPORT_FORMAT
    assert data["version"] == 1
    assert data["message_format"] == MESSAGE_FORMAT
    assert data["session_id"] == "s"
    assert data["parent_id"] is None
    assert data["created_at"] == "2027-01-15T08:00:00+00:00"
    assert [m["seq"] for m in data["messages"]] == list(range(1, 9))
    assert load_messages([m["message"] for m in data["messages"]]) == messages


async def test_delete_removes_one_session_only(backend: Backend) -> None:
    async with backend.store() as store:
        await append_all(store, "gone", every_kind())
        await append_all(store, "kept", every_kind()[:2])
        assert await store.delete("gone") is True
        assert await store.delete("gone") is False
        assert await store.load("gone") == []
        assert await store.info("gone") is None
        assert [i.session_id for i in await store.list_sessions()] == ["kept"]
        assert len(await store.load("kept")) == 2
        assert await store.append("gone", UserMessage(content="again")) == 1


# --- retention --------------------------------------------------------------------------


async def test_max_messages_keeps_the_newest_and_never_reuses_a_seq(backend: Backend) -> None:
    async with backend.store(retention=Retention(max_messages=3)) as store:
        messages = [UserMessage(content=f"m{n}", id=f"m{n}") for n in range(7)]
        assert await append_all(store, "s", messages) == list(range(1, 8))
        assert [(r.seq, r.message) for r in await store.records("s")] == [
            (5, messages[4]),
            (6, messages[5]),
            (7, messages[6]),
        ]
        info = await store.info("s")
        assert info is not None
        assert (info.message_count, info.last_seq) == (3, 7)
        fork = await store.fork("s", "f")
        assert (fork.message_count, fork.last_seq) == (3, 7)


async def test_max_messages_keeps_a_side_sessions_records_whole(backend: Backend) -> None:
    # Approval requests, spend and verdict records: a dropped request would lose a call
    # that waits for a person.
    side = approval_session_id("s")
    async with backend.store(retention=Retention(max_messages=2)) as store:
        records = [UserMessage(content=f"r{n}", id=f"r{n}") for n in range(5)]
        await append_all(store, side, records)
        assert [r.message for r in await store.records(side)] == records


async def test_prune_applies_max_sessions_and_max_age(backend: Backend) -> None:
    clock = FakeClock(POSIX_START)
    async with backend.store(clock=clock) as store:
        for name in ("a", "b", "c", "d", "e"):
            await store.append(name, UserMessage(content=name))
            clock.advance(3600)
        assert await store.prune() == 0  # no limits: nothing to do
    retention = Retention(max_sessions=3, max_age=timedelta(hours=2, minutes=30))
    async with backend.store(clock=clock, retention=retention) as store:
        # Opening prunes: a and b are beyond the three newest, c is older than 2.5 hours.
        assert [i.session_id for i in await store.list_sessions()] == ["e", "d"]
        assert await store.load("a") == []
        clock.advance(3600)  # now d is 3 hours old
        await store.append("f", UserMessage(content="f"))
        assert await store.prune() == 1
        assert [i.session_id for i in await store.list_sessions()] == ["f", "e"]


def test_retention_limits_must_be_positive() -> None:
    for bad in (
        {"max_messages": 0},
        {"max_sessions": -1},
        {"max_messages": True},
        {"max_age": timedelta(0)},
        {"max_age": 60},
    ):
        with pytest.raises(UsageError):
            Retention(**bad)  # type: ignore[arg-type]
    assert not Retention(max_messages=5).prunes
    assert Retention(max_sessions=5).prunes


# --- versions and corrupt data ----------------------------------------------------------


@pytest.mark.parametrize("found", ["99", "two"])
async def test_a_store_written_by_a_newer_release_is_refused(backend: Backend, found: str) -> None:
    async with backend.store() as store:
        await store.append("s", UserMessage(content="hi"))
    await backend.set_schema_version(found)
    async with backend.store() as store:
        with pytest.raises(SessionSchemaError) as caught:
            await store.load("s")
    error = caught.value
    assert error.supported == SCHEMA_VERSION == 1
    assert str(error.found) in (found, repr(found.encode()))
    assert "upgrade hookloop" in str(error)
    assert isinstance(error, HookloopError)


CORRUPTIONS = {
    "bad JSON": ({"data": '{"role": "user", "content": '}, "not valid JSON"),
    "unknown role": (
        {"data": '{"role": "robot", "content": "beep", "id": "m2"}'},
        "unknown role 'robot'",
    ),
    "wrong shape": ({"data": '{"role": "user", "content": 42, "id": "m2"}'}, "content"),
    "not an object": ({"data": "[1, 2, 3]"}, "expected an object"),
    "newer format": ({"format": 7}, "message format 7 cannot be read"),
    "foreign message": (
        {"data": '{"role": "user", "content": "hi", "id": "someone-else"}'},
        "holds message 'someone-else'",
    ),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
async def test_a_corrupt_row_names_its_session_and_the_others_stay_readable(
    backend: Backend, corruption: str
) -> None:
    columns, reason = CORRUPTIONS[corruption]
    async with backend.store() as store:
        for session_id in ("good", "bad"):
            await store.append(session_id, UserMessage(content="one", id="m1"))
            await store.append(session_id, UserMessage(content="two", id="m2"))
    await backend.set_row("bad", 2, **columns)
    async with backend.store() as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.load("bad")
        error = caught.value
        assert (error.session_id, error.seq) == ("bad", 2)
        assert reason in error.reason
        assert "'bad'" in str(error)
        with pytest.raises(CorruptSessionError):
            await store.export("bad")
        assert [m.id for m in await store.load("good")] == ["m1", "m2"]
        assert {i.session_id for i in await store.list_sessions()} == {"good", "bad"}
        assert await store.delete("bad")  # a corrupt session can still be deleted


async def test_a_broken_session_record_is_reported_and_left_out_of_the_list(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    async with backend.store() as store:
        await append_all(store, "bad", every_kind()[:3])
        await store.append("good", UserMessage(content="fine"))
    await backend.break_record("bad")
    async with backend.store() as store:
        with pytest.raises(CorruptSessionError) as caught:
            await store.append("bad", UserMessage(content="more"))
        assert caught.value.session_id == "bad"
        assert len(await store.load("bad")) == 3  # nothing was overwritten
        assert len(await store.load("good")) == 1
        if backend.kind != "postgres":  # PostgreSQL's typed columns keep the record readable
            with pytest.raises(CorruptSessionError):
                await store.info("bad")
            assert [i.session_id for i in await store.list_sessions()] == ["good"]
            assert "'bad' is corrupt" in caplog.text


# --- arguments --------------------------------------------------------------------------


async def test_bad_arguments_are_usage_errors(backend: Backend) -> None:
    async with backend.store() as store:
        for bad_id in ("", None, 42, "x" * 300, "new\nline"):
            with pytest.raises(UsageError):
                await store.append(bad_id, UserMessage(content="hi"))  # type: ignore[arg-type]
        for bad_seq in (-1, True, "1"):
            with pytest.raises(UsageError):
                await store.append("s", UserMessage(content="hi"), expected_seq=bad_seq)  # type: ignore[arg-type]
        with pytest.raises(UsageError):
            await store.fork("s", "")
        assert await store.list_sessions() == []


# --- SQLite specifics -------------------------------------------------------------------


async def test_sqlite_checkpoints_the_log_of_direct_appends(tmp_path: Path) -> None:
    store = SQLiteSessionStore(tmp_path / "s.db")
    async with store:
        for n in range(2_000):  # about 25 MB of log without checkpoints
            await store.append("s", UserMessage(content=f"message {n} " * 20))
        await store.info("s")  # the worker has run the checkpoints posted so far
        wal = tmp_path / "s.db-wal"
        assert wal.stat().st_size < 8_000_000
        assert len(await store.load("s")) == 2_000


async def test_sqlite_full_synchronous_round_trips(tmp_path: Path) -> None:
    async with SQLiteSessionStore(tmp_path / "s.db", synchronous="full") as store:
        messages = every_kind()
        await append_all(store, "s", messages)
        assert await store.load("s") == messages
    with pytest.raises(UsageError):
        SQLiteSessionStore(tmp_path / "s.db", synchronous="off")  # type: ignore[arg-type]


# --- an inconsistent record: CorruptSessionError, and repair() -------------------------------

MAX_SEQ = 2**63 - 1

INCONSISTENT = {
    # what the record says -> what the error says
    "behind the log": (2, "a message is stored at seq 3, above its record's last_seq 2"),
    "at the limit": (MAX_SEQ, f"its last_seq {MAX_SEQ} leaves no seq for another message"),
    "missing": (None, "its record is missing while 3 messages remain (seq 1 to 3)"),
}


@given(
    st.booleans(),
    st.one_of(st.integers(0, MAX_SEQ), st.just("many"), st.none()),
    st.lists(st.integers(1, MAX_SEQ - 1), max_size=5, unique=True),
)
def test_a_repaired_record_always_agrees_with_its_log(
    has_record: bool, last_seq: object, seqs: list[int]
) -> None:
    if not has_record and not seqs:
        return  # nothing to repair: repair() says the session is not there
    state = RecordState(
        "s", has_record, last_seq, min(seqs, default=None), max(seqs, default=None), len(seqs)
    )
    repaired = state.repaired_last_seq()
    after = RecordState("s", True, repaired, state.first, state.top, state.count)
    assert after.problem() is None
    if state.problem() is None:
        assert repaired == last_seq  # a sound record is left as it is


@pytest.mark.parametrize("damage", sorted(INCONSISTENT))
async def test_an_inconsistent_record_is_corrupt_not_a_conflict_and_repair_mends_it(
    backend: Backend, damage: str
) -> None:
    last_seq, reason = INCONSISTENT[damage]
    messages = [UserMessage(content=f"m{n}", id=f"m{n}") for n in range(3)]
    async with backend.store() as store:
        await append_all(store, "s", messages)
        await store.append("other", UserMessage(content="fine"))
    await backend.set_record("s", last_seq)
    async with backend.store() as store:
        for expected in (3, None):  # a recorder's append, and a plain one
            with pytest.raises(CorruptSessionError) as caught:
                await store.append("s", UserMessage(content="more", id="m3"), expected_seq=expected)
            error = caught.value
            assert (error.session_id, error.seq, error.reason) == ("s", None, reason)
            assert str(error) == f"session 's' is corrupt at its record: {reason}"
        assert await store.load("s") == messages  # nothing was written
        repaired = await store.repair("s")
        assert (repaired.session_id, repaired.message_count, repaired.last_seq) == ("s", 3, 3)
        assert await store.info("s") == repaired
        assert await store.repair("s") == repaired  # a sound session is left as it is
        assert await store.append("s", UserMessage(content="more", id="m3"), expected_seq=3) == 4
        assert [r.seq for r in await store.records("s")] == [1, 2, 3, 4]
        assert len(await store.load("other")) == 1


async def test_an_agent_on_an_inconsistent_session_fails_with_corrupt_and_goes_on_after_repair(
    backend: Backend,
) -> None:
    async with backend.store() as store:
        agent = Agent(ScriptedModel(["one", "two", "three"]), plugins=[store.session("s")])
        await agent.chat("hello")
        await backend.set_record("s", None)
        with pytest.raises(CorruptSessionError, match="its record is missing"):
            await agent.chat("again")
        await store.repair("s")
        await agent.chat("once more")  # "again", kept unsaved, is stored first
        users = [m.text for m in agent.messages if isinstance(m, UserMessage)]
        assert users == ["hello", "again", "once more"]
        assert await store.load("s") == list(agent.messages)
        assert [r.seq for r in await store.records("s")] == [1, 2, 3, 4, 5]


async def test_repair_of_an_unknown_session_is_not_found(backend: Backend) -> None:
    async with backend.store() as store:
        with pytest.raises(SessionNotFoundError):
            await store.repair("nobody")
        with pytest.raises(UsageError):
            await store.repair("")


async def test_export_readable_only_keeps_every_readable_message_and_names_the_rest(
    backend: Backend,
) -> None:
    messages = [UserMessage(content=f"m{n}", id=f"m{n}") for n in range(4)]
    async with backend.store() as store:
        await append_all(store, "s", messages)
    await backend.set_row("s", 2, data="{broken")
    await backend.set_row("s", 4, format=7)
    async with backend.store() as store:
        with pytest.raises(CorruptSessionError):
            await store.export("s")
        exported = await store.export("s", readable_only=True)
        unreadable: list[CorruptSessionError] = []
        records = await store.records("s", unreadable=unreadable)
    assert [m["seq"] for m in exported["messages"]] == [1, 3]
    assert load_messages([m["message"] for m in exported["messages"]]) == messages[0:3:2]
    assert [(r.seq, r.message) for r in records] == [(1, messages[0]), (3, messages[2])]
    assert [(u["seq"], u["reason"][:14]) for u in exported["unreadable"]] == [
        (2, "not valid JSON"),
        (4, "message format"),
    ]
    assert [(e.seq, e.reason) for e in unreadable] == [
        (u["seq"], u["reason"]) for u in exported["unreadable"]
    ]
    assert json.loads(json.dumps(exported)) == exported


@pytest.mark.parametrize("how", DAMAGES)
async def test_a_damaged_sqlite_file_is_a_typed_error_naming_it(tmp_path: Path, how: str) -> None:
    path = tmp_path / "sessions.db"
    async with SQLiteSessionStore(path) as store:
        for n in range(300):
            await store.append("s", UserMessage(content=f"message {n} " * 20))
    assert not (tmp_path / "sessions.db-wal").exists()  # all in the file itself
    damage_file(path, how)
    async with SQLiteSessionStore(path) as store:
        for call in (
            lambda: store.load("s"),
            lambda: store.append("s", UserMessage(content="more")),
            lambda: store.export("s"),
        ):
            with pytest.raises(CorruptStoreError) as caught:
                await call()
            check_damaged_file_error(caught.value, path)


def test_the_sqlite_store_binds_its_parameters_in_order() -> None:
    """Numbered placeholders bound from a sequence: Python 3.12 warns, 3.14 refuses them."""
    import ast
    import inspect
    import re

    from hookloop.sessions import _sqlite, _sqlite_sql

    for module in (_sqlite, _sqlite_sql):
        texts = [
            node.value
            for node in ast.walk(ast.parse(inspect.getsource(module)))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
        ]
        assert not [t for t in texts if re.search(r"\?\d", t)], module.__name__
