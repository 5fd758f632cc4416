"""The ORM saver: checkpoints in Django's database (PostgreSQL or SQLite)."""

from __future__ import annotations

import hashlib
import json
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DatabaseError, connections, transaction
from django.db.models import F
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    writes_sort_key,
)

from checkpoints.codec import compress_typed, decompress_typed
from checkpoints.conf import setting
from checkpoints.encryption import open_typed, seal_typed
from checkpoints.errors import (
    CheckpointConfigError,
    CheckpointStoreFormatError,
    InvalidCheckpointInput,
    ThreadExists,
    ThreadVersionConflict,
)
from checkpoints.models import (
    ChannelBlob,
    FinishedMark,
    PendingWrite,
    StoreFormat,
    Thread,
)
from checkpoints.models import (
    Checkpoint as CheckpointRow,
)
from checkpoints.savers import pg_sql, sqlite_sql
from checkpoints.savers.base import (
    _MISSING,
    FORMAT_ERROR_HINT,
    FORMAT_GENERATION,
    FinishedEntry,
    StoreSaver,
    ThreadHoldings,
    ThreadRetention,
    config_keys,
    json_metadata,
    metadata_matches,
    utcnow,
    validate_filter,
)
from checkpoints.savers.pg_pool import statement_cursor

PAGE = 100
EMPTY = "empty"
_format_checked: set[str] = set()
_format_lock = threading.Lock()
_alias_lock = threading.Lock()


def forget_format_checks() -> None:
    """Make the next saver built on each database check the format generation again."""
    _format_checked.clear()


def alias_for_conn_string(conn_string: str) -> str:
    """A Django database alias for a connection string, registered on first use."""
    from project.dburl import parse_database_url

    alias = "checkpoints_" + hashlib.sha1(conn_string.encode()).hexdigest()[:12]
    with _alias_lock:
        if alias not in connections.settings:
            try:
                entry = parse_database_url(conn_string)
            except ValueError as exc:
                raise CheckpointConfigError(
                    f"LLM_PROVIDER_CHECKPOINT_CONN_STRING: {exc}", field="conn_string"
                ) from exc
            merged = connections.configure_settings(
                {"default": dict(connections.settings["default"]), alias: entry}
            )
            connections.settings[alias] = merged[alias]
    return alias


