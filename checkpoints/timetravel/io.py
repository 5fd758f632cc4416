"""The I/O a time-travel flow asks for, and how a saver fulfils each request.

A flow (see :mod:`checkpoints.flows`) yields these requests; :func:`perform` answers them
with the saver's sync methods and :func:`aperform` with its async twins, so the sync and
async forms of every operation run the same steps in the same order.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction

from checkpoints.signals import thread_forked
from checkpoints.store.orm.aio import off_loop, on_loop_thread
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
class BumpAndPut:
    """Store ``put`` and bump the thread's version as one unit (`one_unit`): a refused put
    leaves the version where it was, and a refused bump writes nothing."""

    thread_id: str
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
    | BumpAndPut
    | OpenList
    | NextRow
    | FireForked
)


@contextmanager
def one_unit(saver) -> Iterator[None]:
    """The store's unit of work around several calls: a transaction where the store's
    tables are a database's (its ``db_alias``), the store's lock on memory; Redis offers
    none across two calls."""
    alias = getattr(saver, "db_alias", None)
    if isinstance(alias, str):
        with transaction.atomic(using=alias):
            yield
        return
    lock = getattr(getattr(saver, "store", None), "lock", None)
    with lock if lock is not None else nullcontext():
        yield


def bump_and_put(saver, request: BumpAndPut) -> Any:
    """The put, then the version bump, in the store's unit of work (`one_unit`)."""
    put, thread_id, expected = request.put, request.thread_id, request.expected
    with one_unit(saver):
        if expected is not None and saver.thread_version(thread_id) != expected:
            # Refused in the store's own words, before anything is written.
            saver.bump_thread_version(thread_id, expected=expected)
        # Put first: a refused put leaves the version alone even where the store has no
        # unit around both (Redis); there only a bump racing in between could still
        # refuse after the put.
        stored = saver.put(put.config, put.checkpoint, put.metadata, put.new_versions)
        saver.bump_thread_version(thread_id, expected=expected)
        return stored


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
        case BumpAndPut():
            if isinstance(getattr(saver, "db_alias", None), str) and on_loop_thread():
                # An ORM saver called from a loop's thread runs its calls on the off-loop
                # thread: the transaction must be opened there, around both of them.
                return off_loop(bump_and_put, saver, request)
            return bump_and_put(saver, request)
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
        case BumpAndPut():
            # The unit is a database transaction or a lock, both held by one thread.
            return await sync_to_async(perform, thread_sensitive=True)(saver, request)
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
