"""A plain script's cold start: `python -m bench.cold_start [--runs 7] [--postgres]`.

Runs, each in a fresh interpreter as a user's script would (no DJANGO_SETTINGS_MODULE):
open a store from a URL, compile a one-node StateGraph on it, invoke it once, exit. Ours
(`checkpoints.connect.from_conn_string`) against LangGraph's own saver
(`SqliteSaver.from_conn_string`, or `PostgresSaver.from_conn_string` + ``setup()`` as its
docs ask), on a new store ("first": a new file or database each run) and on one an earlier
run made ("second"). Runs are interleaved round by round, so load on a shared machine
falls on both sides alike. Reported: the median wall time of the whole process (interpreter
start to exit), the median peak RSS (the child's own ``ru_maxrss``, from ``os.wait4``),
and, from one ``python -X importtime`` run of each script, the modules our script imports
that LangGraph's does not, heaviest first.

``--with-migrate`` adds ours with a new store made by Django's ``migrate`` (the path before
`checkpoints.connect._create_new_store`), interleaved with the rest. ``--tables N`` times
only the making of a new store's tables (``_ensure_tables``, its first connection
included), from the models against ``migrate``, N interleaved runs each in new processes.

The checkout's packages are byte-compiled first (``compileall``, into their
``__pycache__``), as pip compiles an installed wheel's: with ``PYTHONDONTWRITEBYTECODE``
set (as on these machines) every run would otherwise compile ours from source (~60 modules,
~0.2 s) while LangGraph's installed modules load compiled. ``--from-source`` skips it.

SQLite files go to a temporary folder; ``--postgres`` drops and re-creates databases
``checkpoint_bench_cold*`` on the bench server (``CHECKPOINTS_BENCH_PG_HOST/PORT/USER``).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GRAPH = """
import sys
from typing import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    count: int


def step(state):
    return {"count": state["count"] + 1}


builder = StateGraph(State)
builder.add_node("step", step)
builder.add_edge(START, "step")
builder.add_edge("step", END)
"""
OURS = """
from checkpoints.connect import from_conn_string

with from_conn_string(sys.argv[1]) as saver:
    graph = builder.compile(checkpointer=saver)
    print(graph.invoke({"count": 1}, {"configurable": {"thread_id": "cold"}}))
"""
# Ours with a new store made by `migrate`, as before `_create_new_store`.
OURS_MIGRATE = (
    """
import checkpoints.connect

checkpoints.connect._create_new_store = lambda alias: False
"""
    + OURS
)
# The time `_ensure_tables` takes on a new store (argv[1]), from the models or (argv[2]
# "migrate") by Django's migrate.
TABLES = """
import sys, time
import checkpoints.connect as connect

if sys.argv[2] == "migrate":
    connect._create_new_store = lambda alias: False
real, took = connect._ensure_tables, []


def timed(alias, may_create):
    started = time.perf_counter()
    real(alias, may_create)
    took.append(time.perf_counter() - started)


connect._ensure_tables = timed
with connect.from_conn_string(sys.argv[1]):
    pass
print(took[0], file=sys.stderr)
"""
LG_SQLITE = """
from langgraph.checkpoint.sqlite import SqliteSaver

with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    graph = builder.compile(checkpointer=saver)
    print(graph.invoke({"count": 1}, {"configurable": {"thread_id": "cold"}}))
"""
LG_POSTGRES = """
from langgraph.checkpoint.postgres import PostgresSaver

with PostgresSaver.from_conn_string(sys.argv[1]) as saver:
    saver.setup()
    graph = builder.compile(checkpointer=saver)
    print(graph.invoke({"count": 1}, {"configurable": {"thread_id": "cold"}}))
"""


@dataclass
class Subject:
    label: str
    script: str
    family: str  # "sqlite" or "postgres"
    walls: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))
    rss: dict[str, list[float]] = field(default_factory=lambda: collections.defaultdict(list))


def compile_checkout() -> None:
    """Byte-compile the packages a script of ours imports, as pip does at install."""
    import compileall

    for package in ("checkpoints", "retention"):
        if not compileall.compile_dir(ROOT / package, quiet=1):
            raise SystemExit(f"compileall failed on {ROOT / package}")


def plain_env() -> dict[str, str]:
    """A user's environment: this checkout importable, no Django or store settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CHECKPOINTS_"))}
    env.pop("LLM_PROVIDER_CHECKPOINT", None)
    env["PYTHONPATH"] = str(ROOT)
    return env


