"""Reads of checkpoints from before LangGraph's format 4: `python -m bench.legacy [--family
postgres|sqlite|memory] [--threads N] [--rounds N]`.

A checkpoint of format v2/v3 keeps the pending sends its graph made in its PARENT's writes
(the TASKS channel); a reader moves them into the checkpoint (PostgresSaver's rule, which
our database stores follow). Each family holds the same threads twice: legacy (v3, the
sends in the parent's writes) and v4 (the sends in the checkpoint's own TASKS channel, the
form LangGraph writes today), in our store and in LangGraph's saver. Each round times, per
subject and per form, get latest (``get_tuple`` of the thread), get by id (a checkpoint in
the middle) and list (the whole thread), the subjects interleaved; the table gives the
median wall time per call and, per operation, ours beside the peer (``peer/ours``: above 1
is ours faster) and ours legacy beside ours v4 (``v4/legacy``: 1 is no cost for legacy).

Issue 56's targets: legacy get latest within 0.9x of our own v4 get latest on SQLite
(``v4/legacy`` >= 0.9), and >= 1.5x PostgresSaver's on PostgreSQL (``peer/ours`` >= 1.5).

Runs on databases and files of its own (``checkpoint_bench_legacy*``, a temp directory),
so it can run beside the other benches.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

OPS = ("latest", "by_id", "list")
FORMS = ("legacy", "v4")
TASKS = "__pregel_tasks"
STEPS = 10


def _private_places() -> None:
    """Bench databases and files no other bench run resets meanwhile."""
    from django.conf import settings

    settings.PG_DB = "checkpoint_bench_legacy"
    settings.PG_DB_LG = "checkpoint_bench_legacy_lg"
    settings.DATABASES["pg"]["NAME"] = settings.PG_DB
    settings.BENCH_DIR = tempfile.mkdtemp(prefix="checkpoints-bench-legacy-")
    settings.DATABASES["default"]["NAME"] = os.path.join(settings.BENCH_DIR, "ours.sqlite3")


def _version(n: int) -> str:
    return f"{n:032}.0"


def write_thread(saver, thread_id: str, form: str) -> list[str]:
    """``STEPS`` checkpoints of a fan-out graph: each step's task sends two Sends and writes
    a message; legacy keeps them in the parent's writes, v4 in the child's TASKS channel.
    Returns the checkpoint ids, oldest first."""
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.types import Send

    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    ids = []
    messages: list[str] = []
    previous_sends: list = []
    for step in range(STEPS):
        checkpoint = empty_checkpoint()
        checkpoint["v"] = 3 if form == "legacy" else 4
        messages = [*messages, f"message {step} " + "x" * 200]
        values = {"messages": messages, "step": step}
        versions = {"messages": _version(2 * step + 1), "step": _version(2 * step + 1)}
        if form == "v4" and previous_sends:
            values[TASKS] = previous_sends
            versions[TASKS] = _version(2 * step + 1)
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = versions
        metadata = {"source": "loop", "step": step, "parents": {}}
        config = saver.put(config, checkpoint, metadata, dict(versions))
        ids.append(config["configurable"]["checkpoint_id"])
        sends = [Send("worker", {"item": step, "part": part}) for part in range(2)]
        saver.put_writes(config, [(TASKS, sends[0]), ("messages", ["w"])], f"task-{step}", "~a")
        saver.put_writes(config, [(TASKS, sends[1])], f"task-{step}-b", "~b")
        previous_sends = sends
    return ids


def _timed(call) -> int:
    start = time.perf_counter_ns()
    call()
    return time.perf_counter_ns() - start


def _ops(saver, thread_id: str, ids: list[str]):
    root = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    middle = {"configurable": {**root["configurable"], "checkpoint_id": ids[len(ids) // 2]}}
    return {
        "latest": lambda: saver.get_tuple(root),
        "by_id": lambda: saver.get_tuple(middle),
        "list": lambda: list(saver.list(root)),
    }


def run_family(family: str, threads: int, rounds: int) -> list[str]:
    from bench.stores import build_subjects

    subjects = [s for s in build_subjects([], {family}) if s.runs_graphs]
    ours, peer = subjects[0], subjects[1]
    threads_of = {}
    for subject in (ours, peer):
        for form in FORMS:
            threads_of[(subject.label, form)] = [
                (f"{form}-{n}", write_thread(subject.saver, f"{form}-{n}", form))
                for n in range(threads)
            ]
    # The legacy read must be the migrated one wherever the saver migrates: checked once.
    legacy_id, _ = threads_of[(ours.label, "legacy")][0]
    newest = ours.saver.get_tuple({"configurable": {"thread_id": legacy_id, "checkpoint_ns": ""}})
    moved = TASKS in newest.checkpoint["channel_values"]
    spent = {(s.label, form, op): [] for s in (ours, peer) for form in FORMS for op in OPS}
    for subject in (ours, peer):  # a round uncounted: connections, caches, prepared plans
        for form in FORMS:
            for thread_id, ids in threads_of[(subject.label, form)]:
                for call in _ops(subject.saver, thread_id, ids).values():
                    call()
    for number in range(rounds):
        order = [(s, form) for s in (ours, peer) for form in FORMS]
        order = order[number % len(order) :] + order[: number % len(order)]
        for subject, form in order:
            for thread_id, ids in threads_of[(subject.label, form)]:
                for op, call in _ops(subject.saver, thread_id, ids).items():
                    spent[(subject.label, form, op)].append(_timed(call))
    median = {key: statistics.median(values) / 1000 for key, values in spent.items()}
    lines = [
        f"## {family}: {threads} threads x {STEPS} checkpoints, {rounds} rounds "
        f"(ours moves legacy sends: {moved})",
        f"{'subject':<14}{'form':<8}" + "".join(f"{op + ' us':>12}" for op in OPS),
    ]
    for subject in (ours, peer):
        for form in FORMS:
            cells = "".join(f"{median[(subject.label, form, op)]:>12.1f}" for op in OPS)
            lines.append(f"{subject.label:<14}{form:<8}{cells}")
    for form in FORMS:
        ratios = "".join(
            f"{median[(peer.label, form, op)] / median[(ours.label, form, op)]:>12.2f}"
            for op in OPS
        )
        lines.append(f"{'peer/ours':<14}{form:<8}{ratios}")
    ratios = "".join(
        f"{median[(ours.label, 'v4', op)] / median[(ours.label, 'legacy', op)]:>12.2f}"
        for op in OPS
    )
    lines.append(f"{'v4/legacy':<14}{'ours':<8}{ratios}")
    for subject in subjects:
        subject.close()
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.legacy")
    parser.add_argument(
        "--family", action="append", choices=("postgres", "sqlite", "memory"), default=None
    )
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    _private_places()
    import django

    django.setup()
    for family in args.family or ("postgres", "sqlite", "memory"):
        for line in run_family(family, args.threads, args.rounds):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
