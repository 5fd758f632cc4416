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

Load mode (issue 36): ``--pool N`` caps every PostgreSQL pool at N connections (ours
through ``CHECKPOINTS_PG_POOL_SIZE``, which `checkpoints.store.postgres.pool` reads when it
builds its sync and async pools; LangGraph's through ``max_size``). ``--sync-threads N``
adds a part where N Python threads each run sync ``invoke`` on their own thread ids, on
``orm-pg``, ``lg-postgres`` (PostgresSaver on a psycopg_pool ConnectionPool, autocommit,
prepare_threshold=0, dict_row, max_size from ``--pool``), ``redis``, ``raw-redis`` and
``lg-memory``. Every burst reports turns/s, p50/p99 per-turn latency, the most server
connections of the subject seen at once (pg_stat_activity per database, CLIENT LIST per
client name, sampled every 50 ms by a thread) and the share of pool checkouts that waited.
``--no-single`` skips the one-at-a-time level, ``--no-async`` the async part, ``--only``
picks subjects. E.g. ``--runs 128 --pool 20 --sync-threads 32 --no-single``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"

# (ours, theirs, minimum ratio at one run at a time, minimum ratio at --runs at once)
TARGETS = [
    ("orm-pg", "lg-apostgres", 1.2, 1.5),
    ("redis", "raw-redis", 0.5, 0.5),
]
# (ours, theirs, minimum ratio at --sync-threads threads each running sync invoke)
SYNC_TARGETS = [
    ("orm-pg", "lg-postgres", 1.2),
    ("redis", "raw-redis", 0.5),
]
POOL_COUNTERS = (
    "requests_num",
    "requests_queued",
    "requests_wait_ms",
    "usage_ms",
    "connections_num",
)
# redis-py's client_name for each Redis subject's connections (CLIENT LIST tells them apart).
# The sync part's clients get names of their own: the async part's may still be open.
OURS_REDIS_NAME, RAW_REDIS_NAME, SAMPLER_NAME = "bench-ours", "bench-raw", "bench-sampler"
REDIS_NAMES = (OURS_REDIS_NAME, RAW_REDIS_NAME, f"{OURS_REDIS_NAME}-sync", f"{RAW_REDIS_NAME}-sync")


class RawAsyncRedisFloor:
    """The thinnest async saver a graph runs on: whole checkpoints as plain Redis keys."""

    PREFIX = "rawconc:"

    def __new__(cls, client, sync_client=None):
        from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

        from checkpoints.store.contract import strict_serializer

        prefix = cls.PREFIX

        class Floor(BaseCheckpointSaver):
            def __init__(self) -> None:
                super().__init__(serde=strict_serializer())
                self.r = client
                self.s = sync_client  # the same commands for sync ``invoke`` (--sync-threads)

            def _checkpoint_value(self, checkpoint, metadata) -> bytes:
                type_, data = self.serde.dumps_typed((checkpoint, metadata))
                return type_.encode() + b"\n" + data

            def _writes_mapping(self, writes, task_id) -> dict:
                mapping = {}
                for i, (channel, value) in enumerate(writes):
                    type_, data = self.serde.dumps_typed(value)
                    mapping[f"{task_id}:{i}:{channel}"] = type_.encode() + b"\n" + data
                return mapping

            def _tuple(self, conf, cid, value):
                if value is None:
                    return None
                type_, data = value.split(b"\n", 1)
                checkpoint, metadata = self.serde.loads_typed((type_.decode(), data))
                stored = {"configurable": {**conf, "checkpoint_id": cid}}
                return CheckpointTuple(stored, checkpoint, metadata, None, [])

            def put(self, config, checkpoint, metadata, new_versions):
                conf = config["configurable"]
                tid, ns = conf["thread_id"], conf.get("checkpoint_ns", "")
                pipe = self.s.pipeline(transaction=True)
                pipe.set(
                    self._key(tid, f"ck:{checkpoint['id']}"),
                    self._checkpoint_value(checkpoint, metadata),
                )
                pipe.zadd(self._key(tid, "idx"), {checkpoint["id"]: 0})
                pipe.execute()
                return {
                    "configurable": {
                        "thread_id": tid,
                        "checkpoint_ns": ns,
                        "checkpoint_id": checkpoint["id"],
                    }
                }

            def put_writes(self, config, writes, task_id, task_path=""):
                conf = config["configurable"]
                mapping = self._writes_mapping(writes, task_id)
                if mapping:
                    key = self._key(conf["thread_id"], f"w:{conf['checkpoint_id']}")
                    self.s.hset(key, mapping=mapping)

            def get_tuple(self, config):
                conf = config["configurable"]
                tid, cid = conf["thread_id"], conf.get("checkpoint_id")
                if not cid:
                    found = self.s.zrevrange(self._key(tid, "idx"), 0, 0)
                    if not found:
                        return None
                    cid = found[0].decode()
                return self._tuple(conf, cid, self.s.get(self._key(tid, f"ck:{cid}")))

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
                return self._tuple(conf, cid, await self.r.get(self._key(tid, f"ck:{cid}")))

        return Floor()


@dataclass
class Subject:
    label: str
    saver: object
    close: Callable[[], Any]  # async in the async mode, plain in the sync one
    # Where its connections show on the server: ("pg", database) or ("redis", client name).
    where: tuple[str, str] | None = None
    # The psycopg pools it runs on (their counters give pool waits); looked up per burst.
    pools: Callable[[], list] = field(default=lambda: [])


@dataclass
class Tally:
    """One subject at one level, summed over the rounds."""

    turns: int = 0
    seconds: float = 0.0
    cpu: float = 0.0  # this process's CPU seconds while the bursts ran
    latencies: list[int] = field(default_factory=list)  # ns per graph turn
    peak: int = 0  # most server connections seen at once (sampled)
    seen: set = field(default_factory=set)  # distinct server connections seen
    pool: Counter = field(default_factory=Counter)

    def rate(self) -> float:
        return self.turns / self.seconds if self.seconds else float("nan")


class PeakSampler:
    """Polls ``count()`` on a thread: the most connections seen at once, and which.

    ``count`` returns {key: set of connection ids} (backend pids, Redis client ids) for the
    connections open on the server now; a burst's window is what `take` returns.
    """

    def __init__(self, count: Callable[[], dict], interval: float = 0.05) -> None:
        self.count = count
        self.interval = interval
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._peak: dict = {}
        self._seen: dict = defaultdict(set)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        try:
            found = self.count()
        except Exception as exc:  # noqa: BLE001 - a lost sample must not stop the run
            self.errors.append(repr(exc))
            return
        with self._lock:
            for key, ids in found.items():
                self._peak[key] = max(self._peak.get(key, 0), len(ids))
                self._seen[key] |= set(ids)

    def take(self) -> tuple[dict, dict]:
        """(peak per key, ids seen per key) since the last take; starts a new window."""
        with self._lock:
            peak, seen = self._peak, self._seen
            self._peak, self._seen = {}, defaultdict(set)
        return peak, seen

    def start(self) -> None:
        def run() -> None:
            while not self._stop.wait(self.interval):
                self.sample()

        self._thread = threading.Thread(target=run, name="bench-conn-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


def latency_summary(latencies: list[int]) -> tuple[float, float]:
    """(p50, p99) in ms of per-turn nanosecond latencies (nearest rank)."""
    from bench.measure import percentile

    return percentile(latencies, 50), percentile(latencies, 99)


def _named(url: str, name: str) -> str:
    """``url`` with redis-py's ``client_name`` set, so CLIENT LIST tells whose it is."""
    return f"{url}{'&' if '?' in url else '?'}client_name={name}"


def _connection_counter(notes: list[str]):
    """(count, close): connections now open on the bench databases and the bench Redis db."""
    import psycopg
    import redis
    from django.conf import settings

    from bench.stores import pg_url

    pg = psycopg.connect(pg_url("postgres"), autocommit=True)  # not a bench database
    client = redis.Redis.from_url(_named(settings.REDIS_BENCH_URL, SAMPLER_NAME))
    db = str(client.connection_pool.connection_kwargs.get("db", 0))
    try:
        client.ping()
    except redis.RedisError:
        client = None
    databases = [settings.PG_DB, settings.PG_DB_LG]

    def count() -> dict:
        found: dict = defaultdict(set)
        rows = pg.execute(
            "SELECT datname, pid FROM pg_stat_activity WHERE datname = ANY(%s)", [databases]
        )
        for datname, pid in rows:
            found[("pg", datname)].add(pid)
        if client is not None:
            for c in client.client_list():
                if c.get("db") == db and c.get("name") in REDIS_NAMES:
                    found[("redis", c["name"])].add(c["id"])
        return found

    def close() -> None:
        pg.close()
        if client is not None:
            client.close()

    return count, close


def _pg_sessions() -> dict[str, int]:
    """pg_stat_database.sessions (connections ever opened) of the bench databases."""
    from django.conf import settings

    from bench.stores import admin_connection

    with admin_connection() as conn:
        rows = conn.execute(
            "SELECT datname, sessions FROM pg_stat_database WHERE datname = ANY(%s)",
            [[settings.PG_DB, settings.PG_DB_LG]],
        ).fetchall()
    return {name: int(sessions or 0) for name, sessions in rows}


def _our_pools(kind: str) -> list:
    """The ORM saver's psycopg pools of database alias "pg" (sync, or this loop's async)."""
    from checkpoints.store.postgres import pool as pools

    if kind == "sync":
        return [p for key, p in list(pools._pools.items()) if key[0] == "pg"]
    loop_id = id(asyncio.get_running_loop())
    return [
        entry[1]
        for key, entry in list(pools._async_pools.items())
        if key[0] == "pg" and key[3] == loop_id
    ]


class Meter:
    """Brackets one burst: pool counters, this process's CPU, the sampler's window."""

    def __init__(self, sampler: PeakSampler) -> None:
        self.sampler = sampler

    def begin(self, subject: Subject) -> None:
        for pool in subject.pools():
            pool.pop_stats()  # counters from here on
        self.sampler.take()
        self.cpu = time.process_time()

    def end(self, subject: Subject, tally: Tally, turns: int, took: float) -> None:
        tally.cpu += time.process_time() - self.cpu
        tally.turns += turns
        tally.seconds += took
        self.sampler.sample()
        peak, seen = self.sampler.take()
        if subject.where is not None:
            tally.peak = max(tally.peak, peak.get(subject.where, 0))
            tally.seen |= seen.get(subject.where, set())
        for pool in subject.pools():
            stats = pool.get_stats()
            for key in POOL_COUNTERS:
                tally.pool[key] += stats.get(key, 0)
            tally.pool["pool_max"] = stats.get("pool_max", 0)


def _prepare_stores(notes: list[str]) -> None:
    """Fresh bench databases (ours migrated, PostgresSaver's set up) and an empty Redis db."""
    import redis
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connections
    from langgraph.checkpoint.postgres import PostgresSaver

    from bench.stores import admin_connection, reset_pg_database

    reset_pg_database(settings.PG_DB)
    reset_pg_database(settings.PG_DB_LG)
    call_command("migrate", database="pg", verbosity=0)
    with admin_connection(settings.PG_DB_LG) as conn:
        PostgresSaver(conn).setup()
    # Setup's connections are not the savers': none stays open into the run.
    connections.close_all()
    client = redis.Redis.from_url(settings.REDIS_BENCH_URL)
    try:
        client.flushdb()
    except redis.RedisError as exc:
        notes.append(f"redis skipped: {settings.REDIS_BENCH_URL} does not answer ({exc})")
    finally:
        client.close()


def _close_leftovers(notes: list[str]) -> None:
    """Close what the async part left open, so the sync part's counts are its own."""
    from checkpoints.store.postgres.pool import _async_pools, close_pools

    left = sum(1 for _, _, opened, _ in _async_pools.values() for c in opened if not c.closed)
    if left:
        notes.append(
            f"{left} connections of our async pool were still open after the event loop "
            "closed (closed here, before the sync part)"
        )
    close_pools()


def _pool_size() -> int:
    return int(os.environ.get("CHECKPOINTS_PG_POOL_SIZE", "8"))


def _pg_kwargs() -> dict:
    from psycopg.rows import dict_row

    # As LangGraph's docs set up PostgresSaver / AsyncPostgresSaver on a pool.
    return {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}


async def _subjects(notes: list[str], redis_ok: bool) -> list[Subject]:
    """Every async subject that can be built here (the stores are already prepared)."""
    import redis.asyncio
    from asgiref.sync import sync_to_async
    from django.conf import settings
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from psycopg_pool import AsyncConnectionPool

    from bench.stores import pg_url
    from checkpoints.store.registry import get_saver

    async def nothing():
        return None

    ours = await sync_to_async(get_saver, thread_sensitive=True)("postgres", using="pg")
    pool = AsyncConnectionPool(
        pg_url(settings.PG_DB_LG), max_size=_pool_size(), kwargs=_pg_kwargs(), open=False
    )
    await pool.open()
    theirs = AsyncPostgresSaver(pool)
    threaded = await sync_to_async(get_saver, thread_sensitive=True)("postgres", using="pg")
    threaded._native_async = lambda: False
    ours_db, lg_db = ("pg", settings.PG_DB), ("pg", settings.PG_DB_LG)
    subjects = [
        Subject("orm-pg", ours, nothing, ours_db, lambda: _our_pools("async")),
        Subject("orm-pg-thread", threaded, nothing, ours_db, lambda: _our_pools("sync")),
        Subject("lg-apostgres", theirs, pool.close, lg_db, lambda: [pool]),
    ]
    if redis_ok:
        url = settings.REDIS_BENCH_URL
        # The floor waits for a free connection as ours does (from_url's pool raises when
        # its 100 are out: 128 runs hold about 256 at once).
        client = redis.asyncio.Redis(
            connection_pool=redis.asyncio.BlockingConnectionPool.from_url(
                _named(url, RAW_REDIS_NAME), **_raw_redis_pool()
            )
        )
        redis_saver = await sync_to_async(get_saver)(
            "redis", conn_string=_named(url, OURS_REDIS_NAME)
        )
        subjects.append(Subject("redis", redis_saver, nothing, ("redis", OURS_REDIS_NAME)))
        subjects.append(
            Subject(
                "raw-redis", RawAsyncRedisFloor(client), client.aclose, ("redis", RAW_REDIS_NAME)
            )
        )
    subjects.append(Subject("lg-memory", InMemorySaver(), nothing))
    return subjects


def _raw_redis_pool() -> dict:
    """The pool options of our Redis saver on one server, for the floor's pool."""
    from checkpoints.store.redis.clients import MAX_CONNECTIONS, POOL_TIMEOUT

    return {"max_connections": MAX_CONNECTIONS, "timeout": POOL_TIMEOUT}


def _sync_subjects(redis_ok: bool) -> list[Subject]:
    """The sync subjects: ours, PostgresSaver on a ConnectionPool, Redis and its floor."""
    import redis
    from django.conf import settings
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg_pool import ConnectionPool

    from bench.stores import pg_url
    from checkpoints.store.registry import get_saver

    ours = get_saver("postgres", using="pg")
    pool = ConnectionPool(pg_url(settings.PG_DB_LG), max_size=_pool_size(), kwargs=_pg_kwargs())
    pool.wait()
    subjects = [
        Subject("orm-pg", ours, lambda: None, ("pg", settings.PG_DB), lambda: _our_pools("sync")),
        Subject(
            "lg-postgres",
            PostgresSaver(pool),
            pool.close,
            ("pg", settings.PG_DB_LG),
            lambda: [pool],
        ),
    ]
    if redis_ok:
        url = settings.REDIS_BENCH_URL
        ours_name, raw_name = f"{OURS_REDIS_NAME}-sync", f"{RAW_REDIS_NAME}-sync"
        client = redis.Redis(
            connection_pool=redis.BlockingConnectionPool.from_url(
                _named(url, raw_name), **_raw_redis_pool()
            )
        )
        ours_redis = get_saver("redis", conn_string=_named(url, ours_name))
        subjects.append(Subject("redis", ours_redis, lambda: None, ("redis", ours_name)))
        floor = RawAsyncRedisFloor(None, client)
        subjects.append(Subject("raw-redis", floor, client.close, ("redis", raw_name)))
    subjects.append(Subject("lg-memory", InMemorySaver(), lambda: None))
    return subjects


async def _burst(
    graph, label: str, tag: str, runs: int, threads_per_run: int, latencies: list[int] | None = None
) -> tuple[int, float]:
    """``runs`` concurrent workers, each running two-turn threads; (turns, seconds)."""
    from bench.graph import arun_turn

    async def worker(w: int) -> None:
        for k in range(threads_per_run):
            thread_id = f"{tag}-{label}-w{w}-{k}"
            for turn in range(2):
                started = time.perf_counter_ns()
                await arun_turn(graph, thread_id, turn)
                if latencies is not None:
                    latencies.append(time.perf_counter_ns() - started)

    started = time.perf_counter()
    outcomes = await asyncio.gather(*(worker(w) for w in range(runs)), return_exceptions=True)
    _raise_failures(outcomes, runs)
    return runs * threads_per_run * 2, time.perf_counter() - started


class BurstFailed(Exception):
    """Some of a burst's runs raised: the subject is dropped from the rest of the run."""


def _raise_failures(outcomes: list, runs: int) -> None:
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    if failed:
        first = failed[0]
        raise BurstFailed(
            f"{len(failed)} of {runs} runs failed, first: {type(first).__name__}: {first}"
        )


def _sync_burst(
    executor, graph, label: str, tag: str, workers: int, per_worker: int, latencies: list[int]
) -> tuple[int, float]:
    """``workers`` threads of ``executor`` each running two-turn threads with ``invoke``."""
    from bench.graph import run_turn

    gate = threading.Barrier(workers + 1, timeout=120)

    def worker(w: int) -> None:
        gate.wait()
        for k in range(per_worker):
            thread_id = f"{tag}-{label}-t{w}-{k}"
            for turn in range(2):
                started = time.perf_counter_ns()
                run_turn(graph, thread_id, turn)
                latencies.append(time.perf_counter_ns() - started)

    futures = [executor.submit(worker, w) for w in range(workers)]
    gate.wait()
    started = time.perf_counter()
    outcomes = [future.exception() or None for future in futures]
    _raise_failures(outcomes, workers)
    return workers * per_worker * 2, time.perf_counter() - started


def _rotated(subjects: list, number: int) -> list:
    order = subjects[number % len(subjects) :] + subjects[: number % len(subjects)]
    return order[::-1] if number % 2 else order


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _table(title: str, rows: list[tuple[str, str, Tally]], pool_cap: int) -> None:
    print("")
    print(f"== {title} ==")
    print(
        f"{'subject':<14} {'level':>9} {'turns/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'conns peak':>10} {'seen':>5} {'pool waits':>14} {'held x per turn':>15} {'cpu':>5}"
    )
    for label, level, tally in rows:
        if not tally.turns:
            print(f"{label:<14} {level:>9}  no burst completed (see FAILED below)")
            continue
        p50, p99 = latency_summary(tally.latencies)
        waits = held = "-"
        if tally.pool.get("requests_num"):
            queued = tally.pool.get("requests_queued", 0)
            share = queued / tally.pool["requests_num"]
            wait = tally.pool.get("requests_wait_ms", 0) / max(queued, 1)
            waits = f"{share:.0%} {wait:.1f}ms"
            held = f"{tally.pool.get('usage_ms', 0) / tally.pool['requests_num']:.1f}ms"
            held += f" x{tally.pool['requests_num'] / tally.turns:.0f}"
        peak = str(tally.peak) if label != "lg-memory" else "-"
        seen = str(len(tally.seen)) if label != "lg-memory" else "-"
        cpu = tally.cpu / tally.seconds if tally.seconds else float("nan")
        print(
            f"{label:<14} {level:>9} {tally.rate():>8.1f} {p50:>8.1f} {p99:>8.1f} "
            f"{peak:>10} {seen:>5} {waits:>14} {held:>15} {cpu:>5.2f}"
        )
    print(
        f"(conns peak: most server connections of the subject seen at once, sampled every "
        f"50 ms; seen: distinct ones over the run; pool waits: share of pool checkouts that "
        f"queued in the pool and their mean wait (orm-pg's async callers wait at a semaphore "
        f"before its pool instead: that queue shows in p50/p99, not here); held: mean time a "
        f"checkout kept its connection, x "
        f"checkouts per graph turn; "
        f"cpu: this process's CPU seconds per wall second; "
        f"PostgreSQL pools capped at {pool_cap})"
    )


def _verdict(ok: bool) -> str:
    return "MET   " if ok else "MISSED"


async def main_async(args, notes: list[str], sampler: PeakSampler, redis_ok: bool) -> dict:
    from asgiref.sync import sync_to_async
    from django.db import connections

    from bench.graph import arun_turn, build_graph

    subjects = [
        s for s in await _subjects(notes, redis_ok) if not args.only or s.label in args.only
    ]
    graphs = {s.label: build_graph(s.saver) for s in subjects}
    # Building the savers used Django's connection in its sync thread: closed, so what the
    # sampler sees open is what the runs use.
    await sync_to_async(connections.close_all, thread_sensitive=True)()
    failed: dict[str, str] = {}
    for s in subjects:  # warm-up: pools opened, statements prepared
        try:
            await arun_turn(graphs[s.label], f"warm-{s.label}", 0)
            await _burst(graphs[s.label], s.label, "warm", args.runs, 1)
        except Exception as exc:  # noqa: BLE001 - named in the report, the others go on
            failed[s.label] = f"warm-up at {args.runs} at once: {exc}"
    levels = (args.runs,) if args.no_single else (1, args.runs)
    tallies = {(s.label, c): Tally() for s in subjects for c in levels}
    meter = Meter(sampler)
    await asyncio.sleep(1.5)  # session counters are flushed about a second after connecting
    sessions = await asyncio.to_thread(_pg_sessions)
    for number in range(args.rounds):
        for s in _rotated(subjects, number):
            for c in levels:
                if s.label in failed:
                    break
                # One at a time runs as many turns as a burst, so both take similar time.
                per = args.threads * (args.runs if c == 1 else 1)
                tally = tallies[(s.label, c)]
                meter.begin(s)
                try:
                    turns, took = await _burst(
                        graphs[s.label], s.label, f"r{number}c{c}", c, per, tally.latencies
                    )
                except BurstFailed as exc:
                    failed[s.label] = f"round {number + 1}, {c} at once: {exc}"
                    continue
                meter.end(s, tally, turns, took)
        _log(f"async round {number + 1}/{args.rounds} done")
    await asyncio.sleep(1.5)
    after = await asyncio.to_thread(_pg_sessions)
    opened = {name: after.get(name, 0) - sessions.get(name, 0) for name in after}
    for s in subjects:
        await s.close()
    await sync_to_async(connections.close_all, thread_sensitive=True)()
    return {
        "subjects": [s.label for s in subjects],
        "levels": levels,
        "failed": failed,
        "tallies": tallies,
        "opened": opened,
    }


def run_sync(args, notes: list[str], sampler: PeakSampler, redis_ok: bool) -> dict:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    from bench.graph import build_graph

    workers = args.sync_threads
    subjects = [s for s in _sync_subjects(redis_ok) if not args.only or s.label in args.only]
    graphs = {s.label: build_graph(s.saver) for s in subjects}
    # One thread pool per subject, kept over the rounds, as a threaded server keeps its
    # threads (and Django its per-thread connections).
    executors = {s.label: ThreadPoolExecutor(workers, f"bench-{s.label}") for s in subjects}
    failed: dict[str, str] = {}
    for s in subjects:
        try:
            _sync_burst(executors[s.label], graphs[s.label], s.label, "swarm", workers, 1, [])
        except BurstFailed as exc:
            failed[s.label] = f"warm-up: {exc}"
    tallies = {s.label: Tally() for s in subjects}
    meter = Meter(sampler)
    time.sleep(1.5)
    sessions = _pg_sessions()
    for number in range(args.rounds):
        for s in _rotated(subjects, number):
            if s.label in failed:
                continue
            tally = tallies[s.label]
            meter.begin(s)
            try:
                turns, took = _sync_burst(
                    executors[s.label],
                    graphs[s.label],
                    s.label,
                    f"s{number}",
                    workers,
                    args.threads,
                    tally.latencies,
                )
            except BurstFailed as exc:
                failed[s.label] = f"round {number + 1}: {exc}"
                continue
            meter.end(s, tally, turns, took)
        _log(f"sync round {number + 1}/{args.rounds} done")
    time.sleep(1.5)
    after = _pg_sessions()
    opened = {name: after.get(name, 0) - sessions.get(name, 0) for name in after}
    for s in subjects:
        gate = threading.Barrier(workers, timeout=60)

        def close_connections(gate=gate) -> None:
            gate.wait()  # one task on each of the pool's threads
            connections.close_all()

        for future in [executors[s.label].submit(close_connections) for _ in range(workers)]:
            future.result()
        executors[s.label].shutdown()
        s.close()
    return {
        "subjects": [s.label for s in subjects],
        "tallies": tallies,
        "opened": opened,
        "failed": failed,
    }


def _report_async(args, result: dict, pool_cap: int) -> None:
    tallies, levels, failed = result["tallies"], result["levels"], result["failed"]
    rows = [
        (label, f"{c} at once", tallies[(label, c)]) for label in result["subjects"] for c in levels
    ]
    labels = [label for label in result["subjects"] if label not in failed]
    rate = {key: t.rate() for key, t in tallies.items()}
    _table("ainvoke graph turns (two-turn threads, durability='sync')", rows, pool_cap)
    _print_failed(failed, [(o, t) for o, t, _, _ in TARGETS])
    if len(levels) == 2:
        print("")
        print(f"{'subject':<14} {'1 at a time':>12} {f'{args.runs} at once':>12} {'speed-up':>9}")
        for label in labels:
            one, many = rate[(label, 1)], rate[(label, args.runs)]
            print(f"{label:<14} {one:>12.1f} {many:>12.1f} {many / one:>8.2f}x")
    print("")
    print("== ratios (ours turns/s / theirs turns/s) ==")
    for ours, theirs, want_one, want_many in TARGETS:
        if ours not in labels or theirs not in labels:
            continue
        for c, want in ((1, want_one), (args.runs, want_many)):
            if c not in levels:
                continue
            ratio = rate[(ours, c)] / rate[(theirs, c)]
            print(
                f"{_verdict(ratio >= want)} {ours} vs {theirs} at {c} concurrent: "
                f"{ratio:.2f} (target {want})"
            )
    if "orm-pg" in labels and "lg-apostgres" in labels:
        ours, theirs = tallies[("orm-pg", args.runs)], tallies[("lg-apostgres", args.runs)]
        p99_ours, p99_theirs = (
            latency_summary(ours.latencies)[1],
            latency_summary(theirs.latencies)[1],
        )
        print(
            f"{_verdict(p99_ours <= p99_theirs)} orm-pg p99 at {args.runs} concurrent: "
            f"{p99_ours:.1f} ms vs lg-apostgres {p99_theirs:.1f} ms (target: no worse)"
        )
        print(
            f"{_verdict(ours.peak <= pool_cap)} orm-pg server connections at {args.runs} "
            f"concurrent: at most {ours.peak} at once (target <= {pool_cap}); "
            f"lg-apostgres {theirs.peak}"
            + (" (counts orm-pg-thread's too: same database)" if "orm-pg-thread" in labels else "")
        )
    if "lg-memory" in labels:
        for label in labels:
            if label != "lg-memory":
                ceiling = rate[(label, args.runs)] / rate[("lg-memory", args.runs)]
                print(
                    f"       {label} at {args.runs} concurrent / no store (lg-memory): "
                    f"{ceiling:.2f}"
                )
    _print_opened(result["opened"])
    for label in labels:
        many = tallies[(label, args.runs)]
        p50, p99 = latency_summary(many.latencies)
        one = f" one_turns_s={rate[(label, 1)]:.1f}" if 1 in levels else ""
        print(
            f"RESULT label={label}{one} concurrent_turns_s={rate[(label, args.runs)]:.1f} "
            f"runs={args.runs} p50_ms={p50:.1f} p99_ms={p99:.1f} conns_peak={many.peak} "
            f"conns_seen={len(many.seen)}"
        )


def _report_sync(args, result: dict, pool_cap: int) -> None:
    tallies, failed = result["tallies"], result["failed"]
    n = args.sync_threads
    rows = [(label, f"{n} thr", tallies[label]) for label in result["subjects"]]
    labels = [label for label in result["subjects"] if label not in failed]
    _table(f"invoke graph turns, {n} threads (two-turn threads, durability='sync')", rows, pool_cap)
    _print_failed(failed, [(o, t) for o, t, _ in SYNC_TARGETS])
    print("")
    print("== ratios (ours turns/s / theirs turns/s) ==")
    for ours, theirs, want in SYNC_TARGETS:
        if ours in labels and theirs in labels:
            ratio = tallies[ours].rate() / tallies[theirs].rate()
            print(
                f"{_verdict(ratio >= want)} {ours} vs {theirs} at {n} threads: "
                f"{ratio:.2f} (target {want})"
            )
    if "lg-memory" in labels:
        for label in labels:
            if label != "lg-memory":
                ceiling = tallies[label].rate() / tallies["lg-memory"].rate()
                print(f"       {label} at {n} threads / no store (lg-memory): {ceiling:.2f}")
    _print_opened(result["opened"])
    for label in labels:
        t = tallies[label]
        p50, p99 = latency_summary(t.latencies)
        print(
            f"RESULT mode=sync label={label} threads={n} turns_s={t.rate():.1f} "
            f"p50_ms={p50:.1f} p99_ms={p99:.1f} conns_peak={t.peak} conns_seen={len(t.seen)}"
        )


def _print_failed(failed: dict[str, str], pairs: list[tuple[str, str]]) -> None:
    """Subjects dropped after a failing burst; a target on one of them is not met."""
    for label, why in failed.items():
        print(f"FAILED {label}: dropped from the rest of the run ({why})")
    for ours, theirs in pairs:
        if ours in failed or theirs in failed:
            which = ours if ours in failed else theirs
            print(f"MISSED {ours} vs {theirs}: not measured, {which} failed")


def _print_opened(opened: dict[str, int]) -> None:
    for name, count in sorted(opened.items()):
        print(f"       PostgreSQL sessions opened on {name} during the timed rounds: {count}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.concurrency", description=__doc__)
    parser.add_argument("--runs", type=int, default=32, help="concurrent ainvoke runs")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--threads", type=int, default=2, help="two-turn threads per run")
    parser.add_argument(
        "--pool",
        type=int,
        default=None,
        help="max connections of every PostgreSQL pool (ours: CHECKPOINTS_PG_POOL_SIZE)",
    )
    parser.add_argument(
        "--sync-threads", type=int, default=0, help="also N threads each running sync invoke"
    )
    parser.add_argument("--no-single", action="store_true", help="skip the 1-at-a-time level")
    parser.add_argument("--no-async", action="store_true", help="only the --sync-threads part")
    parser.add_argument("--only", action="append", default=[], help="subject label (repeat)")
    args = parser.parse_args(argv)
    if args.pool is not None:
        # Read by checkpoints.store.postgres.pool when it builds a pool: set before any is built.
        os.environ["CHECKPOINTS_PG_POOL_SIZE"] = str(args.pool)
    pool_cap = _pool_size()
    import django

    django.setup()
    from bench.stores import reset_files

    reset_files()
    notes: list[str] = []
    _prepare_stores(notes)
    redis_ok = not any(note.startswith("redis skipped") for note in notes)
    count, close_counter = _connection_counter(notes)
    sampler = PeakSampler(count)
    sampler.start()
    load = os.getloadavg()
    _log(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {os.cpu_count()} cpus")
    try:
        if not args.no_async:
            result = asyncio.run(main_async(args, notes, sampler, redis_ok))
            _report_async(args, result, pool_cap)
            _close_leftovers(notes)
        if args.sync_threads:
            _report_sync(args, run_sync(args, notes, sampler, redis_ok), pool_cap)
    finally:
        sampler.stop()
        close_counter()
    load = os.getloadavg()
    print(f"note: load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    for note in notes + [f"connection sample failed: {e}" for e in sampler.errors[:3]]:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
