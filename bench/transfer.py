"""Import threads from LangGraph's PostgresSaver and SqliteSaver into our PostgreSQL store.

    .venv/bin/python -m bench.transfer --threads 5000 --per-thread 10 --jobs 1,2
    .venv/bin/python -m bench.transfer --threads 5000 --baseline /tmp/before  # beside "today"
    .venv/bin/python -m bench.transfer --baseline /tmp/before --jobs 1 --rounds 3  # alternating

Seeds ``threads x per-thread`` checkpoints (a growing message list, of plain strings or with
``--messages langchain`` of LangChain messages, a counter, one pending write each) with
PostgresSaver in its own database (``checkpoint_bench_transfer_lg``) and with SqliteSaver in
a file: one thread written by the saver itself, its rows copied in SQL under the other ids,
then ``ANALYZE``d as autovacuum would have done. Then, from each source, into a fresh store
of ours (``checkpoint_bench_transfer``, dropped and migrated before each run):

- ``manage.py import_checkpoints SOURCE --jobs N`` for each N of ``--jobs``, timed by the
  summary's own seconds (the copy, not Django's start), with the peak RSS of its processes;
- with ``--baseline PATH``: the same command in a checkout of the code before (a ``git
  worktree`` of the commit to compare with), labelled "today";
- the batched-insert floor: our one statement per thread (``PUT_BATCH``) alone, replayed
  with the parameters a real import of ``--floor-threads`` threads built (values encoded,
  nothing read or checked), committed as the import commits (``COMMIT_EVERY`` threads);
  answer by answer as the import sends it, then pipelined (the server's own time);
- a bare ``COPY`` of the same rows' bytes into plain tables of ours (from SQLite: its rows
  streamed into ``COPY FROM STDIN``).

The imports from both sources run first, then the floors and the COPYs: a child forked
after the floor grew this process would report this process's size as its own peak.
Every database made here is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LG_DB = "checkpoint_bench_transfer_lg"
OUR_DB = "checkpoint_bench_transfer"
# The thread the saver writes; seeding copies it as bench-0000001, bench-0000002, ...
TEMPLATE = "bench-0000000"
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
PG = "postgresql://postgres@127.0.0.1:5432/"
SUMMARY = re.compile(r"Imported (\d+) thread\(s\), (\d+) checkpoint\(s\).*; ([\d.]+)s")


def _admin(*statements: str) -> None:
    import psycopg

    with psycopg.connect(ADMIN, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)


def _drop(*names: str) -> None:
    _admin(*(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)" for name in names))


def _env(data_dir: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "bench-only-" + "0123456789abcdef" * 4,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "LLM_PROVIDER_CHECKPOINT": "postgres",
        "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{OUR_DB}",
        "CHECKPOINTS_DATA_DIR": data_dir,
    }


def _configure(data_dir: str) -> None:
    """Django in this process, on our bench database (the floor runs here)."""
    sys.path.insert(0, str(ROOT))
    os.environ.update(_env(data_dir))
    os.environ.pop("LLM_PROVIDER_CHECKPOINT_CONN_STRING", None)
    import django

    django.setup()


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# -- seeding ------------------------------------------------------------------------------
def _write_template(saver, per_thread: int, models: bool = False) -> None:
    """One thread through the saver's own put and put_writes: v4, as real graphs write.
    ``models``: the messages are LangChain's (pydantic models, stored as msgpack ext
    payloads), as a chat graph's are; else plain strings."""
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.pregel._checkpoint import create_checkpoint, empty_checkpoint

    config = {"configurable": {"thread_id": TEMPLATE, "checkpoint_ns": ""}}
    checkpoint = empty_checkpoint()
    messages: list[str] = []
    version = None
    for step in range(per_thread):
        text = f"message {step} " + "lorem ipsum " * 24
        if models:
            kind = HumanMessage if step % 2 == 0 else AIMessage
            messages = [*messages, kind(content=text, id=f"m{step}")]
        else:
            messages = [*messages, text]
        version = saver.get_next_version(version, None)
        checkpoint = create_checkpoint(checkpoint, None, step)
        checkpoint["channel_values"] = {"messages": messages, "count": step}
        checkpoint["channel_versions"] = {"messages": version, "count": version}
        config = saver.put(
            config,
            checkpoint,
            {"step": step, "source": "loop", "team": "red"},
            dict.fromkeys(("messages", "count"), version),
        )
        saver.put_writes(config, [("messages", f"pending {step}")], f"task-{step}")


