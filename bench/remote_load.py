"""One subject: the remote saver under load, `python -m bench.remote_load` (issue 52).

    .venv/bin/python -m bench.remote_load                 # 128 runs, 4 clients, 2 services
    .venv/bin/python -m bench.remote_load --quick         # a smoke-sized run (16 runs)

``--runs`` concurrent graph runs (bench/graph.py's ten-node chat graph through ``ainvoke``,
``durability="sync"``) spread over ``--clients`` client processes, each an event loop, on
two setups in turn:

- ``remote``: every client's runs on a `RemoteSaver`, the clients split over ``--services``
  store service processes (gunicorn with one uvicorn worker each, as `bench.remote` starts
  them, two ports), all of them on one PostgreSQL store; each service's own pool capped by
  the store's setting ``CHECKPOINTS_PG_POOL_SIZE`` (``--service-pool``) and Django's own
  pool by ``DATABASE_POOL_SIZE`` (``--django-pool``; as shipped unless given);
- ``lg-apostgres``: every client's runs on LangGraph's AsyncPostgresSaver over its own
  AsyncConnectionPool of ``--lg-pool`` (32: 128 connections for four clients), set up as
  LangGraph's docs say (autocommit, prepare_threshold=0, dict_row).

Both run against a private PostgreSQL server started here (initdb in a temp dir, a spare
port in 5433-5499, ``max_connections`` 300, since the shared server allows 100), stopped
and removed at the end. Setups alternate over ``--rounds`` (remote, lg, lg, remote...).
Each burst starts once every client has warmed up (pools open, one turn per run).

Printed per setup: graph turns/s and steps/s over the burst's wall time (first client's
start to last client's end), p50/p99 turn latency, the database connections held by the
whole system during the burst (``count(*)`` of pg_stat_activity on the setup's database,
sampled every 50 ms: max and median), the sessions opened on it during the burst, and CPU
per graph turn of the clients and (remote) of the service processes. Then the ratio
remote / lg-apostgres against the targets (>= 1.0x turns/s, <= 20 connections).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from bench.graph import STEPS
from bench.measure import percentile
from bench.remote import Service

PORTS = range(5433, 5500)
TARGET_CONNECTIONS = 20
TARGET_RATIO = 1.0
STORE_DB, LG_DB = "load_store", "load_lg"
CALLS = ("aget_tuple", "aput", "aput_writes")


# -- the private PostgreSQL server ---------------------------------------------------------------
def _bindir() -> str:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    if found:
        return str(found[0])
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL's server binaries (initdb, pg_ctl) are not installed")
    return str(Path(initdb).parent)


def _as_postgres(*command: str) -> None:
    # initdb refuses to run as root: the cluster is the postgres user's, as a packaged one.
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    done = subprocess.run([*prefix, *command], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {done.stdout}{done.stderr}")


class PrivatePostgres:
    """A PostgreSQL server of this run's own, on a spare port in 5433-5499, in a temp dir."""

    def __init__(self, max_connections: int = 300) -> None:
        self.bindir = _bindir()
        self.max_connections = max_connections
        self.folder = Path(tempfile.mkdtemp(prefix="bench-remote-load-pg-"))
        self.data = self.folder / "data"
        self.port = 0
        self.running = False

    def start(self) -> None:
        if os.geteuid() == 0:
            shutil.chown(self.folder, "postgres")
        _as_postgres(f"{self.bindir}/initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres")
        tried = []
        # Other runs pick ports in the same range: a random one, another on a clash.
        for port in random.sample(list(PORTS), 8):
            with socket.socket() as probe:
                try:
                    probe.bind(("127.0.0.1", port))
                except OSError:
                    continue
            options = (
                f"-p {port} -k {self.folder} -c listen_addresses=127.0.0.1 "
                f"-c max_connections={self.max_connections}"
            )
            try:
                _as_postgres(
                    f"{self.bindir}/pg_ctl", "-D", str(self.data), "-o", options,
                    "-l", str(self.folder / "server.log"), "-w", "start",
                )  # fmt: skip
            except RuntimeError as exc:
                tried.append(f"{port}: {exc}")
                continue
            self.port, self.running = port, True
            return
        raise RuntimeError("no private PostgreSQL server started: " + "; ".join(tried))

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def cpu(self) -> float:
        """CPU seconds the server has used: the postmaster's own and its children's, the
        live ones read now and the exited ones as the postmaster reaped them (cutime)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        return process_cpu(postmaster, reaped=True) + sum(
            process_cpu(pid) for pid in children(postmaster)
        )

    def create(self, *names: str) -> None:
        with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
            for name in names:
                conn.execute(f'CREATE DATABASE "{name}"')

    def stop(self) -> None:
        if self.running:
            _as_postgres(f"{self.bindir}/pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")
            self.running = False
        shutil.rmtree(self.folder, ignore_errors=True)


# -- what the server holds -----------------------------------------------------------------------
class ConnectionSampler:
    """Counts the server's connections to one database every ``interval`` s on a thread."""

    def __init__(self, url: str, interval: float = 0.05) -> None:
        self.conn = psycopg.connect(url, autocommit=True)  # on "postgres": not counted
        self.interval = interval
        self.database = ""
        self.samples: list[int] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def count(self) -> int:
        row = self.conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s", [self.database]
        ).fetchone()
        return int(row[0])

    def sessions(self, database: str) -> int:
        """Connections ever opened on ``database`` (flushed about a second after the fact)."""
        row = self.conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = %s", [database]
        ).fetchone()
        return int(row[0] or 0) if row else 0

    def begin(self, database: str) -> None:
        self.database, self.samples = database, []
        self._stop.clear()

        def run() -> None:
            while not self._stop.wait(self.interval):
                try:
                    self.samples.append(self.count())
                except psycopg.Error as exc:  # a lost sample must not stop the burst
                    self.errors.append(repr(exc))

        self._thread = threading.Thread(target=run, name="bench-load-sampler", daemon=True)
        self._thread.start()

    def end(self) -> list[int]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self.samples

    def close(self) -> None:
        self.conn.close()


