"""The saver's CPU per call: `python -m bench.per_call memory|sqlite|postgres [--rounds N]`.

Records the put, put_writes and get_tuple calls three turns of the bench graph make (on a
recording InMemorySaver), then replays them on our saver and LangGraph's, a thread each
round, the subjects interleaved, and prints the median thread CPU per call of each kind.
No graph runs in the timed loop, so what is left is the saver's own cost: its Python and
its driver's, not LangGraph's. Run it from two trees (``PYTHONPATH=<tree>``) to compare a
change with its base.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

KINDS = ("put", "put_writes", "get_tuple")


def record_calls(turns: int = 3) -> list[tuple[str, tuple]]:
    """(method, args) of each saver call ``turns`` turns of the bench graph make."""
    from langgraph.checkpoint.memory import InMemorySaver

    from bench.graph import build_graph, run_turn

    calls: list[tuple[str, tuple]] = []

    class Recording(InMemorySaver):
        def put(self, config, checkpoint, metadata, new_versions):
            calls.append(("put", copy.deepcopy((config, checkpoint, metadata, new_versions))))
            return super().put(config, checkpoint, metadata, new_versions)

        def put_writes(self, config, writes, task_id, task_path=""):
            calls.append(("put_writes", copy.deepcopy((config, writes, task_id, task_path))))
            return super().put_writes(config, writes, task_id, task_path)

        def get_tuple(self, config):
            calls.append(("get_tuple", copy.deepcopy((config,))))
            return super().get_tuple(config)

    graph = build_graph(Recording())
    for turn in range(turns):
        run_turn(graph, "recorded", turn)
    return calls


def replay(saver, calls: list[tuple[str, tuple]], thread_id: str) -> dict[str, list[int]]:
    """Make every recorded call on ``saver`` under ``thread_id``: thread CPU ns per call."""
    clock = time.thread_time_ns
    spent: dict[str, list[int]] = {kind: [] for kind in KINDS}
    for kind, args in calls:
        config = dict(args[0])
        config["configurable"] = dict(config["configurable"], thread_id=thread_id)
        method = getattr(saver, kind)
        start = clock()
        method(config, *args[1:])
        spent[kind].append(clock() - start)
    return spent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.per_call")
    parser.add_argument("family", choices=("memory", "sqlite", "postgres"))
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)
    import django

    django.setup()
    from bench.stores import build_subjects, reset_files

    calls = record_calls()
    reset_files()
    subjects = [s for s in build_subjects([], {args.family}) if s.runs_graphs]
    for warm in range(3):
        for subject in subjects:
            replay(subject.saver, calls, f"warm-{warm}")
    per_call: dict[str, dict[str, list[float]]] = {
        s.label: {kind: [] for kind in KINDS} for s in subjects
    }
    for number in range(args.rounds):
        for subject in subjects:
            for kind, ns in replay(subject.saver, calls, f"round-{number}").items():
                per_call[subject.label][kind].append(sum(ns) / len(ns) / 1000)
    print(f"{'subject':<14}" + "".join(f"{kind + ' us':>16}" for kind in KINDS))
    for label, kinds in per_call.items():
        cells = "".join(f"{statistics.median(kinds[kind]):>16.1f}" for kind in KINDS)
        print(f"{label:<14}{cells}")
    for subject in subjects:
        subject.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