PG_COLUMNS = {
    "checkpoints": "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata",
    "checkpoint_blobs": "checkpoint_ns, channel, version, type, blob",
    "checkpoint_writes": "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, blob, "
    "task_path",
}
SQLITE_COLUMNS = {
    "checkpoints": "checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata",
    "writes": "checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, task_path",
}


def seed_postgres(threads: int, per_thread: int, models: bool = False) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(PG + LG_DB) as lg:
        lg.setup()
        _write_template(lg, per_thread, models)
        with lg.conn.cursor() as cur:
            for start in range(1, threads, 10_000):
                for table, cols in PG_COLUMNS.items():
                    cur.execute(
                        f"INSERT INTO {table} (thread_id, {cols}) "
                        f"SELECT 'bench-' || lpad(g::text, 7, '0'), {cols} FROM {table}, "
                        "generate_series(%s::int, %s::int) AS g WHERE thread_id = %s",
                        (start, min(start + 9_999, threads - 1), TEMPLATE),
                    )
            # The statistics autovacuum would have gathered on a store written over time.
            cur.execute("ANALYZE")


def seed_sqlite(path: str, threads: int, per_thread: int, models: bool = False) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        lg = SqliteSaver(conn)
        lg.setup()
        _write_template(lg, per_thread, models)
        for table, cols in SQLITE_COLUMNS.items():
            conn.execute(
                f"INSERT INTO {table} (thread_id, {cols}) "
                "SELECT 'bench-' || substr('0000000' || g.n, -7), "
                f"{cols} FROM {table}, (WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL "
                "SELECT n + 1 FROM s WHERE n < ?) SELECT n FROM s) AS g WHERE thread_id = ?",
                (threads - 1, TEMPLATE),
            )
        conn.commit()
        conn.execute("ANALYZE")
    finally:
        conn.close()


# -- runs ---------------------------------------------------------------------------------
def _fresh_store(manage: Path, env: dict) -> None:
    _drop(OUR_DB)
    _admin(f"CREATE DATABASE {OUR_DB}")
    subprocess.run(
        # No system checks: they warn of the bench store's missing static files manifest
        # (W050) at every fresh store, which is noise in the bench's table.
        [sys.executable, str(manage), "migrate", "-v", "0", "--skip-checks"],
        env=env,
        check=True,
        cwd=env["CHECKPOINTS_DATA_DIR"],
    )