def summarize(samples: list[int]) -> tuple[int, float]:
    """(max, median) of the connection counts sampled during a burst."""
    if not samples:
        return 0, float("nan")
    return max(samples), statistics.median(samples)


def process_cpu(pid: int, reaped: bool = False) -> float:
    """CPU seconds (user + system) a live process has used, from /proc; with ``reaped``,
    plus that of its children it has waited for. A process gone meanwhile counts 0."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / os.sysconf("SC_CLK_TCK")


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (gunicorn's workers under its arbiter)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


# -- the clients -------------------------------------------------------------------------------
def split(total: int, parts: int) -> list[int]:
    """``total`` runs over ``parts`` clients as evenly as they go."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


@dataclass
class ClientJob:
    setup: str  # "remote" or "lg-apostgres"
    url: str  # the service's base URL, or the PostgreSQL database's
    token: str
    runs: int
    threads: int  # threads each run goes through, one after another
    turns: int  # turns per thread
    tag: str
    lg_pool: int = 32
    client_connections: int = 32  # the RemoteSaver's keep-alive pool (its default)


def _client(job: ClientJob, ready, go, results) -> None:
    try:
        results.put(asyncio.run(_client_async(job, ready, go)))
    except BaseException as exc:  # noqa: BLE001 - reported by the parent, which stops the run
        ready.set()
        results.put({"error": f"{type(exc).__name__}: {exc}"})


async def _client_async(job: ClientJob, ready, go) -> dict:
    from bench.graph import arun_turn, build_graph

    close = None
    if job.setup == "remote":
        from checkpoints.remote import RemoteSaver

        saver = RemoteSaver(job.url, api_key=job.token, max_connections=job.client_connections)
        close = saver.aclose
    else:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        pool = AsyncConnectionPool(
            job.url,
            max_size=job.lg_pool,
            kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            open=False,
        )
        await pool.open()
        saver = AsyncPostgresSaver(pool)
        close = pool.close
    calls = _count_calls(saver)
    graph = build_graph(saver)
    pid = os.getpid()
    # Warm: every run's connection opened (pool, keep-alive), statements planned.
    await asyncio.gather(
        *(arun_turn(graph, f"warm-{job.tag}-{pid}-{r}", 0) for r in range(job.runs))
    )
    calls.update(dict.fromkeys(calls, 0))
    ready.set()
    await asyncio.to_thread(go.wait)
    latencies: list[int] = []

    async def run(r: int) -> None:
        for k in range(job.threads):
            thread_id = f"{job.tag}-{pid}-{r}-{k}"
            for turn in range(job.turns):
                started = time.perf_counter_ns()
                await arun_turn(graph, thread_id, turn)
                latencies.append(time.perf_counter_ns() - started)

    cpu = time.process_time()
    started = time.time()
    await asyncio.gather(*(run(r) for r in range(job.runs)))
    ended = time.time()
    cpu = time.process_time() - cpu
    await close()
    return {
        "started": started,
        "ended": ended,
        "turns": job.runs * job.threads * job.turns,
        "latencies": latencies,
        "cpu": cpu,
        "calls": dict(calls),
    }


