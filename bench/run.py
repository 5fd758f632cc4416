"""Run the saver benchmark: `python -m bench.run [--quick]`.

Every subject runs the same three workloads (the trimmed chat agent; the heavy one:
documents every 8 steps, an untrimmed 200-step thread; and live: 60 untrimmed threads
written round-robin, graph turns at LangGraph's default durability) in interleaved rounds
(the order rotates each round) so drift of this machine spreads over all of them. Beside
each graph turn's wall time it counts the saver's CPU per turn (`bench.measure.SaverCpu`),
for ours, LangGraph's and `bench.floor`'s FloorSaver. The last lines are machine-readable
RESULT lines, one per subject and workload.
"""

from __future__ import annotations

import argparse
import gc
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
    # The live workload (`workload.LIVE`): `live_threads` threads each advanced `live_steps`
    # steps a round, round-robin (every put and put_writes timed); reads on a 200-step live
    # thread grown beside them; `live_turns` graph turns a round, round-robin over
    # `live_graph_threads` threads that keep their turns, at LangGraph's default durability.
    live_threads: int = 60
    live_steps: int = 3
    live_gets: int = 60
    live_lists: int = 10
    live_turns: int = 6
    live_graph_threads: int = 6


QUICK = Plan(
    2, 2, 20, 50, 12, 4, 20, 3, 200, (10, 100, 300), 20, 20, 4, 4, 200,
    live_steps=2, live_gets=20, live_lists=4, live_turns=3, live_graph_threads=3,
)  # fmt: skip
FULL = Plan(6, 3, 30, 150, 30, 6, 20, 5, 200, (10, 100, 1000), 30, 60, 10, 4, 200)
WORKLOADS = ("chat", "heavy", "live")

# (ours, theirs, {op: minimum ratio, or {workload: minimum ratio}}, bytes: True = at most
# theirs, a number = at most that share of theirs, False = reported only). A plain number
# applies to every workload that times the operation (delete_thread: chat only).
TARGETS = [
    # Issues 21 and 36: put 1.5x, reads 2x, delete_thread 1x; e2e 1.0x on chat (and live,
    # the chat-like agent), 2x on heavy.
    (
        "orm-pg",
        "lg-postgres",
        {
            "get_latest": 2.0,
            "list50": 2.0,
            "put": 1.5,
            "delete_thread": 1.0,
            "e2e": {"chat": 1.0, "heavy": 2.0, "live": 1.0},
        },
        True,
    ),
    ("orm-pg", "raw-pg", {}, False),
    ("orm-pg", "floor-pg", {}, False),
    # Issues 21 and 36: e2e 1.0x (both at synchronous=FULL), reads at least 1.0x, at most
    # 0.3x the bytes (blob sharing).
    (
        "orm-sqlite",
        "lg-sqlite",
        {"get_latest": 1.0, "get_by_id": 1.0, "list50": 1.0, "e2e": 1.0},
        0.3,
    ),
    ("orm-sqlite", "raw-sqlite", {"delete_thread": 1.0}, False),
    ("orm-sqlite", "floor-sqlite", {}, False),
    # Issues 21 and 36: e2e 1.0x, put at least 0.8x.
    ("memory", "lg-memory", {"put": 0.8, "e2e": 1.0}, False),
    ("memory", "floor-memory", {}, False),
    ("redis", "raw-redis", {}, False),
]

# Saver CPU per graph turn, ours / the peer's, at most (issue 36); the floor is printed beside.
# (family, ours, peer, floor or None, most)
CPU_TARGETS = [
    ("postgres", "orm-pg", "lg-postgres", "floor-pg", 1.0),
    ("sqlite", "orm-sqlite", "lg-sqlite", "floor-sqlite", 1.5),
    ("memory", "memory", "lg-memory", "floor-memory", 1.5),
]


