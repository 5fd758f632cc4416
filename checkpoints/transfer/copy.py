"""Copy threads from any source into one of our stores, a whole thread at a time.

Everything is written through the store contract (``put``, ``put_writes``, the retention
and finished-mark ledger), so the target's own rules (keys, blobs, sealing, compression,
owners) apply as for a graph's writes. What makes a thread whole or absent:

- ORM stores (PostgreSQL, SQLite): one database transaction per thread;
- Redis: the thread is written under a staging id, then moved onto its id by the store's
  ``copy_thread`` (one Lua script, so all or nothing), then given its finished mark (a
  store-wide key, outside the thread's script), and only then is the staging copy
  deleted. So a staging copy beside its thread means a killed import got as far as the
  copy: the next run gives the thread its mark and deletes the staging copy. A staging
  copy alone is deleted and the thread imported again;
- memory: in-process, so a kill loses the whole store anyway; a failure part-way
  deletes what was written of the thread.

Before anything of a thread is written, `checks.check_thread` checks every record of it
and its owner is resolved; a thread that fails is refused whole and named, the others are
imported. ``strict`` makes it all or nothing: every thread is read and checked first and
nothing is written when one is refused; a thread the target then refuses undoes the
whole import (one transaction on the ORM stores, the threads written deleted on the
others).

Owners: a thread keeps the owner its source records (a username: our ORM stores export
it), which must be a user here; ``owner_from_metadata`` names a metadata key to take the
owner from instead, when the source records none; ``owner`` owns the rest. A checkpoint's
metadata never names the owner on its own: whoever writes a checkpoint chooses it.

Modules that read the models (owners, presence) are imported inside the functions that use
them: a plain script imports `copy_threads` before `from_conn_string` has set Django up.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from django.db import DataError, IntegrityError
from langgraph.checkpoint.base import BaseCheckpointSaver

from checkpoints.errors import CheckpointStoreError, InvalidCheckpointInput, ThreadExists
from checkpoints.store.planning import check_thread_id
from checkpoints.transfer.checks import check_thread
from checkpoints.transfer.langgraph_tables import TableSource
from checkpoints.transfer.records import (
    ThreadRecord,
    TransferFormatError,
    refuse,
)
from checkpoints.transfer.sources import FileSource, SaverSource, source_of
from checkpoints.transfer.verify import verify_thread
from checkpoints.transfer.writing import all_or_nothing, finish_interrupted_copy, write_thread


@dataclass
class TransferSummary:
    threads: int = 0
    checkpoints: int = 0
    writes: int = 0
    # Serialized bytes the target was given (bodies, values, writes) or the export holds.
    bytes: int = 0
    skipped: int = 0
    refused: int = 0
    seconds: float = 0.0
    refusals: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"{self.threads} thread(s), {self.checkpoints} checkpoint(s), {self.writes} "
            f"pending write(s), {self.bytes} bytes; {self.skipped} skipped, {self.refused} "
            f"refused; {self.seconds:.2f}s"
        )


class TransferRefused(InvalidCheckpointInput):
    """A ``strict`` import refused whole: nothing was written; ``summary.refusals`` names
    every thread refused."""

    code = "transfer_refused"

    def __init__(self, summary: TransferSummary) -> None:
        super().__init__(
            f"{summary.refused} thread(s) refused, so nothing was imported (strict): "
            + "; ".join(summary.refusals[:3])
            + (" ..." if len(summary.refusals) > 3 else "")
        )
        self.summary = summary


def as_source(source: Any):
    if isinstance(source, (SaverSource, FileSource, TableSource)):
        return source
    if isinstance(source, BaseCheckpointSaver):
        return source_of(source)
    if isinstance(source, str):
        return FileSource(source)
    raise InvalidCheckpointInput(
        f"cannot read threads from a {type(source).__name__}; pass a saver or an export path",
        field="source",
    )


def copy_threads(
    source_saver: Any,
    target_saver: BaseCheckpointSaver,
    *,
    thread_ids: Iterable[str] | None = None,
    on_conflict: str = "skip",
    verify: bool = False,
    owner: str = "",
    owner_from_metadata: str = "",
    strict: bool = False,
    dry_run: bool = False,
    progress: Callable[[TransferSummary], None] | None = None,
) -> TransferSummary:
    """Copy every thread (or ``thread_ids``) of the source into ``target_saver``.

    ``source_saver``: any BaseCheckpointSaver, an export file's path, or a source from
    `open_source`. A thread the target already knows is skipped (``on_conflict="skip"``)
    or refused, before anything is written (``"fail"``, ThreadExists naming it). A thread
    with a bad record is refused and counted (the summary's ``refusals`` name it, with the
    file's line or the checkpoint); the others are imported, unless ``strict``: then
    TransferRefused, and nothing is written. Owners: see the module's docstring.
    ``verify`` reads each imported thread back from both sides and raises
    TransferVerifyError at the first difference.
    """
    if on_conflict not in ("skip", "fail"):
        raise InvalidCheckpointInput(
            f"on_conflict must be 'skip' or 'fail', got {on_conflict!r}", field="on_conflict"
        )
    source = as_source(source_saver)
    wanted = None if thread_ids is None else [check_thread_id(t) for t in thread_ids]
    owners = _Owners(
        target_saver, _owner_pk(target_saver, owner) if owner else None, owner_from_metadata
    )
    started = time.monotonic()
    if on_conflict == "fail":
        # Refused before anything is written: an import that would take a thread over
        # writes none.
        for thread_id in wanted if wanted is not None else source.thread_ids():
            found = _presence(target_saver, thread_id)
            if found is not None:
                raise ThreadExists(
                    f"cannot import thread {thread_id!r}: the target already holds it "
                    f"({found}); nothing was imported",
                    field="thread_id",
                )
    run = _Run(source, target_saver, owners, on_conflict, verify, progress)
    if strict:
        checked = _Run(source, target_saver, owners, on_conflict, False, None)
        checked.copy(wanted, dry_run=True)
        if checked.summary.refused:
            checked.summary.seconds = time.monotonic() - started
            raise TransferRefused(checked.summary)
        if dry_run:
            run = checked
        else:
            with all_or_nothing(target_saver, run.written):
                run.strict = True
                run.copy(wanted, dry_run=False)
    else:
        run.copy(wanted, dry_run=dry_run)
    run.summary.seconds = time.monotonic() - started
    return run.summary


def _target_refusals() -> tuple[type[BaseException], ...]:
    """What a target raises for a record it cannot store: refusals of that thread. The
    checks catch these first; this names any they miss rather than stop the import."""
    refusals: tuple[type[BaseException], ...] = (
        InvalidCheckpointInput,
        ValueError,
        TypeError,
        DataError,
        IntegrityError,
    )
    try:
        import psycopg
    except ImportError:
        return refusals
    return (*refusals, psycopg.DataError, psycopg.IntegrityError)


class _Run:
    """One pass over the source: checks, owners, conflicts, writes, and the summary."""

    def __init__(self, source, target, owners, on_conflict, verify, progress) -> None:
        self.source, self.target, self.owners = source, target, owners
        self.on_conflict, self.verify, self.progress = on_conflict, verify, progress
        self.summary = TransferSummary()
        self.strict = False
        # Threads this run wrote, for `all_or_nothing` to take back.
        self.written: list[ThreadRecord] = []

    def refuse(self, refusal: TransferFormatError) -> None:
        self.summary.refused += 1
        self.summary.refusals.append(refusal.message)
        if self.strict:
            raise TransferRefused(self.summary)

    def copy(self, wanted, *, dry_run: bool) -> None:
        target, summary = self.target, self.summary
        counting, counter = _counting(target)
        refused_by_target = _target_refusals()
        for item in self.source.threads(wanted):
            if isinstance(item, TransferFormatError):
                self.refuse(item)
                continue
            problem = check_thread(item)
            owner_pk = None
            if problem is None:
                try:
                    owner_pk = self.owners.pk_for(item)
                except InvalidCheckpointInput as exc:
                    problem = refuse(
                        exc.message, thread_id=item.thread_id, path=item.path, line=item.line
                    )
            if problem is not None:
                self.refuse(problem)
                continue
            if not dry_run and finish_interrupted_copy(target, item, owner_pk):
                self.count(item)
                continue
            if _presence(target, item.thread_id) is not None:
                if self.on_conflict == "fail":
                    raise ThreadExists(
                        f"cannot import thread {item.thread_id!r}: the target already holds it",
                        field="thread_id",
                    )
                summary.skipped += 1
                continue
            if not dry_run:
                try:
                    write_thread(counting, item, owner_pk=owner_pk)
                except refused_by_target as exc:
                    # The thread's unit of work rolled back, so nothing of it is there.
                    why = exc.message if isinstance(exc, CheckpointStoreError) else str(exc)
                    if not isinstance(exc, (InvalidCheckpointInput, ValueError)):
                        why = f"the store refused it ({type(exc).__name__}: {why})"
                    self.refuse(
                        refuse(why, thread_id=item.thread_id, path=item.path, line=item.line)
                    )
                    continue
                self.written.append(item)
                if self.verify:
                    rereads = isinstance(self.source, (SaverSource, TableSource))
                    again = self.source.thread(item.thread_id) if rereads else item
                    verify_thread(again, SaverSource(target).thread(item.thread_id))
            self.count(item)
            summary.bytes = counter[0]
            if self.progress is not None:
                self.progress(summary)

    def count(self, item: ThreadRecord) -> None:
        self.summary.threads += 1
        self.summary.checkpoints += len(item.checkpoints)
        self.summary.writes += item.writes


class _Owners:
    """The owner each imported thread gets (see the module's docstring), as a user's pk."""

    def __init__(self, target, default_pk: int | None, metadata_key: str) -> None:
        self.alias = getattr(target, "db_alias", None)
        self.records = bool(getattr(target, "records_owners", False)) and self.alias is not None
        self.default_pk = default_pk
        self.metadata_key = metadata_key
        self._by_name: dict[str, int | None] = {}

    def pk_for(self, thread: ThreadRecord) -> int | None:
        if not self.records:
            return None
        if thread.owner:
            pk = self._username(thread.owner)
            if pk is None:
                raise InvalidCheckpointInput(
                    f"its owner {thread.owner!r} is no user of this deployment; create that "
                    "user first (a thread keeps its owner)",
                    field="owner",
                )
            return pk
        if self.metadata_key:
            key = self.metadata_key
            claimed = {cp.metadata.get(key) for cp in thread.checkpoints} - {None, ""}
            if len(claimed) > 1:
                names = ", ".join(sorted(repr(c) for c in claimed))
                raise InvalidCheckpointInput(
                    f"its checkpoints' metadata {key!r} name more than one owner ({names})",
                    field="owner",
                )
            if claimed:
                value = claimed.pop()
                found = None
                if isinstance(value, (str, int)) and not isinstance(value, bool):
                    from checkpoints.store.orm.ledger import find_user

                    found = find_user(str(value), using=self.alias, only_pk=True)
                if found is None:
                    raise InvalidCheckpointInput(
                        f"its checkpoints' metadata {key!r} names {value!r}, no user of this "
                        "deployment",
                        field="owner",
                    )
                return found.pk
        return self.default_pk

    def _username(self, name: str) -> int | None:
        # By username only: an exported owner is a username, even one made of digits.
        if name not in self._by_name:
            from django.contrib.auth import get_user_model

            model = get_user_model()
            users = model._default_manager.db_manager(self.alias)
            found = users.filter(**{model.USERNAME_FIELD: name}).values_list("pk", flat=True)
            self._by_name[name] = found.first()
        return self._by_name[name]


def _presence(saver, thread_id: str) -> str | None:
    if hasattr(saver, "thread_presence"):
        from checkpoints.threads import thread_presence

        return thread_presence(saver=saver, thread_id=thread_id)
    found = saver.get_tuple({"configurable": {"thread_id": thread_id}})
    return "checkpoints" if found is not None else None


def _owner_pk(target, owner: str) -> int:
    from checkpoints.store.orm.ledger import find_user

    found = find_user(owner, using=getattr(target, "db_alias", None) or "default", only_pk=True)
    if found is None:
        raise InvalidCheckpointInput(f"--owner {owner!r} names no user", field="owner")
    return found.pk


def _counting(target):
    """The target, its serializer counting the bytes it hands out; and the count."""
    counter = [0]
    serde = getattr(target, "serde", None)
    if serde is None:
        return target, counter
    base = type(serde)

    class Counting(base):
        def dumps_typed(self, obj, *args, **kwargs):
            typed = super().dumps_typed(obj, *args, **kwargs)
            counter[0] += len(typed[1])
            return typed

    Counting.__name__ = base.__name__
    counted = copy.copy(serde)
    counted.__class__ = Counting
    clone = copy.copy(target)
    clone.serde = counted
    return clone, counter


__all__ = ["TransferRefused", "TransferSummary", "copy_threads"]
