"""DBOS engines for the tests: notifications polled every 50 ms instead of every second."""

from __future__ import annotations

from hookloop.durable import DBOSEngine

# DBOS polls SQLite for a turn's notifications and events (PostgreSQL tells it instead), and
# its shutdown waits for the polling thread's sleep to end: at DBOS's default of one second, a
# test on SQLite waited up to a second for each result and each shutdown, in-process and in
# every worker process it starts. Only the waiting changes; DBOS documents the setting as
# the way to speed tests up (minimum 0.001 s).
POLLING = 0.05


def dbos_engine(database_url: str, **options: object) -> DBOSEngine:
    """``DBOSEngine(database_url, **options)``, polling for notifications every 50 ms."""
    engine = DBOSEngine(database_url, **options)  # type: ignore[arg-type]
    engine._config["notification_listener_polling_interval_sec"] = POLLING
    return engine
