"""Sessions in Redis, for many worker processes sharing one server.

Built on redis-py's asyncio client (``pip install 'hookloop[redis]'``). Each session is:

- ``{prefix}session:{id}``: a hash with ``last_seq``, ``created_at``, ``updated_at`` and
  ``parent_id``;
- ``{prefix}log:{id}``: a stream holding one entry per message, with the entry id
  ``{seq}-0`` and the fields ``i`` (message id), ``f`` (format version), ``d`` (JSON);
- ``{prefix}ids:{id}``: a hash from message id to seq, which makes appends idempotent;
- and its id in the sorted set ``{prefix}sessions``, scored by ``updated_at``.

An append is one Lua script, which Redis runs atomically: read ``last_seq``, check
``expected_seq``, ``XADD`` with the next id, update the hash. Two writers can therefore never
take the same seq, and the stream refuses an entry id that is not above its last one, so a
message is never overwritten. Every check comes before the first write, because Redis does
not roll a script back when it fails halfway.

Durability is the server's: with the default snapshotting a crash of the Redis server can
lose recent appends; run it with ``appendonly yes`` (and ``appendfsync always`` to lose
nothing) when sessions must survive one. A crash of the writing process loses nothing that
:meth:`~RedisSessionStore.append` returned for. Redis Cluster is not supported (a session's
keys and the session index live in different slots); Redis 6.2 or newer is needed (``COPY``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .._approval_log import is_approval_session
from .._errors import (
    CorruptSessionError,
    SessionConflictError,
    SessionError,
    SessionExistsError,
    SessionNotFoundError,
)
from .._extras import import_extra
from .._loopbound import LoopBound
from .._messages import Message
from .._stores._checks import check_text
from .._stores._pools import abandon_client, close_client
from .._stores._reach import reachable, redis_lost
from .._stores._schema import check_schema_version
from ._base import SessionStore, utc
from ._codec import MESSAGE_FORMAT, Row, decode_messages, decode_rows, encode_message
from ._consistency import RecordState
from ._redis_lua import APPEND, CREATE, FORK, PRUNE
from ._types import SCHEMA_VERSION, Retention, SessionInfo, StoredMessage

if TYPE_CHECKING:
    from redis.asyncio import Redis
    from redis.commands.core import AsyncScript
    from redis.exceptions import ResponseError

__all__ = ["RedisSessionStore"]

logger = logging.getLogger(__name__)


# The scripts compute seqs with Lua's numbers (doubles): integers are exact up to 2**53.
_MAX_SEQ = 2**53


class RedisSessionStore(SessionStore):
    """Sessions in Redis: any number of worker processes can share them.

    See the module documentation for the keys and for durability.

    Args:
        url: The server, e.g. ``redis://localhost:6379/0``.
        prefix: Put in front of every key, so several applications (or tests) can share a
            database.
        retention: What to keep; see :class:`~hookloop.sessions.Retention`.
        clock: Returns the current time as POSIX seconds (tests pass a fake one).

    Raises:
        UsageError: A bad argument.
    """

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "hookloop:",
        retention: Retention | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(retention=retention)
        self.url = check_text(url, "url", empty=False)
        self.prefix = check_text(prefix, "prefix")
        self._clock = clock
        self._clients: LoopBound[Redis] = LoopBound(self._open, self._close, self._abandon)
        self._index = f"{prefix}sessions"
        # Each client's scripts (an AsyncScript is bound to its client), dropped with it.
        self._scripts: dict[Redis, dict[str, AsyncScript]] = {}

    def __repr__(self) -> str:
        return f"RedisSessionStore({self.url!r}, prefix={self.prefix!r})"

    def _keys(self, session_id: str) -> tuple[str, str, str]:
        p = self.prefix
        return f"{p}session:{session_id}", f"{p}log:{session_id}", f"{p}ids:{session_id}"

    async def _ensure(self) -> Redis:
        return await self._clients.get()

    async def _open(self) -> Redis:
        """The running loop's client, the schema checked (and pruned); once per loop."""
        redis = import_extra("redis.asyncio", extra="redis", by="RedisSessionStore")
        client: Redis = redis.Redis.from_url(self.url)
        self._scripts[client] = {}
        try:
            await self._migrate(client)
            if self.retention.prunes:
                await self._prune(client)
        except BaseException:
            await self._close(client)
            raise
        return client

    async def _close(self, client: Redis) -> None:
        self._scripts.pop(client, None)
        await close_client(client)

    def _abandon(self, client: Redis) -> None:
        self._scripts.pop(client, None)
        abandon_client(client)

    async def _migrate(self, client: Redis) -> None:
        key = f"{self.prefix}schema"
        await client.set(key, SCHEMA_VERSION, nx=True)
        found: object = await client.get(key)
        check_schema_version(found, supported=SCHEMA_VERSION, store=self._where())
        # Migrations from older versions go here, one step per version.

    def _script(self, client: Redis, source: str) -> AsyncScript:
        """The script, sent once and then run by its SHA1 (``EVALSHA``)."""
        scripts = self._scripts.setdefault(client, {})
        script = scripts.get(source)
        if script is None:
            script = scripts[source] = client.register_script(source)
        return script

    def _where(self) -> str:
        return f"{self.url} (prefix {self.prefix!r})"

    async def close(self) -> None:
        """Close the running loop's connections to the server.

        Used from several event loops (threads), the store has a client per loop; each is
        closed in its own loop, or dropped once that loop has ended.
        """
        await self._clients.close()

    # --- appending ----------------------------------------------------------------------

    @reachable(redis_lost, "session store")
    async def _append_message(
        self, session_id: str, message: Message, expected_seq: int | None
    ) -> int:
        data = encode_message(message)
        client = await self._ensure()
        # A side session's records (approvals, spend, verdicts) are kept whole: retention
        # is for conversations, and a dropped request would lose a call that waits.
        limit = None if is_approval_session(session_id) else self.retention.max_messages
        try:
            status, seq = await self._script(client, APPEND)(
                keys=[*self._keys(session_id), self._index],
                args=[
                    session_id,
                    message.id,
                    MESSAGE_FORMAT,
                    data,
                    "" if expected_seq is None else expected_seq,
                    repr(self._clock()),
                    "" if limit is None else limit,
                ],
            )
        except _redis_errors().ResponseError as exc:
            await self._check_record(client, session_id)
            raise _corrupt(session_id, exc) from exc
        if status in (0, 1):
            return int(seq)
        # A record that disagrees with the log refuses every append: say so, not "conflict".
        await self._check_record(client, session_id)
        if status == 2:
            raise SessionConflictError(
                f"session {session_id!r} is at seq {seq}, not at the expected {expected_seq}: "
                "another writer appended first; nothing was written",
                session_id=session_id,
                expected_seq=expected_seq,
                actual_seq=int(seq),
            )
        if status == 3:
            raise SessionConflictError(
                f"session {session_id!r} already holds another message with id "
                f"{message.id!r} (seq {seq}); nothing was written",
                session_id=session_id,
            )
        raise CorruptSessionError(
            session_id=session_id,
            seq=None,
            reason="its record has no valid last_seq, or last_seq is behind the stored log",
        )

    # --- reading ------------------------------------------------------------------------

    async def _read_records(
        self, session_id: str, unreadable: list[CorruptSessionError] | None
    ) -> list[StoredMessage]:
        return decode_rows(session_id, await self._rows(session_id), unreadable)

    async def _read_messages(self, session_id: str) -> list[Message]:
        return decode_messages(session_id, await self._rows(session_id))

    @reachable(redis_lost, "session store")
    async def _rows(self, session_id: str) -> list[Row]:
        client = await self._ensure()
        try:
            entries: list[tuple[bytes, dict[bytes, bytes]]] = await client.xrange(
                self._keys(session_id)[1]
            )  # type: ignore[assignment]  # redis-py's union of every reply type
        except _redis_errors().ResponseError as exc:
            raise _corrupt(session_id, exc) from exc
        rows: list[Row] = []
        for entry_id, fields in entries:
            seq = _entry_seq(session_id, entry_id)
            rows.append((seq, fields.get(b"i"), fields.get(b"f"), fields.get(b"d")))
        return rows

    @reachable(redis_lost, "session store")
    async def _read_info(self, session_id: str) -> SessionInfo | None:
        client = await self._ensure()
        found = await self._infos(client, [session_id])
        info = found[0]
        if isinstance(info, CorruptSessionError):
            raise info
        return info

    @reachable(redis_lost, "session store")
    async def _read_infos(self, limit: int | None) -> list[SessionInfo]:
        client = await self._ensure()
        out: list[SessionInfo] = []
        start = 0
        # Pages of the index, newest first, until ``limit`` conversations are found:
        # approval side sessions are left out (``is_approval_session``).
        while limit is None or len(out) < limit:
            stop = -1 if limit is None else start + limit - len(out) - 1
            try:
                ids: Sequence[object] = await client.zrevrange(self._index, start, stop)
            except _redis_errors().ResponseError as exc:
                raise self._broken_index(exc) from exc
            texts = [_text(i) for i in ids]
            for info in await self._infos(client, [i for i in texts if not is_approval_session(i)]):
                if isinstance(info, CorruptSessionError):
                    logger.warning("%s; left out of the list", info)
                elif info is not None:
                    out.append(info)
            if stop == -1 or len(ids) < stop - start + 1:
                break  # the end of the index
            start = stop + 1
        return out

    async def _infos(
        self, client: Redis, session_ids: list[str]
    ) -> list[SessionInfo | CorruptSessionError | None]:
        async with client.pipeline(transaction=True) as pipe:
            for session_id in session_ids:
                record, log, _ = self._keys(session_id)
                _ = pipe.hgetall(record)  # queued: the pipeline returns itself
                _ = pipe.xlen(log)
            replies = await pipe.execute(raise_on_error=False)
        out: list[SessionInfo | CorruptSessionError | None] = []
        for n, session_id in enumerate(session_ids):
            fields, count = replies[2 * n], replies[2 * n + 1]
            try:
                out.append(_info(session_id, fields, count))
            except CorruptSessionError as exc:
                out.append(exc)
        return out

    # --- sessions as a whole ------------------------------------------------------------

    @reachable(redis_lost, "session store")
    async def _create_session(self, session_id: str, parent_id: str | None) -> SessionInfo:
        client = await self._ensure()
        now = repr(self._clock())
        created = await self._script(client, CREATE)(
            keys=[self._keys(session_id)[0], self._index], args=[session_id, parent_id or "", now]
        )
        if not created:
            raise SessionExistsError(session_id)
        return await self._info_after(client, session_id)

    @reachable(redis_lost, "session store")
    async def _fork_session(self, session_id: str, new_id: str) -> SessionInfo:
        client = await self._ensure()
        try:
            done = await self._script(client, FORK)(
                keys=[*self._keys(session_id), *self._keys(new_id), self._index],
                args=[session_id, new_id, repr(self._clock())],
            )
        except _redis_errors().ResponseError as exc:
            raise _corrupt(session_id, exc) from exc
        if done == -1:
            raise SessionNotFoundError(session_id)
        if done == -2:
            raise SessionExistsError(new_id)
        return await self._info_after(client, new_id)

    async def _check_record(self, client: Redis, session_id: str) -> None:
        try:
            async with client.pipeline(transaction=True) as pipe:
                state = await self._record_state(pipe, session_id)
        except _redis_errors().ResponseError:
            return  # keys of another type: the caller reports what Redis said
        state.check()

    async def _record_state(self, pipe: Any, session_id: str) -> RecordState:
        """The session's record against its log, read in one transaction (or under WATCH)."""
        record, log, _ = self._keys(session_id)
        replies = []
        for command in (
            ("EXISTS", record),
            ("HGET", record, "last_seq"),
            ("XLEN", log),
            ("XRANGE", log, "-", "+", "COUNT", 1),
            ("XREVRANGE", log, "+", "-", "COUNT", 1),
        ):
            replies.append(pipe.execute_command(*command))
        if pipe.explicit_transaction or not pipe.watching:  # queued: run them together
            replies = await pipe.execute()
        else:  # watching, before MULTI: each command ran at once
            replies = [await reply for reply in replies]
        exists, raw_last, count, oldest, newest = replies
        last: object = raw_last
        if isinstance(raw_last, bytes) and raw_last.isdigit():
            last = int(raw_last)
        first = _entry_seq(session_id, oldest[0][0]) if oldest else None
        top = _entry_seq(session_id, newest[0][0]) if newest else None
        return RecordState(session_id, bool(exists), last, first, top, int(count), _MAX_SEQ)

    @reachable(redis_lost, "session store")
    async def _repair_session(self, session_id: str) -> SessionInfo:
        client = await self._ensure()
        record, log, _ = self._keys(session_id)
        while True:
            async with client.pipeline(transaction=True) as pipe:
                await pipe.watch(record, log)  # an append meanwhile: read again
                state = await self._record_state(pipe, session_id)
                if not state.has_record and not state.count:
                    raise SessionNotFoundError(session_id)
                last_seq = state.repaired_last_seq()
                pipe.multi()  # type: ignore[no-untyped-call]  # redis-py leaves it untyped
                if not state.has_record:
                    now = repr(self._clock())
                    _ = pipe.hset(record, mapping={"created_at": now, "updated_at": now})
                    _ = pipe.zadd(self._index, {session_id: float(now)})
                _ = pipe.hset(record, "last_seq", last_seq)  # queued: the pipeline returns itself
                try:
                    await pipe.execute()
                except _redis_errors().WatchError:
                    continue
            return await self._info_after(client, session_id)

    async def _info_after(self, client: Redis, session_id: str) -> SessionInfo:
        info = (await self._infos(client, [session_id]))[0]
        if isinstance(info, CorruptSessionError):
            raise info
        if info is None:  # deleted by another process at once
            raise SessionNotFoundError(session_id)
        return info

    @reachable(redis_lost, "session store")
    async def _delete_session(self, session_id: str) -> bool:
        client = await self._ensure()
        return await self._delete(client, [session_id]) > 0

    async def _delete(self, client: Redis, session_ids: list[str]) -> int:
        if not session_ids:
            return 0
        async with client.pipeline(transaction=True) as pipe:
            for session_id in session_ids:
                record, log, ids = self._keys(session_id)
                _ = pipe.delete(record)  # queued: the pipeline returns itself
                _ = pipe.delete(log, ids)
            _ = pipe.zrem(self._index, *session_ids)
            replies = await pipe.execute()
        return sum(1 for n in range(len(session_ids)) if replies[2 * n])

    @reachable(redis_lost, "session store")
    async def prune(self) -> int:
        """Apply ``max_sessions`` and ``max_age`` now; see :meth:`SessionStore.prune`."""
        return await self._prune(await self._ensure())

    async def _prune(self, client: Redis) -> int:
        retention = self.retention
        if not retention.prunes:
            return 0
        cutoff = ""
        if retention.max_age is not None:
            cutoff = repr(self._clock() - retention.max_age.total_seconds())
        limit = "" if retention.max_sessions is None else str(retention.max_sessions)
        # One script: the choice and the delete are one step (see PRUNE).
        try:
            deleted = await self._script(client, PRUNE)(
                keys=[self._index], args=[self.prefix, cutoff, limit]
            )
        except _redis_errors().ResponseError as exc:
            raise self._broken_index(exc) from exc
        return int(deleted)

    def _broken_index(self, exc: ResponseError) -> SessionError:
        """The session index key holds something else (WRONGTYPE): not the store's own."""
        return SessionError(
            f"the session index {self._index!r} is not a sorted set; Redis said: {exc}",
            session_id=None,
        )


