"""LangGraph's own suite passes on every provider wherever it passes on InMemorySaver.

Slow (minutes) and needs the network for the sdist, so it is kept out of the default run:
``.venv/bin/pytest -m langgraph_suite`` (CI's separate step).
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.langgraph_suite
def test_no_differential_failures(tmp_path):
    out = tmp_path / "results.json"
    done = subprocess.run(
        [sys.executable, "-m", "tests.langgraph_upstream.run", "--json", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    print(done.stdout)
    assert out.exists(), f"the suite did not finish:\n{done.stdout}\n{done.stderr[-4000:]}"
    results = json.loads(out.read_text())["results"]
    for name, r in results.items():
        assert r["tests"] > 0, f"{name} ran no test; see {r['log']}"
    differential = {n: r["differential"] for n, r in results.items() if r["differential"]}
    assert not differential, done.stdout
    assert done.returncode == 0, done.stdout


@pytest.mark.peer_suites
def test_peer_suites_differ_only_as_the_allow_list_says(tmp_path):
    """The suites of langgraph-checkpoint, -sqlite and -postgres, each test on the peer saver
    and on ours: a test that passes on the peer fails on ours only if peer_allowlist.toml
    says why (or names it a test of the peer's own API)."""
    out = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.langgraph_upstream.run",
            "--suite",
            "checkpoint",
            "sqlite",
            "postgres",
            "--json",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(done.stdout)
    assert out.exists(), f"the suites did not finish:\n{done.stdout}\n{done.stderr[-4000:]}"
    results = json.loads(out.read_text())["results"]
    for name, r in results.items():
        assert r["tests"] > 0, f"{name} ran no test; see {r['log']}"
    unexplained = {n: r["unexplained"] for n, r in results.items() if r.get("unexplained")}
    assert not unexplained, done.stdout
    assert done.returncode == 0, done.stdout
