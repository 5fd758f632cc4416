"""scripts/install.sh on the pip that Python 3.11 ships (23.2, which cannot resolve our
OpenTelemetry pins on its own): it upgrades pip first, installs, and says nothing much."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.host_venv import ROOT, run
from tests.services import need_service

pytestmark = pytest.mark.host

PYTHON_311 = Path("/root/.pyenv/versions/3.11.7/bin/python")
# This machine's pip configuration names local indexes that do not all exist; pip says so
# once per package. The environment's noise, not the install's.
ENVIRONMENT_NOISE = "WARNING: Location 'file:///opt/"


def test_install_script_on_a_fresh_python_311_venv(tmp_path):
    # Under CI's flag a missing interpreter fails the test instead of skipping it.
    need_service(None if PYTHON_311.exists() else f"{PYTHON_311} is not installed (pyenv's 3.11.7)")
    checkout = tmp_path / "checkout"
    files = run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT).splitlines()
    for name in files:
        if (ROOT / name).is_file() and not name.startswith((".venv", "var/")):
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    venv = tmp_path / "venv"
    # The venv made as a newcomer makes it: Python 3.11's own, with its bundled pip 23.2.
    run([PYTHON_311, "-m", "venv", venv], cwd=tmp_path)
    assert run([venv / "bin" / "pip", "--version"], cwd=tmp_path).startswith("pip 23.")
    done = subprocess.run(
        ["bash", "scripts/install.sh", "prod"],
        cwd=checkout,
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(Path.home()),
            "VENV": str(venv),
            "PYTHON": str(PYTHON_311),
        },
        capture_output=True,
        text=True,
        timeout=1800,
    )
    output = [
        line
        for line in (done.stdout + done.stderr).splitlines()
        if line.strip() and not line.startswith(ENVIRONMENT_NOISE)
    ]
    assert done.returncode == 0, "\n".join(output[-60:])
    # No warning walls: setuptools' "Package would be ignored" blocks were ~250 lines.
    assert "Package would be ignored" not in done.stderr
    assert len(output) <= 15, "\n".join(output)
    pip = run([venv / "bin" / "pip", "--version"], cwd=tmp_path)
    assert not pip.startswith("pip 23."), pip  # upgraded first
    run(
        [venv / "bin" / "python", "-c", "import checkpoints, gunicorn, health_check, django_redis"],
        cwd=tmp_path,
    )
