"""Run the saver benchmark: `python -m bench.run [--quick]`.

Every subject runs the same two workloads (the trimmed chat agent, and the heavy one:
documents every 8 steps, an untrimmed 200-step thread) in interleaved rounds (the order
rotates each round) so drift of this machine spreads over all of them; the last lines are
machine-readable RESULT lines, one per subject and workload.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import resource
import sys
import time
from dataclasses import dataclass

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"


@dataclass(frozen=True)
class Plan:
    rounds: int
    put_threads: int
    put_steps: int
    gets: int
    lists: int
    deletes: int
    delete_depth: int
    e2e_threads: int
    deep: int
    growth: tuple[int, ...]
    growth_gets: int
    # The heavy workload (`workload.HEAVY`): one 200-step thread per subject grown over the
    # rounds (its puts timed), reads on a deep heavy thread, and one graph thread whose
    # state keeps growing, `heavy_turns` turns a round.
    heavy_gets: int = 60
    heavy_lists: int = 10
    heavy_turns: int = 4
    heavy_steps: int = 200


QUICK = Plan(2, 2, 20, 50, 12, 4, 20, 3, 200, (10, 100, 300), 20, 20, 4, 4, 200)
FULL = Plan(6, 3, 30, 150, 30, 6, 20, 5, 200, (10, 100, 1000), 30, 60, 10, 4, 200)

# (ours, theirs, {op: minimum ratio}, bytes: True = at most theirs, a number = at most that
# share of theirs, False = reported only). Every target applies to both workloads.
TARGETS = [
    # Issue 21: put 1.5x, reads 2x, delete_thread 1x, e2e 1.2x (async: bench.concurrency).
    (
        "orm-pg",
        "lg-postgres",
        {"get_latest": 2.0, "list50": 2.0, "put": 1.5, "delete_thread": 1.0, "e2e": 1.2},
        True,
    ),
    ("orm-pg", "raw-pg", {}, False),
    # Issue 21: e2e 1.2x, reads at least 1.0x, at most 0.3x the bytes (blob sharing).
    (
        "orm-sqlite",
        "lg-sqlite",
        {"get_latest": 1.0, "get_by_id": 1.0, "list50": 1.0, "e2e": 1.2},
        0.3,
    ),
    ("orm-sqlite", "raw-sqlite", {"delete_thread": 1.0}, False),
    # Issue 21: e2e 1.2x, put at least 0.8x.
    ("memory", "lg-memory", {"put": 0.8, "e2e": 1.2}, False),
    ("redis", "raw-redis", {}, False),
]


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict:
    conf = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _drain(saver, config: dict, limit: int) -> int:
    return sum(1 for _ in saver.list(config, limit=limit))


class Bench:
    def __init__(self, plan: Plan, subjects, docs, samples, shape=None) -> None:
        from bench.workload import CHAT

        self.plan = plan
        self.subjects = subjects
        self.docs = docs
        self.samples = samples
        self.shape = shape or CHAT
        self.deep_ids: dict[str, list[str]] = {}
        self.graphs = {}
        self.rng = random.Random(11)
        self.failed: dict[str, str] = {}

    def _guarded(self, subject, log, call) -> None:
        """Run one subject's share; a subject that fails is dropped, the others go on."""
        if subject.label in self.failed:
            return
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - one broken store must not end the run
            self.failed[subject.label] = f"{type(exc).__name__}: {exc}"
            log(f"{subject.label} failed and is dropped from the rest of the run: {exc!r}")

    def _thread(self, subject, thread_id: str):
        from bench.workload import ChatThread

        seed = thread_id.replace(subject.label, "subject")
        return ChatThread(
            thread_id, subject.saver.get_next_version, self.docs, seed=seed, shape=self.shape
        )

    def grow(self, subject, thread, steps: int, *, timed: bool) -> list[str]:
        saver, label = subject.saver, subject.label
        ids = []
        for _ in range(steps):
            checkpoint, metadata, new_versions = thread.advance()
            if timed:
                stored = self.samples.timed(
                    label,
                    "put",
                    saver.put,
                    thread.config,
                    checkpoint,
                    metadata,
                    new_versions,
                )
            else:
                stored = saver.put(thread.config, checkpoint, metadata, new_versions)
            thread.commit(checkpoint, stored)
            writes, task_id = thread.writes()
            if timed:
                self.samples.timed(label, "put_writes", saver.put_writes, stored, writes, task_id)
            else:
                saver.put_writes(stored, writes, task_id)
            ids.append(checkpoint["id"])
        return ids

    def prepare(self) -> None:
        """Each subject's deep thread, and a warm-up of every operation (untimed)."""
        from bench.graph import build_graph, run_turn

        for subject in self.subjects:
            deep = f"deep-{subject.label}"
            self.deep_ids[subject.label] = self.grow(
                subject, self._thread(subject, deep), self.plan.deep, timed=False
            )
            warm = self._thread(subject, f"warm-{subject.label}")
            self.grow(subject, warm, 5, timed=False)
            subject.saver.get_tuple(_config(deep))
            list(subject.saver.list(_config(deep), limit=50))
            subject.saver.delete_thread(warm.thread_id)
            if subject.runs_graphs:
                self.graphs[subject.label] = build_graph(subject.saver)
                run_turn(self.graphs[subject.label], f"warm-e2e-{subject.label}", 0)

    def round(self, number: int, subject) -> None:
        p, saver, label = self.plan, subject.saver, subject.label
        for i in range(p.put_threads):
            self.grow(
                subject, self._thread(subject, f"r{number}-put{i}-{label}"), p.put_steps, timed=True
            )
        deep = f"deep-{label}"
        if saver.get_tuple(_config(deep)) is None:
            raise RuntimeError(
                f"{label}: the deep thread {deep!r} vanished; another process flushed the store"
            )
        for _ in range(p.gets):
            self.samples.timed(label, "get_latest", saver.get_tuple, _config(deep))
        ids = self.deep_ids[label]
        for _ in range(p.gets):
            cid = self.rng.choice(ids)
            self.samples.timed(label, "get_by_id", saver.get_tuple, _config(deep, cid))
        for _ in range(p.lists):
            self.samples.timed(label, "list50", _drain, saver, _config(deep), 50)
        doomed = []
        for i in range(p.deletes):
            thread = self._thread(subject, f"r{number}-del{i}-{label}")
            self.grow(subject, thread, p.delete_depth, timed=False)
            doomed.append(thread.thread_id)
        for thread_id in doomed:
            self.samples.timed(label, "delete_thread", saver.delete_thread, thread_id)
        graph = self.graphs.get(label)
        if graph is not None:
            from bench.graph import run_turn

            for i in range(p.e2e_threads):
                thread_id = f"r{number}-e2e{i}-{label}"
                for turn in range(2):
                    self.samples.timed(label, "e2e", run_turn, graph, thread_id, turn)

    def run_rounds(self, log, also=None) -> None:
        """The rounds; ``also`` (the heavy workload) runs its share right after each one's."""
        n = len(self.subjects)
        for number in range(self.plan.rounds):
            started = time.perf_counter()
            # Rotate and reverse the order on alternate rounds: A B C, then C B A shifted.
            order = self.subjects[number % n :] + self.subjects[: number % n]
            if number % 2:
                order = order[::-1]
            for subject in order:
                self._guarded(subject, log, lambda s=subject, n=number: self.round(n, s))
                if also is not None:
                    self._guarded(subject, log, lambda s=subject, n=number: also.round(n, s))
            took = time.perf_counter() - started
            log(f"round {number + 1}/{self.plan.rounds} done in {took:.1f}s")

    def growth(self, log) -> dict[str, dict[int, tuple[float, float]]]:
        """Put and get_tuple(latest) time as one thread per subject grows, interleaved."""
        from bench.measure import Samples, median_ms

        points = set(self.plan.growth)
        curve: dict[str, dict[int, tuple[float, float]]] = {s.label: {} for s in self.subjects}
        threads = {s.label: self._thread(s, f"grow-{s.label}") for s in self.subjects}
        puts: dict[str, list[int]] = {s.label: [] for s in self.subjects}
        local = Samples()
        for depth in range(1, max(points) + 1):
            for subject in self.subjects:
                start = time.perf_counter_ns()
                self._guarded(
                    subject,
                    log,
                    lambda s=subject: self.grow(s, threads[s.label], 1, timed=False),
                )
                puts[subject.label].append(time.perf_counter_ns() - start)
            if depth in points:
                for subject in self.subjects:
                    if subject.label in self.failed:
                        continue
                    tid = f"grow-{subject.label}"
                    for _ in range(self.plan.growth_gets):
                        local.timed(
                            f"{subject.label}@{depth}",
                            "get",
                            lambda s=subject, t=tid: s.saver.get_tuple(_config(t)),
                        )
                    window = puts[subject.label][-10:]
                    curve[subject.label][depth] = (
                        median_ms(window),
                        median_ms(local.get(f"{subject.label}@{depth}", "get")),
                    )
                log(f"growth: depth {depth} measured")
        return curve


