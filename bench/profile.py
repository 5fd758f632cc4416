"""Profile one saver's hot paths: `python -m bench.profile orm-pg|orm-sqlite|memory`.

Builds a deep thread, then prints the SQL of one get_tuple/put/list/delete call (ORM savers,
the pooled PostgreSQL statements included) and cProfile's top functions over repeated calls
(get, put, delete_thread of 20-checkpoint threads, graph turns through invoke and ainvoke).
"""

from __future__ import annotations

import asyncio
import cProfile
import io
import os
import pstats
import sys
import time

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    label = argv[0] if argv else "orm-pg"
    calls = int(argv[1]) if len(argv) > 1 else 100
    import django

    django.setup()
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from bench.graph import arun_turn, build_graph, run_turn
    from bench.measure import Samples
    from bench.run import Bench, Plan, _config
    from bench.stores import build_subjects, reset_files
    from bench.workload import DocumentPool

    family = {"orm-pg": "postgres", "orm-sqlite": "sqlite", "memory": "memory"}[label]
    reset_files()
    subject = next(s for s in build_subjects([], {family}) if s.label == label)
    plan = Plan(1, 1, 1, 1, 1, 1, 1, 1, 200, (10,), 1)
    bench = Bench(plan, [subject], DocumentPool(), Samples())
    bench.prepare()
    saver = subject.saver
    deep = f"deep-{label}"
    thread = bench._thread(subject, "profiled")
    bench.grow(subject, thread, 5, timed=False)
    alias = getattr(saver, "using", None)
    raw: list[tuple[float, str]] = []
    if hasattr(saver, "_execute"):
        # The PostgreSQL hot paths run on pooled psycopg cursors Django never sees.
        execute = saver._execute

        def recorded(cur, sql, params, **options):
            start = time.perf_counter()
            try:
                return execute(cur, sql, params, **options)
            finally:
                raw.append((time.perf_counter() - start, " ".join(sql.split())))

        saver._execute = recorded
    if alias:
        conn = connections[alias]
        for name, call in (
            ("get_tuple(latest)", lambda: saver.get_tuple(_config(deep))),
            ("list(limit=50)", lambda: list(saver.list(_config(deep), limit=50))),
            ("put", lambda: bench.grow(subject, thread, 1, timed=False)),
            ("delete_thread", lambda: saver.delete_thread("profiled")),
        ):
            raw.clear()
            with CaptureQueriesContext(conn) as ctx:
                call()
            print(f"-- {name}: {len(ctx.captured_queries) + len(raw)} statements")
            for took, sql in raw:
                print(f"   {took:.6f}s  (pooled) {sql[:300]}")
            for q in ctx.captured_queries:
                print(f"   {q['time']}s  {q['sql'][:300]}")
                if name.startswith("get_tuple") and q["sql"].startswith("SELECT"):
                    with conn.cursor() as cur:
                        prefix = (
                            "EXPLAIN ANALYZE "
                            if conn.vendor == "postgresql"
                            else "EXPLAIN QUERY PLAN "
                        )
                        cur.execute(prefix + q["sql"])
                        for line in cur.fetchall():
                            print("      plan:", " ".join(str(c) for c in line))
        bench.grow(subject, bench._thread(subject, "profiled"), 5, timed=False)
    graph = build_graph(saver)
    doomed = []

    def delete_one() -> None:
        # A fresh 20-checkpoint thread each call; growing it is not profiled.
        profiler.disable()
        victim = bench._thread(subject, f"victim-{len(doomed)}")
        bench.grow(subject, victim, 20, timed=False)
        doomed.append(victim.thread_id)
        profiler.enable()
        saver.delete_thread(victim.thread_id)

    loop = asyncio.new_event_loop()
    for name, call in (
        ("get_tuple(latest)", lambda: saver.get_tuple(_config(deep))),
        ("put+put_writes", lambda: bench.grow(subject, thread, 1, timed=False)),
        ("delete_thread (20 checkpoints)", delete_one),
        ("e2e turn", lambda: run_turn(graph, f"prof-e2e-{os.getpid()}", 0)),
        (
            "e2e turn (ainvoke)",
            lambda: loop.run_until_complete(arun_turn(graph, f"prof-ae2e-{os.getpid()}", 0)),
        ),
    ):
        n = calls if not name.startswith("e2e turn") else max(3, calls // 10)
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(n):
            if name == "e2e turn":
                run_turn(graph, f"prof-e2e-{i}", 0)
            elif name == "e2e turn (ainvoke)":
                loop.run_until_complete(arun_turn(graph, f"prof-ae2e-{i}", 0))
            else:
                call()
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(14)
        print(f"== {label} {name} x{n} (sorted by own time) ==")
        print("\n".join(out.getvalue().splitlines()[:32]))
    loop.close()
    subject.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
