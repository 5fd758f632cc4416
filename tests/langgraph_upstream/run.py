"""Run LangGraph's own suite on our savers and on its InMemorySaver, and compare.

    python -m tests.langgraph_upstream.run [--providers memory sqlite postgres redis]

Fetches the installed langgraph's sdist (see sdist.py), then runs every upstream test
module that takes ``sync_checkpointer`` / ``async_checkpointer``: one pytest process per
provider, side by side, plus the ``baseline`` process (upstream's InMemorySaver). Prints
provider / tests / passed / failed / differential failures (failed on ours, passed on the
baseline) and exits 1 when there is any differential failure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from tests.langgraph_upstream.sdist import installed_version, upstream_root

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROVIDERS = ("memory", "sqlite", "postgres", "redis")
BASELINE = "baseline"
FIXTURE_RE = re.compile(r"\b(sync_checkpointer|async_checkpointer)\b")


@dataclass
class Result:
    provider: str
    outcomes: dict[str, str] = field(default_factory=dict)  # test id -> passed/failed/skipped
    returncode: int = 0
    seconds: float = 0.0
    log: str = ""
    flaky: list[str] = field(default_factory=list)  # failed, then passed when run again

    def count(self, outcome: str) -> int:
        return sum(1 for o in self.outcomes.values() if o == outcome)


def modules(root: Path) -> list[str]:
    """Upstream test modules that take a checkpointer through the two fixtures."""
    return sorted(
        f"tests/{p.name}"
        for p in (root / "tests").glob("test_*.py")
        if FIXTURE_RE.search(p.read_text(encoding="utf-8"))
    )


def command(root: Path, junit: Path, tests: list[str]) -> list[str]:
    return [
        sys.executable, "-m", "pytest", "-p", "lgsuite_plugin",
        # Our pytest-django would guard the database; upstream's config is not ours to load.
        "-p", "no:django", "-p", "no:cacheprovider",
        "-c", str(root / "pyproject.toml"), "--rootdir", str(root),
        "-o", "addopts=", "-o", "asyncio_default_fixture_loop_scope=function",
        "-q", "--no-header", "-rN", "--tb=short", f"--junitxml={junit}",
        *tests,
    ]  # fmt: skip


def env_for(provider: str, root: Path, tag: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    # Upstream's `tests` package must win over ours; then the plugin, then our code.
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(HERE), str(REPO)])
    env["LGSUITE_PROVIDER"] = provider
    env["LGSUITE_RUN_TAG"] = f"{tag}_{provider}"
    env["NO_DOCKER"] = "true"  # upstream's own postgres/redis store and cache fixtures
    return env


def parse_junit(path: Path) -> dict[str, str]:
    outcomes: dict[str, str] = {}
    if not path.exists():
        return outcomes
    for case in ET.parse(path).iter("testcase"):
        parts = case.get("classname", "").split(".")
        # A test in a class: junit's classname ends with the class; pytest's id names it apart.
        inner = [p for p in parts if p.startswith("Test")]
        module = parts[: len(parts) - len(inner)]
        test_id = "::".join([f"{'/'.join(module)}.py", *inner, case.get("name", "")])
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        # A test can report twice (call and teardown): any failure wins.
        if outcomes.get(test_id) != "failed":
            outcomes[test_id] = outcome
    return outcomes


def _start(provider: str, root: Path, junit: Path, log_path: Path, tag: str, tests: list[str]):
    log = log_path.open("w")
    proc = subprocess.Popen(
        command(root, junit, tests),
        cwd=root,
        env=env_for(provider, root, tag),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, log, time.monotonic()


def run(providers: list[str], extra: list[str], workdir: Path) -> dict[str, Result]:
    root = upstream_root()
    tag = str(os.getpid())
    procs = {
        provider: _start(
            provider,
            root,
            workdir / f"{provider}.xml",
            workdir / f"{provider}.log",
            tag,
            [*extra, *modules(root)],
        )
        for provider in [BASELINE, *providers]
    }
    results = {}
    for provider, (proc, log, started) in procs.items():
        proc.wait()
        log.close()
        results[provider] = Result(
            provider,
            parse_junit(workdir / f"{provider}.xml"),
            proc.returncode,
            time.monotonic() - started,
            str(workdir / f"{provider}.log"),
        )
    return results


def rerun_differential(results: dict[str, Result], extra: list[str], workdir: Path) -> None:
    """Run each provider's differential failures once more, alone; a pass there is flaky.

    Some upstream tests assert stream timing or the arrival order of parallel tasks, and
    fail now and then under load (the baseline too). A test that passes when run again is
    reported as flaky rather than counted; one that fails again stays a failure.
    """
    root = upstream_root()
    tag = f"{os.getpid()}r"
    procs = {}
    for name in results:
        if name == BASELINE:
            continue
        again = differential(results, name)
        if again:
            procs[name] = _start(
                name,
                root,
                workdir / f"{name}.rerun.xml",
                workdir / f"{name}.rerun.log",
                tag,
                [*extra, *again],
            )
    for name, (proc, log, _started) in procs.items():
        proc.wait()
        log.close()
        second = parse_junit(workdir / f"{name}.rerun.xml")
        for test_id, outcome in second.items():
            if outcome == "passed" and results[name].outcomes.get(test_id) == "failed":
                results[name].outcomes[test_id] = "passed"
                results[name].flaky.append(test_id)


def differential(results: dict[str, Result], provider: str) -> list[str]:
    base = results[BASELINE].outcomes
    return sorted(
        t
        for t, o in results[provider].outcomes.items()
        if o == "failed" and base.get(t) == "passed"
    )


def table(results: dict[str, Result]) -> str:
    rows = [
        ("provider", "tests", "passed", "failed", "skipped", "differential", "flaky", "seconds")
    ]
    for name, r in results.items():
        diff = "-" if name == BASELINE else str(len(differential(results, name)))
        rows.append(
            (
                name,
                str(len(r.outcomes)),
                str(r.count("passed")),
                str(r.count("failed")),
                str(r.count("skipped")),
                diff,
                str(len(r.flaky)),
                f"{r.seconds:.0f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", nargs="+", choices=PROVIDERS, default=list(PROVIDERS))
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", type=Path, help="folder for the logs and junit files")
    parser.add_argument(
        "--no-rerun", action="store_true", help="count a differential failure at once"
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="lgsuite-run-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = run(args.providers, args.pytest_args, workdir)
    if not args.no_rerun:
        rerun_differential(results, args.pytest_args, workdir)
    wall = time.monotonic() - started
    print(f"LangGraph {installed_version()} suite on our savers (logs in {workdir})")
    print(table(results))
    print(f"wall time: {wall:.0f}s")
    failed_runs = []
    total = 0
    for name, r in results.items():
        if not r.outcomes:
            failed_runs.append(name)
            print(f"\n{name}: no results (exit {r.returncode}); see {r.log}")
    for name in args.providers:
        diff = differential(results, name)
        total += len(diff)
        if diff:
            print(f"\n{name}: {len(diff)} differential failure(s)")
            for t in diff:
                print(f"  {t}")
        if results[name].flaky:
            print(f"\n{name}: {len(results[name].flaky)} flaky (failed, passed when run again)")
            for t in results[name].flaky:
                print(f"  {t}")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "langgraph": installed_version(),
                    "wall_seconds": round(wall),
                    "results": {
                        n: {
                            "tests": len(r.outcomes),
                            "passed": r.count("passed"),
                            "failed": r.count("failed"),
                            "skipped": r.count("skipped"),
                            "differential": [] if n == BASELINE else differential(results, n),
                            "flaky": r.flaky,
                            "log": r.log,
                        }
                        for n, r in results.items()
                    },
                },
                indent=2,
            )
        )
    return 1 if total or failed_runs else 0


if __name__ == "__main__":
    sys.exit(main())
