"""Where threads are read from: a saver, an export file, or a SOURCE string.

LangGraph's PostgresSaver and SqliteSaver, given as a SOURCE string or as saver objects
(`source_of`), are read straight from their tables by `langgraph_tables`, every value by
the store's reader: their own savers would decode a row with LangGraph's default
serializer, which runs what the row names. Our stores, and any other saver, are read
through the saver's own ``list``; `SaverSource` reads PostgresSaver and SqliteSaver that
way too when given one explicitly, with what ``list`` leaves out (thread ids, the path
and index of each pending write) read from their tables.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.utils.module_loading import import_string
from langgraph.checkpoint.base import WRITES_IDX_MAP, BaseCheckpointSaver, writes_sort_key
from langgraph.constants import TASKS

from checkpoints.codec.serde import store_serializer
from checkpoints.dburl import parse_database_url
from checkpoints.errors import CheckpointConfigError
from checkpoints.store.capabilities import STAGING_PREFIX
from checkpoints.store.planning.parent_sends import migrate_parent_sends, needs_parent_sends
from checkpoints.transfer.extras import read_extras
from checkpoints.transfer.langgraph_tables import postgres_tables, sqlite_tables, tables_of
from checkpoints.transfer.records import CheckpointRecord, ThreadRecord, WriteRecord, read_export

PAGE = 1000


class SaverSource:
    """Threads read from a BaseCheckpointSaver."""

    def __init__(self, saver: BaseCheckpointSaver, name: str = "", *, extras: bool = False) -> None:
        self.saver = saver
        self.name = name or type(saver).__name__
        # Read each thread's registered extras (`extras`): only for the deployment's own
        # store, whose thread metadata and holds live in this deployment's database.
        self.extras = extras

    # -- thread ids -----------------------------------------------------------------------
    def thread_ids(self) -> Iterator[str]:
        saver = self.saver
        if hasattr(saver, "threads") and hasattr(saver, "thread_holdings"):
            # Ours: ids only, newest first; an import's staging copies are not threads.
            ids = saver.threads()
            yield from (t for t in ids if not t.startswith(STAGING_PREFIX))
            return
        tables = tables_of(saver)
        if tables is not None:  # LangGraph's PostgresSaver or SqliteSaver: pages of its ids
            yield from (str(thread_id) for thread_id in tables.thread_ids())
            return
        seen: set[str] = set()  # any other saver: its list of everything, ids kept once
        for tup in saver.list(None):
            thread_id = str(tup.config["configurable"]["thread_id"])
            if thread_id not in seen:
                seen.add(thread_id)
                yield thread_id

    # -- one thread -----------------------------------------------------------------------
    def thread(self, thread_id: str) -> ThreadRecord | None:
        tuples = list(self.saver.list({"configurable": {"thread_id": thread_id}}))
        if not tuples:
            return None
        tuples.sort(
            key=lambda t: (t.config["configurable"].get("checkpoint_ns") or "", t.checkpoint["id"])
        )
        keys = self._write_keys(thread_id)
        checkpoints = []
        sends: dict[tuple[str, str], list] = {}
        for tup in tuples:
            conf = tup.config["configurable"]
            ns = conf.get("checkpoint_ns") or ""
            cid = str(tup.checkpoint["id"])
            writes = _writes(tup.pending_writes or (), keys.get((ns, cid)))
            checkpoint = dict(tup.checkpoint)
            parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
            if needs_parent_sends(checkpoint, parent):
                # The saver may have done it as it read (PostgresSaver and ours do).
                migrate_parent_sends(
                    checkpoint,
                    sends.get((ns, parent or "")) or [],
                    lambda: self.saver.get_next_version(None, None),
                )
            sends[(ns, cid)] = [w.value for w in writes if w.channel == TASKS]
            checkpoints.append(
                CheckpointRecord(ns, checkpoint, dict(tup.metadata or {}), parent, writes)
            )
        record = ThreadRecord(thread_id=thread_id, checkpoints=checkpoints)
        if hasattr(self.saver, "thread_retention"):
            declared = self.saver.thread_retention(thread_id)
            if declared.waiting_minutes is not None or declared.finished_minutes is not None:
                record.retention = {
                    "waiting_minutes": declared.waiting_minutes,
                    "finished_minutes": declared.finished_minutes,
                }
            mark = self.saver.finished_mark(thread_id)
            if mark is not None:
                record.finished = {"due_at": mark.due_at.isoformat(), "owner": mark.owner}
        # The owner the store records, never one a checkpoint's metadata claims: anyone
        # writing a checkpoint chooses its metadata.
        record.owner = _owner_name(self.saver, thread_id)
        if self.extras:
            record.extras = read_extras(self.saver, thread_id)
        return record

    def threads(self, thread_ids=None) -> Iterator[ThreadRecord]:
        for thread_id in thread_ids if thread_ids is not None else self.thread_ids():
            record = self.thread(thread_id)
            if record is not None:
                yield record

    def _write_keys(self, thread_id: str) -> dict[tuple[str, str], list[tuple]]:
        """(task_id, task_path, idx, channel) of each pending write, per checkpoint, in
        read order: what ``pending_writes`` leaves out. Empty where we cannot read them."""
        rows = _write_rows(self.saver, thread_id)
        if rows is None:
            return {}
        keyed: dict[tuple[str, str], list[tuple]] = {}
        for ns, cid, task_id, task_path, idx, channel in rows:
            keyed.setdefault((ns or "", cid), []).append(
                (task_id, task_path or "", int(idx), channel)
            )
        for found in keyed.values():
            found.sort(key=lambda k: writes_sort_key(k[1], k[0], k[2]))
        return keyed


def _owner_name(saver, thread_id: str) -> str:
    if not getattr(saver, "records_owners", False) or getattr(saver, "db_alias", None) is None:
        return ""
    from checkpoints.selectors import owner_name

    return owner_name(saver=saver, thread_id=thread_id)


def source_of(saver: BaseCheckpointSaver, name: str = ""):
    """The source for a saver object: LangGraph's PostgresSaver and SqliteSaver by their
    tables (`langgraph_tables`), any other through its own ``list``."""
    tables = tables_of(saver)
    if tables is not None:
        if name:
            tables.name = name
        return tables
    return SaverSource(saver, name=name)


def _writes(pending, keys: list[tuple] | None) -> list[WriteRecord]:
    """Pending writes with their path and index: from the table's keys when they line up
    with what the saver returned, else the index LangGraph's put_writes would give."""
    pending = list(pending)
    if (
        keys is not None
        and len(keys) == len(pending)
        and all(k[0] == p[0] and k[3] == p[1] for k, p in zip(keys, pending, strict=True))
    ):
        return [
            WriteRecord(task_id=str(p[0]), channel=p[1], value=p[2], task_path=k[1], idx=k[2])
            for k, p in zip(keys, pending, strict=True)
        ]
    counters: dict[str, int] = {}
    out = []
    for task_id, channel, value in pending:
        if channel in WRITES_IDX_MAP:
            idx = WRITES_IDX_MAP[channel]
        else:
            idx = counters.get(task_id, 0)
            counters[task_id] = idx + 1
        out.append(WriteRecord(task_id=str(task_id), channel=channel, value=value, idx=idx))
    return out


