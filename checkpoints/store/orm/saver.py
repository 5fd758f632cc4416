"""What the ORM savers of PostgreSQL and SQLite share: checkpoints in Django's database.

One subject: `OrmSaver`, the base both dialects' savers extend; its reads, writes and
copies run over the same models and rows.

`OrmSaver` holds encoding, reading rows into tuples, paging, the ORM's deletes and copies;
each dialect's saver (`checkpoints.store.postgres.saver.PostgresStore`,
`checkpoints.store.sqlite.saver.SqliteStore`) writes its own put and writes
(``_store_checkpoint``, ``_store_writes``) and reads (``_get_rows``, ``_page``,
``_read_durability``). `registry.dialect_saver` picks the one a database needs; a
deployment subclasses that one.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC
from types import TracebackType
from typing import Any

from django.db import connections, transaction
from django.db.models import Sum
from django.db.models.functions import Length
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import CheckpointTuple

from checkpoints.codec import compress_typed, decompress_typed
from checkpoints.codec.encryption import SUFFIX as SEALED
from checkpoints.codec.encryption import Place, encryption_enabled, open_typed, seal_typed
from checkpoints.conf import prepare_mode, setting
from checkpoints.connect import alias_for_conn_string
from checkpoints.errors import CheckpointConfigError
from checkpoints.flows import Emit, stream
from checkpoints.models import ChannelBlob, FinishedMark, PendingWrite, Thread
from checkpoints.models import Checkpoint as CheckpointRow
from checkpoints.store.contract import StoreSaver
from checkpoints.store.orm.aio import OrmAsync, iter_off_loop, off_loop, on_loop_thread
from checkpoints.store.orm.internals import raw_delete
from checkpoints.store.orm.ledger import OrmLedger
from checkpoints.store.orm.prune import EMPTY, OrmPrune
from checkpoints.store.orm.reading import OrmReading
from checkpoints.store.orm.sealing import OrmReseal, rebind_orm_row
from checkpoints.store.planning import check_limit, config_keys, list_bounds, utcnow
from checkpoints.store.planning.copy import CopyOutcome
from checkpoints.store.planning.metadata import metadata_matches, validate_filter
from checkpoints.store.planning.put import PutPlan
from checkpoints.store.planning.records import (
    MISSING,
    ThreadHoldings,
    ThreadStorage,
    thread_storage,
)
from checkpoints.store.planning.writes import WritesPlan
from checkpoints.store.registry import dialect_saver
from checkpoints.store.requests import StoreRequest

PAGE = 100
# An owner not looked up yet (the owner cache holds None for "no such user").
MISSING_OWNER = object()


class _Unbatched:
    """A schema editor's statements sent one by one, as the editor sends them."""

    def __enter__(self) -> _Unbatched:
        return self

    def __exit__(self, kind: type | None, exc: BaseException | None, tb: TracebackType | None):
        return None

    def send(self) -> None:
        return None


