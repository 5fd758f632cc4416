"""Choose the compression threshold and level by measurement: `python -m bench.compression`.

For each (INLINE_COMPRESS_BYTES, zstd level) the SQLite saver grows the heavy workload's
200-step thread (a 64-256 KB document every 8 steps, messages past 64 KB from about step
150) beside LangGraph's SqliteSaver, and reports CPU time (this thread's, so other
processes on a loaded machine do not count) of the last 50 puts, of get_tuple(latest) and
of list(limit=50), and the bytes of values stored per checkpoint. Ratios are ours / SqliteSaver's
time: below 1 means ours is faster.
"""

from __future__ import annotations

import os
import statistics
import sys
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

CHOICES = [(16384, 3), (65536, 1), (65536, 3), (262144, 3), (None, 3)]


def _cpu(call) -> int:
    start = time.thread_time_ns()
    call()
    return time.thread_time_ns() - start


def _payload_bytes(subject, thread_id: str) -> int:
    """Bytes of the thread's stored values (bodies, blobs, writes, metadata), no pages."""
    if subject.label == "lg-sqlite":
        conn = subject.saver.conn
        sums = [
            "SELECT SUM(LENGTH(checkpoint) + LENGTH(metadata)) FROM checkpoints "
            "WHERE thread_id = ?",
            "SELECT SUM(LENGTH(value)) FROM writes WHERE thread_id = ?",
        ]
        return sum(conn.execute(sql, (thread_id,)).fetchone()[0] or 0 for sql in sums)
    from django.db import connection

    pk = "(SELECT id FROM checkpoints_thread WHERE thread_id = %s)"
    sums = [
        "SELECT SUM(LENGTH(checkpoint) + LENGTH(metadata) + LENGTH(channel_versions)) "
        f"FROM checkpoints_checkpoint WHERE thread_id = {pk}",
        f"SELECT SUM(LENGTH(blob)) FROM checkpoints_channelblob WHERE thread_id = {pk}",
        f"SELECT SUM(LENGTH(blob)) FROM checkpoints_pendingwrite WHERE thread_id = {pk}",
    ]
    with connection.cursor() as cur:
        total = 0
        for sql in sums:
            cur.execute(sql, [thread_id])
            total += cur.fetchone()[0] or 0
    return total


def main(argv: list[str] | None = None) -> int:
    import django

    django.setup()
    from bench.run import Bench, Plan, _config, _drain
    from bench.stores import build_subjects, reset_files
    from bench.workload import HEAVY, DocumentPool
    from checkpoints.codec import compression

    reset_files()
    subjects = [s for s in build_subjects([], {"sqlite"}) if s.label in ("orm-sqlite", "lg-sqlite")]
    ours, theirs = subjects
    plan = Plan(1, 1, 1, 1, 1, 1, 1, 1, 200, (10,), 1)
    bench = Bench(plan, subjects, DocumentPool(), None, shape=HEAVY)

    rows = []
    theirs_row = None
    for threshold, level in [*CHOICES, ("lg", None)]:
        subject = theirs if threshold == "lg" else ours
        if subject is ours:
            ours.saver.compress_bytes = threshold
            compression.LEVEL = level
            compression._local.__dict__.clear()
            compression.FRAMES.clear()
        tag = f"{threshold}-{level}"
        thread = bench._thread(subject, f"choice-{tag}")
        bench.grow(subject, thread, 150, timed=False)
        puts = []
        for _ in range(50):
            checkpoint, metadata, versions = thread.advance()
            start = time.thread_time_ns()
            stored = subject.saver.put(thread.config, checkpoint, metadata, versions)
            puts.append(time.thread_time_ns() - start)
            thread.commit(checkpoint, stored)
        config = _config(thread.thread_id)
        # A new process reads without the frame cache: the first read is timed apart.
        compression.FRAMES.clear()
        saver = subject.saver
        cold = _cpu(lambda c=config, s=saver: s.get_tuple(c))
        gets = [_cpu(lambda c=config, s=saver: s.get_tuple(c)) for _ in range(60)]
        lists = [_cpu(lambda c=config, s=saver: _drain(s, c, 50)) for _ in range(6)]
        row = {
            "choice": "SqliteSaver" if threshold == "lg" else f"{threshold or 'never'} / {level}",
            "bytes": _payload_bytes(subject, thread.thread_id) / 200,
            "put": statistics.median(puts) / 1e3,
            "get_cold": cold / 1e3,
            "get": statistics.median(gets) / 1e3,
            "list50": statistics.median(lists) / 1e6,
        }
        if threshold == "lg":
            theirs_row = row
        rows.append(row)
    sizes = {row["choice"]: row["bytes"] for row in rows}
    lg_bytes = theirs_row["bytes"]
    print("CPU microseconds (median; list in ms), heavy 200-step thread, puts 150-200:")
    print(
        f"{'threshold / level':<18} {'put':>8} {'x lg':>6} {'get':>8} {'x lg':>6} "
        f"{'1st get':>8} {'list50':>8} {'x lg':>6} {'bytes/ckpt':>11} {'x lg':>6}"
    )
    for row in rows:
        b = sizes.get(row["choice"])
        print(
            f"{row['choice']:<18} {row['put']:>8.0f} {row['put'] / theirs_row['put']:>6.2f} "
            f"{row['get']:>8.0f} {row['get'] / theirs_row['get']:>6.2f} {row['get_cold']:>8.0f} "
            f"{row['list50']:>8.1f} {row['list50'] / theirs_row['list50']:>6.2f} "
            f"{b:>11.0f} {b / lg_bytes:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
