"""Concurrent async graphs: `python -m bench.concurrency [--runs 32] [--rounds 3]`.

Runs bench/graph.py's ten-node graph through ``ainvoke`` (two turns per thread,
``durability="sync"``) on each subject, first one run at a time, then ``--runs`` runs at
once on one event loop, and prints graph turns per second and the ratios. Subjects:

- ``orm-pg``: our PostgreSQL saver (native async on psycopg's AsyncConnectionPool);
- ``orm-pg-thread``: the same saver with its async calls in Django's sync thread, as they
  ran before the native path (every call queues for that one thread);
- ``lg-apostgres``: LangGraph's AsyncPostgresSaver, set up as its docs recommend (an
  AsyncConnectionPool with autocommit, prepare_threshold=0, row_factory=dict_row);
- ``redis``: our Redis saver (redis.asyncio);
- ``raw-redis``: the floor, the same graph on a saver of a few lines over redis.asyncio
  (a SET and a ZADD per checkpoint, an HSET per task's writes; reads rebuild nothing);
- ``lg-memory``: LangGraph's InMemorySaver, the graph with no store at all: the ceiling.

Subjects alternate within each round and the order reverses every round, so drift of a
loaded machine spreads over all of them. It uses the databases `bench.run` uses
(`checkpoint_bench`, `checkpoint_bench_lg`, Redis db 13): do not run both at once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

# (ours, theirs, minimum ratio at one run at a time, minimum ratio at --runs at once)
TARGETS = [
    ("orm-pg", "lg-apostgres", 1.2, 1.5),
    ("redis", "raw-redis", 0.5, 0.5),
]


class RawAsyncRedisFloor:
    """The thinnest async saver a graph runs on: whole checkpoints as plain Redis keys."""

    PREFIX = "rawconc:"

    def __new__(cls, client):
        from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

        from checkpoints.store.contract import strict_serializer

        prefix = cls.PREFIX

        class Floor(BaseCheckpointSaver):
            def __init__(self) -> None:
                super().__init__(serde=strict_serializer())
                self.r = client

            def _key(self, thread_id: str, what: str) -> str:
                return f"{prefix}{{{thread_id}}}:{what}"

            async def aput(self, config, checkpoint, metadata, new_versions):
                conf = config["configurable"]
                tid, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
                type_, data = self.serde.dumps_typed((checkpoint, metadata))
                pipe = self.r.pipeline(transaction=True)
                pipe.set(self._key(tid, f"ck:{checkpoint['id']}"), type_.encode() + b"\n" + data)
                pipe.zadd(self._key(tid, "idx"), {checkpoint["id"]: 0})
                await pipe.execute()
                return {
                    "configurable": {
                        "thread_id": tid,
                        "checkpoint_ns": ns,
                        "checkpoint_id": checkpoint["id"],
                    }
                }

            async def aput_writes(self, config, writes, task_id, task_path=""):
                conf = config["configurable"]
                mapping = {}
                for i, (channel, value) in enumerate(writes):
                    type_, data = self.serde.dumps_typed(value)
                    mapping[f"{task_id}:{i}:{channel}"] = type_.encode() + b"\n" + data
                if mapping:
                    key = self._key(conf["thread_id"], f"w:{conf['checkpoint_id']}")
                    await self.r.hset(key, mapping=mapping)

            async def aget_tuple(self, config):
                conf = config["configurable"]
                tid, cid = conf["thread_id"], conf.get("checkpoint_id")
                if not cid:
                    found = await self.r.zrevrange(self._key(tid, "idx"), 0, 0)
                    if not found:
                        return None
                    cid = found[0].decode()
                value = await self.r.get(self._key(tid, f"ck:{cid}"))
                if value is None:
                    return None
                type_, data = value.split(b"\n", 1)
                checkpoint, metadata = self.serde.loads_typed((type_.decode(), data))
                stored = {"configurable": {**conf, "checkpoint_id": cid}}
                return CheckpointTuple(stored, checkpoint, metadata, None, [])

        return Floor()


async def _subjects(notes: list[str]) -> list[tuple[str, object, object]]:
    """(label, saver, async close) for every subject that can be built here."""
    import redis.asyncio
    from asgiref.sync import sync_to_async
    from django.conf import settings
    from django.core.management import call_command
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg.rows import dict_row
    from psycopg_pool import AsyncConnectionPool

    from bench.stores import pg_url, reset_pg_database
    from checkpoints.store.registry import get_saver

    def build_ours():
        reset_pg_database(settings.PG_DB)
        reset_pg_database(settings.PG_DB_LG)
        call_command("migrate", database="pg", verbosity=0)
        return get_saver("postgres", using="pg")

    async def nothing():
        return None

    ours = await sync_to_async(build_ours, thread_sensitive=True)()
    size = int(os.environ.get("CHECKPOINTS_PG_POOL_SIZE", "8"))
    pool = AsyncConnectionPool(
        pg_url(settings.PG_DB_LG),
        max_size=size,
        kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
        open=False,
    )
    await pool.open()
    theirs = AsyncPostgresSaver(pool)
    await theirs.setup()
    threaded = await sync_to_async(get_saver, thread_sensitive=True)("postgres", using="pg")
    threaded._native_async = lambda: False
    subjects = [
        ("orm-pg", ours, nothing),
        ("orm-pg-thread", threaded, nothing),
        ("lg-apostgres", theirs, pool.close),
    ]
    client = redis.asyncio.Redis.from_url(settings.REDIS_BENCH_URL)
    try:
        await client.ping()
    except redis.RedisError as exc:
        notes.append(f"redis skipped: {settings.REDIS_BENCH_URL} does not answer ({exc})")
    else:
        await client.flushdb()
        redis_saver = await sync_to_async(get_saver)("redis", conn_string=settings.REDIS_BENCH_URL)
        subjects.append(("redis", redis_saver, nothing))
        subjects.append(("raw-redis", RawAsyncRedisFloor(client), client.aclose))
    subjects.append(("lg-memory", InMemorySaver(), nothing))
    return subjects


async def _burst(graph, label: str, tag: str, runs: int, threads_per_run: int) -> tuple[int, float]:
    """``runs`` concurrent workers, each running two-turn threads; (turns, seconds)."""
    from bench.graph import arun_turn

    async def worker(w: int) -> None:
        for k in range(threads_per_run):
            thread_id = f"{tag}-{label}-w{w}-{k}"
            for turn in range(2):
                await arun_turn(graph, thread_id, turn)

    started = time.perf_counter()
    await asyncio.gather(*(worker(w) for w in range(runs)))
    return runs * threads_per_run * 2, time.perf_counter() - started


async def main_async(args) -> int:
    from bench.graph import arun_turn, build_graph

    def log(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    notes: list[str] = []
    subjects = await _subjects(notes)
    graphs = {label: build_graph(saver) for label, saver, _ in subjects}
    for label, _, _ in subjects:  # warm-up: pools opened, statements prepared
        await arun_turn(graphs[label], f"warm-{label}", 0)
        await _burst(graphs[label], label, "warm", args.runs, 1)
    levels = (1, args.runs)
    totals = {(label, c): [0, 0.0] for label, _, _ in subjects for c in levels}
    for number in range(args.rounds):
        order = subjects[number % len(subjects) :] + subjects[: number % len(subjects)]
        if number % 2:
            order = order[::-1]
        for label, _, _ in order:
            for c in levels:
                # One at a time runs as many turns as a burst, so both take similar time.
                per = args.threads * (args.runs if c == 1 else 1)
                turns, took = await _burst(graphs[label], label, f"r{number}c{c}", c, per)
                totals[(label, c)][0] += turns
                totals[(label, c)][1] += took
        log(f"round {number + 1}/{args.rounds} done")
    rate = {key: turns / took for key, (turns, took) in totals.items()}
    print("")
    print("== ainvoke graph turns per second (two-turn threads, durability='sync') ==")
    print(f"{'subject':<14} {'1 at a time':>12} {f'{args.runs} at once':>12} {'speed-up':>9}")
    for label, _, _ in subjects:
        one, many = rate[(label, 1)], rate[(label, args.runs)]
        print(f"{label:<14} {one:>12.1f} {many:>12.1f} {many / one:>8.2f}x")
    print("")
    print("== ratios (ours turns/s / theirs turns/s) ==")
    labels = {label for label, _, _ in subjects}
    for ours, theirs, want_one, want_many in TARGETS:
        if ours not in labels or theirs not in labels:
            continue
        for c, want in ((1, want_one), (args.runs, want_many)):
            ratio = rate[(ours, c)] / rate[(theirs, c)]
            verdict = "MET   " if ratio >= want else "MISSED"
            print(f"{verdict} {ours} vs {theirs} at {c} concurrent: {ratio:.2f} (target {want})")
    if "lg-memory" in labels:
        for label in sorted(labels - {"lg-memory"}):
            ceiling = rate[(label, args.runs)] / rate[("lg-memory", args.runs)]
            print(f"       {label} at {args.runs} concurrent / no store (lg-memory): {ceiling:.2f}")
    for note in notes:
        print(f"note: {note}")
    for label, _, close in subjects:
        await close()
        print(
            f"RESULT label={label} one_turns_s={rate[(label, 1)]:.1f} "
            f"concurrent_turns_s={rate[(label, args.runs)]:.1f} runs={args.runs}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__)
    parser.add_argument("--runs", type=int, default=32, help="concurrent ainvoke runs")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=2, help="two-turn threads per run")
    args = parser.parse_args(argv)
    import django

    django.setup()
    from bench.stores import reset_files

    reset_files()
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
