"""This checkout as a user installs it: its wheel, a fresh virtualenv, commands run there.

Shared by the host-project test and the floor-versions test.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(args, *, cwd, env=None, timeout=600) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, (
        f"{args} exited {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n"
        f"--- stderr\n{done.stderr[-4000:]}"
    )
    return done.stdout


def host_env(venv: Path) -> dict[str, str]:
    """The host's own environment: its venv first, nothing of this checkout or its settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "CHECKPOINTS_", "PYTHON", "VIRTUAL_ENV"))
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["DJANGO_SETTINGS_MODULE"] = "host.settings"
    return env


def build_wheel(into: Path) -> Path:
    """The wheel of this checkout's files (a copy, so no stale build/ folder leaks in)."""
    files = run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT).splitlines()
    source = into / "source"
    for name in files:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", source, "-w", into], cwd=into)
    [wheel] = into.glob("checkpoint_store-*.whl")
    return wheel