# -- the tables of LangGraph's savers -----------------------------------------------------
def _lg_kind(saver) -> str | None:
    module = type(saver).__module__
    if module.startswith("langgraph.checkpoint.postgres"):
        return "postgres"
    if module.startswith("langgraph.checkpoint.sqlite"):
        return "sqlite"
    return None


def _query(saver, kind: str, sql: str, args: tuple) -> list[tuple]:
    if kind == "postgres":
        with saver._cursor() as cur:
            cur.execute(sql, args)
            return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in cur.fetchall()]
    with saver.cursor(transaction=False) as cur:
        cur.execute(sql.replace("%s", "?"), args)
        return [tuple(r) for r in cur.fetchall()]


def _write_rows(saver, thread_id: str) -> list[tuple] | None:
    kind = _lg_kind(saver)
    if kind is not None:
        table = "checkpoint_writes" if kind == "postgres" else "writes"
        if kind == "sqlite" and not getattr(saver, "_has_task_path", True):
            path = "''"
        else:
            path = "task_path"
        return _query(
            saver,
            kind,
            f"SELECT checkpoint_ns, checkpoint_id, task_id, {path}, idx, channel FROM {table} "
            "WHERE thread_id = %s",
            (thread_id,),
        )
    slots = getattr(saver, "write_slots", None)  # ours: each store reads its own
    return slots(thread_id) if slots is not None else None


