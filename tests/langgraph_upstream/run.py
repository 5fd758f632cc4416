"""Run LangGraph's own suite on our savers and on its InMemorySaver, and compare.

    python -m tests.langgraph_upstream.run [--providers memory ... remote-redis]
    python -m tests.langgraph_upstream.run --suite checkpoint sqlite postgres

The second form runs the suites of LangGraph's saver packages (`SUITES`), each test once on
the peer saver (``baseline``) and once on each of ours (in process and the remote saver), and
judges them with `peer_allowlist.toml`.

Fetches the installed langgraph's sdist (see sdist.py), then runs every upstream test
module that takes ``sync_checkpointer`` / ``async_checkpointer``: one pytest process per
provider, side by side, plus the ``baseline`` process (upstream's InMemorySaver). Prints
provider / tests / passed / failed / differential failures (failed on ours, passed on the
baseline) and exits 1 when there is any differential failure; for a saver package's suite,
any that `peer_allowlist.toml` does not list (see `exit_code`).
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
# The remote saver on a store service in the suite's process, backed by PostgreSQL or Redis,
# runs by default (the main suite runs it on SQLite); remote-sqlite on request.
REMOTE = ("remote-postgres", "remote-redis")
DEFAULT = (*PROVIDERS, *REMOTE)
CHOICES = (*PROVIDERS, "remote-sqlite", *REMOTE)
BASELINE = "baseline"
FIXTURE_RE = re.compile(r"\b(sync_checkpointer|async_checkpointer)\b")
ALLOWLIST = HERE / "peer_allowlist.toml"


@dataclass(frozen=True)
class Suite:
    name: str
    package: str  # whose sdist's tests/ are run
    providers: tuple[str, ...]  # ours, each compared with the baseline (the peer saver)


SUITES = {
    "langgraph": Suite("langgraph", "langgraph", PROVIDERS),
    # InMemorySaver's tests on the providers that keep no SQL: the remote saver's among them
    # is the service on Redis, the one store the other two suites' remote savers leave out.
    "checkpoint": Suite("checkpoint", "langgraph-checkpoint", ("memory", "redis", "remote-redis")),
    # Each SQL package's tests also on the remote saver whose service keeps that database.
    "sqlite": Suite("sqlite", "langgraph-checkpoint-sqlite", ("sqlite", "remote-sqlite")),
    "postgres": Suite("postgres", "langgraph-checkpoint-postgres", ("postgres", "remote-postgres")),
}
PEER_SUITES = [s for s in SUITES if s != "langgraph"]


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


def modules(root: Path, suite: str = "langgraph") -> list[str]:
    """Upstream test modules that take a checkpointer through the two fixtures.

    For a saver package's suite: its test modules less those the allow-list marks as not
    applicable as a whole (its BaseStore tests, say).
    """
    if suite != "langgraph":
        skip = {e["module"] for e in allowlist(suite)["not_applicable_modules"]}
        return sorted(
            f"tests/{p.name}"
            for p in (root / "tests").glob("test_*.py")
            if f"tests/{p.name}" not in skip
        )
    return sorted(
        f"tests/{p.name}"
        for p in (root / "tests").glob("test_*.py")
        if FIXTURE_RE.search(p.read_text(encoding="utf-8"))
    )


# What each kind of allow-list entry must say (besides ``suite``), and may.
ENTRY_KEYS = {
    "allow": ({"test", "why", "ours"}, set()),
    "not_applicable": ({"test", "reason"}, {"ours"}),
    "not_applicable_modules": ({"module", "reason"}, set()),
}


class AllowListError(ValueError):
    """peer_allowlist.toml holds an entry that does not say what its kind must."""


def load_allowlist(text: str) -> dict[str, list[dict]]:
    """Every entry of an allow-list's TOML, checked: each names a known suite and says what
    its kind must (an ``allow`` entry the test, why ours differs and the test of ours that
    shows ours right; a ``not_applicable`` one the test and why), in words, not blanks."""
    import tomllib

    data = tomllib.loads(text)
    unknown = set(data) - set(ENTRY_KEYS)
    if unknown:
        raise AllowListError(f"unknown kind(s) of entry: {sorted(unknown)}; use {list(ENTRY_KEYS)}")
    out: dict[str, list[dict]] = {kind: [] for kind in ENTRY_KEYS}
    for kind, (required, optional) in ENTRY_KEYS.items():
        for n, entry in enumerate(data.get(kind, []), 1):
            where = f"[[{kind}]] #{n} ({entry.get('test') or entry.get('module') or '?'})"
            if entry.get("suite") not in SUITES or entry.get("suite") == "langgraph":
                raise AllowListError(f"{where}: suite must be one of {PEER_SUITES}")
            missing = sorted(k for k in required if not str(entry.get(k, "")).strip())
            if missing:
                raise AllowListError(f"{where}: says no {', '.join(missing)}")
            extra = sorted(set(entry) - required - optional - {"suite"})
            if extra:
                raise AllowListError(f"{where}: unknown key(s) {extra}")
            out[kind].append(entry)
    return out


def allowlist(suite: str, path: Path | None = None) -> dict[str, list[dict]]:
    """The suite's entries of peer_allowlist.toml: allowed differences and not-applicable tests.

    Each ``allow`` entry names a test, why ours differs and the test of ours that shows ours
    is right; each ``not_applicable`` entry a test of the peer's own API and why (and, where
    the behaviour it observes through that API matters, ``ours``: our test of it).
    """
    data = load_allowlist((path or ALLOWLIST).read_text(encoding="utf-8"))
    return {kind: [e for e in entries if e["suite"] == suite] for kind, entries in data.items()}


def _matches(test_id: str, pattern: str) -> bool:
    """An entry names a test id; each ``*`` in it stands for any text, so ``test_x*`` covers
    every parametrization of test_x and ``test_x[*-counters]`` those ending so."""
    if "*" not in pattern:
        return test_id == pattern
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), test_id) is not None


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


def env_for(provider: str, root: Path, tag: str, suite: str = "langgraph") -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DJANGO_SETTINGS_MODULE", None)
    # Upstream's `tests` package must win over ours; then the plugin, then our code.
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(HERE), str(REPO)])
    env["LGSUITE_PROVIDER"] = provider
    env["LGSUITE_SUITE"] = suite
    env["LGSUITE_RUN_TAG"] = (
        f"{tag}_{provider}" if suite == "langgraph" else f"{tag}_{suite}_{provider}"
    )
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


def _start(
    provider: str,
    root: Path,
    junit: Path,
    log_path: Path,
    tag: str,
    tests: list[str],
    suite: str = "langgraph",
):
    log = log_path.open("w")
    proc = subprocess.Popen(
        command(root, junit, tests),
        cwd=root,
        env=env_for(provider, root, tag, suite),
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return proc, log, time.monotonic()


def _root(suite: str) -> Path:
    return upstream_root(package=SUITES[suite].package)


def _name(suite: str, provider: str) -> str:
    """A result's key and file stem: the provider alone for LangGraph's suite."""
    return provider if suite == "langgraph" else f"{suite}.{provider}"


def run(
    providers: list[str], extra: list[str], workdir: Path, suites: tuple[str, ...] = ("langgraph",)
) -> dict[str, Result]:
    """Every suite's processes side by side: its baseline and each of its providers."""
    tag = str(os.getpid())
    procs = {}
    for suite in suites:
        root = _root(suite)
        chosen = providers if suite == "langgraph" else SUITES[suite].providers
        for provider in [BASELINE, *chosen]:
            name = _name(suite, provider)
            procs[name] = _start(
                provider,
                root,
                workdir / f"{name}.xml",
                workdir / f"{name}.log",
                tag,
                [*extra, *modules(root, suite)],
                suite,
            )
    results = {}
    for name, (proc, log, started) in procs.items():
        proc.wait()
        log.close()
        results[name] = Result(
            name,
            parse_junit(workdir / f"{name}.xml"),
            proc.returncode,
            time.monotonic() - started,
            str(workdir / f"{name}.log"),
        )
    return results


