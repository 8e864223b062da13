"""Many workers on PostgreSQL: one turn of a session at a time, a dead worker's turns resumed.

Real worker processes (``tests.durable._dbos_worker``) on a real PostgreSQL database, running a
plain DBOS workflow: the machinery is generic, it recovers whatever the workflows run. Tests
synchronise on the runs file the steps write; timeouts are only failure guards.
"""

from __future__ import annotations

from typing import Any

from tests.durable._workers_support import Workers, result, submit, wait_for


def steps(workers: Workers, session_id: str) -> list[tuple[str, int]]:
    return [(run.step, run.turn) for run in workers.runs() if run.session_id == session_id]


def test_a_worker_killed_in_a_step_has_its_turn_finished_by_another(
    dbos_workers: Workers, client: Any
) -> None:
    workers = dbos_workers
    workers.start("w1", "w2")
    hold = workers.hold("tool", "s1")
    handle = submit(client, "s1", 1)
    first = wait_for("the tool step", lambda: workers.ran("tool", "s1", 1))[0]
    victim = workers.by_pid(first.pid)
    survivor = next(eid for eid in ("w1", "w2") if eid != victim)
    workers.kill(victim)
    hold.unlink()

    assert result(handle) == ["model s1 1", "tool s1 1"]
    # The finished model step is not run again; the step in flight runs again, elsewhere.
    assert steps(workers, "s1") == [
        ("model", 1),
        ("model-done", 1),
        ("tool", 1),
        ("tool", 1),
        ("tool-done", 1),
    ]
    assert [run.pid for run in workers.ran("tool", "s1", 1)] == [
        workers.pid(victim),
        workers.pid(survivor),
    ]


def test_a_worker_killed_in_its_first_step_has_the_turn_rerun_from_the_start(
    dbos_workers: Workers, client: Any
) -> None:
    workers = dbos_workers
    workers.start("w1", "w2")
    hold = workers.hold("model", "s1")
    handle = submit(client, "s1", 1)
    victim = workers.by_pid(
        wait_for("the model step", lambda: workers.ran("model", "s1", 1))[0].pid
    )
    workers.kill(victim)
    hold.unlink()

    assert result(handle) == ["model s1 1", "tool s1 1"]
    assert steps(workers, "s1") == [
        ("model", 1),
        ("model", 1),
        ("model-done", 1),
        ("tool", 1),
        ("tool-done", 1),
    ]


def test_two_workers_never_run_two_turns_of_one_session_at_once(
    dbos_workers: Workers, client: Any
) -> None:
    workers = dbos_workers
    workers.start("w1", "w2")
    hold = workers.hold("model", "s1")
    s1 = [submit(client, "s1", turn) for turn in (1, 2, 3)]
    wait_for("turn 1 of s1", lambda: workers.ran("model", "s1", 1))
    # Queued after s1's turns 2 and 3, s2's turn finishes while s1's first turn is held: the
    # queue skipped s1's waiting turns because the session was busy, not because it was idle.
    assert result(submit(client, "s2", 1)) == ["model s2 1", "tool s2 1"]
    assert steps(workers, "s1") == [("model", 1)]
    hold.unlink()

    assert [result(handle) for handle in s1] == [
        [f"model s1 {turn}", f"tool s1 {turn}"] for turn in (1, 2, 3)
    ]
    assert steps(workers, "s1") == [
        (step, turn) for turn in (1, 2, 3) for step in ("model", "model-done", "tool", "tool-done")
    ]


def test_a_worker_stopped_with_sigterm_leaves_its_turn_to_a_live_one(
    dbos_workers: Workers, client: Any
) -> None:
    workers = dbos_workers
    workers.start("w1", "w2")
    hold = workers.hold("tool", "s1")
    handle = submit(client, "s1", 1)
    leaver = workers.by_pid(wait_for("the tool step", lambda: workers.ran("tool", "s1", 1))[0].pid)
    assert workers.terminate(leaver) == 0
    hold.unlink()

    assert result(handle) == ["model s1 1", "tool s1 1"]
    stayer = next(eid for eid in ("w1", "w2") if eid != leaver)
    assert [run.pid for run in workers.ran("tool-done", "s1", 1)] == [workers.pid(stayer)]
