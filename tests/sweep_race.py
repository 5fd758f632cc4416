"""Sweeps in real processes, started at the same instant: exactly one may run.

Each process (``SWEEPER``) sets Django up on the test databases, builds its saver, says it
is ready, and waits for the go; ``race_sweeps`` starts them, lets them all go at once and
returns what each one's sweep did.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from django.conf import settings
from django.db import connections

SWEEPER = """
import json, os, sys, time
import django
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
from django.conf import settings
django.setup()
provider, alias, database, default_db, go = sys.argv[1:6]
settings.DATABASES[alias]["NAME"] = database
settings.DATABASES["default"]["NAME"] = default_db
from checkpoints.store.registry import get_saver
from retention.errors import SweepAlreadyRunning
from retention.sweep import register_live_thread_filter, sweep_checkpoints
conn_string = sys.argv[6] if len(sys.argv) > 6 else None
if conn_string:
    saver = get_saver(provider, conn_string=conn_string)
else:
    saver = get_saver(provider, using=alias)
register_live_thread_filter("slow", lambda ids: time.sleep(0.5) or set())
# Ready, then wait for the test's go: every process starts its sweep at the same moment.
saver.thread_holdings("warm-up")
open(f"{go}.{os.getpid()}.ready", "w").close()
while not os.path.exists(go):
    time.sleep(0.01)
try:
    result = sweep_checkpoints(saver=saver, triggered_by=f"process {os.getpid()}")
    print(json.dumps({"ran": result.swept_count}))
except SweepAlreadyRunning as exc:
    print(json.dumps({"refused": str(exc)}))
"""


def start_together(procs: list[subprocess.Popen], go: str) -> None:
    """Wait until every sweeper process is ready, then let them all go at once."""
    deadline = time.monotonic() + 120
    while len(glob.glob(f"{go}.*.ready")) < len(procs):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), [
            p.communicate()[1][-2000:] for p in procs if p.poll() is not None
        ]
        time.sleep(0.05)
    open(go, "w").close()


def race_sweeps(
    tmp_path: Path,
    provider: str,
    alias: str,
    *,
    processes: int,
    conn_string: str | None = None,
    timeout: float = 120,
) -> list[dict]:
    """``processes`` sweeps of the store on ``alias`` (or at ``conn_string``), each in a
    process of its own, started at once; what each printed: ``{"ran": swept count}`` or
    ``{"refused": why}``."""
    connections.close_all()
    script = tmp_path / "sweeper.py"
    script.write_text(textwrap.dedent(SWEEPER))
    database = str(settings.DATABASES[alias]["NAME"])
    default_db = str(settings.DATABASES["default"]["NAME"])
    go = str(tmp_path / "go")
    env = {**os.environ, "PYTHONPATH": str(settings.BASE_DIR)}
    env["CHECKPOINTS_TEST_REDIS_URL"] = settings.REDIS_TEST_URL
    command = [sys.executable, str(script), provider, alias, database, default_db, go]
    procs = [
        subprocess.Popen(
            command + ([conn_string] if conn_string else []),
            cwd=settings.BASE_DIR,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(processes)
    ]
    start_together(procs, go)
    outcomes = []
    for proc in procs:
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err[-3000:]
        outcomes.append(json.loads(out.strip().splitlines()[-1]))
    return outcomes
