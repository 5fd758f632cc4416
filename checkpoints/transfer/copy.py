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

Retention clocks: an imported thread's created and last-write times are the import's, so
its waiting horizon counts from now (the summary counts the threads whose newest checkpoint
is older than their waiting horizon: the ones an import keeping the source's times would
hand to the next sweep). ``keep_source_times`` keeps the source's instead: created at the
oldest checkpoint's ``ts``, last written at the newest's, so those threads fall to the
next sweep by policy; it needs a target whose threads are rows of a database (`db_alias`).

Extras (`extras`): the thread metadata and holds an export carries are restored with the
thread; ``thread_metadata`` lifts the named checkpoint metadata keys into the thread
metadata the threads API searches.

Modules that read the models (owners, presence) are imported inside the functions that use
them: a plain script imports `copy_threads` before `from_conn_string` has set Django up.
"""

from __future__ import annotations

import copy
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from itertools import islice
from typing import Any

from django.db import DataError, IntegrityError, transaction
from langgraph.checkpoint.base import BaseCheckpointSaver

from checkpoints.codec.serde import StoreSerializer
from checkpoints.errors import (
    CheckpointConfigError,
    CheckpointStoreError,
    InvalidCheckpointInput,
    ThreadExists,
)
from checkpoints.signals import checkpoint_created
from checkpoints.store.planning import check_thread_id, utcnow
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.transfer.checks import check_thread
from checkpoints.transfer.extras import (
    lift_metadata,
    refuse_lifting_without_threads_api,
    restore_extras,
)
from checkpoints.transfer.langgraph_tables import TableSource
from checkpoints.transfer.records import (
    ThreadRecord,
    TransferFormatError,
    refuse,
)
from checkpoints.transfer.sources import FileSource, SaverSource, source_of
from checkpoints.transfer.verify import verify_thread
from checkpoints.transfer.writing import (
    PreparedThread,
    all_or_nothing,
    finish_interrupted_copy,
    staging_id_of,
    thread_puts,
    write_thread,
)


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
    # Threads imported whose newest checkpoint is older than their waiting horizon in force.
    past_waiting: int = 0
    # The platform's waiting horizon the count was made against (minutes).
    waiting_minutes: int = 0
    kept_source_times: bool = False
    # Threads the source holds, when it can tell (for an estimate of the time left).
    total: int | None = None

    def add(self, other: TransferSummary) -> None:
        """Count ``other`` (a part of the same import, run elsewhere) into this one."""
        for name in ("threads", "checkpoints", "writes", "bytes", "skipped", "refused"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.past_waiting += other.past_waiting
        self.refusals.extend(other.refusals)

    def clock(self) -> str:
        """What the import did to the threads' retention clocks, in words."""
        if self.kept_source_times:
            return (
                "Retention: each thread kept its source's times (created at its oldest "
                f"checkpoint, last written at its newest); {self.past_waiting} of them are "
                f"older than their waiting horizon ({self.waiting_minutes} min unless the "
                "thread declares its own), so the next sweep deletes them unless a hold, a "
                "finished mark's horizon or a live-thread filter keeps them."
            )
        return (
            "Retention: each thread's clock restarted at this import (created and last "
            f"written now), so it lives a full waiting horizon ({self.waiting_minutes} min "
            f"unless the thread declares its own) from today; {self.past_waiting} of them "
            "were last written longer ago than that and would fall to the next sweep with "
            "--keep-source-times."
        )

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
    keep_source_times: bool = False,
    thread_metadata: Sequence[str] = (),
) -> TransferSummary:
    """Copy every thread (or ``thread_ids``) of the source into ``target_saver``.

    ``source_saver``: any BaseCheckpointSaver, an export file's path, or a source from
    `open_source`. A thread the target already knows is skipped (``on_conflict="skip"``)
    or refused, before anything is written (``"fail"``, ThreadExists naming it). A thread
    with a bad record is refused and counted (the summary's ``refusals`` name it, with the
    file's line or the checkpoint); the others are imported, unless ``strict``: then
    TransferRefused, and nothing is written. Owners: see the module's docstring.
    ``verify`` reads each imported thread back from both sides and raises
    TransferVerifyError at the first difference. ``keep_source_times``,
    ``thread_metadata``: see the module's docstring.
    """
    if on_conflict not in ("skip", "fail"):
        raise InvalidCheckpointInput(
            f"on_conflict must be 'skip' or 'fail', got {on_conflict!r}", field="on_conflict"
        )
    refuse_source_times(target_saver, keep_source_times)
    refuse_lifting_without_threads_api(thread_metadata)
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
            found = presence(target_saver, thread_id)
            if found is not None:
                raise ThreadExists(
                    f"cannot import thread {thread_id!r}: the target already holds it "
                    f"({found}); nothing was imported",
                    field="thread_id",
                )
    shape = _Shape(keep_source_times, tuple(thread_metadata))
    run = _Run(source, target_saver, owners, on_conflict, verify, progress, shape)
    with _verbatim(source, target_saver):
        if strict:
            checked = _Run(source, target_saver, owners, on_conflict, False, None, shape)
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