class OrmSaver(OrmAsync, OrmReading, OrmPrune, OrmLedger, OrmReseal, StoreSaver):
    """Checkpoints, blobs and writes as Django models; one transaction per write."""

    vendor = ""  # the Django backend's vendor the dialect speaks
    stores_values_verbatim = True  # `_dump` encodes each value; the body has none
    json_as_text = False  # whether JSON columns come back as text
    # What the migrations do beyond the models' tables on this dialect: (app, migration,
    # attribute holding the statement), run after a new store's tables (`connect`).
    new_store_extra_sql: tuple[tuple[str, str, str], ...] = ()
    # Dialect facts the console's own table queries ask for (pages, keyset walks, the forks
    # of a thread), so no module outside the store compares database vendors.
    # Whether a metadata containment test (``metadata__contains``) is served by an index.
    indexed_json_containment = False
    # Whether a deep keyset page is found faster by walking the index than by sorting.
    prefers_index_walk = False

    @classmethod
    def tuned_reads(cls, alias: str) -> AbstractContextManager[None]:
        """Around the console's heavier reads on database ``alias``: nothing by default."""
        return nullcontext()

    @classmethod
    def walk_the_index(cls, cursor) -> None:
        """Ask the planner, for the rest of the transaction, to walk an index, not sort."""

    def __init__(
        self, *, using: str = "default", serde=None, max_checkpoints=None, check_format=True
    ) -> None:
        super().__init__(serde=serde, max_checkpoints=max_checkpoints)
        dialect = dialect_saver(using)
        if not self.vendor:
            raise CheckpointConfigError(
                f"{type(self).__name__} subclasses OrmSaver, which speaks no database's "
                f"dialect; subclass {dialect.__module__}.{dialect.__qualname__}, the saver of "
                f"database {using!r}, instead"
            )
        if dialect.vendor != self.vendor:
            raise CheckpointConfigError(
                f"{type(self).__name__} runs on {self.vendor}; database {using!r} is "
                f"{connections[using].vendor}"
            )
        self.using = using
        self.compress_bytes = setting("INLINE_COMPRESS_BYTES")
        # Named server-side prepared statements for the hot-path SQL (PostgreSQL): "auto"
        # uses them unless a pooler (PgBouncer in transaction mode) sits in between.
        self.prepare_mode = prepare_mode(setting("PG_PREPARED_STATEMENTS"))
        self.pooled = bool(setting("PG_POOL"))
        self._durability: str | None = None
        self._durability_read_at = 0.0
        self._durability_session: int | None = None
        self._owner_cache: dict[str, int | None] = {}
        if check_format:
            off_loop(self.ensure_format) if on_loop_thread() else self.ensure_format()

    @classmethod
    def build(
        cls, *, provider: str, conn_string: str | None = None, using: str | None = None, **options
    ) -> OrmSaver:
        """The registry's constructor: the database from ``using`` or ``conn_string``."""
        if using is None:
            using = alias_for_conn_string(conn_string) if conn_string else "default"
        dialect = dialect_saver(using)
        if dialect.provider != provider or (cls.vendor and cls.vendor != dialect.vendor):
            raise CheckpointConfigError(
                f"provider {provider!r} was asked for, but database {using!r} is "
                f"{connections[using].vendor}; set LLM_PROVIDER_CHECKPOINT_CONN_STRING "
                f"(or DATABASE_URL) to a {provider} database",
                field="provider",
            )
        return cls(using=using, **options)

    # -- the dialect's hooks ----------------------------------------------------------------
    # Each dialect's saver also writes ``_store_checkpoint`` and ``_store_writes`` (the
    # contract's), from `_checkpoint_row` and `_write_rows`.
    def _warm(self, *, write: bool = False) -> AbstractContextManager:
        """An open connection for the call (SQLite lends one; a server's is Django's)."""
        return nullcontext()

    def _get_rows(self, params: dict) -> list[tuple]:
        """The rows (with blobs and writes) of one checkpoint, by id or the newest."""
        raise NotImplementedError

    def _page(self, params, wanted, cursor, size) -> list[tuple]:
        """One keyset page of list's rows (see `_list_flow`)."""
        raise NotImplementedError

    def _read_durability(self) -> str:
        """The level a commit on this thread's connection gets now."""
        raise NotImplementedError

    @staticmethod
    def lock_new_store(editor) -> None:
        """Wait for another process making a new store here (`checkpoints.connect`); none
        by default: the schema editor's transaction holds the database's write lock."""
        return None

    @staticmethod
    def schema_batch(editor) -> AbstractContextManager:
        """How a new store's schema statements are sent (`checkpoints.connect`)."""
        return _Unbatched()

    def _run(self, flow) -> Any:
        # A sync call from a running loop's thread (a notebook cell): the whole flow, its
        # transactions as on any thread, on the off-loop thread (aio.off_loop).
        if on_loop_thread():
            return off_loop(super()._run, flow)
        return super()._run(flow)

    def perform(self, request: StoreRequest) -> Any:
        # The primitives run by flows are the writes (and a few small reads).
        with self._warm(write=True):
            return super().perform(request)

    # -- durability -----------------------------------------------------------------------
    @property
    def durability(self) -> str:
        """The level a write gets now: read again after ``DURABILITY_RECHECK_SECONDS`` and
        whenever this thread's connection is a new one (a reconnect, perhaps elsewhere).

        PostgreSQL writes stamp what their own statement committed with (postgres.LEVEL);
        this is what the store says it guarantees, for the admin, the API and SQLite.
        """
        conn = connections[self.using].connection
        session = id(conn) if conn is not None else None
        now = time.monotonic()
        if (
            self._durability is None
            or now - self._durability_read_at >= float(setting("DURABILITY_RECHECK_SECONDS"))
            or (session is not None and session != self._durability_session)
        ):
            self._durability = self._read_durability()
            conn = connections[self.using].connection
            self._durability_session = id(conn) if conn is not None else None
            self._durability_read_at = now
        return self._durability

    # -- serialization --------------------------------------------------------------------
    # ``at`` is where the value is stored: the sealed bytes are bound to it.
    def _dump(
        self,
        value: Any,
        at: Place | Callable[[], Place],
        where: str | tuple[str, str] = "value",
        plan: PutPlan | WritesPlan | None = None,
    ) -> tuple[str, bytes]:
        typed = compress_typed(self._encode(value, where, plan), self.compress_bytes)
        return seal_typed(typed, at=at)

    def _load(self, type_: str, data: Any, at: Place | Callable[[], Place]) -> Any:
        """``at`` may be a function making the place: only sealed values (or a store with
        keys set, which refuses plaintext naming the place) need one."""
        if not type_.endswith(SEALED) and not encryption_enabled():
            return self.serde.loads_typed(decompress_typed((type_, bytes(data))))
        place = at() if callable(at) else at
        return self.serde.loads_typed(decompress_typed(open_typed((type_, bytes(data)), at=place)))

    # -- writes ---------------------------------------------------------------------------
    def _checkpoint_row(self, plan: PutPlan, owner_pk: int | None) -> tuple[dict, list[tuple]]:
        """The checkpoint's row (unstamped) and its new blobs, encoded for either path."""
        plan.plain_bytes = 0
        body_type, body_bytes = self._encode(
            plan.body(without=("channel_values", "channel_versions")), "checkpoint", plan
        )
        blobs = [
            (channel, version, EMPTY, None)
            if value is MISSING
            else (
                channel,
                version,
                *self._dump(
                    value,
                    # Made only when a key seals the value (a Place costs a few us).
                    lambda c=channel, v=version: Place.blob(plan.thread_id, plan.ns, c, v),
                    ("channel", channel),
                    plan,
                ),
            )
            for channel, version, value in plan.blobs
        ]
        row = {
            "thread_id": plan.thread_id,
            "owner_id": owner_pk,
            "ns": plan.ns,
            "checkpoint_id": plan.checkpoint_id,
            "parent_id": plan.parent_id,
            "type": body_type,
            "body": body_bytes,
            "channel_versions": plan.versions,
            "source": plan.source[:64],
            "step": plan.step,
            "run_id": plan.run_id,
        }
        return row, blobs

    def _store_head(self, plan: PutPlan, expected: int | None) -> None:
        # One transaction: the bump first (its UPDATE holds the thread row until the
        # commit, and refuses a stale version before anything is encoded), then the
        # dialect's put, which joins it; a put refused rolls the bump back.
        with transaction.atomic(using=self.using):
            self.bump_thread_version(plan.thread_id, expected=expected)
            self._store_checkpoint(plan)

    def _stamp_row(self, row: dict, plan: PutPlan, level: str | None = None) -> None:
        # The stamp's time is the row's created_at: the store keeps it once, as a column.
        now = utcnow()
        row["durability"] = self._stamp(plan, level, now)["level"]
        row["now"] = now
        row["metadata"] = plan.metadata

    def _durability_of(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> dict[str, str] | None:
        rows = CheckpointRow.objects.using(self.using).filter(
            thread__thread_id=thread_id, checkpoint_ns=ns
        )
        if checkpoint_id:
            rows = rows.filter(checkpoint_id=checkpoint_id)
        found = rows.order_by("-checkpoint_id").values_list("durability", "created_at").first()
        if found is None:
            return None
        return {"level": found[0], "at": found[1].astimezone(UTC).isoformat()}

    def _write_rows(self, plan: WritesPlan) -> list[tuple]:
        """(idx, channel, type, bytes) of each write, encoded for either path."""
        plan.plain_bytes = 0
        return [
            (
                idx,
                channel,
                *self._dump(
                    value,
                    lambda i=idx, c=channel: Place.write(
                        plan.thread_id, plan.ns, plan.checkpoint_id, plan.task_id, i, c
                    ),
                    ("write to channel", channel),
                    plan,
                ),
            )
            for idx, channel, value in plan.items
        ]

    def _thread_pk(self, thread_id: str) -> int | None:
        found = list(
            Thread.objects.using(self.using)
            .filter(thread_id=thread_id)
            .values_list("pk", flat=True)[:1]
        )
        return found[0] if found else None

    # -- reads ----------------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        if on_loop_thread():
            return off_loop(self.get_tuple, config)
        thread_id, ns, checkpoint_id = config_keys(config)
        params = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        with self._warm():
            found = self._get_rows(params)
            return self._tuples(found)[0] if found else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        pages = self._list_pages(config, filter=filter, before=before, limit=limit)
        if on_loop_thread():
            pages = iter_off_loop(pages)
        for page in pages:
            yield from page

    def _list_pages(self, config, *, filter=None, before=None, limit=None) -> Iterator[list]:
        """Pages of tuples, each fetched by its own keyset query (no cursor held open)."""

        def fetch_warm(request):
            with self._warm():
                return self._page(*request)

        flow = self._list_flow(config, filter=filter, before=before, limit=limit)
        # Each page is yielded with no connection lent: a caller that stops early leaves this
        # generator to the garbage collector, which may close it on another thread.
        yield from stream(flow, fetch_warm)

    def _list_flow(self, config, *, filter=None, before=None, limit=None):
        """The paging rules, written once: yields each page's query arguments (params,
        wanted, cursor, size), is sent its rows, and emits the page's tuples."""
        wanted = validate_filter(filter)
        check_limit(limit)
        thread_id, ns, checkpoint_id, before_id = list_bounds(config, before)
        params: dict[str, Any] = {}
        if config is not None:
            params.update(thread_id=thread_id, ns=ns, checkpoint_id=checkpoint_id)
        if before is not None:
            params["before"] = before_id
        remaining = limit
        cursor: tuple[str, int] | None = None
        while remaining is None or remaining > 0:
            size = PAGE if remaining is None or wanted else min(PAGE, remaining)
            fetched = yield (params, wanted, cursor, size)
            if not fetched:
                return
            cursor = (fetched[-1][4], fetched[-1][0])
            full_page = len(fetched) == size
            if wanted:
                fetched = [
                    r
                    for r in fetched
                    if metadata_matches(json.loads(r[8]) if isinstance(r[8], str) else r[8], wanted)
                ]
            if remaining is not None:
                fetched = fetched[:remaining]
                remaining -= len(fetched)
            if fetched:
                yield Emit(self._tuples(fetched))
            if not full_page:
                return

    # -- deletes and copies ---------------------------------------------------------------
    def _count(self, thread_id: str) -> ThreadHoldings:
        pk = self._thread_pk(thread_id)
        if pk is None:
            return ThreadHoldings(0, 0)
        return ThreadHoldings(
            CheckpointRow.objects.using(self.using).filter(thread_id=pk).count(),
            PendingWrite.objects.using(self.using).filter(thread_id=pk).count(),
        )

    def _storage(self, thread_id: str) -> ThreadStorage:
        pk = self._thread_pk(thread_id)
        if pk is None:
            return thread_storage((), (), ())
        db = self.using
        bodies = (
            CheckpointRow.objects.using(db)
            .filter(thread_id=pk)
            .annotate(size=Length("checkpoint"))
            .values_list("size", flat=True)
        )
        by_channel = []
        for model in (ChannelBlob, PendingWrite):
            by_channel.append(
                model.objects.using(db)
                .filter(thread_id=pk)
                .values("channel")
                .order_by()
                .annotate(size=Sum(Length("blob")))
                .values_list("channel", "size")
            )
        values, writes = ([(c, n or 0) for c, n in rows] for rows in by_channel)
        return thread_storage((n or 0 for n in bodies), values, writes)

    def _delete_threads_round(self, thread_ids: list[str]) -> dict[str, ThreadHoldings]:
        """Set-based deletes, one transaction per thousand threads."""
        db = self.using
        for start in range(0, len(thread_ids), 1000):
            chunk = thread_ids[start : start + 1000]
            with transaction.atomic(using=db):
                self._raw_delete_threads(
                    list(
                        Thread.objects.using(db)
                        .filter(thread_id__in=chunk)
                        .values_list("pk", flat=True)
                    )
                )
        # A writer's put or put_writes re-creates the thread row, so rows mean "holds rows".
        again = (
            Thread.objects.using(db)
            .filter(thread_id__in=thread_ids)
            .values_list("thread_id", flat=True)
        )
        return {t: self._count(t) for t in again}

    def _raw_delete_threads(self, pks: list[int]) -> None:
        """Delete these threads' rows, inside the caller's transaction."""
        db = self.using
        for model in (PendingWrite, CheckpointRow, ChannelBlob):
            raw_delete(model.objects.using(db).filter(thread_id__in=pks))
        raw_delete(Thread.objects.using(db).filter(pk__in=pks))

    def _forget_threads(self, thread_ids: list[str]) -> None:
        db = self.using
        for start in range(0, len(thread_ids), 1000):
            raw_delete(
                FinishedMark.objects.using(db).filter(
                    thread_id__in=thread_ids[start : start + 1000]
                )
            )

    def _delete_runs(self, run_ids: list[str]) -> None:
        db = self.using
        with transaction.atomic(using=db):
            doomed = list(
                CheckpointRow.objects.using(db)
                .filter(run_id__in=run_ids)
                .values_list("thread_id", "checkpoint_ns", "checkpoint_id")
            )
            by_key: dict[tuple[int, str], list[str]] = defaultdict(list)
            for tpk, ns, cid in doomed:
                by_key[(tpk, ns)].append(cid)
            for (tpk, ns), ids in by_key.items():
                raw_delete(
                    PendingWrite.objects.using(db).filter(
                        thread_id=tpk, checkpoint_ns=ns, checkpoint_id__in=ids
                    )
                )
            raw_delete(CheckpointRow.objects.using(db).filter(run_id__in=run_ids))
            for tpk in {k[0] for k in by_key}:
                self._drop_unreferenced_blobs(tpk)

    def _copy_thread(self, source_thread_id: str, target_thread_id: str) -> CopyOutcome:
        db = self.using
        with transaction.atomic(using=db):
            src = Thread.objects.using(db).filter(thread_id=source_thread_id).first()
            if src is None:
                return CopyOutcome.NO_SOURCE
            if CheckpointRow.objects.using(db).filter(thread__thread_id=target_thread_id).exists():
                return CopyOutcome.TARGET_HOLDS
            now = utcnow()
            target = Thread(
                thread_id=target_thread_id,
                created_at=now,
                last_write_at=now,
                owner_id=src.owner_id,
                waiting_minutes=src.waiting_minutes,
                finished_minutes=src.finished_minutes,
            )
            Thread.objects.using(db).bulk_create(
                [target],
                update_conflicts=True,
                unique_fields=["thread_id"],
                update_fields=["last_write_at"],
            )
            for model, fields in (
                (ChannelBlob, ("checkpoint_ns", "channel", "version", "type", "blob")),
                (
                    CheckpointRow,
                    (
                        "checkpoint_ns",
                        "checkpoint_id",
                        "parent_checkpoint_id",
                        "channel_versions",
                        "type",
                        "checkpoint",
                        "metadata",
                        "source",
                        "step",
                        "run_id",
                        "durability",
                        "created_at",
                    ),
                ),
                (
                    PendingWrite,
                    (
                        "checkpoint_ns",
                        "checkpoint_id",
                        "task_id",
                        "task_path",
                        "idx",
                        "channel",
                        "type",
                        "blob",
                    ),
                ),
            ):
                qs = model.objects.using(db).filter(thread_id=src.pk).order_by("pk")
                last = 0
                while True:
                    batch = list(qs.filter(pk__gt=last).values("pk", *fields)[:500])
                    if not batch:
                        break
                    last = batch[-1].pop("pk")
                    for item in batch:
                        item.pop("pk", None)
                        rebind_orm_row(model, item, source_thread_id, target_thread_id)
                    model.objects.using(db).bulk_create(
                        [model(thread_id=target.pk, **item) for item in batch],
                        ignore_conflicts=True,
                    )
        return CopyOutcome.COPIED