def run_import(manage: Path, source: str, jobs: int | None, env: dict) -> dict:
    """One import by the command in a fresh store: threads, checkpoints, seconds, peak RSS."""
    _fresh_store(manage, env)
    args = [sys.executable, str(manage), "import_checkpoints", source]
    if jobs is not None:
        args += ["--jobs", str(jobs)]
    process = subprocess.Popen(
        args,
        env=env,
        cwd=env["CHECKPOINTS_DATA_DIR"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    out, err = _communicate(process)
    peak = process.peak_mb
    if process.returncode != 0:
        raise SystemExit(f"import failed ({process.returncode}): {err.decode()[-2000:]}")
    found = SUMMARY.search(out.decode())
    if found is None:
        raise SystemExit(f"no summary in the import's output: {out.decode()[-2000:]}")
    threads, checkpoints, seconds = int(found[1]), int(found[2]), float(found[3])
    return {"threads": threads, "checkpoints": checkpoints, "seconds": seconds, "peak": peak}


def _communicate(process: subprocess.Popen) -> tuple[bytes, bytes]:
    """Its output, then its own peak RSS (``os.wait4``: the command's, and its workers',
    which it waited for) as ``process.peak_mb``."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pumps = [(process.stdout, out), (process.stderr, err)]

        def pump(source, sink):
            for chunk in iter(lambda: source.read(65536), b""):
                sink.write(chunk)

        threads = [threading.Thread(target=pump, args=p) for p in pumps]
        for thread in threads:
            thread.start()
        _, status, usage = os.wait4(process.pid, 0)
        for thread in threads:
            thread.join()
        process.returncode = os.waitstatus_to_exitcode(status)
        process.peak_mb = usage.ru_maxrss / 1024
        out.seek(0)
        err.seek(0)
        return out.read(), err.read()


def floor(source: str, limit: int) -> tuple[float, float, int]:
    """Seconds (answer by answer, then pipelined) and checkpoints of our batched insert
    alone: PUT_BATCH with the parameters a real import of ``limit`` threads built, replayed
    into an emptied store.

    Answer by answer is how the import sends it: each statement's answer read before the
    next is built. Pipelined (psycopg's pipeline mode) sends the next without waiting, so
    it is the server's own time for the statements: the bound on an import that overlapped
    its Python with the server's work."""
    from django.db import connections, transaction

    from checkpoints.store.postgres.sql import PUT_BATCH
    from checkpoints.store.registry import get_saver
    from checkpoints.transfer import copy_threads, open_source
    from checkpoints.transfer.copy import COMMIT_EVERY

    ours = get_saver()
    captured: list[dict] = []
    execute = ours._execute

    def record(cur, statement, params, *args, **kwargs):
        if statement is PUT_BATCH:
            captured.append(params)
        return execute(cur, statement, params, *args, **kwargs)

    ours._execute = record
    try:
        with open_source(source) as src:
            ids = [t for _, t in zip(range(limit), src.thread_ids(), strict=False)]
            summary = copy_threads(src, ours, thread_ids=ids)
    finally:
        ours._execute = execute

    def replay(pipelined: bool) -> float:
        ours.reset_store()
        started = time.perf_counter()
        # Committed as the import commits (`copy.COMMIT_EVERY` threads a transaction).
        for start in range(0, len(captured), COMMIT_EVERY):
            with transaction.atomic(using=ours.using):
                raw = connections[ours.using].connection
                with raw.pipeline() if pipelined else nullcontext():
                    for params in captured[start : start + COMMIT_EVERY]:
                        with ours._raw_cursor(PUT_BATCH) as cur:
                            ours._execute(cur, PUT_BATCH, params)
                            if not pipelined:
                                cur.fetchone()  # the level, as the import reads it
        return time.perf_counter() - started

    seconds, pipelined = replay(False), replay(True)
    ours.reset_store()
    connections.close_all()
    return seconds, pipelined, summary.checkpoints


def bare_copy_postgres() -> tuple[float, int]:
    """Seconds and bytes to COPY the source's rows (the same bytes) into plain tables."""
    import psycopg

    with psycopg.connect(PG + LG_DB) as src, psycopg.connect(PG + OUR_DB) as dst:
        _copy_tables(dst)
        moved = 0
        started = time.perf_counter()
        queries = {
            "checkpoints": "SELECT thread_id, checkpoint_ns, checkpoint_id, "
            "parent_checkpoint_id, checkpoint, metadata FROM checkpoints",
            "checkpoint_blobs": "SELECT thread_id, checkpoint_ns, channel, version, type, blob "
            "FROM checkpoint_blobs",
            "checkpoint_writes": "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, "
            "channel, type, blob, task_path FROM checkpoint_writes",
        }
        for table, query in queries.items():
            with (
                src.cursor().copy(f"COPY ({query}) TO STDOUT (FORMAT BINARY)") as out,
                dst.cursor().copy(f"COPY copy_{table} FROM STDIN (FORMAT BINARY)") as into,
            ):
                for chunk in out:
                    moved += len(chunk)
                    into.write(chunk)
        dst.commit()
        return time.perf_counter() - started, moved


def bare_copy_sqlite(path: str) -> tuple[float, int]:
    """Seconds and bytes to stream the SqliteSaver file's rows into plain tables by COPY."""
    import psycopg

    conn = sqlite3.connect(path)
    try:
        with psycopg.connect(PG + OUR_DB) as dst:
            _copy_tables(dst)
            moved = 0
            started = time.perf_counter()
            with dst.cursor().copy(
                "COPY copy_sqlite_checkpoints (thread_id, ns, id, parent, type, body, metadata) "
                "FROM STDIN"
            ) as into:
                for row in conn.execute(
                    "SELECT thread_id, checkpoint_ns, checkpoint_id, parent_checkpoint_id, type, "
                    "checkpoint, metadata FROM checkpoints"
                ):
                    moved += len(row[5]) + len(row[6] or b"")
                    into.write_row(row)
            with dst.cursor().copy(
                "COPY copy_checkpoint_writes (thread_id, ns, id, task, idx, channel, type, "
                "blob, task_path) FROM STDIN"
            ) as into:
                for row in conn.execute(
                    "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, "
                    "type, value, task_path FROM writes"
                ):
                    moved += len(row[7])
                    into.write_row(row)
            dst.commit()
            return time.perf_counter() - started, moved
    finally:
        conn.close()


def _copy_tables(dst) -> None:
    for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "sqlite_checkpoints"):
        dst.execute(f"DROP TABLE IF EXISTS copy_{table}")
    dst.execute(
        "CREATE TABLE copy_checkpoints (thread_id text, ns text, id text, parent text, "
        "checkpoint jsonb, metadata jsonb)"
    )
    dst.execute(
        "CREATE TABLE copy_sqlite_checkpoints (thread_id text, ns text, id text, parent text, "
        "type text, body bytea, metadata bytea)"
    )
    dst.execute(
        "CREATE TABLE copy_checkpoint_blobs (thread_id text, ns text, channel text, "
        "version text, type text, blob bytea)"
    )
    dst.execute(
        "CREATE TABLE copy_checkpoint_writes (thread_id text, ns text, id text, task text, "
        "idx int, channel text, type text, blob bytea, task_path text)"
    )
    dst.commit()


def _line(label: str, checkpoints: int, seconds: float, extra: str = "") -> None:
    rate = checkpoints / seconds if seconds else float("inf")
    print(f"  {label:<34} {checkpoints:>9,} ckpt {seconds:>8.2f}s {rate:>10,.0f} ckpt/s {extra}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2000)
    parser.add_argument("--per-thread", type=int, default=10)
    parser.add_argument("--jobs", default="1,2", help="job counts to run, e.g. 1,2,4")
    parser.add_argument(
        "--source", action="append", choices=("postgres", "sqlite"), help="default: both"
    )
    parser.add_argument("--baseline", help="a checkout of the code to compare with ('today')")
    parser.add_argument("--floor-threads", type=int, default=1000)
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the imports (today's, then each --jobs) this many times, alternating",
    )
    parser.add_argument(
        "--messages",
        choices=("text", "langchain"),
        default="text",
        help="the message list's items: plain strings, or LangChain messages (models)",
    )
    args = parser.parse_args(argv)
    models = args.messages == "langchain"
    jobs = [int(j) for j in args.jobs.split(",") if j]
    sources = args.source or ["postgres", "sqlite"]
    data_dir = tempfile.mkdtemp(prefix="bench-transfer-")
    sqlite_path = os.path.join(data_dir, "langgraph.sqlite3")
    _drop(LG_DB, OUR_DB)
    _admin(f"CREATE DATABASE {LG_DB}", f"CREATE DATABASE {OUR_DB}")
    env = _env(data_dir)
    try:
        started = time.perf_counter()
        if "postgres" in sources:
            seed_postgres(args.threads, args.per_thread, models)
        if "sqlite" in sources:
            seed_sqlite(sqlite_path, args.threads, args.per_thread, models)
        print(
            f"seeded {args.threads:,} threads x {args.per_thread} checkpoints per source "
            f"({args.messages} messages) in "
            f"{time.perf_counter() - started:.1f}s"
        )
        urls = {
            "postgres": f"langgraph+{PG}{LG_DB}",
            "sqlite": f"langgraph+sqlite:///{sqlite_path}",
        }
        _configure(data_dir)
        # Every import first: a child forked after the floor grew this process reports
        # this process's size as its own peak (Linux keeps the larger across exec).
        for name in sources:
            print(f"from {'PostgresSaver' if name == 'postgres' else 'SqliteSaver'}:")
            for _ in range(args.rounds):
                if args.baseline:
                    base = run_import(Path(args.baseline) / "manage.py", urls[name], None, env)
                    _line("today (baseline checkout)", base["checkpoints"], base["seconds"])
                for n in jobs:
                    done = run_import(ROOT / "manage.py", urls[name], n, env)
                    _line(
                        f"import --jobs {n}",
                        done["checkpoints"],
                        done["seconds"],
                        f"peak RSS {done['peak']:.0f} MB",
                    )
        for name in sources:
            peer = "PostgresSaver" if name == "postgres" else "SqliteSaver"
            print(f"beside the imports from {peer}:")
            _fresh_store(ROOT / "manage.py", env)
            seconds, pipelined, checkpoints = floor(urls[name], args.floor_threads)
            _line(f"batched-insert floor ({args.floor_threads} thr)", checkpoints, seconds)
            _line("  the same, pipelined", checkpoints, pipelined)
            seconds, moved = (
                bare_copy_postgres() if name == "postgres" else bare_copy_sqlite(sqlite_path)
            )
            _line("bare COPY", args.threads * args.per_thread, seconds, f"{moved:,} bytes")
        print(f"bench process peak RSS {_rss_mb():.0f} MB")
    finally:
        from django.db import connections

        connections.close_all()
        _drop(LG_DB, OUR_DB)


if __name__ == "__main__":
    main()
