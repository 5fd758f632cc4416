"""Import threads from LangGraph's PostgresSaver into our PostgreSQL store, timed.

    .venv/bin/python -m bench.transfer --threads 2000 --per-thread 10

Seeds ``threads x per-thread`` checkpoints (a growing message list, a counter, one pending
write each) with PostgresSaver in its own database (``checkpoint_bench_transfer_lg``), then
imports them with `copy_threads` into our store (``checkpoint_bench_transfer``) in two
halves, printing checkpoints/s and the process's RSS after each half (the second half
lands on a store twice the size: flat RSS means memory does not grow with the store).
The source is ANALYZEd after seeding, as autovacuum would have done. The floor: a bare
``COPY`` of the same rows' bytes into plain tables. Both databases are dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LG_DB = "checkpoint_bench_transfer_lg"
OUR_DB = "checkpoint_bench_transfer"
# The thread PostgresSaver writes; seed() copies it as bench-0000001, bench-0000002, ...
TEMPLATE = "bench-0000000"
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _databases(create: bool) -> None:
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for name in (LG_DB, OUR_DB):
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            if create:
                conn.execute(f"CREATE DATABASE {name}")


def _configure() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    os.environ["DJANGO_DEBUG"] = "0"
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "0123456789abcdef" * 4)
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1")
    os.environ["LLM_PROVIDER_CHECKPOINT"] = "postgres"
    os.environ.pop("LLM_PROVIDER_CHECKPOINT_CONN_STRING", None)
    os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{OUR_DB}"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def _rss_mb() -> tuple[float, float]:
    """(current RSS, peak RSS) of this process in MB."""
    fields = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            fields[key] = value
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def seed(lg, threads: int, per_thread: int) -> int:
    """One thread written by PostgresSaver itself, then copied in SQL under ``threads`` ids.

    Every thread the loop used to write was the same but for its id and timestamps, and at
    100,000 threads writing them one put at a time took longer than the import it feeds
    (2,000,000 commits); the copies hold the peer's own bytes, row for row.
    """
    # v4, the format real graphs write (see bench.workload).
    from langgraph.pregel._checkpoint import create_checkpoint, empty_checkpoint

    config = {"configurable": {"thread_id": TEMPLATE, "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    messages: list[str] = []
    version = None
    for step in range(per_thread):
        messages = [*messages, f"message {step} " + "lorem ipsum " * 24]
        version = lg.get_next_version(version, None)
        checkpoint = create_checkpoint(checkpoint, None, step)
        checkpoint["channel_values"] = {"messages": messages, "count": step}
        checkpoint["channel_versions"] = {"messages": version, "count": version}
        config = lg.put(
            config,
            checkpoint,
            {"step": step, "source": "loop"},
            dict.fromkeys(("messages", "count"), version),
        )
        lg.put_writes(config, [("messages", f"pending {step}")], f"task-{step}")
    columns = {
        "checkpoints": "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, "
        "metadata",
        "checkpoint_blobs": "checkpoint_ns, channel, version, type, blob",
        "checkpoint_writes": "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, "
        "task_path",
    }
    with lg.conn.cursor() as cur:
        for start in range(1, threads, 10_000):
            for table, cols in columns.items():
                cur.execute(
                    f"INSERT INTO {table} (thread_id, {cols}) "
                    f"SELECT 'bench-' || lpad(g::text, 7, '0'), {cols} "
                    f"FROM {table}, generate_series(%s::int, %s::int) AS g WHERE thread_id = %s",
                    (start, min(start + 9_999, threads - 1), TEMPLATE),
                )
    with lg.conn.cursor() as cur:
        # The statistics autovacuum would have gathered on a store written over time:
        # without them the peer's own list query scans its tables for every thread.
        cur.execute("ANALYZE")
    return threads * per_thread


def bare_copy(threads: int) -> tuple[float, int]:
    """Seconds to COPY the source's rows (the same bytes) into plain tables of ours."""
    import psycopg

    with (
        psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{LG_DB}") as src,
        psycopg.connect(f"postgresql://postgres@127.0.0.1:5432/{OUR_DB}") as dst,
    ):
        for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes"):
            dst.execute(f"DROP TABLE IF EXISTS copy_{table}")
        dst.execute(
            "CREATE TABLE copy_checkpoints (thread_id text, ns text, id text, parent text, "
            "checkpoint jsonb, metadata jsonb)"
        )
        dst.execute(
            "CREATE TABLE copy_checkpoint_blobs (thread_id text, ns text, channel text, "
            "version text, type text, blob bytea)"
        )
        dst.execute(
            "CREATE TABLE copy_checkpoint_writes (thread_id text, ns text, id text, task text, "
            "idx int, channel text, type text, blob bytea, task_path text)"
        )
        dst.commit()
        moved = 0
        started = time.perf_counter()
        queries = {
            "checkpoints": "SELECT thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, checkpoint, metadata FROM checkpoints",
            "checkpoint_blobs": "SELECT thread_id, checkpoint_ns, channel, version, type, blob "
            "FROM checkpoint_blobs",
            "checkpoint_writes": "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, "
            "channel, type, blob, task_path FROM checkpoint_writes",
        }
        for table, query in queries.items():
            with (
                src.cursor().copy(f"COPY ({query}) TO STDOUT (FORMAT BINARY)") as out,
                dst.cursor().copy(f"COPY copy_{table} FROM STDIN (FORMAT BINARY)") as into,
            ):
                for chunk in out:
                    moved += len(chunk)
                    into.write(chunk)
        dst.commit()
        return time.perf_counter() - started, moved


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2000)
    parser.add_argument("--per-thread", type=int, default=10)
    args = parser.parse_args(argv)
    _databases(create=True)
    try:
        _configure()
        from langgraph.checkpoint.postgres import PostgresSaver

        from checkpoints import get_saver
        from checkpoints.transfer import SaverSource, copy_threads

        with PostgresSaver.from_conn_string(f"postgresql://postgres@127.0.0.1:5432/{LG_DB}") as lg:
            lg.setup()
            started = time.perf_counter()
            total = seed(lg, args.threads, args.per_thread)
            print(
                f"seeded {args.threads} threads / {total} checkpoints with PostgresSaver "
                f"in {time.perf_counter() - started:.1f}s"
            )
            source = SaverSource(lg)
            ids = list(source.thread_ids())
            ours = get_saver()
            half = len(ids) // 2
            print(f"RSS before import: {_rss_mb()[0]:.1f} MB")
            for label, part in (("first half", ids[:half]), ("second half", ids[half:])):
                summary = copy_threads(source, ours, thread_ids=part)
                now, peak = _rss_mb()
                print(
                    f"import {label}: {summary}; {summary.checkpoints / summary.seconds:,.0f} "
                    f"checkpoints/s; RSS {now:.1f} MB, peak {peak:.1f} MB"
                )
        seconds, moved = bare_copy(args.threads)
        print(
            f"bare COPY of the same rows ({moved:,} bytes): {seconds:.2f}s, "
            f"{total / seconds:,.0f} checkpoints/s"
        )
    finally:
        from django.db import connections

        connections.close_all()
        _databases(create=False)


if __name__ == "__main__":
    main()
