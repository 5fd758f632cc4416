"""Create the bench databases and build every subject on them."""

from __future__ import annotations

import os
import shutil
import sqlite3

import psycopg
from django.conf import settings

from bench.subjects import (
    RawRedisFloor,
    RawSqlFloor,
    Subject,
    payload_bytes,
    pg_relation_bytes,
    sqlite_count,
    sqlite_table_bytes,
)

LG_PG_TABLES = ["checkpoints", "checkpoint_blobs", "checkpoint_writes"]
LG_SQLITE_TABLES = ["checkpoints", "writes"]
RAW_TABLES = ["raw_checkpoints", "raw_writes"]


def pg_url(dbname: str) -> str:
    return f"postgresql://{settings.PG_USER}@{settings.PG_HOST}:{settings.PG_PORT}/{dbname}"


def admin_connection(dbname: str = "postgres") -> psycopg.Connection:
    return psycopg.connect(pg_url(dbname), autocommit=True)


def reset_pg_database(name: str) -> None:
    """Drop and create a bench database; refuses anything not named like one."""
    if not name.startswith("checkpoint_bench"):
        raise ValueError(f"refusing to reset database {name!r}: not a checkpoint_bench database")
    with admin_connection() as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def reset_files() -> None:
    """Start from empty SQLite files; called before Django opens any of them."""
    bench_dir = settings.BENCH_DIR
    if os.path.isdir(bench_dir):
        shutil.rmtree(bench_dir)
    os.makedirs(bench_dir)


def sqlite_path(name: str) -> str:
    return os.path.join(settings.BENCH_DIR, name)


def _sqlite_conn(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, check_same_thread=False)
    # The same pragmas as our Django SQLite database (bench.settings; FULL is also the
    # project's default, CHECKPOINTS["SQLITE_SYNCHRONOUS"]), so the comparison is of code.
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def _our_tables() -> list[str]:
    from checkpoints.models import ChannelBlob, Checkpoint, PendingWrite, Thread

    return [m._meta.db_table for m in (Thread, Checkpoint, ChannelBlob, PendingWrite)]


def _count_via_holdings(saver) -> int:
    return sum(saver.thread_holdings(t).checkpoints for t in saver.threads())


def postgres_subjects() -> list[Subject]:
    from django.core.management import call_command
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg.rows import dict_row

    from checkpoints.models import Checkpoint
    from checkpoints.store.registry import get_saver

    reset_pg_database(settings.PG_DB)
    reset_pg_database(settings.PG_DB_LG)
    call_command("migrate", database="pg", verbosity=0)
    ours = get_saver("postgres", using="pg")
    ours_admin = admin_connection(settings.PG_DB)
    lg_conn = psycopg.connect(
        pg_url(settings.PG_DB_LG), autocommit=True, prepare_threshold=0, row_factory=dict_row
    )
    theirs = PostgresSaver(lg_conn)
    theirs.setup()
    raw_conn = psycopg.connect(pg_url(settings.PG_DB_LG), autocommit=True)
    lg_admin = admin_connection(settings.PG_DB_LG)
    table = Checkpoint._meta.db_table

    def count(conn, name):
        return lambda: int(conn.execute(f'SELECT COUNT(*) FROM "{name}"').fetchone()[0])

    return [
        Subject(
            "orm-pg",
            "postgres",
            ours,
            lambda: pg_relation_bytes(ours_admin, _our_tables()),
            count(ours_admin, table),
            ours_admin.close,
        ),
        Subject(
            "lg-postgres",
            "postgres",
            theirs,
            lambda: pg_relation_bytes(lg_admin, LG_PG_TABLES),
            count(lg_admin, "checkpoints"),
            lg_conn.close,
        ),
        Subject(
            "raw-pg",
            "postgres",
            RawSqlFloor(raw_conn, sqlite=False),
            lambda: pg_relation_bytes(lg_admin, RAW_TABLES),
            count(lg_admin, "raw_checkpoints"),
            raw_conn.close,
        ),
    ]


