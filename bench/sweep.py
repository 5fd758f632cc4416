"""Benchmark the retention sweep on a large PostgreSQL store: `python -m bench.sweep`.

Seeds threads and checkpoints with set-based SQL (generate_series), then times: a sweep
with nothing due, a bare set-based DELETE of the due threads (the floor), and the real
sweep deleting the same threads after they are seeded again. Peak RSS is printed around
the sweep; run two sizes (--threads) to see whether it follows the store's size.

``--lists`` then times the admin and API lists on the full store (see `bench.lists`), and
``--fan-out N`` sweeps N idle threads twice on the same seed: in this process, then as one
fanned-out run on two real Celery workers (see `bench.sweep_fanout`).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from datetime import timedelta
from pathlib import Path

from bench.seeding import tables

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
# Its own SQLite directory, so it can run while `bench.run` holds var/bench.
os.environ.setdefault("CHECKPOINTS_BENCH_DIR", os.path.join("var", "bench-sweep"))

ALIAS = "pgsweep"
# The history the console pages read: one thread this deep (``--lists``).
LONG_THREAD = 2_000


def bare_delete(cur, cutoff) -> int:
    """The floor: one set-based DELETE per table for every thread idle before ``cutoff``."""
    t = tables()
    doomed = f'SELECT id FROM "{t["Thread"]}" WHERE last_write_at < %s'
    for table in ("PendingWrite", "Checkpoint", "ChannelBlob"):
        cur.execute(f'DELETE FROM "{t[table]}" WHERE thread_id IN ({doomed})', [cutoff])
    cur.execute(f'DELETE FROM "{t["Thread"]}" WHERE last_write_at < %s', [cutoff])
    return cur.rowcount


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sweep", description=__doc__)
    parser.add_argument("--threads", type=int, default=100_000, help="threads in the store")
    parser.add_argument("--per-thread", type=int, default=10, help="checkpoints per thread")
    parser.add_argument(
        "--due", type=int, default=None, help="threads past the waiting horizon (default: half)"
    )
    parser.add_argument(
        "--lists", action="store_true", help="time the admin and API lists on the full store"
    )
    parser.add_argument(
        "--fan-out", type=int, default=0, help="threads for the fan-out comparison (0: skip)"
    )
    parser.add_argument("--fan-out-per-thread", type=int, default=2)
    parser.add_argument(
        "--skip-base", action="store_true", help="seed, but skip the base sweep timings"
    )
    args = parser.parse_args(argv)
    due = args.threads // 2 if args.due is None else min(args.due, args.threads)

    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections, transaction

    from bench.seeding import checkpoint_body, seed
    from bench.stores import reset_files, reset_pg_database
    from checkpoints.store.planning import utcnow
    from checkpoints.store.registry import get_saver
    from retention.sweep import sweep_checkpoints

    reset_files()
    reset_pg_database(settings.PG_DB_SWEEP)
    call_command("migrate", database="default", verbosity=0)
    call_command("migrate", database=ALIAS, verbosity=0)
    saver = get_saver("postgres", using=ALIAS)
    waiting = settings.CHECKPOINTS["RETENTION_WAITING_MINUTES"]
    with connections[ALIAS].cursor() as cur:
        body = checkpoint_body(cur)
    now = utcnow()
    old, fresh = timedelta(minutes=waiting + 1440), timedelta(hours=1)
    cutoff = now - timedelta(minutes=waiting)

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    with connections[ALIAS].cursor() as cur:
        seed(cur, first=1, last=due, age=old, per_thread=args.per_thread, body=body, now=now,
                 unique_ids=True)  # fmt: skip
        seed(
            cur,
            first=due + 1,
            last=args.threads,
            age=fresh,
            per_thread=args.per_thread,
            body=body,
            now=now,
            unique_ids=True,
        )
        cur.execute("ANALYZE")
    seeded = time.perf_counter() - started
    log(f"seeded {args.threads} threads x {args.per_thread} checkpoints in {seeded:.1f}s")

    if args.skip_base:
        extras(args, saver, body, now, old, fresh, log)
        return 0

    # Nothing is due a day before the old threads' last write.
    quiet_now = now - old - timedelta(days=1) + timedelta(minutes=waiting)
    timings = []
    for _ in range(5):
        start = time.perf_counter()
        result = sweep_checkpoints(now=quiet_now, saver=saver)
        timings.append(time.perf_counter() - start)
        assert result.swept_count == 0, result
    nothing_due_ms = sorted(timings)[len(timings) // 2] * 1000
    log(f"sweep with nothing due: {nothing_due_ms:.1f} ms (median of 5)")

    with transaction.atomic(using=ALIAS), connections[ALIAS].cursor() as cur:
        start = time.perf_counter()
        deleted = bare_delete(cur, cutoff)
    bare_s = time.perf_counter() - start
    log(f"bare set-based DELETE of {deleted} threads: {bare_s:.2f}s")
    with connections[ALIAS].cursor() as cur:
        seed(cur, first=1, last=due, age=old, per_thread=args.per_thread, body=body, now=now,
                 unique_ids=True)  # fmt: skip
        cur.execute("ANALYZE")

    rss_before = rss_mb()
    start = time.perf_counter()
    result = sweep_checkpoints(now=now, saver=saver)
    sweep_s = time.perf_counter() - start
    rss_after = rss_mb()
    log(f"sweep deleted {result.swept_count} threads in {sweep_s:.2f}s")

    print(f"store: {args.threads} threads x {args.per_thread} checkpoints; {due} past the horizon")
    print(f"sweep with nothing due: {nothing_due_ms:.1f} ms (target < 100 ms)")
    print(f"bare set-based DELETE of {deleted} threads: {bare_s:.2f} s")
    print(
        f"sweep deleting {result.swept_count} threads: {sweep_s:.2f} s = "
        f"{sweep_s / bare_s:.1f}x the bare DELETE (target <= 2x); "
        f"{result.swept_count / sweep_s:.0f} threads/s"
    )
    print(f"peak RSS: {rss_before:.0f} MB before the sweep, {rss_after:.0f} MB after")
    print(
        f"RESULT label=sweep threads={args.threads} checkpoints={args.threads * args.per_thread} "
        f"nothing_due_ms={nothing_due_ms:.1f} bare_delete_s={bare_s:.3f} sweep_s={sweep_s:.3f} "
        f"ratio={sweep_s / bare_s:.2f} deleted={result.swept_count} peak_rss_mb={rss_after:.0f}"
    )
    if args.lists:
        with connections[ALIAS].cursor() as cur:
            seed(cur, first=1, last=due, age=old, per_thread=args.per_thread, body=body, now=now,
                 unique_ids=True)  # fmt: skip
            cur.execute("ANALYZE")
    extras(args, saver, body, now, old, fresh, log)
    return 0


def seed_for_lists(args, saver, body: bytes, now, fresh) -> str:
    """What the lists' filters and the console pages need rows for, on the full store: the
    long thread (its id is returned), interrupts and errors at heads, finished marks,
    recent writes, parks, holds, sweep runs and audit events."""
    from django.db import connections

    from bench.seeding import (
        make_recent,
        mark_finished,
        mark_some_finished,
        seed,
        seed_side_tables,
        seed_status_writes,
    )

    number = args.threads + 1
    long_thread = f"sweep-{number}"
    with connections[ALIAS].cursor() as cur:
        seed(cur, first=number, last=number, age=timedelta(0), per_thread=LONG_THREAD, body=body,
             now=now, unique_ids=True)  # fmt: skip
        seed_status_writes(
            cur, saver=saver, per_thread=args.per_thread, unique_ids=True, skip=(long_thread,)
        )
        # The oldest threads (idle past the horizon, so "due") and one in ten of all.
        mark_some_finished(cur, 1000, now)
        mark_finished(cur, now=now)
        make_recent(cur, now=now, written_after=now - fresh - timedelta(minutes=1))
    seed_side_tables(ALIAS, now)
    with connections[ALIAS].cursor() as cur:
        # What autovacuum does to a settled table (PostgreSQL 13+ vacuums after inserts
        # too): without it every index-only walk of a deep page fetched each skipped row
        # from the heap, a state a production table leaves within minutes.
        cur.execute("VACUUM (ANALYZE) checkpoints_thread")
        cur.execute("VACUUM (ANALYZE) checkpoints_pendingwrite")
        cur.execute("ANALYZE")
    return long_thread


def extras(args, saver, body: bytes, now, old, fresh, log) -> None:
    """The list timings and the fan-out comparison, each when asked for."""
    from django.conf import settings
    from django.db import connections

    from bench.seeding import seed
    from bench.sweep_fanout import fan_out_on_two_workers, time_lists
    from checkpoints.models import FinishedMark
    from retention.sweep import sweep_checkpoints

    database = settings.DATABASES[ALIAS]
    if args.lists:
        long_thread = seed_for_lists(args, saver, body, now, fresh)
        connections.close_all()
        log("timing the admin and API lists")
        summary = time_lists(database, long_thread)
        print(
            f"lists at {summary['threads']} threads / {summary['checkpoints']} checkpoints "
            "(server time, median of 5):"
        )
        print("| list | query | ms | status | runs |\n|---|---|---|---|---|")
        for what, query, ms, status, runs in summary["rows"]:
            print(f"| {what} | `{query}` | {ms:.1f} | {status} | {runs} |")
        print(f"over 100 ms: {len(summary['over'])} of {len(summary['rows'])}")
    if args.fan_out:
        t = tables()

        def seed_idle(cur) -> None:
            seed(cur, first=1, last=args.fan_out, age=old, per_thread=args.fan_out_per_thread,
                 body=body, now=now, unique_ids=True)  # fmt: skip

        with connections[ALIAS].cursor() as cur:
            names = [*t.values(), FinishedMark._meta.db_table]
            cur.execute("TRUNCATE " + ", ".join(f'"{name}"' for name in names) + " CASCADE")
            seed_idle(cur)
            cur.execute("ANALYZE")
        start = time.perf_counter()
        single = sweep_checkpoints(now=now, saver=saver)
        single_s = time.perf_counter() - start
        log(f"single-process sweep: {single.swept_count} threads in {single_s:.2f}s")
        with connections[ALIAS].cursor() as cur:
            seed_idle(cur)
            cur.execute("ANALYZE")
        connections.close_all()
        fan_s, run = fan_out_on_two_workers(
            database, ALIAS, now, Path(settings.BENCH_DIR) / "fanout-logs"
        )
        log(f"fan-out on two workers: {run} in {fan_s:.2f}s")
        print(
            f"sweep of {args.fan_out} idle threads x {args.fan_out_per_thread} checkpoints: "
            f"single process {single.swept_count} in {single_s:.2f} s = "
            f"{single.swept_count / single_s:.0f} threads/s; fanned out on two Celery workers "
            f"({run['batches']} batches, workers {run['workers']}, {run['status']}) "
            f"{run['swept_count']} in {fan_s:.2f} s = {run['swept_count'] / fan_s:.0f} threads/s"
        )


if __name__ == "__main__":
    sys.exit(main())
