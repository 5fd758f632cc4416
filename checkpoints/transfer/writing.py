"""Writing one thread into one of our stores, whole or not at all (see `copy` for what
makes a thread whole on each kind of store)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction

from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.transfer.records import ThreadRecord


@dataclass(frozen=True, slots=True)
class PreparedThread:
    """A thread's batch as the target prepared it ahead of its write
    (`StoreSaver.prepare_many`), under the thread's own id, and the bytes its values
    encoded to."""

    batch: Any
    bytes: int


def write_thread(
    target,
    thread: ThreadRecord,
    *,
    owner_pk: int | None = None,
    finish: Callable[[str], None] | None = None,
    savepoint: bool = True,
) -> None:
    """Write the whole thread into the target as one unit (see the module's docstring).

    ``finish(thread_id)``: what the import adds to a written thread (its extras, its
    source's times), inside the thread's transaction on the ORM stores; on Redis before
    the staging copy goes, so a resumed import runs it again. ``savepoint=False``: inside
    a caller's transaction, the thread takes no savepoint of its own (a failure spoils the
    caller's transaction, which then rolls back whole).
    """
    staging = staging_id_of(target, thread.thread_id)
    if staging is not None:
        target.delete_thread(staging)  # what a killed import left before its copy
        try:
            _put_thread(target, thread, staging)
            if thread.retention:
                target.set_thread_retention(staging, ThreadRetention(**thread.retention))
            target.copy_thread(staging, thread.thread_id)
        except BaseException:
            target.delete_thread(staging)
            raise
        give_marks(target, thread, thread.thread_id, owner_pk)
        if finish is not None:
            finish(thread.thread_id)
        target.delete_thread(staging)  # last: its absence says the thread is complete
        return
    with all_or_nothing(target, [thread], savepoint=savepoint):
        _put_thread(target, thread, thread.thread_id)
        if thread.retention:
            target.set_thread_retention(thread.thread_id, ThreadRetention(**thread.retention))
        give_marks(target, thread, thread.thread_id, owner_pk)
        if finish is not None:
            finish(thread.thread_id)


def give_marks(target, thread: ThreadRecord, thread_id: str, owner_pk: int | None) -> None:
    if thread.finished and hasattr(target, "mark_finished"):
        target.mark_finished(
            thread_id,
            datetime.fromisoformat(thread.finished["due_at"]),
            thread.finished.get("owner") or "",
        )
    if owner_pk is not None and hasattr(target, "set_owner"):
        target.set_owner(thread_id, owner_pk)


def _put_thread(target, thread: ThreadRecord, thread_id: str) -> None:
    if thread.prepared is not None and thread_id == thread.thread_id:
        target.put_prepared(thread.prepared.batch)
        return
    puts, writes = thread_puts(thread, thread_id)
    if hasattr(target, "put_many"):
        # One unit, in as few round trips as the store can (PostgreSQL: one statement).
        target.put_many(puts, writes)
        return
    for put in puts:
        target.put(*put)
    for write in writes:
        target.put_writes(*write)


def thread_puts(thread: ThreadRecord, thread_id: str) -> tuple[list, list]:
    """The thread's checkpoints as ``put`` arguments under ``thread_id``, each with the
    channel versions none before it stored, and its writes as ``put_writes`` arguments."""
    written: set[tuple[str, str, str]] = set()
    puts, writes = [], []
    for cp in thread.checkpoints:
        # No user_id: the owner is set once, as resolved (`_Owners`), never by the put.
        conf: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": cp.ns}
        if cp.parent_id:
            conf["checkpoint_id"] = cp.parent_id
        versions = cp.checkpoint.get("channel_versions") or {}
        new_versions = {}
        for channel, version in versions.items():
            key = (cp.ns, channel, str(version))
            if key not in written:
                written.add(key)
                new_versions[channel] = version
        puts.append(({"configurable": conf}, cp.checkpoint, cp.metadata, new_versions))
        at = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": cp.ns,
                "checkpoint_id": cp.checkpoint_id,
            }
        }
        for task_id, path, group in _write_groups(cp.writes):
            writes.append((at, group, task_id, path))
    return puts, writes


def _write_groups(writes):
    """(task_id, task_path, writes) per task, specials apart: put_writes gives the others
    indexes 0, 1, ... in order and each special its own, as the source held them."""
    groups: dict[tuple[str, str, bool], list] = {}
    for w in writes:
        special = w.idx is not None and w.idx < 0
        groups.setdefault((w.task_id, w.task_path, special), []).append((w.channel, w.value))
    for (task_id, path, _), group in groups.items():
        yield task_id, path, group


@contextmanager
def all_or_nothing(target, written: list[ThreadRecord], *, savepoint: bool = True):
    """Every thread written inside, or none: one transaction where the target's tables are a
    database's (its ``db_alias``); on the others, the threads written are taken back (their
    checkpoints, marks and declared retention) when anything fails."""
    using = getattr(target, "db_alias", None)
    if using is not None:
        with transaction.atomic(using=using, savepoint=savepoint):
            yield
        return
    try:
        yield
    except BaseException:
        for thread in written:
            target.delete_thread(thread.thread_id)
            if thread.finished and hasattr(target, "unmark_finished"):
                target.unmark_finished(thread.thread_id)
            if thread.retention and hasattr(target, "set_thread_retention"):
                target.set_thread_retention(thread.thread_id, ThreadRetention())
        raise


def finish_interrupted_copy(
    target,
    thread: ThreadRecord,
    owner_pk: int | None,
    finish: Callable[[str], None] | None = None,
) -> bool:
    """Complete a thread a killed import had copied on Redis but not yet marked (its
    staging copy is still there, see the module's docstring); True when it did."""
    staging = staging_id_of(target, thread.thread_id)
    if staging is None:
        return False
    if target.thread_holdings(staging).empty or target.thread_holdings(thread.thread_id).empty:
        return False
    give_marks(target, thread, thread.thread_id, owner_pk)
    if finish is not None:
        finish(thread.thread_id)
    target.delete_thread(staging)
    return True


def staging_id_of(target, thread_id: str) -> str | None:
    """Where the target stages a thread's import (`Capabilities.staging_id`); None for a
    target whose writes of a thread are one transaction, or a saver that is not ours."""
    staging_id = getattr(target, "staging_id", None)
    return staging_id(thread_id) if staging_id is not None else None
