"""The most any saver can gain end to end: `python -m bench.floor postgres|sqlite|memory`.

A graph turn's time is LangGraph's own work plus its saver's. `FloorSaver` does only what
every durable saver must do for each call LangGraph makes: serialize what it is given with
LangGraph's serializer (a put: the checkpoint's body and the values of the channels it
changed, `new_versions`), send one INSERT and commit it (PostgreSQL: autocommit, so one WAL
flush a call, as with `synchronous_commit = on`; SQLite: WAL with `synchronous=FULL`, as
the project's default and the benchmark configure; memory: the bytes appended to a list in
the process, under a lock, as an in-process store must hold them). It reads nothing back:
`get_tuple` hands back the last checkpoint put on the thread as it was given, held in
memory (a turn on a new thread gets None), so a thread that keeps its turns grows as it
would on a real saver while reading costs the floor nothing. It keeps no index but the
primary key and no bookkeeping. `bench.run` runs it as the `floor-pg` / `floor-sqlite` /
`floor-memory` subject (e2e only). Its turn time over LangGraph's own saver's is the
ceiling of the e2e ratio on this machine: no saver that keeps each call (durably, on the
databases) can reach a higher one.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench.settings")

from langgraph.checkpoint.base import (  # noqa: E402
    BaseCheckpointSaver,
    CheckpointTuple,
    copy_checkpoint,
)


class FloorSaver(BaseCheckpointSaver):
    """One serialized INSERT, committed, per put and put_writes; nothing else."""

    def __init__(self, execute) -> None:
        super().__init__()
        self._execute = execute
        # thread id -> (config, checkpoint, metadata) of its last put: what get_tuple answers.
        self._latest: dict[str, tuple[dict, Any, Any]] = {}

    def put(self, config, checkpoint, metadata, new_versions):
        # The body and the values of the channels this put changed: what a saver that keeps
        # each channel's value once per version (all of LangGraph's) must serialize.
        values = checkpoint.get("channel_values") or {}
        body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        body["channel_values"] = {ch: values[ch] for ch in new_versions if ch in values}
        _, data = self.serde.dumps_typed(body)
        thread_id = config["configurable"]["thread_id"]
        self._execute(thread_id, data)
        stored = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": config["configurable"].get("checkpoint_ns", ""),
                "checkpoint_id": checkpoint["id"],
            }
        }
        self._latest[thread_id] = (stored, checkpoint, metadata)
        return stored

    def put_writes(self, config, writes, task_id, task_path=""):
        _, data = self.serde.dumps_typed([(channel, value) for channel, value in writes])
        self._execute(config["configurable"]["thread_id"], data)

    def get_tuple(self, config) -> CheckpointTuple | None:
        latest = self._latest.get(config["configurable"]["thread_id"])
        if latest is None or config["configurable"].get("checkpoint_id") not in (
            None,
            latest[0]["configurable"]["checkpoint_id"],
        ):
            return None
        stored, checkpoint, metadata = latest
        return CheckpointTuple(stored, copy_checkpoint(checkpoint), metadata, None, [])

    def list(self, config, *, filter=None, before=None, limit=None) -> Iterator[CheckpointTuple]:
        return iter(())


def _floor(conn, create: str, insert: str) -> FloorSaver:
    conn.execute(create)
    lock = threading.Lock()  # LangGraph calls from several threads; one connection

    def execute(key: str, data: bytes) -> None:
        with lock:
            conn.execute(insert, (key, data))

    return FloorSaver(execute)


def sqlite_floor(path: str) -> FloorSaver:
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return _floor(
        conn,
        "CREATE TABLE IF NOT EXISTS floor (id INTEGER PRIMARY KEY, k TEXT, v BLOB)",
        "INSERT INTO floor (k, v) VALUES (?, ?)",
    )


def postgres_floor(url: str) -> FloorSaver:
    import psycopg

    return _floor(
        psycopg.connect(url, autocommit=True),
        "CREATE TABLE IF NOT EXISTS floor (id BIGSERIAL PRIMARY KEY, k TEXT, v BYTEA)",
        "INSERT INTO floor (k, v) VALUES (%s, %s)",
    )


def memory_floor() -> FloorSaver:
    """The floor of an in-process store: each call's bytes appended to a list (kept, never
    read back), which is all InMemorySaver must do beyond serializing."""
    kept: list[tuple[str, bytes]] = []
    lock = threading.Lock()

    def execute(key: str, data: bytes) -> None:
        with lock:
            kept.append((key, data))

    saver = FloorSaver(execute)
    saver.kept = kept
    return saver


def floor_for(family: str) -> FloorSaver:
    """The floor saver on the benchmark's own SQLite folder or LangGraph's bench database,
    or in this process's memory."""
    from django.conf import settings

    from bench.stores import pg_url, sqlite_path

    if family == "memory":
        return memory_floor()
    if family == "sqlite":
        return sqlite_floor(sqlite_path("floor.sqlite3"))
    return postgres_floor(pg_url(settings.PG_DB_LG))


def floor_subject(family: str):
    """`FloorSaver` as a `bench.run` subject (`floor-pg`, `floor-sqlite`, `floor-memory`):
    graph turns only."""
    from bench.subjects import Subject

    saver = floor_for(family)
    label = {"postgres": "floor-pg", "sqlite": "floor-sqlite", "memory": "floor-memory"}[family]
    return Subject(label, family, saver, lambda: 0, lambda: 0, e2e_only=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor")
    parser.add_argument("family", choices=("sqlite", "postgres", "memory"))
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    import django

    django.setup()

    from bench.graph import build_graph, run_turn
    from bench.stores import build_subjects, reset_files

    reset_files()
    subjects = [s for s in build_subjects([], {args.family}) if s.runs_graphs]
    floor = floor_for(args.family)
    savers: dict[str, Any] = {s.label: s.saver for s in subjects}
    savers["floor"] = floor
    graphs = {label: build_graph(saver) for label, saver in savers.items()}
    for label, graph in graphs.items():
        run_turn(graph, f"floor-warm-{label}", 0)
    per_turn: dict[str, list[float]] = {label: [] for label in graphs}
    for round_no in range(args.rounds):
        order = list(graphs) if round_no % 2 == 0 else list(graphs)[::-1]
        for label in order:
            started = time.perf_counter()
            for turn in range(args.turns):
                run_turn(graphs[label], f"floor-{label}-{round_no}-{turn}", 0)
            per_turn[label].append((time.perf_counter() - started) / args.turns * 1e3)
    theirs = next(label for label in graphs if label.startswith("lg-"))
    ours = next(label for label in graphs if label != "floor" and not label.startswith("lg-"))
    medians = {label: statistics.median(times) for label, times in per_turn.items()}
    print(f"{'saver':<12} {'turn ms (median of rounds)':>27}  {'rounds':>30}")
    for label, times in per_turn.items():
        shown = " ".join(f"{t:.2f}" for t in times)
        print(f"{label:<12} {medians[label]:>27.2f}  {shown:>30}")
    print(
        f"ceiling (floor vs {theirs}): {medians[theirs] / medians['floor']:.2f}x; "
        f"{ours} vs {theirs}: {medians[theirs] / medians[ours]:.2f}x"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