def _count_calls(saver) -> dict[str, int]:
    """Counts the saver calls the graph makes (each one HTTP round trip on the remote)."""
    counts = dict.fromkeys(CALLS, 0)
    for name in CALLS:
        method = getattr(saver, name)

        async def counted(*args, _method=method, _name=name, **kwargs):
            counts[_name] += 1
            return await _method(*args, **kwargs)

        setattr(saver, name, counted)
    return counts


# -- one burst -----------------------------------------------------------------------------------
@dataclass
class Tally:
    """One setup over the rounds."""

    turns: int = 0
    seconds: float = 0.0
    latencies: list[int] = field(default_factory=list)
    samples: list[int] = field(default_factory=list)
    sessions: int = 0
    client_cpu: float = 0.0
    service_cpu: float = 0.0
    db_cpu: float = 0.0
    calls: int = 0

    def cpu_ms(self, seconds: float) -> float:
        """``seconds`` of CPU per graph turn, in ms."""
        return seconds / self.turns * 1000 if self.turns else float("nan")

    def rate(self) -> float:
        return self.turns / self.seconds if self.seconds else float("nan")


def burst(
    setup: str,
    jobs: list[ClientJob],
    sampler: ConnectionSampler,
    database: str,
    tally: Tally,
    services: list[Service],
    server: PrivatePostgres,
) -> None:
    """Start the clients, wait until all have warmed up, time their runs together."""
    ctx = multiprocessing.get_context("spawn")
    go = ctx.Event()
    results = ctx.Queue()
    readies = [ctx.Event() for _ in jobs]
    procs = [
        ctx.Process(target=_client, args=(job, ready, go, results), name=f"bench-load-{i}")
        for i, (job, ready) in enumerate(zip(jobs, readies, strict=True))
    ]
    for proc in procs:
        proc.start()
    outcomes: list[dict] = []
    try:
        deadline = time.monotonic() + 600
        for ready in readies:
            if not ready.wait(max(1.0, deadline - time.monotonic())):
                raise RuntimeError(f"{setup}: a client did not warm up within 600 s")
        workers = [pid for s in services for pid in children(s.process.pid)]
        before = {pid: process_cpu(pid) for pid in workers}
        db_cpu = server.cpu()
        time.sleep(1.2)  # session counters are flushed about a second after a connection
        sessions = sampler.sessions(database)
        sampler.begin(database)
        go.set()
        for _ in procs:
            outcomes.append(results.get(timeout=1800))
        tally.samples += sampler.end()
        tally.service_cpu += sum(process_cpu(pid) - before[pid] for pid in workers)
        tally.db_cpu += server.cpu() - db_cpu
        time.sleep(1.2)
        tally.sessions += sampler.sessions(database) - sessions
    finally:
        sampler.end()
        for proc in procs:
            proc.join(60)
            if proc.is_alive():
                proc.kill()
    failed = [o["error"] for o in outcomes if "error" in o]
    if failed:
        raise RuntimeError(f"{setup}: {len(failed)} client(s) failed, first: {failed[0]}")
    tally.turns += sum(o["turns"] for o in outcomes)
    tally.seconds += max(o["ended"] for o in outcomes) - min(o["started"] for o in outcomes)
    tally.client_cpu += sum(o["cpu"] for o in outcomes)
    tally.calls += sum(sum(o["calls"].values()) for o in outcomes)
    for o in outcomes:
        tally.latencies += o["latencies"]


