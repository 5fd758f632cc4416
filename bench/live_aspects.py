"""Which aspect of the live workload moves ours / PostgresSaver: `python -m bench.live_aspects`.

An independent harness (issue 36) measured ours / PostgresSaver on a workload like
`bench.run`'s `live` one and found much smaller ratios than `bench.run` did. This runs the
live workload (`bench.run.LiveBench`) on orm-pg and lg-postgres once as is and once with
each aspect switched off, interleaved the same way, and prints the ratios side by side:

- `sequential`: each live thread's steps in a row instead of round-robin over 60 threads;
- `no-writes`: puts only, no put_writes after each put;
- `deep-alone`: the 200-step read thread grown on its own, not among the live threads;
- `trimmed`: the message list trimmed to 100 messages (as the chat workload does);
- `sync`: graph turns at durability="sync" instead of LangGraph's default ("async");
- `doc-str`: the document as a plain string (as chat and heavy have it, in the graph too)
  instead of live's {"text": ...}: PostgresSaver inlines str/int/float/bool channel values
  in every checkpoint row's JSONB, so a string document is rewritten, TOAST-compressed and
  read back with every checkpoint until it changes; a dict is a blob written once per
  version, as ours keeps either.

``--commit-off`` runs every variant with `synchronous_commit = off` on both savers'
databases (set per database on the bench's own databases, nothing server-wide): what the
ratios are when a commit does not wait for its WAL flush, as on a server with fast or no
fsync. ``--pg-rounds`` / ``--steps`` size it (defaults: `bench.run --quick`'s live share).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

VARIANTS = {
    "live": {},
    "sequential": {"order": "sequential"},
    "no-writes": {"writes": False},
    "deep-alone": {"beside": False},
    "trimmed": {"window": 100},
    "sync": {"durability": "sync"},
    "doc-str": {"document_as": "str"},
}


def _commit_off(subjects) -> None:
    """synchronous_commit = off for both savers: per database, then fresh connections."""
    from django.conf import settings
    from django.db import connections

    from bench.stores import admin_connection
    from checkpoints.store.postgres.pool import close_pools

    with admin_connection() as conn:
        for name in (settings.PG_DB, settings.PG_DB_LG):
            conn.execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
    close_pools()
    connections.close_all()
    for subject in subjects:
        if subject.label == "lg-postgres":
            subject.saver.conn.execute("SET synchronous_commit = off")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.live_aspects", description=__doc__)
    parser.add_argument("--variant", action="append", choices=tuple(VARIANTS))
    parser.add_argument("--commit-off", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--steps", type=int, default=2, help="live steps a round per thread")
    args = parser.parse_args(argv)
    import django

    django.setup()
    from bench.measure import Samples, ops_per_second
    from bench.run import QUICK, Bench, LiveBench
    from bench.stores import postgres_subjects, reset_files
    from bench.workload import LIVE, DocumentPool

    reset_files()
    subjects = [s for s in postgres_subjects() if s.label in ("orm-pg", "lg-postgres")]
    if args.commit_off:
        _commit_off(subjects)
    plan = dataclasses.replace(QUICK, rounds=args.rounds, live_steps=args.steps)
    parent = Bench(plan, subjects, DocumentPool(), Samples())
    ops = ("put", "put_writes", "get_latest", "list50", "e2e")
    print(
        f"ours / PostgresSaver, ops/s ratio (>1: ours faster); saver CPU ours/theirs "
        f"(synchronous_commit {'off' if args.commit_off else 'on'})"
    )
    print(f"{'variant':<12} " + " ".join(f"{op:>10}" for op in ops) + f" {'cpu/turn':>9}")
    for name in args.variant or VARIANTS:
        options = dict(VARIANTS[name])
        shape = LIVE
        for field in ("window", "document_as"):
            if field in options:
                shape = dataclasses.replace(shape, **{field: options.pop(field)})
        started = time.perf_counter()
        bench = LiveBench(parent, Samples(), shape=shape, prefix=f"{name}-", **options)
        bench.prepare()
        for number in range(plan.rounds):
            order = subjects if number % 2 == 0 else subjects[::-1]
            for subject in order:
                bench.round(number, subject)
        cells = []
        for op in ops:
            a, b = bench.samples.get("orm-pg", op), bench.samples.get("lg-postgres", op)
            cells.append(f"{ops_per_second(a) / ops_per_second(b):>10.2f}" if a and b else "-")
        ours, theirs = bench.samples.cpu["orm-pg"], bench.samples.cpu["lg-postgres"]
        cpu = (ours[1] / ours[0]) / (theirs[1] / theirs[0]) if ours[0] and theirs[0] else 0
        took = time.perf_counter() - started
        print(f"{name:<12} " + " ".join(cells) + f" {cpu:>9.2f}   ({took:.0f}s)", flush=True)
    for subject in subjects:
        subject.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