class FileSource:
    """Threads read from an export file, one at a time."""

    def __init__(self, path: str, serde=None, *, max_bytes: int | None = None) -> None:
        if not os.path.isfile(path):
            raise CheckpointConfigError(f"export file {path!r} does not exist", field="source")
        self.path = path
        self.name = path
        # Decompressed bytes read at most (records.DEFAULT_MAX_IMPORT_BYTES when None).
        self.max_bytes = max_bytes
        # The store's reader: revives the types the process knows, never imports a module
        # a file names (checkpoints.codec.serde).
        self.serde = serde or store_serializer()

    def threads(self, thread_ids=None):
        wanted = set(thread_ids) if thread_ids is not None else None
        for item in read_export(self.path, self.serde, max_bytes=self.max_bytes):
            thread_id = getattr(item, "thread_id", None)
            if wanted is None or thread_id is None or thread_id in wanted:
                yield item

    def thread_ids(self) -> Iterator[str]:
        for item in self.threads():
            if isinstance(item, ThreadRecord):
                yield item.thread_id


# -- SOURCE strings -----------------------------------------------------------------------
# The one source kind read by a package the service does not install (the extra of that
# name in pyproject.toml installs it).
REDIS_EXTRA = "langgraph-redis"
REDIS_MISSING = (
    "langgraph+redis:// reads a langgraph-checkpoint-redis store, which needs the "
    f'langgraph-checkpoint-redis package (pip install "checkpoint-store[{REDIS_EXTRA}]") '
    "and a Redis with the RedisJSON and RediSearch modules"
)

# Its JSON layout is read only by the package itself, whose serializer revives the classes a
# stored document names; the store's strict reader cannot stand in, so the operator decides.
REDIS_UNTRUSTED = (
    "langgraph+redis:// is read by langgraph-checkpoint-redis's own serializer, which "
    "imports and calls the classes a stored row names; import such a store only if you "
    "trust everything written to it, and say so with --trust-source"
)


@contextmanager
def open_source(
    source: str | None,
    *,
    saver: str | None = None,
    max_bytes: int | None = None,
    trust_source: bool = False,
) -> Iterator[Any]:
    """The source for a SOURCE argument (see the README), closed after. ``max_bytes``: the
    most an export file may hold decompressed; ``trust_source``: the operator vouches for a
    source only its own package can read (langgraph+redis://)."""
    if saver:
        yield from _factory_source(saver)
        return
    if not source:
        raise CheckpointConfigError("name a SOURCE or --saver module:callable", field="source")
    scheme = source.split("://", 1)[0].lower() if "://" in source else ""
    if scheme in ("langgraph+postgresql", "langgraph+postgres"):
        with postgres_tables(source.split("+", 1)[1], _safe(source)) as tables:
            yield tables
        return
    if scheme == "langgraph+sqlite":
        with sqlite_tables(_sqlite_path(source.split("+", 1)[1]), source) as tables:
            yield tables
        return
    if scheme in ("langgraph+redis", "langgraph+rediss"):
        if not trust_source:
            raise CheckpointConfigError(REDIS_UNTRUSTED, field="source")
        try:
            from langgraph.checkpoint.redis import RedisSaver
        except ImportError as exc:
            raise CheckpointConfigError(REDIS_MISSING, field="source") from exc
        url = source.split("+", 1)[1]
        cm = RedisSaver.from_conn_string(url)
        try:
            lg = cm.__enter__()
        except Exception as exc:  # noqa: BLE001 - the package's own error, named
            raise CheckpointConfigError(
                f"cannot open the langgraph-checkpoint-redis store {_safe(url)}: {exc}",
                field="source",
            ) from exc
        try:
            try:
                lg.setup()
            except Exception as exc:  # noqa: BLE001 - Redis without the modules says so
                raise CheckpointConfigError(
                    f"cannot read the langgraph-checkpoint-redis store {_safe(url)} ({exc}); "
                    f"{REDIS_MISSING}",
                    field="source",
                ) from exc
            yield SaverSource(lg, name=_safe(source))
        finally:
            cm.__exit__(None, None, None)
        return
    if scheme:
        from checkpoints import from_conn_string

        if scheme == "sqlite":
            path = _sqlite_path(source)
            if not os.path.isfile(path):
                # Opening it would create an empty store and import nothing.
                raise CheckpointConfigError(
                    f"SQLite store file {path!r} does not exist", field="source"
                )
        elif scheme.split("+", 1)[0] in ("postgres", "postgresql", "pgsql"):
            # Opening an empty database would make a store in it (its migrations run on
            # the source) and import nothing; an unreachable one would raise the driver's error.
            _check_postgres_store(source)
        with from_conn_string(source) as ours:
            yield SaverSource(ours, name=_safe(source))
        return
    yield FileSource(source, max_bytes=max_bytes)


