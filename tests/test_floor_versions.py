"""The pins' lower bounds are real: our wheel with langgraph 1.2.0 and langgraph-checkpoint
4.3.0 (the floors in pyproject.toml) passes LangGraph's conformance suite and runs a graph
that interrupts and resumes. Builds a fresh venv from the package registry."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.host_venv import build_wheel, host_env, run
from tests.pins import FLOORS

pytestmark = pytest.mark.host
DRIVER = Path(__file__).resolve().parent / "scripts" / "floor_driver.py"


def test_the_floor_versions_pass_conformance_and_run_a_graph(tmp_path):
    wheel = build_wheel(tmp_path)
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", venv], cwd=tmp_path)
    python = venv / "bin" / "python"
    env = {k: v for k, v in host_env(venv).items() if k != "DJANGO_SETTINGS_MODULE"}
    floors = [f"{name}=={'.'.join(map(str, v))}" for name, v in FLOORS.items()]
    run(
        [python, "-m", "pip", "install", "-q", wheel, *floors, "langgraph-checkpoint-conformance"],
        cwd=tmp_path,
        env=env,
        timeout=900,
    )
    out = json.loads(
        run([python, DRIVER, tmp_path / "floor.sqlite3"], cwd=tmp_path, env=env).splitlines()[-1]
    )
    print(f"\nfloor versions: {out}")
    assert (out["langgraph"], out["checkpoint"]) == ("1.2.0", "4.3.0")
    for store in ("memory", "sqlite"):
        assert out[store]["failures"] == [], out[store]["failures"]
        assert out[store]["passed"] >= 70
        assert out[store]["graph"] == ["start", "approved:yes"]
