"""Seed an ORM checkpoint store with many checkpoints, then time one sweep over it.

    .venv/bin/python bench/sweep_seed.py --provider postgres --threads 10000 --per-thread 10

PostgreSQL uses its own database (``checkpoint_sweep_bench``, recreated each run); SQLite a
file under ``var/bench``. Rows go in through the models' bulk_create, bypassing the saver,
so seeding takes seconds; the sweep then runs through the real saver and filters.
Of the threads: 40% are finished past due, 30% idle past the waiting horizon, 30% fresh;
1% of the due ones hold an unexpired park, so the sweep spares them. ``--due-percent P``
instead marks P% finished past due and leaves the rest fresh (no parks).

On SQLite the run also says how much of the file the sweep gave back: the file before and
after (WAL checkpointed), what the survivors need (the size of ``VACUUM INTO`` a copy), and
the sweep's own ``bytes_freed``. ``--value-bytes N`` stores N incompressible bytes per
channel value instead of a short list, so the rows weigh what a real store's do.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_DB = "checkpoint_sweep_bench"


def configure(provider: str) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DJANGO_SETTINGS_MODULE"] = "project.settings"
    os.environ["DJANGO_DEBUG"] = "0"
    # DEBUG off refuses the dev key and "*" hosts; a benchmark serves no one.
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-only-" + "0123456789abcdef" * 4)
    os.environ.setdefault("DJANGO_ALLOWED_HOSTS", "127.0.0.1")
    os.environ["LOG_LEVEL"] = "ERROR"
    os.environ["LLM_PROVIDER_CHECKPOINT"] = provider
    os.environ.pop("LLM_PROVIDER_CHECKPOINT_CONN_STRING", None)
    if provider == "postgres":
        import psycopg

        with psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres") as conn:
            conn.autocommit = True
            conn.execute(f"DROP DATABASE IF EXISTS {PG_DB} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {PG_DB}")
        os.environ["DATABASE_URL"] = f"postgres://postgres@127.0.0.1:5432/{PG_DB}"
    else:
        path = ROOT / "var" / "bench" / "sweep.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        for leftover in path.parent.glob("sweep.sqlite3*"):
            leftover.unlink()
        os.environ["DATABASE_URL"] = f"sqlite:///{path}"

    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def kind_of(i: int, due_percent: int | None, scatter: bool) -> int:
    """0-3 finished past due, 4-6 idle past the waiting horizon, 7-9 fresh.

    With ``due_percent``, P of every 100 threads are finished (the first P of each hundred,
    or, with ``scatter``, P% picked at random), the rest fresh.
    """
    if due_percent is None:
        return i % 10
    place = random.Random(i).randrange(100) if scatter else i % 100
    return 0 if place < due_percent else 7


def seed(
    saver,
    threads: int,
    per_thread: int,
    due_percent: int | None = None,
    value_bytes: int = 0,
    scatter: bool = False,
    interleave: bool = False,
) -> dict[str, int]:
    from checkpoints.models import ChannelBlob, Checkpoint, FinishedMark, Thread
    from checkpoints.store.planning import utcnow
    from retention.models import Park

    db = saver.using
    now = utcnow()
    waiting = timedelta(minutes=10080 + 60)
    body_type, body = saver.serde.dumps_typed({"v": 4, "channel_versions": {"messages": "1"}})
    blob_type, blob = saver.serde.dumps_typed(["hello"] * 20)
    if value_bytes:
        # Hex of random bytes: below the compression threshold it is stored as it is.
        blob_type, blob = saver.serde.dumps_typed(os.urandom(value_bytes // 2).hex())
    counts = {"finished_due": 0, "idle": 0, "fresh": 0, "parked": 0}
    chunk = 2000
    for start in range(0, threads, chunk):
        ids = range(start, min(start + chunk, threads))
        kinds = {i: kind_of(i, due_percent, scatter) for i in ids}
        rows = []
        for i in ids:
            kind = kinds[i]
            # A finished thread's last write comes before its mark, or the run rule spares it.
            written = (
                now - waiting if 4 <= kind < 7 else now - timedelta(days=3) if kind < 4 else now
            )
            rows.append(Thread(thread_id=f"t{i:07d}", created_at=written, last_write_at=written))
        Thread.objects.using(db).bulk_create(rows, batch_size=chunk)
        by_name = dict(
            Thread.objects.using(db)
            .filter(thread_id__in=[r.thread_id for r in rows])
            .values_list("thread_id", "pk")
        )
        checkpoints, blobs, marks, parks = [], [], [], []
        for i in ids:
            name = f"t{i:07d}"
            pk = by_name[name]
            kind = kinds[i]
            for step in range(per_thread):
                checkpoints.append(
                    Checkpoint(
                        thread_id=pk,
                        checkpoint_id=f"{step:08d}",
                        parent_checkpoint_id=f"{step - 1:08d}" if step else None,
                        type=body_type,
                        checkpoint=body,
                        metadata={"source": "loop", "step": step},
                        source="loop",
                        step=step,
                        durability="disk",
                        created_at=now,
                    )
                )
                blobs.append(
                    ChannelBlob(
                        thread_id=pk,
                        channel="messages",
                        version=f"{step}",
                        type=blob_type,
                        blob=blob,
                    )
                )
            if kind < 4:
                counts["finished_due"] += 1
                marks.append(
                    FinishedMark(
                        thread_id=name,
                        marked_at=now - timedelta(days=2),
                        due_at=now - timedelta(days=1),
                    )
                )
                if i % 100 == 0 and due_percent is None:
                    counts["parked"] += 1
                    parks.append(
                        Park(
                            thread_id=name,
                            deadline=now + timedelta(hours=1),
                            created_at=now,
                            provider=saver.provider,
                        )
                    )
            elif kind < 7:
                counts["idle"] += 1
            else:
                counts["fresh"] += 1
        if interleave:
            # Step by step across the chunk's threads, as threads running at once write:
            # one thread's rows spread over many pages.
            order = [t * per_thread + step for step in range(per_thread) for t in range(len(ids))]
            checkpoints = [checkpoints[k] for k in order]
            blobs = [blobs[k] for k in order]
        Checkpoint.objects.using(db).bulk_create(checkpoints, batch_size=5000)
        ChannelBlob.objects.using(db).bulk_create(blobs, batch_size=5000)
        FinishedMark.objects.using(db).bulk_create(marks, batch_size=5000)
        Park.objects.bulk_create(parks)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--provider", choices=["postgres", "sqlite"], default="postgres")
    parser.add_argument("--threads", type=int, default=10000)
    parser.add_argument("--per-thread", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--due-percent", type=int, default=None, choices=range(0, 101))
    parser.add_argument("--value-bytes", type=int, default=0)
    parser.add_argument(
        "--scatter", action="store_true", help="due threads picked at random, not in runs"
    )
    parser.add_argument(
        "--interleave", action="store_true", help="rows written step by step across threads"
    )
    args = parser.parse_args()
    configure(args.provider)

    from django.conf import settings
    from django.test import override_settings

    from checkpoints.models import Checkpoint
    from checkpoints.store.registry import get_saver
    from retention.sweep import sweep_checkpoints

    saver = get_saver()
    started = time.perf_counter()
    counts = seed(
        saver,
        args.threads,
        args.per_thread,
        args.due_percent,
        args.value_bytes,
        args.scatter,
        args.interleave,
    )
    total = Checkpoint.objects.using(saver.using).count()
    print(
        f"seeded {total} checkpoints on {args.threads} threads in "
        f"{time.perf_counter() - started:.1f}s: {counts}"
    )

    overrides = dict(settings.CHECKPOINTS)
    if args.batch_size:
        overrides["SWEEP_BATCH_SIZE"] = args.batch_size
    sqlite = args.provider == "sqlite"
    if sqlite:
        before = sqlite_file(saver)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with override_settings(CHECKPOINTS=overrides):
        started = time.perf_counter()
        result = sweep_checkpoints(saver=saver, triggered_by="bench")
        took = time.perf_counter() - started
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    left = Checkpoint.objects.using(saver.using).count()
    print(
        f"sweep on {result.provider}: {took:.1f}s, deleted {result.swept_count} threads "
        f"({result.finished_swept} finished, {result.waiting_swept} waiting), "
        f"spared {len(result.spared)}, {total - left} checkpoints removed, {left} left; "
        f"{result.swept_count / took:.0f} threads/s; peak RSS {rss_before // 1024} -> "
        f"{rss_after // 1024} MB"
    )
    if sqlite:
        report_space(saver, before, result.bytes_freed)


def sqlite_file(saver) -> int:
    """The store's file and WAL in bytes, the WAL checkpointed into the file first."""
    from django.db import connections

    from checkpoints.store.sqlite.space import _file_bytes

    conn = connections[saver.using]
    with conn.cursor() as cur:
        cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        cur.fetchall()
    return _file_bytes(str(conn.settings_dict["NAME"]))


def report_space(saver, before: int, recorded: int | None) -> None:
    """How much of what the sweep freed went back to the file system."""
    import tempfile

    from django.db import connections

    after = sqlite_file(saver)
    with tempfile.TemporaryDirectory() as scratch:
        copy = os.path.join(scratch, "survivors.sqlite3")
        with connections[saver.using].cursor() as cur:
            cur.execute("VACUUM INTO %s", [copy])
            cur.execute("PRAGMA auto_vacuum")
            mode = cur.fetchone()[0]
        need = os.path.getsize(copy)
    freed = before - need  # the pages the deleted rows held (a bulk-seeded file is dense)
    returned = before - after
    mb = 1024 * 1024
    print(
        f"space (auto_vacuum={mode}): file {before / mb:.1f} MB before the sweep, "
        f"{after / mb:.1f} MB after; the survivors need {need / mb:.1f} MB (VACUUM INTO); "
        f"freed {freed / mb:.1f} MB, returned {returned / mb:.1f} MB = "
        f"{100 * returned / freed if freed else 0:.1f}% of it; the sweep recorded "
        f"bytes_freed {(recorded or 0) / mb:.1f} MB"
    )


if __name__ == "__main__":
    main()