@contextmanager
def _verbatim(source, target) -> Iterator[None]:
    """A LangGraph table source hands its checked msgpack values over as their stored
    bytes (`codec.serde.Verbatim`) where the target stores them as they are: a saver that
    encodes each value on its own with our serializer, and no `checkpoint_created`
    receiver (its envelope carries the values themselves)."""
    if (
        not isinstance(source, TableSource)
        or not getattr(target, "stores_values_verbatim", False)
        or not isinstance(getattr(target, "serde", None), StoreSerializer)
        or checkpoint_created.has_listeners(type(target))
    ):
        yield
        return
    before, source.verbatim = source.verbatim, True
    try:
        yield
    finally:
        source.verbatim = before


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


def refuse_source_times(target, keep_source_times: bool) -> None:
    """Refuse ``keep_source_times`` on a target whose threads are no database rows, before
    anything is read."""
    if keep_source_times and getattr(target, "db_alias", None) is None:
        raise CheckpointConfigError(
            f"--keep-source-times sets each thread's created and last-write times, which the "
            f"{getattr(target, 'provider', '') or type(target).__name__} store keeps itself; "
            "import without it (the threads' clocks then start at the import)",
            field="keep_source_times",
        )


@dataclass(frozen=True)
class _Shape:
    """What an import makes of each thread beyond its records."""

    keep_source_times: bool = False
    thread_metadata: tuple[str, ...] = ()


def source_times(thread: ThreadRecord) -> tuple[datetime, datetime] | None:
    """(oldest, newest) checkpoint ``ts`` of a checked thread, naive ones read as UTC."""
    moments = []
    for cp in thread.checkpoints:
        when = datetime.fromisoformat(cp.checkpoint["ts"])
        moments.append(when if when.tzinfo is not None else when.replace(tzinfo=UTC))
    return (min(moments), max(moments)) if moments else None


def _keep_times(target, thread_id: str, times: tuple[datetime, datetime]) -> None:
    from checkpoints.models import Thread  # see the module's docstring

    Thread.objects.using(target.db_alias).filter(thread_id=thread_id).update(
        created_at=times[0], last_write_at=times[1]
    )


