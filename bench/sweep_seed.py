"""Seed an ORM checkpoint store with many checkpoints, then time one sweep over it.

    .venv/bin/python bench/sweep_seed.py --provider postgres --threads 10000 --per-thread 10

PostgreSQL uses its own database (``checkpoint_sweep_bench``, recreated each run); SQLite a
file under ``var/bench``. Rows go in through the models' bulk_create, bypassing the saver,
so seeding takes seconds; the sweep then runs through the real saver and filters.
Of the threads: 40% are finished past due, 30% idle past the waiting horizon, 30% fresh;
1% of the due ones hold an unexpired park, so the sweep spares them.
"""

from __future__ import annotations

import argparse
import os
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


def seed(saver, threads: int, per_thread: int) -> dict[str, int]:
    from checkpoints.models import ChannelBlob, Checkpoint, FinishedMark, Thread
    from checkpoints.store.planning import utcnow
    from retention.models import Park

    db = saver.using
    now = utcnow()
    waiting = timedelta(minutes=10080 + 60)
    body_type, body = saver.serde.dumps_typed({"v": 4, "channel_versions": {"messages": "1"}})
    blob_type, blob = saver.serde.dumps_typed(["hello"] * 20)
    counts = {"finished_due": 0, "idle": 0, "fresh": 0, "parked": 0}
    chunk = 2000
    for start in range(0, threads, chunk):
        ids = range(start, min(start + chunk, threads))
        rows = []
        for i in ids:
            kind = i % 10
            idle = 4 <= kind < 7
            written = now - waiting if idle else now
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
            kind = i % 10
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
                if i % 100 == 0:
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
    args = parser.parse_args()
    configure(args.provider)

    from django.conf import settings
    from django.test import override_settings

    from checkpoints.models import Checkpoint
    from checkpoints.store.registry import get_saver
    from retention.sweep import sweep_checkpoints

    saver = get_saver()
    started = time.perf_counter()
    counts = seed(saver, args.threads, args.per_thread)
    total = Checkpoint.objects.using(saver.using).count()
    print(
        f"seeded {total} checkpoints on {args.threads} threads in "
        f"{time.perf_counter() - started:.1f}s: {counts}"
    )

    overrides = dict(settings.CHECKPOINTS)
    if args.batch_size:
        overrides["SWEEP_BATCH_SIZE"] = args.batch_size
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


if __name__ == "__main__":
    main()