def _config(thread_id: str, checkpoint_id: str | None = None) -> dict:
    conf = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def time_reads(bench, saver, label: str, deep: str, gets: int, lists: int) -> None:
    """A workload's timed reads of its deep thread: get latest, get by id, list(50)."""
    for _ in range(gets):
        bench.samples.timed(label, "get_latest", saver.get_tuple, _config(deep))
    ids = bench.deep_ids[label]
    for _ in range(gets):
        cid = bench.rng.choice(ids)
        bench.samples.timed(label, "get_by_id", saver.get_tuple, _config(deep, cid))
    for _ in range(lists):
        bench.samples.timed(label, "list50", _drain, saver, _config(deep), 50)


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
        self.freeze_gc = True

    def settle_gc(self) -> None:
        """Collect, then freeze what survives, before each subject's share of a workload.

        This process holds every subject's data (the in-memory savers' stores, the deep
        threads, twelve savers' caches): CPython's full collections scanned all of it, 90 ms
        each, and landed in whichever call happened to allocate past the threshold (a single
        one made orm-pg's delete_thread p99 52 ms and its ops/s 0.30x PostgresSaver's in one
        run). Frozen, the heap built before the share is not scanned again; what a call
        allocates is still collected, at its own cost, and charged to it. ``--gc-as-is``
        keeps CPython's default.
        """
        if self.freeze_gc:
            gc.collect()
            gc.freeze()

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
            if subject.e2e_only:
                self.graphs[subject.label] = build_graph(subject.saver)
                run_turn(self.graphs[subject.label], f"warm-e2e-{subject.label}", 0)
                continue
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

    def turn(self, subject, thread_id: str, turn: int, durability: str | None = "sync") -> None:
        """One timed graph turn, its saver CPU and process CPU counted (`measure.timed_turn`)."""
        from bench.graph import run_turn
        from bench.measure import timed_turn

        graph = self.graphs[subject.label]
        timed_turn(
            self.samples,
            subject.label,
            subject.saver,
            lambda: run_turn(graph, thread_id, turn, durability),
        )

    def round(self, number: int, subject) -> None:
        p, saver, label = self.plan, subject.saver, subject.label
        if subject.e2e_only:
            return self.e2e(number, subject)
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
        self.e2e(number, subject)

    def e2e(self, number: int, subject) -> None:
        if subject.label not in self.graphs:
            return
        for i in range(self.plan.e2e_threads):
            thread_id = f"r{number}-e2e{i}-{subject.label}"
            for turn in range(2):
                self.turn(subject, thread_id, turn)

    def run_rounds(self, log, also=()) -> None:
        """The rounds; ``also`` (the other workloads) run their shares right after each one's."""
        n = len(self.subjects)
        for number in range(self.plan.rounds):
            started = time.perf_counter()
            # Rotate and reverse the order on alternate rounds: A B C, then C B A shifted.
            order = self.subjects[number % n :] + self.subjects[: number % n]
            if number % 2:
                order = order[::-1]
            for subject in order:
                self.settle_gc()
                self._guarded(subject, log, lambda s=subject, n=number: self.round(n, s))
                for other in also:
                    self.settle_gc()
                    self._guarded(subject, log, lambda s=subject, n=number, o=other: o.round(n, s))
            took = time.perf_counter() - started
            log(f"round {number + 1}/{self.plan.rounds} done in {took:.1f}s")

    def growth(self, log) -> dict[str, dict[int, tuple[float, float]]]:
        """Put and get_tuple(latest) time as one thread per subject grows, interleaved."""
        from bench.measure import Samples, median_ms

        points = set(self.plan.growth)
        subjects = [s for s in self.subjects if not s.e2e_only]
        curve: dict[str, dict[int, tuple[float, float]]] = {s.label: {} for s in subjects}
        threads = {s.label: self._thread(s, f"grow-{s.label}") for s in subjects}
        puts: dict[str, list[int]] = {s.label: [] for s in subjects}
        local = Samples()
        self.settle_gc()
        for depth in range(1, max(points) + 1):
            for subject in subjects:
                start = time.perf_counter_ns()
                self._guarded(
                    subject,
                    log,
                    lambda s=subject: self.grow(s, threads[s.label], 1, timed=False),
                )
                puts[subject.label].append(time.perf_counter_ns() - start)
            if depth in points:
                for subject in subjects:
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
            if not subject.e2e_only:
                self.deep_ids[label] = self.grow(
                    subject,
                    self._thread(subject, f"hdeep-{label}"),
                    self.plan.heavy_steps,
                    timed=False,
                )
                self.long[label] = self._thread(subject, f"hlong-{label}")
            if subject.runs_graphs:
                graph = build_graph(subject.saver, documents=self.docs.docs)
                self.graphs[label] = graph
                run_turn(graph, f"hwarm-e2e-{label}", 0)
                self.turns[label] = 0

    def round(self, number: int, subject) -> None:
        p, saver, label = self.plan, subject.saver, subject.label
        if subject.e2e_only:
            return self.e2e(number, subject)
        per_round = math.ceil(p.heavy_steps / p.rounds)
        left = p.heavy_steps - self.long[label].step - 1
        if left > 0:
            self.grow(subject, self.long[label], min(per_round, left), timed=True)
        time_reads(self, saver, label, f"hdeep-{label}", p.heavy_gets, p.heavy_lists)
        self.e2e(number, subject)

    def e2e(self, number: int, subject) -> None:
        label = subject.label
        if label not in self.graphs:
            return
        for _ in range(self.plan.heavy_turns):
            turn = self.turns[label] = self.turns[label] + 1
            self.turn(subject, f"he2e-{label}", turn)