# -- the run -----------------------------------------------------------------------------------
def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def start_services(
    server: PrivatePostgres, count: int, pool: int, django_pool: int | None = None
) -> list[Service]:
    """``count`` store services (one uvicorn worker each) on one store database; Django's own
    connection pool as shipped (``DATABASE_POOL_SIZE``'s default), or of ``django_pool``
    (0: none)."""
    services = []
    for n in range(count):
        service = Service(STORE_DB, workers=1)
        service.env["DATABASE_URL"] = server.url(STORE_DB)
        # The store's own pool per process: the setting an operator sizes it with.
        service.env["CHECKPOINTS_PG_POOL_SIZE"] = str(pool)
        if django_pool is not None:
            service.env["DATABASE_POOL_SIZE"] = str(django_pool)
        else:
            service.env.pop("DATABASE_POOL_SIZE", None)
        services.append(service)
        service.start()  # migrates (a no-op after the first) and makes user "bench"'s token
        # The next service makes "bench" again: this one's user keeps its token, renamed.
        with psycopg.connect(server.url(STORE_DB), autocommit=True) as conn:
            conn.execute(
                "UPDATE auth_user SET username = %s WHERE username = 'bench'", [f"bench-{n}"]
            )
    return services


def jobs_for(
    setup: str, args, tag: str, server: PrivatePostgres, services: list[Service]
) -> list[ClientJob]:
    jobs = []
    for i, runs in enumerate(split(args.runs, args.clients)):
        if setup == "remote":
            service = services[i % len(services)]
            url, token = f"http://127.0.0.1:{service.port}", service.token
        else:
            url, token = server.url(LG_DB), ""
        jobs.append(
            ClientJob(
                setup,
                url,
                token,
                runs,
                args.threads,
                args.turns,
                f"{tag}c{i}",
                args.lg_pool,
                args.client_connections,
            )
        )
    return jobs


