"""Large Temporal payloads kept in the session store, the history holding a reference.

A turn's records cross Temporal as payloads: a long tool result or a large user message
would reach the server's limit on one payload (2 MB by default), and each activity carries
the records so far, so the history would grow by it again at every call. Temporal's external
storage moves a payload over a threshold to a driver and keeps a reference in its place;
this driver is the session store: each payload is one message of a side session of its own,
``approvals:<sha256 of the payload>`` (so the same payload is stored once). A side session
(the form of a long session's approval records) is not a conversation: ``list_sessions``
leaves it out and retention keeps it whole.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence
from typing import Final

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    ExternalStorage,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)

from .._approval_log import SIDE_PREFIX
from .._errors import DurableRecordError
from .._messages import UserMessage
from ..sessions._base import SessionStore

__all__ = ["PAYLOAD_SESSION_PREFIX", "SessionStorePayloads", "data_converter"]

PAYLOAD_SESSION_PREFIX: Final = SIDE_PREFIX  # and 64 hex digits: a side session's form
THRESHOLD: Final = 256 * 1024  # bytes: Temporal's own default, far below the 2 MB limit


class SessionStorePayloads(StorageDriver):
    """A Temporal storage driver that keeps payloads in a hookloop session store."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store

    def name(self) -> str:
        return "hookloop-session-store"

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        claims = []
        for payload in payloads:
            data = payload.SerializeToString()
            digest = hashlib.sha256(data).hexdigest()
            session_id = PAYLOAD_SESSION_PREFIX + digest
            text = base64.b64encode(data).decode()
            # Appends are idempotent by message id: the same payload is stored once.
            await self._store.append(session_id, UserMessage(content=text, id=digest))
            claims.append(StorageDriverClaim(claim_data={"session": session_id}))
        return claims

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        payloads = []
        for claim in claims:
            session_id = claim.claim_data["session"]
            records = await self._store.records(session_id)
            content = records[0].message.content if records else None
            if not isinstance(content, str):
                raise DurableRecordError(
                    workflow_id="unknown",
                    step="payload",
                    reason=f"the session store has no payload {session_id!r} (pruned?)",
                )
            payloads.append(Payload.FromString(base64.b64decode(content)))
        return payloads


def data_converter(store: SessionStore | None) -> DataConverter:
    """Temporal's default converter, with payloads over 256 KiB kept in ``store``."""
    if store is None:
        return DataConverter.default
    storage = ExternalStorage(
        drivers=[SessionStorePayloads(store)], payload_size_threshold=THRESHOLD
    )
    return DataConverter(external_storage=storage)