class LiveBench(Bench):
    """The third workload (`workload.LIVE`, issue 36): many threads live at once.

    Per subject: `live_threads` threads advanced round-robin, `live_steps` steps a round
    (each put timed, each followed by its task's three writes in one timed put_writes);
    get_tuple and list(50) on a 200-step live thread that was grown beside them (one step of
    a live thread between each of its steps, so its rows lie among theirs); and graph turns
    round-robin over `live_graph_threads` threads that keep their turns (a document every 8
    graph steps) at LangGraph's default durability ("async").

    The knobs exist for `bench.live_aspects`, which switches one aspect off at a time:
    ``order`` "round-robin" or "sequential" (each thread's steps in a row), ``writes`` (the
    put_writes after each put), ``beside`` (the deep thread grown among the live threads, or
    alone), ``durability`` of the graph turns (None: LangGraph's default).
    """

    def __init__(
        self,
        chat: Bench,
        samples,
        *,
        shape=None,
        order: str = "round-robin",
        writes: bool = True,
        beside: bool = True,
        durability: str | None = None,
        prefix: str = "l",
    ) -> None:
        from bench.workload import LIVE

        super().__init__(chat.plan, chat.subjects, chat.docs, samples, shape=shape or LIVE)
        self.failed = chat.failed  # a subject dropped by one workload is dropped by all
        self.order, self.writes_too, self.beside = order, writes, beside
        self.durability, self.prefix = durability, prefix
        self.live: dict[str, list] = {}
        self.turns: dict[str, list[int]] = {}

    def grow(self, subject, thread, steps: int, *, timed: bool) -> list[str]:
        if self.writes_too:
            return super().grow(subject, thread, steps, timed=timed)
        ids = []
        for _ in range(steps):  # puts only: no put_writes between them
            checkpoint, metadata, new_versions = thread.advance()
            args = (thread.config, checkpoint, metadata, new_versions)
            if timed:
                stored = self.samples.timed(subject.label, "put", subject.saver.put, *args)
            else:
                stored = subject.saver.put(*args)
            thread.commit(checkpoint, stored)
            ids.append(checkpoint["id"])
        return ids

    def prepare(self) -> None:
        from bench.graph import build_graph, run_turn

        p, x = self.plan, self.prefix
        for subject in self.subjects:
            label = subject.label
            if not subject.e2e_only:
                threads = [
                    self._thread(subject, f"{x}live{i}-{label}") for i in range(p.live_threads)
                ]
                deep = self._thread(subject, f"{x}deep-{label}")
                ids = []
                for step in range(p.deep):
                    ids += self.grow(subject, deep, 1, timed=False)
                    if self.beside:
                        self.grow(subject, threads[step % len(threads)], 1, timed=False)
                if not self.beside:  # the same seed steps, after the deep thread is whole
                    for step in range(p.deep):
                        self.grow(subject, threads[step % len(threads)], 1, timed=False)
                self.deep_ids[label] = ids
                self.live[label] = threads
            if subject.runs_graphs:
                from bench.workload import as_document

                documents = [as_document(d, self.shape) for d in self.docs.docs]
                graph = build_graph(subject.saver, documents=documents)
                self.graphs[label] = graph
                run_turn(graph, f"{x}warm-e2e-{label}", 0, self.durability)
                self.turns[label] = [0] * p.live_graph_threads

    def round(self, number: int, subject) -> None:
        p, saver, label = self.plan, subject.saver, subject.label
        if subject.e2e_only:
            return self.e2e(number, subject)
        threads = self.live[label]
        if self.order == "round-robin":
            for _ in range(p.live_steps):
                for thread in threads:
                    self.grow(subject, thread, 1, timed=True)
        else:
            for thread in threads:
                self.grow(subject, thread, p.live_steps, timed=True)
        time_reads(self, saver, label, f"{self.prefix}deep-{label}", p.live_gets, p.live_lists)
        self.e2e(number, subject)

    def e2e(self, number: int, subject) -> None:
        label = subject.label
        if label not in self.graphs:
            return
        turns = self.turns[label]
        for i in range(self.plan.live_turns):
            which = (number * self.plan.live_turns + i) % len(turns)
            turns[which] += 1
            thread_id = f"{self.prefix}e2e{which}-{label}"
            self.turn(subject, thread_id, turns[which], self.durability)


