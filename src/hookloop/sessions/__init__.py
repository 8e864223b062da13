"""Sessions: every committed message of an agent kept in a database, restored on restart.

- :class:`SessionStore`: the contract, an append-only log of messages per session with
  sequence numbers, listing, export, fork, deletion and retention.
- Backends: :class:`SQLiteSessionStore` (a file; the default, nothing to install),
  :class:`PostgresSessionStore` (``pip install 'hookloop[postgres]'``) and
  :class:`RedisSessionStore` (``pip install 'hookloop[redis]'``).
- :class:`SessionRecorder`: the plugin that restores a session into an agent and appends
  every message the agent commits (``agent.use(store.session("abc"))``).
- Messages as JSON, the form a store keeps them in: :func:`dump_messages` /
  :func:`load_messages` (plain dicts and lists) and :func:`messages_to_json` /
  :func:`messages_from_json` (text).

The sessions' errors (:class:`~hookloop.SessionError` and its subclasses) are at the root,
with the rest of the error tree.

See ``docs/sessions.md``.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from .._extras import lazy_dir as _lazy_dir
from .._extras import lazy_getattr as _lazy_getattr
from .._messages import dump_messages, load_messages, messages_from_json, messages_to_json
from .._publish import publish as _publish
from ._base import SessionStore
from ._codec import MESSAGE_FORMAT
from ._recorder import SessionRecorder
from ._sqlite import SQLiteSessionStore
from ._types import (
    EXPORT_FORMAT,
    SCHEMA_VERSION,
    ExportedMessage,
    ExportedSession,
    Retention,
    SessionInfo,
    StoredMessage,
    UnreadableMessage,
)

if _TYPE_CHECKING:
    from ._postgres import PostgresSessionStore
    from ._redis import RedisSessionStore

__all__ = [
    "EXPORT_FORMAT",
    "MESSAGE_FORMAT",
    "SCHEMA_VERSION",
    "ExportedMessage",
    "ExportedSession",
    "PostgresSessionStore",
    "RedisSessionStore",
    "Retention",
    "SQLiteSessionStore",
    "SessionInfo",
    "SessionRecorder",
    "SessionStore",
    "StoredMessage",
    "UnreadableMessage",
    "dump_messages",
    "load_messages",
    "messages_from_json",
    "messages_to_json",
]

# The server backends import their client library, which is an optional extra: load them on
# first use, so that `import hookloop.sessions` works without either installed.
_LAZY = {"PostgresSessionStore": "._postgres", "RedisSessionStore": "._redis"}

__getattr__ = _lazy_getattr(__name__, _LAZY)
__dir__ = _lazy_dir(__name__, _LAZY)

_publish(globals(), __all__)