class OrmSaver(StoreSaver):
    """Checkpoints, blobs and writes as Django models; one transaction per write."""

    supports_idle_sweep = True

    def __init__(
        self, *, using: str = "default", serde=None, max_checkpoints=None, check_format=True
    ) -> None:
        super().__init__(serde=serde, max_checkpoints=max_checkpoints)
        if using not in connections.settings:
            raise CheckpointConfigError(f"database alias {using!r} is not configured")
        self.using = using
        vendor = connections[using].vendor
        if vendor == "postgresql":
            self.provider = "postgres"
        elif vendor == "sqlite":
            self.provider = "sqlite"
        else:
            raise CheckpointConfigError(
                f"database {using!r} is {vendor}; the ORM saver runs on PostgreSQL or SQLite"
            )
        self.compress_bytes = setting("INLINE_COMPRESS_BYTES")
        # Server-side prepared statements for the hot-path SQL (PostgreSQL); turn them off
        # behind a transaction-pooling PgBouncer that cannot keep them.
        self.prepare = bool(setting("PG_PREPARED_STATEMENTS"))
        self.pooled = bool(setting("PG_POOL"))
        self._durability: str | None = None
        self._owner_cache: dict[str, int | None] = {}
        if check_format:
            self.ensure_format()

    # -- format generation ----------------------------------------------------------------
    def ensure_format(self) -> None:
        """Record the generation on a new store; refuse a store in another one."""
        key = self.using
        if key in _format_checked:
            return
        with _format_lock:
            if key in _format_checked:
                return
            try:
                with transaction.atomic(using=self.using):
                    recorded = list(
                        StoreFormat.objects.using(self.using).values_list("generation", flat=True)
                    )
                    if not recorded:
                        if CheckpointRow.objects.using(self.using).exists():
                            raise CheckpointStoreFormatError(
                                f"the {self.provider} checkpoint store ({self.using}) holds "
                                "checkpoints but records no format generation: "
                                f"{FORMAT_ERROR_HINT}"
                            )
                        StoreFormat.objects.using(self.using).create(
                            generation=FORMAT_GENERATION, recorded_at=utcnow()
                        )
                    elif set(recorded) != {FORMAT_GENERATION}:
                        raise CheckpointStoreFormatError(
                            f"the {self.provider} checkpoint store ({self.using}) is in format "
                            f"generation {max(recorded)}, this version writes "
                            f"{FORMAT_GENERATION}: {FORMAT_ERROR_HINT}"
                        )
            except DatabaseError as exc:
                raise CheckpointConfigError(
                    f"the checkpoint tables are missing or unreadable on database "
                    f"{self.using!r} ({exc}); run `manage.py migrate`"
                ) from exc
            _format_checked.add(key)

    def reset_store(self) -> int:
        db = self.using
        with transaction.atomic(using=db):
            threads = Thread.objects.using(db).count()
            for model in (
                PendingWrite,
                CheckpointRow,
                ChannelBlob,
                Thread,
                FinishedMark,
                StoreFormat,
            ):
                model.objects.using(db).all()._raw_delete(db)
            StoreFormat.objects.using(db).create(generation=FORMAT_GENERATION, recorded_at=utcnow())
        _format_checked.add(self.using)
        return threads

    # -- durability -----------------------------------------------------------------------
    @property
    def durability(self) -> str:
        if self._durability is None:
            self._durability = self._read_durability()
        return self._durability

    def _read_durability(self) -> str:
        conn = connections[self.using]
        if self.provider == "sqlite":
            name = str(conn.settings_dict.get("NAME") or "")
            in_memory = name in ("", ":memory:") or "mode=memory" in name or conn.is_in_memory_db()
            return "memory" if in_memory else "disk"
        with conn.cursor() as cur:
            cur.execute("SHOW fsync")
            fsync = cur.fetchone()[0]
            cur.execute("SHOW synchronous_standby_names")
            standbys = cur.fetchone()[0]
            cur.execute("SHOW synchronous_commit")
            commit = cur.fetchone()[0]
        if fsync != "on" or commit == "off":
            return "memory"
        if standbys and commit in ("on", "remote_write", "remote_apply"):
            return "replicated"
        return "disk"

    # -- serialization --------------------------------------------------------------------
    def _dump(self, value: Any, where: str = "value") -> tuple[str, bytes]:
        return seal_typed(compress_typed(self._encode(value, where), self.compress_bytes))

    def _load(self, type_: str, data: Any) -> Any:
        return self.serde.loads_typed(decompress_typed(open_typed((type_, bytes(data)))))

    # -- writes ---------------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, ns, parent_id = config_keys(config)
        if not checkpoint.get("id"):
            raise InvalidCheckpointInput("checkpoint['id'] is required", field="checkpoint.id")
        body = {
            k: v for k, v in checkpoint.items() if k not in ("channel_values", "channel_versions")
        }
        body_type, body_bytes = self._encode(body, "checkpoint")
        versions = dict(checkpoint.get("channel_versions") or {})
        blobs = []
        for channel, version, value in self._blob_versions(checkpoint, new_versions):
            if value is _MISSING:
                blobs.append((channel, version, EMPTY, None))
            else:
                blobs.append((channel, version, *self._dump(value, f"channel {channel!r}")))
        md = json_metadata(config, metadata)
        step = md.get("step")
        row = {
            "thread_id": thread_id,
            "owner_id": self._owner_pk(config),
            "ns": ns,
            "checkpoint_id": str(checkpoint["id"]),
            "parent_id": parent_id,
            "type": body_type,
            "body": body_bytes,
            "channel_versions": versions,
            "source": str(md.get("source") or "")[:64],
            "step": step if isinstance(step, int) and not isinstance(step, bool) else None,
            "run_id": str(md["run_id"]) if md.get("run_id") is not None else None,
            "durability": self.durability,
        }
        if self.provider == "postgres" and not self.max_checkpoints:
            # One statement commits (or fails) whole on its own: no BEGIN/COMMIT round trips.
            row["now"] = utcnow()
            row["metadata"] = self._stamp(md)
            self._put_pg(row, blobs)
        else:
            with transaction.atomic(using=self.using):
                # Stamped inside the transaction: no reader sees it before the commit.
                row["now"] = utcnow()
                row["metadata"] = self._stamp(md)
                if self.provider == "postgres":
                    thread_pk = self._put_pg(row, blobs)
                else:
                    thread_pk = self._put_sqlite(row, blobs)
                if self.max_checkpoints:
                    self._prune_pk(thread_pk, self.max_checkpoints, only_ns=ns)
        return self._acknowledge(thread_id, ns, checkpoint, md)

    def _raw_cursor(self):
        """A server-binding cursor: the caller's transaction if one is open, else pooled."""
        return statement_cursor(self.using, pooled=self.pooled)

    def _put_pg(self, row: dict, blobs: list[tuple]) -> int:
        from psycopg.types.json import Jsonb

        params = dict(
            row,
            channel_versions=Jsonb(row["channel_versions"]),
            metadata=Jsonb(row["metadata"]),
            channels=[b[0] for b in blobs],
            versions=[b[1] for b in blobs],
            types=[b[2] for b in blobs],
            blobs=[b[3] for b in blobs],
        )
        with self._raw_cursor() as cur:
            cur.execute(pg_sql.PUT, params, prepare=self.prepare)
            return cur.fetchone()[0]

    def _put_sqlite(self, row: dict, blobs: list[tuple]) -> int:
        ops = connections[self.using].ops
        params = dict(
            row,
            now=ops.adapt_datetimefield_value(row["now"]),
            channel_versions=json.dumps(row["channel_versions"]),
            metadata=json.dumps(row["metadata"]),
        )
        cur = self._sqlite_cursor()
        try:
            thread_pk = cur.execute(sqlite_sql.UPSERT_THREAD, params).fetchone()[0]
            if blobs:
                cur.executemany(
                    sqlite_sql.INSERT_BLOB,
                    [(thread_pk, row["ns"], c, v, t, b) for c, v, t, b in blobs],
                )
            cur.execute(sqlite_sql.UPSERT_CHECKPOINT, dict(params, thread_pk=thread_pk))
        finally:
            cur.close()
        return thread_pk

    def _owner_pk(self, config: RunnableConfig) -> int | None:
        user_id = (config.get("configurable") or {}).get("user_id")
        if user_id is None or user_id == "":
            return None
        key = str(user_id)
        if key not in self._owner_cache:
            from django.contrib.auth import get_user_model

            users = get_user_model().objects.using(self.using)
            found = None
            if key.isdigit():
                found = users.filter(pk=int(key)).values_list("pk", flat=True).first()
            if found is None:
                found = (
                    users.filter(**{get_user_model().USERNAME_FIELD: key})
                    .values_list("pk", flat=True)
                    .first()
                )
            self._owner_cache[key] = found
        return self._owner_cache[key]

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, ns, checkpoint_id = config_keys(config, need_checkpoint=True)
        if not writes:
            return
        rows = []
        for idx, (channel, value) in enumerate(writes):
            type_, data = self._dump(value, f"write to channel {channel!r}")
            rows.append((WRITES_IDX_MAP.get(channel, idx), channel, type_, data))
        special = all(i < 0 for i, *_ in rows)
        put_fast = self._put_writes_pg if self.provider == "postgres" else self._put_writes_sqlite
        if put_fast(thread_id, ns, checkpoint_id, str(task_id), task_path or "", rows, special):
            return
        db = self.using
        with transaction.atomic(using=db):
            pk = self._thread_pk(thread_id, create=True)
            objs = [
                PendingWrite(
                    thread_id=pk,
                    checkpoint_ns=ns,
                    checkpoint_id=checkpoint_id,
                    task_id=str(task_id),
                    task_path=task_path or "",
                    idx=i,
                    channel=c,
                    type=t,
                    blob=b,
                )
                for i, c, t, b in rows
            ]
            if special:
                PendingWrite.objects.using(db).bulk_create(
                    objs,
                    update_conflicts=True,
                    unique_fields=["thread", "checkpoint_ns", "checkpoint_id", "task_id", "idx"],
                    update_fields=["channel", "type", "blob", "task_path"],
                )
            else:
                PendingWrite.objects.using(db).bulk_create(objs, ignore_conflicts=True)

    def _put_writes_pg(self, thread_id, ns, checkpoint_id, task_id, task_path, rows, special):
        """One statement; False when nothing could be written (no thread row, or all kept)."""
        params = {
            "thread_id": thread_id,
            "ns": ns,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "task_path": task_path,
            "idxs": [r[0] for r in rows],
            "channels": [r[1] for r in rows],
            "types": [r[2] for r in rows],
            "blobs": [r[3] for r in rows],
        }
        sql = pg_sql.PUT_WRITES_REPLACE if special else pg_sql.PUT_WRITES_KEEP
        with self._raw_cursor() as cur:
            cur.execute(sql, params, prepare=self.prepare)
            return bool(cur.fetchall())

    def _put_writes_sqlite(self, thread_id, ns, checkpoint_id, task_id, task_path, rows, special):
        """One statement per write; False when nothing could be written (no thread row)."""
        sql = sqlite_sql.PUT_WRITE_REPLACE if special else sqlite_sql.PUT_WRITE_KEEP
        cur = self._sqlite_cursor()
        try:
            with transaction.atomic(using=self.using):
                cur.executemany(
                    sql,
                    [
                        (
                            ns,
                            checkpoint_id,
                            task_id,
                            task_path,
                            idx,
                            channel,
                            type_,
                            blob,
                            thread_id,
                        )
                        for idx, channel, type_, blob in rows
                    ],
                )
                return cur.rowcount > 0
        finally:
            cur.close()

    def _thread_pk(self, thread_id: str, *, create: bool = False) -> int | None:
        found = list(
            Thread.objects.using(self.using)
            .filter(thread_id=thread_id)
            .values_list("pk", flat=True)[:1]
        )
        pk = found[0] if found else None
        if pk is None and create:
            now = utcnow()
            thread = Thread(thread_id=thread_id, created_at=now, last_write_at=now)
            Thread.objects.using(self.using).bulk_create(
                [thread],
                update_conflicts=True,
                unique_fields=["thread_id"],
                update_fields=["thread_id"],
            )
            pk = thread.pk
        return pk

    # -- reads ----------------------------------------------------------------------------
    # Row shape shared by both read paths: pk, thread pk, thread id, ns, checkpoint id,
    # parent id, body type, body, metadata, channel versions, blobs, writes.
    _ROW_FIELDS = (
        "pk",
        "thread_id",
        "thread__thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "type",
        "checkpoint",
        "metadata",
        "channel_versions",
    )

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, ns, checkpoint_id = config_keys(config)
        if self.provider == "postgres":
            params = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
            with self._raw_cursor() as cur:
                cur.execute(
                    pg_sql.GET_BY_ID if checkpoint_id else pg_sql.GET_LATEST,
                    params,
                    binary=True,
                    prepare=self.prepare,
                )
                found = cur.fetchall()
        else:
            params = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
            cur = self._sqlite_cursor()
            try:
                rows = cur.execute(
                    sqlite_sql.GET_BY_ID if checkpoint_id else sqlite_sql.GET_LATEST, params
                ).fetchall()
                found = sqlite_sql.with_blobs_and_writes(cur, rows)
            finally:
                cur.close()
        return self._tuples(found)[0] if found else None

    def _sqlite_cursor(self):
        """A cursor on Django's own sqlite3 connection (inside any transaction it holds)."""
        conn = connections[self.using]
        conn.ensure_connection()
        return conn.connection.cursor()

    def _tuples(self, rows: list[tuple]) -> list[CheckpointTuple]:
        out = []
        for row in rows:
            _, _, thread_id, ns, cid, parent, type_, body, metadata, versions, blobs, writes = row
            checkpoint = self.serde.loads_typed((type_, bytes(body)))
            if isinstance(metadata, str):
                metadata = json.loads(metadata)
            if isinstance(versions, str):
                versions = json.loads(versions)
            checkpoint["channel_versions"] = versions or {}
            checkpoint["channel_values"] = {
                _text(channel): self._load(_text(blob_type), data)
                for channel, blob_type, data in (blobs or ())
            }
            pending = sorted(
                (
                    (
                        _text(task_id),
                        _text(task_path),
                        int(_text(idx)),
                        _text(channel),
                        _text(w_type),
                        data,
                    )
                    for task_id, task_path, idx, channel, w_type, data in (writes or ())
                ),
                key=lambda w: writes_sort_key(w[1], w[0], w[2]),
            )
            conf = {"thread_id": thread_id, "checkpoint_ns": ns}
            out.append(
                CheckpointTuple(
                    config={"configurable": {**conf, "checkpoint_id": cid}},
                    checkpoint=checkpoint,
                    metadata=metadata,
                    parent_config=(
                        {"configurable": {**conf, "checkpoint_id": parent}} if parent else None
                    ),
                    pending_writes=[(w[0], w[3], self._load(w[4], w[5])) for w in pending],
                )
            )
        return out

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        for page in self._list_pages(config, filter=filter, before=before, limit=limit):
            yield from page

    def _list_pages(self, config, *, filter=None, before=None, limit=None) -> Iterator[list]:
        """Pages of tuples, each fetched by its own keyset query (no cursor held open)."""
        wanted = validate_filter(filter)
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise InvalidCheckpointInput(f"limit must be a whole number >= 0, got {limit!r}")
        params: dict[str, Any] = {}
        if config is not None:
            params["thread_id"], _, params["checkpoint_id"] = config_keys(config)
            params["ns"] = config["configurable"].get("checkpoint_ns")
        if before is not None:
            params["before"] = (before.get("configurable") or {}).get("checkpoint_id")
        params = {k: (str(v) if v is not None else None) for k, v in params.items()}
        remaining = limit
        cursor: tuple[str, int] | None = None
        while remaining is None or remaining > 0:
            size = PAGE if remaining is None or wanted else min(PAGE, remaining)
            fetched = self._fetch_page(params, wanted, cursor, size)
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
                yield self._tuples(fetched)
            if not full_page:
                return

    def _fetch_page(self, params, wanted, cursor, size) -> list[tuple]:
        if self.provider == "postgres":
            from psycopg.types.json import Jsonb

            sql = pg_sql.list_page(
                thread=params.get("thread_id") is not None,
                ns=params.get("ns") is not None,
                checkpoint_id=params.get("checkpoint_id") is not None,
                before=params.get("before") is not None,
                metadata=bool(wanted),
                cursor=cursor is not None,
            )
            values = dict(params, limit=size, metadata=Jsonb(wanted) if wanted else None)
            if cursor is not None:
                values["cursor_id"], values["cursor_pk"] = cursor
            with self._raw_cursor() as cur:
                cur.execute(sql, values, binary=True, prepare=self.prepare)
                return cur.fetchall()
        step = wanted.get("step")
        step = step if isinstance(step, int) and not isinstance(step, bool) else None
        source = wanted.get("source") if isinstance(wanted.get("source"), str) else None
        sql = sqlite_sql.list_page(
            thread=params.get("thread_id") is not None,
            ns=params.get("ns") is not None,
            checkpoint_id=params.get("checkpoint_id") is not None,
            before=params.get("before") is not None,
            source=source is not None,
            step=step is not None,
            cursor=cursor is not None,
        )
        values = dict(params, limit=size, source=source, step=step)
        if cursor is not None:
            values["cursor_id"], values["cursor_pk"] = cursor
        cur = self._sqlite_cursor()
        try:
            return sqlite_sql.with_blobs_and_writes(cur, cur.execute(sql, values).fetchall())
        finally:
            cur.close()

    # -- deletes and copies ---------------------------------------------------------------
    def _count(self, thread_id: str) -> ThreadHoldings:
        pk = self._thread_pk(thread_id)
        if pk is None:
            return ThreadHoldings(0, 0)
        return ThreadHoldings(
            CheckpointRow.objects.using(self.using).filter(thread_id=pk).count(),
            PendingWrite.objects.using(self.using).filter(thread_id=pk).count(),
        )

    def _delete_thread_round(self, thread_id: str) -> ThreadHoldings:
        return self._delete_threads_round([thread_id]).get(thread_id, ThreadHoldings(0, 0))

    def _delete_threads_round(self, thread_ids: list[str]) -> dict[str, ThreadHoldings]:
        """Set-based deletes, one transaction per thousand threads."""
        db = self.using
        if self.provider == "postgres":
            again = []
            for start in range(0, len(thread_ids), 1000):
                chunk = {"ids": thread_ids[start : start + 1000]}
                with self._raw_cursor() as cur:
                    cur.execute(pg_sql.DELETE_THREADS, chunk, prepare=self.prepare)
                    cur.execute(pg_sql.AFTER_DELETE, chunk, prepare=self.prepare)
                    again += [row[0] for row in cur.fetchall()]
            return {t: self._count(t) for t in again}
        for start in range(0, len(thread_ids), 1000):
            chunk = thread_ids[start : start + 1000]
            with transaction.atomic(using=db):
                pks = list(
                    Thread.objects.using(db)
                    .filter(thread_id__in=chunk)
                    .values_list("pk", flat=True)
                )
                for model in (PendingWrite, CheckpointRow, ChannelBlob):
                    model.objects.using(db).filter(thread_id__in=pks)._raw_delete(db)
                Thread.objects.using(db).filter(pk__in=pks)._raw_delete(db)
        # A writer's put or put_writes re-creates the thread row, so rows mean "holds rows".
        again = (
            Thread.objects.using(db)
            .filter(thread_id__in=thread_ids)
            .values_list("thread_id", flat=True)
        )
        return {t: self._count(t) for t in again}

    def _forget_threads(self, thread_ids: list[str]) -> None:
        if self.provider == "postgres":
            return  # AFTER_DELETE already dropped the marks of the threads that went
        db = self.using
        for start in range(0, len(thread_ids), 1000):
            FinishedMark.objects.using(db).filter(
                thread_id__in=thread_ids[start : start + 1000]
            )._raw_delete(db)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        run_ids = [str(r) for r in run_ids]
        if not run_ids:
            return
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
                PendingWrite.objects.using(db).filter(
                    thread_id=tpk, checkpoint_ns=ns, checkpoint_id__in=ids
                )._raw_delete(db)
            CheckpointRow.objects.using(db).filter(run_id__in=run_ids)._raw_delete(db)
            for tpk in {k[0] for k in by_key}:
                self._drop_unreferenced_blobs(tpk)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source_thread_id, target_thread_id = str(source_thread_id), str(target_thread_id)
        db = self.using
        with transaction.atomic(using=db):
            src = Thread.objects.using(db).filter(thread_id=source_thread_id).first()
            if src is None:
                return
            if CheckpointRow.objects.using(db).filter(thread__thread_id=target_thread_id).exists():
                raise ThreadExists(
                    f"cannot copy thread {source_thread_id!r} onto {target_thread_id!r}: "
                    "the target already holds checkpoints"
                )
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
                    model.objects.using(db).bulk_create(
                        [model(thread_id=target.pk, **item) for item in batch],
                        ignore_conflicts=True,
                    )

    # -- prune ----------------------------------------------------------------------------
    def _prune_thread(self, thread_id: str, keep_last: int) -> int:
        with transaction.atomic(using=self.using):
            pk = self._thread_pk(thread_id)
            if pk is None:
                return 0
            return self._prune_pk(pk, keep_last)

    def _prune_pk(self, pk: int, keep_last: int, only_ns: str | None = None) -> int:
        """Keep the newest ``keep_last`` per namespace plus the ancestors their delta
        channels replay from; delete the rest with their writes and unused blobs."""
        db = self.using
        rows = CheckpointRow.objects.using(db).filter(thread_id=pk)
        if only_ns is not None:
            rows = rows.filter(checkpoint_ns=only_ns)
            # Cheap exit on the put path: nothing to do while under the cap.
            if rows.count() <= keep_last:
                return 0
        listing = list(
            rows.order_by("checkpoint_ns", "-checkpoint_id").values_list(
                "checkpoint_ns",
                "checkpoint_id",
                "parent_checkpoint_id",
                "metadata",
                "channel_versions",
            )
        )
        by_ns: dict[str, list[tuple]] = defaultdict(list)
        for row in listing:
            by_ns[row[0]].append(row)
        doomed: list[tuple[str, str]] = []
        for ns, ns_rows in by_ns.items():
            keep = {r[1] for r in ns_rows[:keep_last]}
            keep |= self._delta_ancestors(pk, ns, ns_rows, keep)
            doomed.extend((ns, r[1]) for r in ns_rows if r[1] not in keep)
        if not doomed:
            return 0
        by_ns_ids: dict[str, list[str]] = defaultdict(list)
        for ns, cid in doomed:
            by_ns_ids[ns].append(cid)
        for ns, ids in by_ns_ids.items():
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                PendingWrite.objects.using(db).filter(
                    thread_id=pk, checkpoint_ns=ns, checkpoint_id__in=chunk
                )._raw_delete(db)
                CheckpointRow.objects.using(db).filter(
                    thread_id=pk, checkpoint_ns=ns, checkpoint_id__in=chunk
                )._raw_delete(db)
        self._drop_unreferenced_blobs(pk)
        return len(doomed)

    def _delta_ancestors(self, pk: int, ns: str, ns_rows: list[tuple], keep: set[str]) -> set[str]:
        """Ancestors of kept checkpoints that DeltaChannel values are rebuilt from."""
        by_id = {r[1]: r for r in ns_rows}
        extra: set[str] = set()
        for cid in list(keep):
            metadata = by_id[cid][3] or {}
            channels = set((metadata.get("counters_since_delta_snapshot") or {}).keys())
            current = by_id[cid]
            while channels and current is not None:
                versions = current[4] or {}
                seeded = {
                    ch
                    for ch in channels
                    if ch in versions
                    and ChannelBlob.objects.using(self.using)
                    .filter(thread_id=pk, checkpoint_ns=ns, channel=ch, version=str(versions[ch]))
                    .exclude(type=EMPTY)
                    .exists()
                }
                channels -= seeded
                extra.add(current[1])
                parent = current[2]
                current = by_id.get(parent) if parent and channels else None
        return extra

    def _drop_unreferenced_blobs(self, pk: int) -> None:
        db = self.using
        referenced: set[tuple[str, str, str]] = set()
        for ns, versions in (
            CheckpointRow.objects.using(db)
            .filter(thread_id=pk)
            .values_list("checkpoint_ns", "channel_versions")
            .iterator(chunk_size=500)
        ):
            for channel, version in (versions or {}).items():
                referenced.add((ns, channel, str(version)))
        stale = [
            blob_pk
            for blob_pk, ns, channel, version in ChannelBlob.objects.using(db)
            .filter(thread_id=pk)
            .values_list("pk", "checkpoint_ns", "channel", "version")
            if (ns, channel, version) not in referenced
        ]
        for start in range(0, len(stale), 500):
            ChannelBlob.objects.using(db).filter(pk__in=stale[start : start + 500])._raw_delete(db)

    # -- store-wide views -----------------------------------------------------------------
    def threads(self, *, limit: int | None = None) -> list[str]:
        qs = (
            Thread.objects.using(self.using)
            .order_by("-last_write_at")
            .values_list("thread_id", flat=True)
        )
        return list(qs[:limit] if limit else qs)

    def mark_finished(self, thread_id: str, due_at: datetime, owner: str = "") -> FinishedEntry:
        now = utcnow()
        FinishedMark.objects.using(self.using).update_or_create(
            thread_id=str(thread_id),
            defaults={"marked_at": now, "due_at": due_at, "owner": owner or ""},
        )
        return FinishedEntry(str(thread_id), now, due_at, owner or "")

    def unmark_finished(self, thread_id: str) -> bool:
        deleted, _ = (
            FinishedMark.objects.using(self.using).filter(thread_id=str(thread_id)).delete()
        )
        return bool(deleted)

    def finished_mark(self, thread_id: str) -> FinishedEntry | None:
        mark = FinishedMark.objects.using(self.using).filter(thread_id=str(thread_id)).first()
        if mark is None:
            return None
        return FinishedEntry(mark.thread_id, mark.marked_at, mark.due_at, mark.owner)

    def finished_due(self, now: datetime, *, limit: int | None = None) -> list[FinishedEntry]:
        qs = FinishedMark.objects.using(self.using).filter(due_at__lte=now).order_by("due_at")
        if limit:
            qs = qs[:limit]
        return [FinishedEntry(m.thread_id, m.marked_at, m.due_at, m.owner) for m in qs]

    def set_thread_retention(self, thread_id: str, retention: ThreadRetention) -> None:
        now = utcnow()
        thread = Thread(
            thread_id=str(thread_id),
            created_at=now,
            last_write_at=now,
            waiting_minutes=retention.waiting_minutes,
            finished_minutes=retention.finished_minutes,
        )
        Thread.objects.using(self.using).bulk_create(
            [thread],
            update_conflicts=True,
            unique_fields=["thread_id"],
            update_fields=["waiting_minutes", "finished_minutes"],
        )

    def thread_retention(self, thread_id: str) -> ThreadRetention:
        found = (
            Thread.objects.using(self.using)
            .filter(thread_id=str(thread_id))
            .values_list("waiting_minutes", "finished_minutes")
            .first()
        )
        return ThreadRetention(*found) if found else ThreadRetention()

    def thread_version(self, thread_id: str) -> int:
        found = (
            Thread.objects.using(self.using)
            .filter(thread_id=str(thread_id))
            .values_list("version", flat=True)
            .first()
        )
        return found or 0

    def bump_thread_version(self, thread_id: str, expected: int | None = None) -> int:
        rows = Thread.objects.using(self.using).filter(thread_id=str(thread_id))
        if expected is not None:
            rows = rows.filter(version=expected)
        if not rows.update(version=F("version") + 1):
            current = self.thread_version(thread_id)
            raise ThreadVersionConflict(
                f"thread {thread_id!r} is at version {current}, not {expected}: "
                "it changed since it was read"
            )
        return self.thread_version(thread_id)

    def idle_threads(
        self, now: datetime, waiting_minutes: int, *, limit: int | None = None
    ) -> list[str]:
        threads = Thread.objects.using(self.using)
        found = list(
            threads.filter(
                waiting_minutes__isnull=True,
                last_write_at__lt=now - timedelta(minutes=waiting_minutes),
            )
            .order_by("last_write_at")
            .values_list("thread_id", flat=True)[: limit or None]
        )
        # Declared horizons are few distinct values; one indexed query each.
        declared = (
            threads.filter(waiting_minutes__isnull=False)
            .values_list("waiting_minutes", flat=True)
            .distinct()
        )
        for minutes in declared:
            if limit and len(found) >= limit:
                break
            found += list(
                threads.filter(
                    waiting_minutes=minutes, last_write_at__lt=now - timedelta(minutes=minutes)
                )
                .order_by("last_write_at")
                .values_list("thread_id", flat=True)[: (limit - len(found)) if limit else None]
            )
        return found

    # -- async twins: the ORM is synchronous, so each call runs in Django's sync thread ---
    async def aget_tuple(self, config):
        return await sync_to_async(self.get_tuple, thread_sensitive=True)(config)

    async def aput(self, config, checkpoint, metadata, new_versions):
        return await sync_to_async(self.put, thread_sensitive=True)(
            config, checkpoint, metadata, new_versions
        )

    async def aput_writes(self, config, writes, task_id, task_path=""):
        return await sync_to_async(self.put_writes, thread_sensitive=True)(
            config, writes, task_id, task_path
        )

    async def adelete_thread(self, thread_id):
        return await sync_to_async(self.delete_thread, thread_sensitive=True)(thread_id)

    async def adelete_for_runs(self, run_ids):
        return await sync_to_async(self.delete_for_runs, thread_sensitive=True)(run_ids)

    async def acopy_thread(self, source_thread_id, target_thread_id):
        return await sync_to_async(self.copy_thread, thread_sensitive=True)(
            source_thread_id, target_thread_id
        )

    async def aprune(self, thread_ids, *, strategy="keep_latest", keep_last=None):
        return await sync_to_async(self.prune, thread_sensitive=True)(
            thread_ids, strategy=strategy, keep_last=keep_last
        )

    async def aget_delta_channel_history(self, *, config, channels):
        return await sync_to_async(self.get_delta_channel_history, thread_sensitive=True)(
            config=config, channels=channels
        )

    async def alist(
        self, config, *, filter=None, before=None, limit=None
    ) -> AsyncIterator[CheckpointTuple]:
        pages = self._list_pages(config, filter=filter, before=before, limit=limit)
        step = sync_to_async(lambda: next(pages, None), thread_sensitive=True)
        while (page := await step()) is not None:
            for item in page:
                yield item


def _text(value: Any) -> str:
    """Names come back as bytea from the PostgreSQL arrays and as str from the ORM."""
    if isinstance(value, memoryview):
        value = bytes(value)
    return value.decode() if isinstance(value, bytes) else value
