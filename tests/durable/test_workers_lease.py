"""The executors table on a real PostgreSQL database: beats, atomic claims, fencing, leaving."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest

from hookloop import UsageError
from hookloop.durable._lease import TABLE, ExecutorLease, libpq_url
from hookloop.durable._workers import WorkerTimings


def lease(
    url: str, executor_id: str, *, app: str = "app", version: str = "v1", dead_after: float = 60
) -> ExecutorLease:
    return ExecutorLease(
        url,
        app_name=app,
        application_version=version,
        executor_id=executor_id,
        dead_after=dead_after,
    )


def age(url: str, executor_id: str, seconds: float) -> None:
    """Date an executor's last beat ``seconds`` back (in the database's clock)."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            f"UPDATE {TABLE} SET heartbeat_at = heartbeat_at - make_interval(secs => %s) "
            "WHERE executor_id = %s",
            (seconds, executor_id),
        )


def rows(url: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            f"SELECT app_name, executor_id, claimed_by FROM {TABLE} ORDER BY 1, 2"
        ).fetchall()


def test_a_silent_executor_is_claimed_by_one_live_worker_and_fenced(database_url: str) -> None:
    with lease(database_url, "dead") as dead, lease(database_url, "live") as live:
        dead.join()
        live.join()
        assert live.claim_dead() == []
        age(database_url, "dead", 61)
        assert live.claim_dead() == ["dead"]
        assert live.claim_dead() == []  # claimed: its heartbeat is fresh again
        assert rows(database_url) == [("app", "dead", "live"), ("app", "live", None)]
        assert dead.renew() is False  # a worker that was only slow learns it was taken over
        live.release("dead")
        assert rows(database_url) == [("app", "live", None)]
        dead.join()  # restarting with the same id rejoins
        assert dead.renew() is True


def test_a_claim_abandoned_by_a_dying_claimer_is_claimed_again(database_url: str) -> None:
    with (
        lease(database_url, "dead") as dead,
        lease(database_url, "a") as a,
        lease(database_url, "b") as b,
    ):
        for each in (dead, a, b):
            each.join()
        age(database_url, "dead", 61)
        assert a.claim_dead() == ["dead"]
        age(database_url, "dead", 61)  # a died before releasing it
        age(database_url, "a", 61)
        assert b.claim_dead() == ["a", "dead"]


def test_other_applications_are_never_claimed(database_url: str) -> None:
    with lease(database_url, "x", app="other") as other, lease(database_url, "live") as live:
        other.join()
        live.join()
        age(database_url, "x", 61)
        assert live.claim_dead() == []


def test_leaving_hands_over_at_the_next_look_not_after_dead_after(database_url: str) -> None:
    with lease(database_url, "leaver") as leaver, lease(database_url, "live") as live:
        leaver.join()
        live.join()
        leaver.leave()
        assert live.claim_dead() == ["leaver"]


def test_racing_claimers_split_the_dead_executors_between_them(database_url: str) -> None:
    dead = [f"dead-{i:02}" for i in range(30)]
    for executor_id in dead:
        with lease(database_url, executor_id) as each:
            each.join()
            each.leave()
    claimers = [lease(database_url, f"live-{i}") for i in range(4)]
    claimed: list[list[str]] = [[] for _ in claimers]
    start = threading.Barrier(len(claimers))

    def claim(i: int) -> None:
        claimers[i].join()
        start.wait()
        for _ in range(5):
            claimed[i].extend(claimers[i].claim_dead())

    threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(claimers))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for each in claimers:
        each.close()
    everything = [executor_id for each in claimed for executor_id in each]
    assert sorted(everything) == dead  # each dead executor claimed exactly once


@pytest.mark.parametrize(
    ("heartbeat", "dead_after"), [(0, 5), (-1, 5), (1, 2.9), (float("nan"), 5)]
)
def test_timings_that_would_take_a_slow_worker_for_dead_are_refused(
    heartbeat: float, dead_after: float
) -> None:
    with pytest.raises(UsageError):
        WorkerTimings(heartbeat=heartbeat, dead_after=dead_after)


def test_the_default_timings_take_over_within_a_few_seconds() -> None:
    assert WorkerTimings() == WorkerTimings(heartbeat=1.0, dead_after=5.0)


@pytest.mark.parametrize(("heartbeat", "dead_after"), [(0.1, 0.3), (0.05, 0.15), (1, 3)])
def test_exactly_three_heartbeats_is_enough(heartbeat: float, dead_after: float) -> None:
    assert WorkerTimings(heartbeat=heartbeat, dead_after=dead_after).dead_after == dead_after


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql+psycopg://u@h:5/d", "postgresql://u@h:5/d"),
        ("postgres+asyncpg://h/d", "postgres://h/d"),
        ("postgresql://h/d?x=1", "postgresql://h/d?x=1"),
    ],
)
def test_driver_suffixes_are_dropped_for_libpq(url: str, expected: str) -> None:
    assert libpq_url(url) == expected


def test_only_dead_executors_of_the_claimers_own_version_are_claimed(database_url: str) -> None:
    with (
        lease(database_url, "old", version="v1") as old,
        lease(database_url, "new", version="v2") as new,
        lease(database_url, "later", version="v1") as later,
    ):
        old.join()
        new.join()
        age(database_url, "old", 61)
        # A v2 worker cannot recover v1 workflows: it leaves the row for a v1 worker.
        assert new.claim_dead() == []
        assert rows(database_url) == [("app", "new", None), ("app", "old", None)]
        later.join()
        assert later.claim_dead() == ["old"]
        later.release("old")
        assert rows(database_url) == [("app", "later", None), ("app", "new", None)]


def test_one_executor_id_in_two_versions_is_two_executors(database_url: str) -> None:
    with lease(database_url, "x", version="v1") as v1, lease(database_url, "x", version="v2") as v2:
        v1.join()
        v2.join()
        assert (v1.renew(), v2.renew()) == (True, True)


def test_a_second_live_process_with_the_same_executor_id_is_refused(database_url: str) -> None:
    with lease(database_url, "x") as first, lease(database_url, "x") as second:
        first.join()
        beating = threading.Event()

        def beat() -> None:
            while not beating.wait(0.02):
                first.renew()

        thread = threading.Thread(target=beat)
        thread.start()
        try:
            with pytest.raises(UsageError, match="'x' is in use by a live worker"):
                second.join(poll=0.05)
        finally:
            beating.set()
            thread.join()
        assert first.renew() is True  # the live one is untouched


def test_a_killed_processes_id_is_taken_by_its_restart_and_the_old_one_is_fenced(
    database_url: str,
) -> None:
    with (
        lease(database_url, "x", dead_after=0.2) as stalled,
        lease(database_url, "x", dead_after=0.2) as restart,
    ):
        stalled.join()
        restart.join(poll=0.05)  # waits until the silent row is older than dead_after
        assert restart.renew() is True
        assert stalled.renew() is False  # the older duplicate learns it lost its id
        stalled.leave()  # and its leaving does not hand the restart's turns away
        assert restart.renew() is True
        assert rows(database_url) == [("app", "x", None)]


def test_a_claimer_keeps_its_claims_fresh_while_it_recovers_them(database_url: str) -> None:
    with (
        lease(database_url, "dead") as dead,
        lease(database_url, "a") as a,
        lease(database_url, "b") as b,
    ):
        for each in (dead, a, b):
            each.join()
        age(database_url, "dead", 61)
        assert a.claim_dead() == ["dead"]
        age(database_url, "dead", 61)  # a long recovery: the claim grows old
        assert a.renew() is True  # a's beat renews its claim too
        assert b.claim_dead() == []