_DJANGO_PG_OPTIONS = frozenset(
    {"isolation_level", "assume_role", "server_side_binding", "pool", "cursor_factory"}
)


def _check_postgres_store(url: str) -> None:
    """Refuse, naming why, a PostgreSQL source that cannot be opened or holds no store."""
    import psycopg

    from checkpoints.models import Checkpoint, Thread

    try:
        entry = parse_database_url(url)
    except ValueError as exc:
        raise CheckpointConfigError(str(exc), field="source") from None
    given = {
        "dbname": entry.get("NAME"),
        "user": entry.get("USER"),
        "password": entry.get("PASSWORD"),
        "host": entry.get("HOST"),
        "port": entry.get("PORT"),
        # Django's own options are not libpq's.
        **{k: v for k, v in (entry.get("OPTIONS") or {}).items() if k not in _DJANGO_PG_OPTIONS},
    }
    params = {key: value for key, value in given.items() if value not in (None, "")}
    try:
        with psycopg.connect(connect_timeout=10, **params) as conn:
            tables = [Thread._meta.db_table, Checkpoint._meta.db_table]
            found = conn.execute(
                "SELECT to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL", tables
            ).fetchone()
    except psycopg.Error as exc:
        raise CheckpointConfigError(
            f"cannot open the checkpoint store {_safe(url)}: {str(exc).strip()}", field="source"
        ) from None
    if not all(found):
        raise CheckpointConfigError(
            f"{_safe(url)} holds no checkpoint store (no {' or '.join(tables)} table); an "
            "import reads a store and never makes one in its source",
            field="source",
        )


def _sqlite_path(url: str) -> str:

    try:
        return str(parse_database_url(url)["NAME"])
    except ValueError as exc:
        raise CheckpointConfigError(str(exc), field="source") from None


def _factory_source(path: str):
    if ":" not in path:
        raise CheckpointConfigError(f"--saver {path!r} must be module:callable", field="saver")
    module, name = path.split(":", 1)
    try:
        factory = import_string(f"{module}.{name}")
    except ImportError as exc:
        raise CheckpointConfigError(
            f"--saver {path!r} cannot be imported: {exc}", field="saver"
        ) from exc
    made = factory()
    if hasattr(made, "__enter__") and not isinstance(made, BaseCheckpointSaver):
        with made as saver:
            yield _as_source(saver, path)
    else:
        yield _as_source(made, path)


def _as_source(saver, path: str):
    if not isinstance(saver, BaseCheckpointSaver):
        raise CheckpointConfigError(
            f"--saver {path!r} returned a {type(saver).__name__}, not a BaseCheckpointSaver",
            field="saver",
        )
    return source_of(saver, path)


def _safe(url: str) -> str:
    """The URL without its password, for messages and summaries."""
    if "@" not in url or "://" not in url:
        return url
    scheme, rest = url.split("://", 1)
    creds, host = rest.rsplit("@", 1)
    return f"{scheme}://{creds.split(':', 1)[0]}@{host}"
