"""What a worker process pays to open a saver: import time and peak RSS, each in a fresh
interpreter, the remote saver beside LangGraph's SqliteSaver and our in-process one.

    .venv/bin/python -m bench.remote_import --runs 5

The remote saver's figure is its import and its open (no call: the service's address is
not dialled until the first one); SqliteSaver's is its import, an in-memory connection and
``setup()``; ours is ``from_conn_string("sqlite:///...")`` and one read (Django's set-up and
a new store's tables). Medians of ``--runs`` processes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASES = {
    "remote saver (checkpoints+http)": (
        "from checkpoints import from_conn_string\n"
        "with from_conn_string('checkpoints+http://127.0.0.1:9', api_key='k') as s:\n"
        "    pass"
    ),
    "LangGraph SqliteSaver": (
        "import sqlite3\n"
        "from langgraph.checkpoint.sqlite import SqliteSaver\n"
        "s = SqliteSaver(sqlite3.connect(':memory:', check_same_thread=False))\n"
        "s.setup()"
    ),
    "our in-process saver (sqlite:///)": (
        "import os, tempfile\n"
        "from checkpoints import from_conn_string\n"
        "url = 'sqlite:///' + os.path.join(tempfile.mkdtemp(), 'x.sqlite3')\n"
        "with from_conn_string(url) as s:\n"
        "    s.get_tuple({'configurable': {'thread_id': 't'}})"
    ),
}
PROBE = """import resource, sys, time
t = time.perf_counter()
{code}
loaded = sorted(m for m in ("django", "psycopg", "redis") if m in sys.modules)
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, *loaded)
"""


def measure(code: str, runs: int) -> tuple[float, float, list[str]]:
    times, rss, loaded = [], [], []
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-c", PROBE.format(code=code)],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
        seconds, peak, *loaded = done.stdout.split()
        times.append(float(seconds))
        rss.append(int(peak) / 1024)
    return statistics.median(times) * 1000, statistics.median(rss), loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    print(f"{'saver':36} {'import+open ms':>15} {'peak RSS MB':>12}  loaded")
    for name, code in CASES.items():
        ms, mb, loaded = measure(code, args.runs)
        print(f"{name:36} {ms:15.0f} {mb:12.1f}  {', '.join(loaded) or '-'}")


if __name__ == "__main__":
    main()