def run_child(
    script: Path, url: str, cwd: Path, *flags: str, args: tuple[str, ...] = ()
) -> tuple[float, float, str]:
    """(wall seconds, peak RSS in MB, stderr) of one ``python script url`` process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        child = subprocess.Popen(
            [sys.executable, *flags, str(script), url, *args],
            cwd=cwd,
            env=plain_env(),
            stdout=out,
            stderr=err,
        )
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.perf_counter() - started
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        errors = err.read().decode(errors="replace")
        if child.returncode != 0:
            out.seek(0)
            raise SystemExit(
                f"{script.name} {url} exited {child.returncode}\n"
                f"{out.read().decode(errors='replace')}\n{errors}"
            )
    return wall, usage.ru_maxrss / 1024, errors


def pg_admin_url(database: str = "postgres") -> str:
    host = os.environ.get("CHECKPOINTS_BENCH_PG_HOST", "127.0.0.1")
    port = os.environ.get("CHECKPOINTS_BENCH_PG_PORT", "5432")
    user = os.environ.get("CHECKPOINTS_BENCH_PG_USER", "postgres")
    return f"postgresql://{user}@{host}:{port}/{database}"


def recreate_database(name: str) -> str:
    import psycopg

    with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return pg_admin_url(name)


def drop_database(name: str) -> None:
    import psycopg

    with psycopg.connect(pg_admin_url(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Stores:
    """A URL per (subject, mode): a new store for "first", one kept for "second"."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.made = 0
        self.kept: dict[str, str] = {}
        self.databases: set[str] = set()

    def url(self, subject: Subject, mode: str) -> str:
        key = subject.label.replace(" ", "_").replace("-", "_")
        if mode == "second" and key in self.kept:
            return self.kept[key]
        self.made += 1
        name = f"{key}_{mode}_{self.made}"
        if subject.family == "sqlite":
            path = self.folder / f"{name}.sqlite3"
            url = f"sqlite:///{path}" if subject.label.startswith("ours") else str(path)
        else:
            database = "checkpoint_bench_cold_" + ("second_" if mode == "second" else "") + key
            self.databases.add(database)
            url = recreate_database(database)
        if mode == "second":
            self.kept[key] = url
        return url

    def close(self) -> None:
        for database in self.databases:
            drop_database(database)


def import_offenders(ours: Path, theirs: Path, url_ours: str, url_theirs: str, cwd: Path):
    """(ours' extra self time, its modules' count, top packages, top roots) from importtime."""
    times = {}
    for label, script, url in (("ours", ours, url_ours), ("theirs", theirs, url_theirs)):
        _, _, stderr = run_child(script, url, cwd, "-X", "importtime")
        times[label] = parse_importtime(stderr)
    extra = {name: rec for name, rec in times["ours"].items() if name not in times["theirs"]}
    packages: collections.Counter[str] = collections.Counter()
    for name, (self_us, _, _) in extra.items():
        packages[name.split(".")[0]] += self_us
    # Roots: extra modules imported by a module LangGraph's script also imports (or from a
    # function: no parent), with their cumulative time, i.e. what pulled the rest in.
    roots = sorted(
        ((cum, name) for name, (_, cum, parent) in extra.items() if parent not in extra),
        reverse=True,
    )
    return sum(rec[0] for rec in extra.values()), len(extra), packages.most_common(12), roots[:12]


