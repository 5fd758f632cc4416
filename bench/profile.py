"""Profile one saver's hot paths: `python -m bench.profile orm-pg|orm-sqlite|memory`.

Builds a deep thread, then prints the SQL of one get_tuple/put/list call (ORM savers) and
cProfile's top functions over repeated calls.
"""

from __future__ import annotations

import cProfile
import io
import os
import pstats
import sys

os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    label = argv[0] if argv else "orm-pg"
    calls = int(argv[1]) if len(argv) > 1 else 100
    import django

    django.setup()
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from bench.graph import build_graph, run_turn
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
    if alias:
        conn = connections[alias]
        for name, call in (
            ("get_tuple(latest)", lambda: saver.get_tuple(_config(deep))),
            ("list(limit=50)", lambda: list(saver.list(_config(deep), limit=50))),
            ("put", lambda: bench.grow(subject, thread, 1, timed=False)),
            ("delete_thread", lambda: saver.delete_thread("profiled")),
        ):
            with CaptureQueriesContext(conn) as ctx:
                call()
            print(f"-- {name}: {len(ctx.captured_queries)} statements")
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
    for name, call in (
        ("get_tuple(latest)", lambda: saver.get_tuple(_config(deep))),
        ("put+put_writes", lambda: bench.grow(subject, thread, 1, timed=False)),
        ("e2e turn", lambda: run_turn(graph, f"prof-e2e-{os.getpid()}", 0)),
    ):
        n = calls if name != "e2e turn" else max(3, calls // 10)
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(n):
            if name == "e2e turn":
                run_turn(graph, f"prof-e2e-{i}", 0)
            else:
                call()
        profiler.disable()
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(14)
        print(f"== {label} {name} x{n} (sorted by own time) ==")
        print("\n".join(out.getvalue().splitlines()[:32]))
    subject.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