def sqlite_subjects() -> list[Subject]:
    from django.core.management import call_command
    from langgraph.checkpoint.sqlite import SqliteSaver

    from checkpoints.models import Checkpoint
    from checkpoints.store.registry import get_saver

    call_command("migrate", database="default", verbosity=0)
    ours = get_saver("sqlite", using="default")
    ours_path = settings.DATABASES["default"]["NAME"]
    lg_path, raw_path = sqlite_path("lg.sqlite3"), sqlite_path("raw.sqlite3")
    lg_conn = _sqlite_conn(lg_path)
    theirs = SqliteSaver(lg_conn)
    theirs.setup()
    raw_conn = _sqlite_conn(raw_path)
    return [
        Subject(
            "orm-sqlite",
            "sqlite",
            ours,
            lambda: sqlite_table_bytes(ours_path, _our_tables()),
            lambda: sqlite_count(ours_path, Checkpoint._meta.db_table),
        ),
        Subject(
            "lg-sqlite",
            "sqlite",
            theirs,
            lambda: sqlite_table_bytes(lg_path, LG_SQLITE_TABLES),
            lambda: sqlite_count(lg_path, "checkpoints"),
            lg_conn.close,
        ),
        Subject(
            "raw-sqlite",
            "sqlite",
            RawSqlFloor(raw_conn, sqlite=True),
            lambda: sqlite_table_bytes(raw_path, RAW_TABLES),
            lambda: sqlite_count(raw_path, "raw_checkpoints"),
            raw_conn.close,
        ),
    ]


def memory_subjects() -> list[Subject]:
    from langgraph.checkpoint.memory import InMemorySaver

    from checkpoints.store.memory import STORE, MemorySaver

    STORE.clear()
    ours = MemorySaver()
    theirs = InMemorySaver()
    return [
        Subject(
            "memory",
            "memory",
            ours,
            lambda: payload_bytes([STORE.checkpoints, STORE.blobs, STORE.writes]),
            lambda: sum(len(b) for ns in STORE.checkpoints.values() for b in ns.values()),
        ),
        Subject(
            "lg-memory",
            "memory",
            theirs,
            lambda: payload_bytes([theirs.storage, theirs.blobs, theirs.writes]),
            lambda: sum(len(b) for ns in theirs.storage.values() for b in ns.values()),
        ),
    ]


def redis_subjects(notes: list[str]) -> list[Subject]:
    import redis

    url = settings.REDIS_BENCH_URL
    client = redis.Redis.from_url(url)
    try:
        client.ping()
    except redis.RedisError as exc:
        notes.append(f"redis skipped: {url} does not answer ({exc})")
        return []
    client.flushdb()
    subjects = []
    from checkpoints.store.registry import get_saver

    try:
        ours = get_saver("redis", conn_string=url)
    except Exception as exc:  # noqa: BLE001 - a saver still being written may not build
        notes.append(f"redis saver skipped: it failed to build ({exc!r})")
    else:

        def ours_bytes():
            return sum(
                client.memory_usage(k) or 0
                for k in client.scan_iter(count=1000)
                if not k.startswith(RawRedisFloor.PREFIX.encode())
            )

        subjects.append(
            Subject("redis", "redis", ours, ours_bytes, lambda: _count_via_holdings(ours))
        )
    floor = RawRedisFloor(client)
    subjects.append(
        Subject("raw-redis", "redis", floor, floor.stored_bytes, floor.checkpoint_count)
    )
    return subjects


def build_subjects(notes: list[str], only: set[str] | None = None) -> list[Subject]:
    builders = {
        "postgres": postgres_subjects,
        "sqlite": sqlite_subjects,
        "memory": memory_subjects,
        "redis": lambda: redis_subjects(notes),
    }
    subjects = []
    for family, build in builders.items():
        if only and family not in only:
            continue
        subjects.extend(build())
    return subjects