class HeavyBench(Bench):
    """The second workload (`workload.HEAVY`), sharing the chat bench's subjects and failures.

    Per subject: one thread grown to `heavy_steps` over the rounds (every put and put_writes
    timed, so the puts past the compression threshold count), get_tuple and list(50) on a
    deep heavy thread, and one graph thread that keeps all its turns (`heavy_turns` a
    round), with a document set every 8 graph steps.
    """

    def __init__(self, chat: Bench, samples) -> None:
        from bench.workload import HEAVY

        super().__init__(chat.plan, chat.subjects, chat.docs, samples, shape=HEAVY)
        self.failed = chat.failed  # a subject dropped by one workload is dropped by both
        self.long: dict[str, object] = {}
        self.turns: dict[str, int] = {}

    def prepare(self) -> None:
        from bench.graph import build_graph, run_turn

        for subject in self.subjects:
            label = subject.label
            self.deep_ids[label] = self.grow(
                subject, self._thread(subject, f"hdeep-{label}"), self.plan.heavy_steps, timed=False
            )
            self.long[label] = self._thread(subject, f"hlong-{label}")
            if subject.runs_graphs:
                graph = build_graph(subject.saver, documents=self.docs.docs)
                self.graphs[label] = graph
                run_turn(graph, f"hwarm-e2e-{label}", 0)
                self.turns[label] = 0

    def round(self, number: int, subject) -> None:
        p, saver, label = self.plan, subject.saver, subject.label
        per_round = math.ceil(p.heavy_steps / p.rounds)
        left = p.heavy_steps - self.long[label].step - 1
        if left > 0:
            self.grow(subject, self.long[label], min(per_round, left), timed=True)
        deep = f"hdeep-{label}"
        for _ in range(p.heavy_gets):
            self.samples.timed(label, "get_latest", saver.get_tuple, _config(deep))
        ids = self.deep_ids[label]
        for _ in range(p.heavy_gets):
            cid = self.rng.choice(ids)
            self.samples.timed(label, "get_by_id", saver.get_tuple, _config(deep, cid))
        for _ in range(p.heavy_lists):
            self.samples.timed(label, "list50", _drain, saver, _config(deep), 50)
        graph = self.graphs.get(label)
        if graph is not None:
            from bench.graph import run_turn

            for _ in range(p.heavy_turns):
                turn = self.turns[label] = self.turns[label] + 1
                self.samples.timed(label, "e2e", run_turn, graph, f"he2e-{label}", turn)