def parse_importtime(stderr: str) -> dict[str, tuple[int, int, str | None]]:
    """module -> (self us, cumulative us, the module that imported it or None)."""
    rows = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, cum_us, name = line[len("import time:") :].split("|", 2)
        depth = (len(name) - len(name.lstrip())) // 2
        rows.append((int(self_us), int(cum_us), depth, name.strip()))
    found = {}
    for index, (self_us, cum_us, depth, name) in enumerate(rows):
        # importtime prints a module after the modules it imported: its parent is the
        # next line that is less indented.
        parent = next((r[3] for r in rows[index + 1 :] if r[2] < depth), None)
        found.setdefault(name, (self_us, cum_us, parent))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cold_start")
    parser.add_argument("--runs", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--postgres", action="store_true", help="also PostgreSQL")
    parser.add_argument("--no-importtime", action="store_true")
    parser.add_argument(
        "--with-migrate", action="store_true", help="also ours making a new store by migrate"
    )
    parser.add_argument(
        "--tables", type=int, metavar="N", help="only time making a new store's tables, N runs"
    )
    parser.add_argument(
        "--from-source",
        action="store_true",
        help="do not byte-compile the checkout first (ours then compiles at every run)",
    )
    args = parser.parse_args(argv)
    if not args.from_source:
        compile_checkout()
    if args.tables:
        return time_tables(args.tables, args.postgres)

    with tempfile.TemporaryDirectory(prefix="cold_start_") as tmp:
        folder = Path(tmp)
        scripts = {}
        for name, body in (
            ("ours", OURS),
            ("ours_migrate", OURS_MIGRATE),
            ("lg_sqlite", LG_SQLITE),
            ("lg_postgres", LG_POSTGRES),
        ):
            scripts[name] = folder / f"{name}.py"
            scripts[name].write_text(GRAPH + body)
        subjects = [Subject("ours sqlite", scripts["ours"], "sqlite")]
        if args.with_migrate:
            subjects.append(Subject("ours-migrate sqlite", scripts["ours_migrate"], "sqlite"))
        subjects.append(Subject("SqliteSaver", scripts["lg_sqlite"], "sqlite"))
        if args.postgres:
            subjects.append(Subject("ours postgres", scripts["ours"], "postgres"))
            if args.with_migrate:
                subjects.append(
                    Subject("ours-migrate postgres", scripts["ours_migrate"], "postgres")
                )
            subjects.append(Subject("PostgresSaver", scripts["lg_postgres"], "postgres"))
        stores = Stores(folder)
        try:
            for subject in subjects:  # the store each "second" run opens, made and current
                run_child(subject.script, stores.url(subject, "second"), folder)
            print(f"{args.runs} rounds, each: ", end="", flush=True)
            for round_ in range(args.runs):
                order = subjects if round_ % 2 == 0 else subjects[::-1]
                for subject in order:
                    for mode in ("first", "second"):
                        wall, rss, _ = run_child(subject.script, stores.url(subject, mode), folder)
                        subject.walls[mode].append(wall)
                        subject.rss[mode].append(rss)
                print(round_ + 1, end=" ", flush=True)
            print()
            report(subjects)
            if not args.no_importtime:
                ours = subjects[0]
                theirs = next(s for s in subjects if s.label == "SqliteSaver")
                extra = import_offenders(
                    ours.script,
                    theirs.script,
                    stores.url(ours, "second"),
                    stores.url(theirs, "second"),
                    folder,
                )
                report_imports(*extra)
        finally:
            if args.postgres:
                stores.close()
    return 0


def report(subjects: list[Subject]) -> None:
    print(f"\n{'subject':22} {'run':7} {'wall median':>12} {'min':>7} {'max':>7} {'peak RSS':>9}")
    medians = {}
    for subject in subjects:
        for mode in ("first", "second"):
            walls, rss = subject.walls[mode], subject.rss[mode]
            medians[subject.label, mode] = (statistics.median(walls), statistics.median(rss))
            print(
                f"{subject.label:22} {mode:7} {statistics.median(walls):11.3f}s "
                f"{min(walls):6.3f}s {max(walls):6.3f}s {statistics.median(rss):7.1f}MB"
            )
    print("\nours / theirs (median wall; peak RSS difference):")
    for ours in subjects:
        if not ours.label.startswith("ours"):
            continue
        theirs = next(
            s for s in subjects if s.family == ours.family and not s.label.startswith("ours")
        )
        for mode in ("first", "second"):
            (w1, r1), (w2, r2) = medians[ours.label, mode], medians[theirs.label, mode]
            print(f"  {ours.label:21} {mode:7} {w1 / w2:5.2f}x   {r1 - r2:+6.1f} MB")


def time_tables(runs: int, postgres: bool) -> int:
    """Median time of making a new store's tables, from the models against ``migrate``."""
    families = ["sqlite", "postgres"] if postgres else ["sqlite"]
    took: dict[tuple[str, str], list[float]] = collections.defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="cold_tables_") as tmp:
        folder = Path(tmp)
        script = folder / "tables.py"
        script.write_text(TABLES)
        try:
            for round_ in range(runs):
                hows = ("models", "migrate") if round_ % 2 == 0 else ("migrate", "models")
                for family in families:
                    for how in hows:
                        if family == "sqlite":
                            url = f"sqlite:///{folder / f'{how}_{round_}.sqlite3'}"
                        else:
                            url = recreate_database("checkpoint_bench_cold_tables")
                        _, _, stderr = run_child(script, url, folder, args=(how,))
                        took[family, how].append(float(stderr.strip().splitlines()[-1]))
        finally:
            if postgres:
                drop_database("checkpoint_bench_cold_tables")
    print(f"\nmaking a new store's tables, {runs} runs each (ms): median  min  max")
    for (family, how), values in took.items():
        values_ms = [v * 1000 for v in values]
        print(
            f"  {family:9} {how:8} {statistics.median(values_ms):7.1f} "
            f"{min(values_ms):6.1f} {max(values_ms):6.1f}"
        )
    return 0


def report_imports(extra_us: int, count: int, packages, roots) -> None:
    print(
        f"\n-X importtime, second run: {count} modules ours imports and SqliteSaver's "
        f"script does not, {extra_us / 1000:.0f} ms of their own time (importtime inflates it)"
    )
    print("  by package (self time):")
    for package, self_us in packages:
        print(f"    {self_us / 1000:7.1f} ms  {package}")
    print("  what pulled them in (cumulative):")
    for cum_us, name in roots:
        print(f"    {cum_us / 1000:7.1f} ms  {name}")


if __name__ == "__main__":
    raise SystemExit(main())
