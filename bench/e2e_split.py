"""Where a graph turn's time goes: `python -m bench.e2e_split sqlite|memory|postgres [--heavy]`.

Runs 24 turns of the bench graph (`bench/graph.py`; with ``--heavy`` on one thread that
keeps every turn, with a document every 8 steps, as the heavy workload does) on our saver
and on LangGraph's, and prints per turn: wall time, this process's CPU time, the CPU
time (of the calling thread) spent in put / put_writes / get_tuple, and how many new
database connections were opened. LangGraph runs the saver calls in worker threads of a
pool it makes for every invocation, so per-thread CPU is what each call cost, whatever
the machine's load (the wall time of each call is printed too: on PostgreSQL the server's
share is not CPU of this process); turn CPU minus saver CPU is LangGraph's own share, which
bounds the e2e ratio any saver can reach: theirs_turn / (theirs_turn - theirs_saver).
``--floor`` adds `bench.floor`'s FloorSaver (one serialized INSERT committed a call; on
memory, the bytes appended to a list): the cost any saver pays, beside ours and LangGraph's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e_split")
    parser.add_argument("family", choices=("sqlite", "memory", "postgres"))
    parser.add_argument("--heavy", action="store_true")
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--floor", action="store_true", help="also run bench.floor's FloorSaver")
    args = parser.parse_args(argv)
    import django

    django.setup()
    from django.db.backends.signals import connection_created

    from bench.graph import build_graph, run_turn
    from bench.measure import SaverCpu
    from bench.stores import build_subjects, reset_files
    from bench.workload import DocumentPool

    reset_files()
    subjects = [s for s in build_subjects([], {args.family}) if s.runs_graphs]
    if args.floor:
        from types import SimpleNamespace

        from bench.floor import floor_for

        subjects.append(SimpleNamespace(label="floor", saver=floor_for(args.family)))
    docs = DocumentPool().docs if args.heavy else None
    meter = SaverCpu()
    spent = meter.spent
    opened = []
    connection_created.connect(lambda **kw: opened.append(1), weak=False)

    print(
        f"{'subject':<12} {'wall ms':>8} {'cpu ms':>8} {'saver cpu':>10} {'rest':>7} "
        f"{'put us':>7} {'writes us':>9} {'get us':>7} {'connects':>8} "
        f"{'put wall':>8} {'writes wall':>11}  (per turn; us per call)"
    )
    for subject in subjects:
        meter.wrap(subject.saver)
        graph = build_graph(subject.saver, documents=docs)
        run_turn(graph, f"warm-{subject.label}", 0)
        meter.clear()
        opened.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        for turn in range(1, args.turns + 1):
            thread = f"split-{subject.label}" if args.heavy else f"split-{subject.label}-{turn}"
            run_turn(graph, thread, turn if args.heavy else 0)
        n = args.turns
        wall, cpu = (time.perf_counter() - wall) / n * 1e3, (time.process_time() - cpu) / n * 1e3
        saver_cpu = meter.cpu_ns() / n / 1e6

        def per_call(name, wall=False):
            calls, ns, wall_ns = spent[name]
            return (wall_ns if wall else ns) / calls / 1e3 if calls else float("nan")

        print(
            f"{subject.label:<12} {wall:>8.2f} {cpu:>8.2f} {saver_cpu:>10.2f} "
            f"{cpu - saver_cpu:>7.2f} {per_call('put'):>7.0f} {per_call('put_writes'):>9.0f} "
            f"{per_call('get_tuple'):>7.0f} {len(opened) / n:>8.2f} "
            f"{per_call('put', True):>8.0f} {per_call('put_writes', True):>11.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