class _Run:
    """One pass over the source: checks, owners, conflicts, writes, and the summary."""

    def __init__(
        self, source, target, owners, on_conflict, verify, progress, shape=_Shape()
    ) -> None:
        self.source, self.target, self.owners = source, target, owners
        self.on_conflict, self.verify, self.progress = on_conflict, verify, progress
        self.shape = shape
        self.summary = TransferSummary(kept_source_times=shape.keep_source_times)
        self.platform = ThreadRetention.platform()
        self.summary.waiting_minutes = self.platform.waiting_minutes
        self.now = utcnow()
        self.strict = False
        # Threads a strict run wrote, for `all_or_nothing` to take back; only then kept:
        # every record of every thread held to the end grew with the import (434 MB at
        # 5,000 threads of LangChain messages, bench/README).
        self.written: list[ThreadRecord] = []

    def refuse(self, refusal: TransferFormatError) -> None:
        self.summary.refused += 1
        self.summary.refusals.append(refusal.message)
        if self.strict:
            raise TransferRefused(self.summary)

    def copy(self, wanted, *, dry_run: bool) -> None:
        commits = _Commits(None if dry_run else getattr(self.target, "db_alias", None))
        try:
            self._copy(wanted, dry_run, commits)
        except BaseException:
            commits.abort(*sys.exc_info())
            raise
        commits.commit()

    def _copy(self, wanted, dry_run: bool, commits: _Commits) -> None:
        target, summary = self.target, self.summary
        counting, counter = _counting(target)
        refused_by_target = _target_refusals()
        for item in self.items(wanted, prepare=not dry_run):
            if isinstance(item, _Present):
                if self.on_conflict == "fail":
                    raise ThreadExists(
                        f"cannot import thread {item.thread_id!r}: the target already holds it",
                        field="thread_id",
                    )
                summary.skipped += 1
                continue
            if isinstance(item, TransferFormatError):
                self.refuse(item)
                continue
            try:
                owner_pk = self.owners.pk_for(item)
            except InvalidCheckpointInput as exc:
                self.refuse(
                    refuse(exc.message, thread_id=item.thread_id, path=item.path, line=item.line)
                )
                continue
            finish = self.finisher(item)
            if not dry_run and finish_interrupted_copy(target, item, owner_pk, finish):
                self.count(item)
                continue
            if not item.absent and presence(target, item.thread_id) is not None:
                if self.on_conflict == "fail":
                    raise ThreadExists(
                        f"cannot import thread {item.thread_id!r}: the target already holds it",
                        field="thread_id",
                    )
                summary.skipped += 1
                continue
            if not dry_run:
                write = (counting, item, owner_pk, finish)
                if item.prepared is not None:
                    counter[0] += item.prepared.bytes  # encoded in the read-ahead
                try:
                    commits.write(*write)
                except refused_by_target as exc:
                    # Its unit of work rolled back, so nothing of it is there; in a shared
                    # transaction, the others' went with it: written again, one by one.
                    if not commits.grouped:
                        self.refuse_write(item, exc)
                        continue
                    for earlier in commits.take_back():
                        _write_alone(*earlier)
                    try:
                        item.prepared = None
                        _write_alone(*write)
                    except refused_by_target as again:
                        self.refuse_write(item, again)
                        continue
                item.prepared = None  # held no longer than its write
                if self.strict:
                    self.written.append(item)
                if self.verify:
                    rereads = isinstance(self.source, (SaverSource, TableSource))
                    again = self.source.thread(item.thread_id) if rereads else item
                    verify_thread(again, SaverSource(target).thread(item.thread_id))
            self.count(item)
            summary.bytes = counter[0]
            if self.progress is not None:
                self.progress(summary)

    def refuse_write(self, item: ThreadRecord, exc: BaseException) -> None:
        why = exc.message if isinstance(exc, CheckpointStoreError) else str(exc)
        if not isinstance(exc, (InvalidCheckpointInput, ValueError)):
            why = f"the store refused it ({type(exc).__name__}: {why})"
        self.refuse(refuse(why, thread_id=item.thread_id, path=item.path, line=item.line))

    def items(
        self, wanted, *, prepare: bool = False
    ) -> Iterator[ThreadRecord | TransferFormatError | _Present]:
        """The source's threads, those the target holds already as `_Present` without
        reading them: asked in batches where the target's threads are database rows and
        the source reads a thread by its id (a resumed import skips what is there at the
        cost of a query per batch); one by one, as they are read, elsewhere. Each thread
        read is checked as it is read (`checked`): a thread that fails comes as its
        refusal. ``prepare``: a read-ahead also prepares each thread's batch
        (`read_prepared`)."""
        source, target = self.source, self.target
        if getattr(target, "db_alias", None) is None or isinstance(source, FileSource):
            yield from self.checked(source.threads(wanted))
            return
        ids = iter(wanted if wanted is not None else source.thread_ids())
        # A LangGraph table source on a connection of its own reads ahead in a thread of
        # its own: its queries and the target's statements then wait at once
        # (`read_ahead`). Not when verifying: that reads the source again from this thread.
        ahead = getattr(source, "reads_ahead", False) and not self.verify
        read = self.read_checked
        if ahead and prepare and hasattr(target, "prepare_many"):
            read = partial(self.read_prepared, _counting(target))
        while chunk := list(islice(ids, PRESENCE_BATCH)):
            found = present_among(target, chunk)
            yield from (_Present(t) for t in chunk if t in found)
            absent = [t for t in chunk if t not in found]
            for item in read_ahead(read, absent) if ahead else read(absent):
                if isinstance(item, ThreadRecord):
                    item.absent = True
                yield item

    def read_checked(self, thread_ids: list) -> Iterator[ThreadRecord | TransferFormatError]:
        return self.checked(self.source.threads(thread_ids))

    def read_prepared(
        self, preparing: tuple, thread_ids: list
    ) -> Iterator[ThreadRecord | TransferFormatError]:
        """`read_checked`'s threads, each with its batch as the target prepares it (the
        plans; on PostgreSQL also the values encoded and the statement's arrays packed):
        in a read-ahead, that is most of the writing thread's own work moved beside the
        statement's wait. A thread the target refuses is handed over unprepared, to be
        refused where any write is. Its own count of the bytes encoded, since the writes
        count theirs (``preparing``: `_counting`'s target and count, used by one read-ahead
        at a time); none for a target that writes a thread under another id first."""
        target, counter = preparing
        refused_by_target = _target_refusals()
        for item in self.read_checked(thread_ids):
            if isinstance(item, ThreadRecord) and staging_id_of(target, item.thread_id) is None:
                # The GIL offered between the thread's two halves of work (read and checked,
                # then prepared) and after it: an answer the import's thread is waiting on
                # is taken up within ~0.5 ms, not at the interpreter's 5 ms switch interval.
                # One job 2-19 % faster in six paired rounds (bench/README).
                time.sleep(0)
                before = counter[0]
                try:
                    batch = target.prepare_many(*thread_puts(item, item.thread_id))
                except refused_by_target:
                    pass
                else:
                    item.prepared = PreparedThread(batch, counter[0] - before)
            yield item
            time.sleep(0)

    def checked(self, read: Iterable) -> Iterator[ThreadRecord | TransferFormatError]:
        """Each thread with the metadata it lifts (``thread_metadata``), or its refusal when
        a record of it fails `check_thread`. Pure work on the record, so a read-ahead does
        it in its own thread, beside the writes."""
        for item in read:
            if isinstance(item, ThreadRecord):
                lift_metadata(item, self.shape.thread_metadata)
                item = check_thread(item) or item
            yield item

    def finisher(self, item: ThreadRecord) -> Callable[[str], None] | None:
        """What `write_thread` adds to the written thread: its extras, its source's times."""
        times = source_times(item) if self.shape.keep_source_times else None
        if not item.extras and times is None:
            return None
        target = self.target

        def finish(thread_id: str) -> None:
            restore_extras(target, thread_id, item.extras)
            if times is not None:
                _keep_times(target, thread_id, times)

        return finish

    def count(self, item: ThreadRecord) -> None:
        self.summary.threads += 1
        self.summary.checkpoints += len(item.checkpoints)
        self.summary.writes += item.writes
        times = source_times(item)
        if times is not None:
            declared = item.retention or {}
            waiting = ThreadRetention(declared.get("waiting_minutes")).waiting_in_force(
                self.platform.waiting_minutes
            )
            if times[1] < self.now - timedelta(minutes=waiting):
                self.summary.past_waiting += 1


