"""What the memory and session store families share; a backend implements storage only.

- :mod:`._checks`: argument checks (limits, connection strings, SQL and key names).
- :mod:`._schema`: the schema-version check every backend runs when it first connects.
- :mod:`._sqlite_file`: a SQLite file in WAL mode; its damage raised as ``CorruptStoreError``.
- :mod:`._sqlite_thread`: one SQLite connection on a thread of its own (:class:`SQLiteThread`).
- Per-loop connection pools and clients: :class:`hookloop._loopbound.LoopBound`.
"""