def _corrupt(session_id: str, exc: ResponseError) -> CorruptSessionError:
    """A server error about the session's keys (WRONGTYPE: a key that is not ours)."""
    return CorruptSessionError(session_id=session_id, seq=None, reason=f"Redis said: {exc}")


def _redis_errors() -> ModuleType:
    """redis-py's exceptions: imported with the client, so the store loads without redis."""
    return import_extra("redis.exceptions", extra="redis", by="RedisSessionStore")


def _entry_seq(session_id: str, entry_id: bytes) -> int:
    head, _, tail = entry_id.partition(b"-")
    if tail != b"0" or not head.isdigit():
        raise CorruptSessionError(
            session_id=session_id, seq=None, reason=f"a log entry has the id {entry_id!r}"
        )
    return int(head)


def _info(session_id: str, fields: object, count: object) -> SessionInfo | None:
    error = _redis_errors().ResponseError
    if isinstance(fields, error) or isinstance(count, error):
        raise CorruptSessionError(
            session_id=session_id,
            seq=None,
            reason=f"Redis said: {fields if isinstance(fields, error) else count}",
        )
    if not fields:
        return None
    if not isinstance(fields, Mapping) or not isinstance(count, int):
        raise CorruptSessionError(session_id=session_id, seq=None, reason="not a session record")
    record: Mapping[bytes, Any] = fields
    try:
        parent = record.get(b"parent_id")
        return SessionInfo(
            session_id=session_id,
            parent_id=parent.decode() if parent else None,
            created_at=utc(float(record[b"created_at"])),
            updated_at=utc(float(record[b"updated_at"])),
            message_count=count,
            last_seq=int(record[b"last_seq"]),
        )
    except (KeyError, ValueError, OverflowError, OSError, UnicodeDecodeError) as exc:
        raise CorruptSessionError(
            session_id=session_id, seq=None, reason=f"its record is {dict(record)!r:.200} ({exc!r})"
        ) from None


def _text(value: object) -> str:
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, str):
        return value
    raise TypeError(f"expected text from Redis, got {value!r:.80}")
