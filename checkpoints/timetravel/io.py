"""The I/O a time-travel flow asks for, and how a saver fulfils each request.

A flow (see :mod:`checkpoints.flows`) yields these requests; :func:`perform` answers them
with the saver's sync methods and :func:`aperform` with its async twins, so the sync and
async forms of every operation run the same steps in the same order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async

from checkpoints.signals import thread_forked
from checkpoints.threads import record_owner, refuse_existing
from checkpoints.timetravel.snapshot import StateSnapshot

# The name operators configure: fork-signal failures are logged here.
logger = logging.getLogger("checkpoints.timetravel")


@dataclass(frozen=True)
class GetTuple:
    config: dict[str, Any]


@dataclass(frozen=True)
class RefuseExisting:
    thread_id: str
    doing: str


@dataclass(frozen=True)
class SetOwner:
    thread_id: str
    owner: Any


@dataclass(frozen=True)
class GetDurability:
    config: dict[str, Any]


@dataclass(frozen=True)
class DeltaHistory:
    config: dict[str, Any]
    channels: list[str]


@dataclass(frozen=True)
class Put:
    config: dict[str, Any]
    checkpoint: dict[str, Any]
    metadata: dict[str, Any]
    new_versions: dict[str, Any]


@dataclass(frozen=True)
class PutAsHead:
    """Store ``put`` as the thread's new head and bump its version, as one unit of the
    store's (`StoreSaver.put_as_head`): a refused put leaves the version where it was, and
    a version other than ``expected`` writes nothing."""

    expected: int | None
    put: Put


@dataclass(frozen=True)
class OpenList:
    """Start a ``list``; the reply is a cursor for :class:`NextRow`."""

    config: dict[str, Any]
    options: dict[str, Any]


@dataclass(frozen=True)
class NextRow:
    """The cursor's next tuple, or None when it is done."""

    cursor: Any


@dataclass(frozen=True)
class FireForked:
    sender: type
    source_thread_id: str
    checkpoint_id: str
    new_thread_id: str
    snapshot: StateSnapshot


Request = (
    GetTuple
    | RefuseExisting
    | SetOwner
    | GetDurability
    | DeltaHistory
    | Put
    | PutAsHead
    | OpenList
    | NextRow
    | FireForked
)


def perform(saver, request: Request) -> Any:
    """Fulfil ``request`` with the saver's sync methods."""
    match request:
        case GetTuple(config):
            return saver.get_tuple(config)
        case RefuseExisting(thread_id, doing):
            return refuse_existing(saver=saver, thread_id=thread_id, doing=doing)
        case SetOwner(thread_id, owner):
            return record_owner(saver=saver, thread_id=thread_id, user=owner)
        case GetDurability(config):
            get = getattr(saver, "get_durability", None)
            return get(config) if get is not None else None
        case DeltaHistory(config, channels):
            return saver.get_delta_channel_history(config=config, channels=channels)
        case Put(config, checkpoint, metadata, new_versions):
            return saver.put(config, checkpoint, metadata, new_versions)
        case PutAsHead(expected, Put(config, checkpoint, metadata, new_versions)):
            return saver.put_as_head(
                config, checkpoint, metadata, new_versions, expected_version=expected
            )
        case OpenList(config, options):
            return iter(saver.list(config, **options))
        case NextRow(cursor):
            return next(cursor, None)
        case FireForked():
            return fire_forked(saver, request)
    raise TypeError(f"time travel has no sync I/O for {request!r}")


async def aperform(saver, request: Request) -> Any:
    """Fulfil ``request`` with the saver's async methods."""
    match request:
        case GetTuple(config):
            return await saver.aget_tuple(config)
        case RefuseExisting(thread_id, doing):
            refuse = sync_to_async(refuse_existing, thread_sensitive=True)
            return await refuse(saver=saver, thread_id=thread_id, doing=doing)
        case SetOwner(thread_id, owner):
            record = sync_to_async(record_owner, thread_sensitive=True)
            return await record(saver=saver, thread_id=thread_id, user=owner)
        case GetDurability(config):
            aget = getattr(saver, "aget_durability", None)
            return await aget(config) if aget is not None else None
        case DeltaHistory(config, channels):
            return await saver.aget_delta_channel_history(config=config, channels=channels)
        case Put(config, checkpoint, metadata, new_versions):
            return await saver.aput(config, checkpoint, metadata, new_versions)
        case PutAsHead(expected, Put(config, checkpoint, metadata, new_versions)):
            return await saver.aput_as_head(
                config, checkpoint, metadata, new_versions, expected_version=expected
            )
        case OpenList(config, options):
            return saver.alist(config, **options).__aiter__()
        case NextRow(cursor):
            return await anext(cursor, None)
        case FireForked():
            # Receivers are plain Django ones and may touch the ORM.
            return await sync_to_async(fire_forked, thread_sensitive=True)(saver, request)
    raise TypeError(f"time travel has no async I/O for {request!r}")


def fire_forked(saver, fork: FireForked) -> None:
    """Send ``thread_forked``; a failing receiver is logged and the fork stands."""
    results = thread_forked.send_robust(
        sender=fork.sender,
        saver=saver,
        source_thread_id=fork.source_thread_id,
        checkpoint_id=fork.checkpoint_id,
        new_thread_id=fork.new_thread_id,
        snapshot=fork.snapshot,
    )
    for receiver, outcome in results:
        if isinstance(outcome, Exception):
            logger.error(
                "thread_forked receiver %r failed for fork of %r at %r into %r; the fork stands",
                receiver,
                fork.source_thread_id,
                fork.checkpoint_id,
                fork.new_thread_id,
                exc_info=outcome,
            )