def _fmt(value: float, digits: int = 2) -> str:
    return (
        "-"
        if value is None or (isinstance(value, float) and math.isnan(value))
        else f"{value:.{digits}f}"
    )


def _wanted(wanted: dict, op: str, workload: str) -> float | None:
    value = wanted.get(op)
    return value.get(workload) if isinstance(value, dict) else value


def cpu_rows(workloads) -> list[tuple]:
    """Per family and workload: (family, workload, {label: (saver ms, turn ms)}, ratio, most).

    Saver ms = CPU of the calling threads in the saver's calls per graph turn; turn ms = the
    process's CPU per turn. Ratio = ours / the peer's saver CPU (below 1: ours costs less).
    """
    rows = []
    for family, ours, peer, floor, most in CPU_TARGETS:
        for name, samples in workloads:
            per = {}
            for label in (ours, peer, floor):
                turns, saver_ns, process_ns = samples.cpu.get(label, (0, 0, 0))
                if label and turns:
                    per[label] = (saver_ns / turns / 1e6, process_ns / turns / 1e6)
            if ours in per and peer in per:
                ratio = per[ours][0] / per[peer][0] if per[peer][0] else float("nan")
                rows.append((family, name, per, ratio, most, ours, peer, floor))
    return rows


def report(bench: Bench, sizes: dict, curve, notes, elapsed: float, out=print, others=()) -> None:
    from bench.measure import OPS, ops_per_second, percentile

    workloads = [("chat", bench.samples)] + [(o.shape.name, o.samples) for o in others]
    names = [name for name, _ in workloads]
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
    out("== storage (all workloads' checkpoints together) ==")
    out(f"{'subject':<12} {'checkpoints':>12} {'bytes':>14} {'bytes/ckpt':>12}")
    for subject in bench.subjects:
        if subject.e2e_only:
            continue
        total, count = sizes[subject.label]
        per = total / count if count else float("nan")
        out(f"{subject.label:<12} {count:>12} {total:>14} {_fmt(per, 0):>12}")
    out("")
    out(
        "== ratios (ours ops/s / theirs ops/s; > 1 means ours is faster), "
        + " | ".join(names)
        + " =="
    )
    labels = {s.label for s in bench.subjects}
    e2e_only = {s.label for s in bench.subjects if s.e2e_only}
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
                least = _wanted(wanted, op, name)
                if least is not None:
                    met = ratio >= least
                    cell += f" [{'MET' if met else 'MISSED'} >= {least}]"
                    verdicts.append((f"{name}: {ours} vs {theirs} {op}", ratio, f">= {least}", met))
                cells.append(f"{cell:>22}")
            if any(c.strip() != "-" for c in cells):
                out(f"  {op:<14} " + " | ".join(cells))
        if theirs in e2e_only:
            continue
        ours_b = sizes[ours][0] / max(sizes[ours][1], 1)
        theirs_b = sizes[theirs][0] / max(sizes[theirs][1], 1)
        size_ratio = ours_b / theirs_b if theirs_b else float("nan")
        out(f"  {'bytes/ckpt':<14} {_fmt(size_ratio)}x theirs")
        if bytes_target:
            most = 1.0 if bytes_target is True else float(bytes_target)
            met = ours_b <= theirs_b * most
            verdicts.append(
                (f"{ours} vs {theirs} bytes/ckpt (ours/theirs)", size_ratio, f"<= {most}", met)
            )
    out("")
    out(
        "== saver CPU per graph turn (ms of the calling threads in put/put_writes/get_tuple; "
        "turn = process CPU ms), ratio = ours / peer's saver CPU, at most =="
    )
    out(
        f"{'family':<9} {'workload':<8} {'ours':>14} {'peer':>14} {'floor':>14} "
        f"{'ours/peer':>10}  target"
    )
    for family, name, per, ratio, most, ours, peer, floor in cpu_rows(workloads):

        def cell(label, per=per):
            if label not in per:
                return f"{'-':>14}"
            saver_ms, turn_ms = per[label]
            return f"{saver_ms:.2f} / {turn_ms:.1f}".rjust(14)

        met = ratio <= most
        out(
            f"{family:<9} {name:<8} {cell(ours)} {cell(peer)} {cell(floor)} {ratio:>10.2f}  "
            f"[{'MET' if met else 'MISSED'} <= {most}]"
        )
        verdicts.append((f"{name}: {ours} vs {peer} saver CPU/turn", ratio, f"<= {most}", met))
    out("  (cells: saver CPU ms / process CPU ms per turn; labels: ours, peer, floor = ")
    out("   " + "; ".join(f"{o}, {p}, {f or '-'}" for _, o, p, f, _ in CPU_TARGETS) + ")")
    out("")
    out("== targets ==")
    for name, ratio, wanted, met in verdicts:
        out(f"{'MET   ' if met else 'MISSED'} {name}: {ratio:.2f} (target {wanted})")
    out("")
    out("== cost growth: median put ms / median get_tuple(latest) ms at thread depth ==")
    depths = bench.plan.growth
    out(f"{'subject':<12} " + " ".join(f"{'@' + str(d):>16}" for d in depths))
    for subject in bench.subjects:
        if subject.e2e_only:
            continue
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
        total, count = sizes.get(subject.label, (0, 0))

        def ops(op, label=subject.label, samples=samples):
            return _fmt(ops_per_second(samples.get(label, op)), 1)

        e2e = samples.get(subject.label, "e2e")
        e2e_s = _fmt(sum(e2e) / len(e2e) / 1e9, 4) if e2e else "-"
        turns, saver_ns, process_ns = samples.cpu.get(subject.label, (0, 0, 0))
        saver_ms = _fmt(saver_ns / turns / 1e6, 3) if turns else "-"
        turn_ms = _fmt(process_ns / turns / 1e6, 3) if turns else "-"
        # The chat lines keep their old form; the other workloads' lines say so first.
        lead = "RESULT " if name == "chat" else f"RESULT workload={name} "
        out(
            f"{lead}label={subject.label} put_ops_s={ops('put')} get_ops_s={ops('get_latest')} "
            f"list_ops_s={ops('list50')} e2e_s={e2e_s} "
            f"bytes_per_ckpt={_fmt(total / count if count else float('nan'), 0)} "
            f"put_writes_ops_s={ops('put_writes')} get_id_ops_s={ops('get_by_id')} "
            f"delete_ops_s={ops('delete_thread')} saver_cpu_ms_turn={saver_ms} "
            f"turn_cpu_ms={turn_ms}"
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
    parser.add_argument(
        "--gc-as-is",
        action="store_true",
        help="leave CPython's collector alone (default: collect and freeze before each share)",
    )
    parser.add_argument(
        "--no-floor", action="store_true", help="leave out bench.floor's FloorSaver subjects"
    )
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
    if not args.no_floor:
        from bench.floor import floor_subject

        families = {s.family for s in subjects}
        subjects += [floor_subject(f) for f in ("postgres", "sqlite", "memory") if f in families]
    log("subjects: " + ", ".join(s.label for s in subjects))
    bench = Bench(plan, subjects, DocumentPool(), Samples())
    bench.freeze_gc = not args.gc_as_is
    heavy = HeavyBench(bench, Samples())
    live = LiveBench(bench, Samples())
    bench.prepare()
    heavy.prepare()
    live.prepare()
    log("prepared deep threads")
    bench.run_rounds(log, also=(heavy, live))
    curve = {} if args.no_growth else bench.growth(log)
    sizes = {}
    for subject in subjects:
        if subject.e2e_only:
            continue
        try:
            sizes[subject.label] = (subject.stored_bytes(), subject.checkpoint_count())
        except Exception as exc:  # noqa: BLE001 - report the others' sizes regardless
            notes.append(f"{subject.label}: size not measured ({exc!r})")
            sizes[subject.label] = (0, 0)
    for label, why in bench.failed.items():
        notes.append(f"{label} FAILED during the run and its figures are partial: {why}")
    notes.append(
        "garbage collector: "
        + (
            "left as CPython has it (--gc-as-is)"
            if args.gc_as_is
            else "collected and frozen before each subject's share (Bench.settle_gc)"
        )
    )
    notes.append(
        "e2e is one 10-node graph turn; chat: durability='sync', two turns per thread; "
        "heavy: 'sync', one thread keeping every turn; live: LangGraph's default ('async'), "
        "round-robin over threads that keep their turns; raw floors run no graph"
    )
    notes.append(
        "raw floors: one statement per call carrying the checkpoint body plus the changed "
        "values; they never rebuild unchanged channels on read"
    )
    notes.append(
        "floor-pg / floor-sqlite (bench.floor.FloorSaver): one serialized INSERT committed per "
        "put and put_writes, the last checkpoint held in memory for get_tuple; floor-memory: "
        "the bytes appended to a list instead; graph turns only"
    )
    notes.append(
        "heavy: a document every 8 steps, untrimmed 400-byte messages (past 64 KB at about "
        "step 150); put/put_writes on a thread grown to 200 steps over the rounds, reads on "
        "a 200-step thread, e2e on one graph thread that keeps every turn"
    )
    notes.append(
        f"live: {plan.live_threads} threads advanced round-robin, {plan.live_steps} steps a "
        "round, untrimmed 300-byte messages, 3-4 of 8 small channels a step, a document every "
        "8 steps, three writes after each put; reads on a 200-step live thread grown among "
        "them"
    )
    report(bench, sizes, curve, notes, time.perf_counter() - started, others=(heavy, live))
    for subject in subjects:
        subject.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