def _fmt(value: float, digits: int = 2) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def report(bench: Bench, sizes: dict, curve, notes, elapsed: float, out=print, heavy=None) -> None:
    from bench.measure import OPS, ops_per_second, percentile

    workloads = [("chat", bench.samples)] + ([("heavy", heavy.samples)] if heavy else [])
    out("")
    out("== per operation (single caller; ops/s = calls / time spent in them) ==")
    out(
        f"{'workload':<8} {'subject':<12} {'operation':<14} {'n':>5} {'ops/s':>10} "
        f"{'p50 ms':>9} {'p99 ms':>9}"
    )
    for name, samples in workloads:
        for subject in bench.subjects:
            for op in OPS:
                values = samples.get(subject.label, op)
                if not values:
                    continue
                out(
                    f"{name:<8} {subject.label:<12} {op:<14} {len(values):>5} "
                    f"{ops_per_second(values):>10.1f} {percentile(values, 50):>9.3f} "
                    f"{percentile(values, 99):>9.3f}"
                )
    out("")
    out("== storage (both workloads' checkpoints together) ==")
    out(f"{'subject':<12} {'checkpoints':>12} {'bytes':>14} {'bytes/ckpt':>12}")
    for subject in bench.subjects:
        total, count = sizes[subject.label]
        per = total / count if count else float("nan")
        out(f"{subject.label:<12} {count:>12} {total:>14} {_fmt(per, 0):>12}")
    out("")
    out("== ratios (ours ops/s / theirs ops/s; > 1 means ours is faster), chat | heavy ==")
    labels = {s.label for s in bench.subjects}
    verdicts = []
    for ours, theirs, wanted, bytes_target in TARGETS:
        if ours not in labels or theirs not in labels:
            continue
        out(f"{ours} vs {theirs}:")
        for op in OPS:
            cells = []
            for name, samples in workloads:
                a, b = samples.get(ours, op), samples.get(theirs, op)
                if not a or not b:
                    cells.append(f"{'-':>22}")
                    continue
                ratio = ops_per_second(a) / ops_per_second(b)
                cell = f"{ratio:.2f}"
                if op in wanted:
                    met = ratio >= wanted[op]
                    cell += f" [{'MET' if met else 'MISSED'} >= {wanted[op]}]"
                    verdicts.append((f"{name}: {ours} vs {theirs} {op}", ratio, wanted[op], met))
                cells.append(f"{cell:>22}")
            if any(c.strip() != "-" for c in cells):
                out(f"  {op:<14} " + " | ".join(cells))
        ours_b = sizes[ours][0] / max(sizes[ours][1], 1)
        theirs_b = sizes[theirs][0] / max(sizes[theirs][1], 1)
        size_ratio = ours_b / theirs_b if theirs_b else float("nan")
        out(f"  {'bytes/ckpt':<14} {_fmt(size_ratio)}x theirs")
        if bytes_target:
            most = 1.0 if bytes_target is True else float(bytes_target)
            met = ours_b <= theirs_b * most
            verdicts.append(
                (f"{ours} vs {theirs} bytes/ckpt (ours/theirs, at most)", size_ratio, most, met)
            )
    out("")
    out("== targets ==")
    for name, ratio, wanted, met in verdicts:
        out(f"{'MET   ' if met else 'MISSED'} {name}: {ratio:.2f} (target {wanted})")
    out("")
    out("== cost growth: median put ms / median get_tuple(latest) ms at thread depth ==")
    depths = bench.plan.growth
    out(f"{'subject':<12} " + " ".join(f"{'@' + str(d):>16}" for d in depths))
    for subject in bench.subjects:
        row = curve.get(subject.label, {})
        out(
            f"{subject.label:<12} "
            + " ".join(
                f"{_fmt(row[d][0]) + ' / ' + _fmt(row[d][1]):>16}" if d in row else f"{'-':>16}"
                for d in depths
            )
        )
    out("")
    for note in notes:
        out(f"note: {note}")
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out(f"peak RSS of the benchmark process: {peak_mb:.0f} MB; wall time {elapsed:.0f}s")
    for (name, samples), subject in ((w, s) for w in workloads for s in bench.subjects):
        total, count = sizes[subject.label]

        def ops(op, label=subject.label, samples=samples):
            return _fmt(ops_per_second(samples.get(label, op)), 1)

        e2e = samples.get(subject.label, "e2e")
        e2e_s = _fmt(sum(e2e) / len(e2e) / 1e9, 4) if e2e else "-"
        # The chat lines keep their old form; the heavy workload's lines say so first.
        lead = "RESULT " if name == "chat" else f"RESULT workload={name} "
        out(
            f"{lead}label={subject.label} put_ops_s={ops('put')} get_ops_s={ops('get_latest')} "
            f"list_ops_s={ops('list50')} e2e_s={e2e_s} "
            f"bytes_per_ckpt={_fmt(total / count if count else float('nan'), 0)} "
            f"put_writes_ops_s={ops('put_writes')} get_id_ops_s={ops('get_by_id')} "
            f"delete_ops_s={ops('delete_thread')}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a 1-2 minute run")
    parser.add_argument(
        "--only",
        action="append",
        choices=("postgres", "sqlite", "memory", "redis"),
        help="run only these families (repeatable)",
    )
    parser.add_argument("--no-growth", action="store_true", help="skip the cost-growth curve")
    args = parser.parse_args(argv)

    import django

    django.setup()
    from bench.measure import Samples
    from bench.stores import build_subjects, reset_files
    from bench.workload import DocumentPool

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    plan = QUICK if args.quick else FULL
    notes: list[str] = []
    reset_files()
    subjects = build_subjects(notes, set(args.only) if args.only else None)
    log("subjects: " + ", ".join(s.label for s in subjects))
    bench = Bench(plan, subjects, DocumentPool(), Samples())
    heavy = HeavyBench(bench, Samples())
    bench.prepare()
    heavy.prepare()
    log("prepared deep threads")
    bench.run_rounds(log, also=heavy)
    curve = {} if args.no_growth else bench.growth(log)
    sizes = {}
    for subject in subjects:
        try:
            sizes[subject.label] = (subject.stored_bytes(), subject.checkpoint_count())
        except Exception as exc:  # noqa: BLE001 - report the others' sizes regardless
            notes.append(f"{subject.label}: size not measured ({exc!r})")
            sizes[subject.label] = (0, 0)
    for label, why in bench.failed.items():
        notes.append(f"{label} FAILED during the run and its figures are partial: {why}")
    notes.append(
        "e2e is one 10-node graph turn with durability='sync' (two turns per thread); "
        "raw floors run no graph"
    )
    notes.append(
        "raw floors: one statement per call carrying the checkpoint body plus the changed "
        "values; they never rebuild unchanged channels on read"
    )
    notes.append(
        "heavy: a document every 8 steps, untrimmed 400-byte messages (past 64 KB at about "
        "step 150); put/put_writes on a thread grown to 200 steps over the rounds, reads on "
        "a 200-step thread, e2e on one graph thread that keeps every turn"
    )
    report(bench, sizes, curve, notes, time.perf_counter() - started, heavy=heavy)
    for subject in subjects:
        subject.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