def _split(name: str) -> tuple[str, str]:
    suite, _, provider = name.rpartition(".")
    return suite or "langgraph", provider


def _baseline(results: dict[str, Result], name: str) -> Result:
    suite, _ = _split(name)
    return results[_name(suite, BASELINE)]


def rerun_differential(results: dict[str, Result], extra: list[str], workdir: Path) -> None:
    """Run each provider's differential failures once more, alone; a pass there is flaky.

    Some upstream tests assert stream timing or the arrival order of parallel tasks, and
    fail now and then under load (the baseline too). A test that passes when run again is
    reported as flaky rather than counted; one that fails again stays a failure.
    """
    tag = f"{os.getpid()}r"
    procs = {}
    for name in results:
        suite, provider = _split(name)
        if provider == BASELINE:
            continue
        again = differential(results, name)
        if again:
            procs[name] = _start(
                provider,
                _root(suite),
                workdir / f"{name}.rerun.xml",
                workdir / f"{name}.rerun.log",
                tag,
                [*extra, *again],
                suite,
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
    base = _baseline(results, provider).outcomes
    return sorted(
        t
        for t, o in results[provider].outcomes.items()
        if o == "failed" and base.get(t) == "passed"
    )


def judged(
    results: dict[str, Result], name: str, entries: dict[str, list[dict]] | None = None
) -> dict[str, list]:
    """A peer suite's differential failures sorted by the allow-list.

    ``unexplained`` fails the run; ``allowed`` and ``not_applicable`` are (test, reason);
    ``stale`` are allow and not-applicable entries no test fails only on ours any more
    (printed, so they are taken off, but not failing the run).
    """
    suite, _ = _split(name)
    entries = allowlist(suite) if entries is None else entries
    out: dict[str, list] = {"unexplained": [], "allowed": [], "not_applicable": [], "stale": []}
    diff = differential(results, name)
    for test_id in diff:
        na = next((e for e in entries["not_applicable"] if _matches(test_id, e["test"])), None)
        ok = next((e for e in entries["allow"] if _matches(test_id, e["test"])), None)
        if na:
            out["not_applicable"].append((test_id, na["reason"]))
        elif ok:
            out["allowed"].append((test_id, ok["why"]))
        else:
            out["unexplained"].append(test_id)
    for e in [*entries["allow"], *entries["not_applicable"]]:
        if not any(_matches(t, e["test"]) for t in diff):
            out["stale"].append(e["test"])
    return out


def exit_code(results: dict[str, Result], verdicts: dict[str, dict[str, list]]) -> int:
    """1 when a run gave no results, LangGraph's suite failed a test only on ours, or a peer
    suite did so with no allow-list entry saying why; else 0."""
    for name, r in results.items():
        if not r.outcomes:
            return 1
        suite, provider = _split(name)
        if provider == BASELINE:
            continue
        if suite == "langgraph" and differential(results, name):
            return 1
        if suite != "langgraph" and verdicts[name]["unexplained"]:
            return 1
    return 0


def peer_table(results: dict[str, Result]) -> str:
    """The issue's table: per suite and provider, tests / pass on both / fail only on ours."""
    rows = [
        (
            "suite -> ours",
            "tests",
            "pass on both",
            "fail only on ours",
            "allowed",
            "n/a",
            "unexplained",
            "seconds",
        )
    ]
    for name, r in results.items():
        suite, provider = _split(name)
        if suite == "langgraph" or provider == BASELINE:
            continue
        base = _baseline(results, name).outcomes
        both = sum(1 for t, o in r.outcomes.items() if o == "passed" and base.get(t) == "passed")
        j = judged(results, name)
        rows.append(
            (
                f"{suite} -> {provider}",
                str(len(r.outcomes)),
                str(both),
                str(len(differential(results, name))),
                str(len(j["allowed"])),
                str(len(j["not_applicable"])),
                str(len(j["unexplained"])),
                f"{r.seconds:.0f}",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows
    )


def table(results: dict[str, Result]) -> str:
    rows = [
        ("provider", "tests", "passed", "failed", "skipped", "differential", "flaky", "seconds")
    ]
    for name, r in results.items():
        diff = "-" if _split(name)[1] == BASELINE else str(len(differential(results, name)))
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
    parser.add_argument("--providers", nargs="+", choices=CHOICES, default=list(DEFAULT))
    parser.add_argument(
        "--suite", nargs="+", choices=list(SUITES), default=["langgraph"], help="whose tests"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--keep", type=Path, help="folder for the logs and junit files")
    parser.add_argument(
        "--no-rerun", action="store_true", help="count a differential failure at once"
    )
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    for suite in args.suite:
        if suite != "langgraph":
            allowlist(suite)  # a malformed entry stops the run before minutes of tests
    started = time.monotonic()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="lgsuite-run-"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = run(args.providers, args.pytest_args, workdir, tuple(args.suite))
    if not args.no_rerun:
        rerun_differential(results, args.pytest_args, workdir)
    wall = time.monotonic() - started
    versions = ", ".join(
        f"{SUITES[s].package} {installed_version(SUITES[s].package)}" for s in args.suite
    )
    print(f"{versions}: suites on our savers (logs in {workdir})")
    print(table(results))
    if any(s != "langgraph" for s in args.suite):
        print()
        print(peer_table(results))
    print(f"wall time: {wall:.0f}s")
    for name, r in results.items():
        if not r.outcomes:
            print(f"\n{name}: no results (exit {r.returncode}); see {r.log}")
    verdicts = {}
    for name in results:
        suite, provider = _split(name)
        if provider == BASELINE:
            continue
        diff = differential(results, name)
        if suite == "langgraph":
            if diff:
                print(f"\n{name}: {len(diff)} differential failure(s)")
                for t in diff:
                    print(f"  {t}")
        else:
            verdicts[name] = j = judged(results, name)
            if j["unexplained"]:
                print(f"\n{name}: {len(j['unexplained'])} fail only on ours, not on the allow-list")
                for t in j["unexplained"]:
                    print(f"  {t}")
            for kind in ("allowed", "not_applicable"):
                if j[kind]:
                    print(f"\n{name}: {len(j[kind])} {kind.replace('_', ' ')}")
                    for t, why in j[kind]:
                        print(f"  {t}: {why}")
            if j["stale"]:
                print(f"\n{name}: allow-list entries that no longer fail only on ours")
                for t in j["stale"]:
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
                    "suites": {s: installed_version(SUITES[s].package) for s in args.suite},
                    "wall_seconds": round(wall),
                    "results": {
                        n: {
                            "tests": len(r.outcomes),
                            "passed": r.count("passed"),
                            "failed": r.count("failed"),
                            "skipped": r.count("skipped"),
                            "differential": []
                            if _split(n)[1] == BASELINE
                            else differential(results, n),
                            **(
                                {
                                    kind: [t if kind == "unexplained" else t[0] for t in ts]
                                    for kind, ts in verdicts[n].items()
                                    if kind != "stale"
                                }
                                if n in verdicts
                                else {}
                            ),
                            "flaky": r.flaky,
                            "log": r.log,
                        }
                        for n, r in results.items()
                    },
                },
                indent=2,
            )
        )
    return exit_code(results, verdicts)


if __name__ == "__main__":
    sys.exit(main())