def report(args, tallies: dict[str, Tally]) -> None:
    print("")
    print(
        f"== {args.runs} concurrent graph runs over {args.clients} client processes "
        f"({args.threads} thread(s) x {args.turns} turn(s) each, {args.rounds} round(s)); "
        f"remote: {args.services} services, store pool {args.service_pool} each, "
        f"{args.client_connections} HTTP connections per client, "
        + (
            "Django pool as shipped (DATABASE_POOL_SIZE's default)"
            if args.django_pool is None
            else f"Django pool {args.django_pool} each"
            if args.django_pool
            else "no Django pool"
        )
        + " =="
    )
    print(
        f"{'setup':<13} {'turns/s':>8} {'steps/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
        f"{'conns max':>9} {'median':>7} {'opened':>7} {'calls':>6} "
        f"{'cpu: client':>11} {'service':>8} {'db':>6} {'all':>6}"
    )
    for setup, t in tallies.items():
        peak, median = summarize(t.samples)
        svc = f"{t.cpu_ms(t.service_cpu):.1f}" if setup == "remote" else "-"
        every = t.cpu_ms(t.client_cpu + t.service_cpu + t.db_cpu)
        print(
            f"{setup:<13} {t.rate():>8.1f} {t.rate() * STEPS:>8.0f} "
            f"{percentile(t.latencies, 50):>8.0f} {percentile(t.latencies, 99):>8.0f} "
            f"{peak:>9} {median:>7.1f} {t.sessions:>7} {t.calls / t.turns:>6.1f} "
            f"{t.cpu_ms(t.client_cpu):>11.1f} {svc:>8} {t.cpu_ms(t.db_cpu):>6.1f} {every:>6.1f}"
        )
    print(
        "(turns/s: graph turns over the bursts' wall time; steps/s: x the graph's "
        f"{STEPS} nodes; conns: pg_stat_activity count on the setup's database every 50 ms "
        "during the bursts; opened: sessions opened on it during them; calls: saver calls "
        "per turn; cpu: ms of CPU per graph turn of the client processes, the service "
        f"processes, the PostgreSQL server, and all three: {os.cpu_count()} cpus hold at most "
        f"{os.cpu_count()}000 / all turns/s, shared with whatever else runs)"
    )
    remote, lg = tallies.get("remote"), tallies.get("lg-apostgres")
    if remote is None or lg is None:
        return
    ratio = remote.rate() / lg.rate()
    peak, median = summarize(remote.samples)
    lg_peak, lg_median = summarize(lg.samples)
    print("")
    print(
        f"{'MET   ' if ratio >= TARGET_RATIO else 'MISSED'} remote / lg-apostgres turns/s: "
        f"{ratio:.2f} (target >= {TARGET_RATIO})"
    )
    print(
        f"{'MET   ' if peak <= TARGET_CONNECTIONS else 'MISSED'} remote's connections: at most "
        f"{peak}, median {median:.1f} (target <= {TARGET_CONNECTIONS}); lg-apostgres at most "
        f"{lg_peak}, median {lg_median:.1f}"
    )
    if remote.calls:
        print(
            f"       remote: {remote.service_cpu / remote.calls * 1000:.2f} ms of service CPU, "
            f"{remote.db_cpu / remote.calls * 1000:.2f} ms of the server's "
            f"and {remote.sessions / remote.calls:.2f} sessions opened per saver call "
            f"({remote.calls / remote.turns:.1f} calls a turn)"
        )
    for setup, t in tallies.items():
        peak, median = summarize(t.samples)
        print(
            f"RESULT label={setup} runs={args.runs} clients={args.clients} "
            f"turns_s={t.rate():.1f} steps_s={t.rate() * STEPS:.0f} "
            f"p50_ms={percentile(t.latencies, 50):.0f} p99_ms={percentile(t.latencies, 99):.0f} "
            f"conns_max={peak} conns_median={median:.1f} sessions_opened={t.sessions}"
        )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.remote_load", description=__doc__)
    parser.add_argument("--runs", type=int, default=128, help="concurrent graph runs in all")
    parser.add_argument("--clients", type=int, default=4, help="client processes")
    parser.add_argument("--services", type=int, default=2, help="store service processes")
    parser.add_argument("--threads", type=int, default=2, help="threads per run, in turn")
    parser.add_argument("--turns", type=int, default=2, help="turns per thread")
    parser.add_argument("--rounds", type=int, default=2, help="bursts per setup, alternating")
    parser.add_argument(
        "--service-pool",
        type=int,
        default=8,
        help="each service's PostgreSQL pool (CHECKPOINTS_PG_POOL_SIZE)",
    )
    parser.add_argument(
        "--django-pool",
        type=int,
        default=None,
        help="each service's Django connection pool (DATABASE_POOL_SIZE; 0: none; "
        "default: as shipped)",
    )
    parser.add_argument("--lg-pool", type=int, default=32, help="each lg client's pool")
    parser.add_argument(
        "--client-connections",
        type=int,
        default=32,
        help="each remote client's keep-alive HTTP connections (RemoteSaver max_connections)",
    )
    parser.add_argument("--only", choices=("remote", "lg-apostgres"), help="one setup")
    parser.add_argument(
        "--quick", action="store_true", help="smoke size: 16 runs, 1 thread, 1 round"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.threads, args.turns, args.rounds = 16, 1, 2, 1
    return args


def main(argv: list[str] | None = None) -> dict[str, Tally]:
    args = parse(argv)
    setups = [args.only] if args.only else ["remote", "lg-apostgres"]
    load = os.getloadavg()
    _log(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, {os.cpu_count()} cpus")
    server = PrivatePostgres()
    services: list[Service] = []
    sampler = None
    tallies = {setup: Tally() for setup in setups}
    try:
        server.start()
        server.create(STORE_DB, LG_DB)
        _log(f"private PostgreSQL on port {server.port}")
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(server.url(LG_DB)) as lg:
            lg.setup()
        if "remote" in setups:
            services = start_services(server, args.services, args.service_pool, args.django_pool)
            _log("services on ports " + ", ".join(str(s.port) for s in services))
        sampler = ConnectionSampler(server.url("postgres"))
        for number in range(args.rounds):
            order = setups if number % 2 == 0 else setups[::-1]
            for setup in order:
                database = STORE_DB if setup == "remote" else LG_DB
                jobs = jobs_for(setup, args, f"r{number}", server, services)
                burst(setup, jobs, sampler, database, tallies[setup], services, server)
                _log(f"round {number + 1}/{args.rounds} {setup}: {tallies[setup].rate():.1f}")
    finally:
        if sampler is not None:
            sampler.close()
        for service in services:
            service.stop()
        server.stop()
    report(args, tallies)
    load = os.getloadavg()
    print(f"note: load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    return tallies


if __name__ == "__main__":
    main()