# Threads a reader thread holds ready at most (`read_ahead`): enough to cover one slow
# statement, few enough that memory stays flat.
READ_AHEAD = 4


def read_ahead(read: Callable[[list], Iterator[Any]], ids: list) -> Iterator[Any]:
    """``read(ids)``'s items, read in a thread of its own up to ``READ_AHEAD`` ahead.

    One job's import is half waiting (bench/README): for the source's query, then for the
    target's statement. Reading the next threads while the caller writes this one overlaps
    the two; the Python of both still takes turns. Writes stay in the caller's thread, so a
    refused thread fails where it did, in the caller's transaction. An error of the reader
    is raised here, in order; a caller that stops early stops the reader too.
    """
    ready: queue.Queue = queue.Queue(READ_AHEAD)
    stop = threading.Event()
    done = object()

    def reader() -> None:
        try:
            for item in read(ids):
                if stop.is_set():
                    return
                ready.put((item, None))
            ready.put((done, None))
        except BaseException as exc:  # noqa: BLE001 - handed over, raised in the caller
            ready.put((done, exc))

    worker = threading.Thread(target=reader, name="import-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item, exc = ready.get()
            if item is done:
                if exc is not None:
                    raise exc
                return
            yield item
    finally:
        stop.set()
        while worker.is_alive():
            # Drained, so a reader blocked on a full queue sees the stop.
            try:
                ready.get(timeout=0.05)
            except queue.Empty:
                pass
        worker.join()


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


# Threads written in one transaction at most, and seconds one stays open at most (`_Commits`).
COMMIT_EVERY = 50
COMMIT_SECONDS = 2.0


class _Commits:
    """Threads written in shared transactions on a database target, so each is still
    whole or absent and a kill takes back at most the threads of the open transaction,
    which the next run imports again. A commit (and the savepoint a nested unit would
    take) a thread was most of what an import waited for on a busy server: round trips
    (bench/README, the import's profile); one per ``COMMIT_EVERY`` threads or
    ``COMMIT_SECONDS`` is not. A thread the store refuses spoils the shared transaction:
    `take_back` rolls it back and hands back the threads it held, to be written alone."""

    def __init__(self, alias: str | None) -> None:
        self.alias = alias
        self.atomic = None
        self.held: list[tuple] = []
        self.since = 0.0

    @property
    def grouped(self) -> bool:
        return self.alias is not None

    def write(self, target, item: ThreadRecord, owner_pk, finish) -> None:
        if self.alias is None:
            _write_alone(target, item, owner_pk, finish)
            return
        if self.atomic is None:
            self.atomic = transaction.atomic(using=self.alias)
            self.atomic.__enter__()
            self.since = time.monotonic()
        write_thread(target, item, owner_pk=owner_pk, finish=finish, savepoint=False)
        self.held.append((target, item, owner_pk, finish))
        if len(self.held) >= COMMIT_EVERY or time.monotonic() - self.since >= COMMIT_SECONDS:
            self.commit()

    def commit(self) -> None:
        atomic, self.atomic = self.atomic, None
        self.held = []
        if atomic is not None:
            atomic.__exit__(None, None, None)

    def take_back(self) -> list[tuple]:
        held, self.held = self.held, []
        atomic, self.atomic = self.atomic, None
        if atomic is not None:
            transaction.set_rollback(True, using=self.alias)
            atomic.__exit__(None, None, None)
        return held

    def abort(self, *exc_info) -> None:
        atomic, self.atomic = self.atomic, None
        self.held = []
        if atomic is not None:
            atomic.__exit__(*exc_info)


def _write_alone(target, item: ThreadRecord, owner_pk, finish) -> None:
    write_thread(target, item, owner_pk=owner_pk, finish=finish)


# Thread ids asked of the target in one query (`present_among`).
PRESENCE_BATCH = 200


@dataclass(frozen=True)
class _Present:
    """A thread of the source the target holds already."""

    thread_id: str


def present_among(target, thread_ids: list) -> dict[str, str]:
    """thread id -> how the target already holds it, for those of ``thread_ids`` it does:
    a thread row (checkpoints, pending writes or a declared retention) or a finished
    mark, in two queries, then what apps registered (`threads.registered_presence_among`)."""
    from checkpoints.models import FinishedMark, Thread  # see the module's docstring
    from checkpoints.threads import registered_presence_among

    ids = [t for t in thread_ids if isinstance(t, str)]
    alias = target.db_alias
    found = dict.fromkeys(
        Thread.objects.using(alias).filter(thread_id__in=ids).values_list("thread_id", flat=True),
        "a thread record",
    )
    rest = [t for t in ids if t not in found]
    marked = FinishedMark.objects.using(alias).filter(thread_id__in=rest)
    found.update(dict.fromkeys(marked.values_list("thread_id", flat=True), "a finished mark"))
    rest = [t for t in ids if t not in found]
    found.update(registered_presence_among(saver=target, thread_ids=rest) if rest else {})
    return found


def presence(saver, thread_id: str) -> str | None:
    if hasattr(saver, "thread_presence"):
        from checkpoints.threads import thread_presence  # see the module's docstring

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
