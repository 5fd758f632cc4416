"""The remote saver end to end, beside PostgresSaver direct and our in-process saver.

    .venv/bin/python -m bench.remote --turns 20 --threads 4

The chat graph (`bench.graph`: ten nodes a turn, every checkpoint written synchronously)
and its heavy variant (a 64 KB document every eighth step) run the same turns through:

- ``lg-postgres``: LangGraph's PostgresSaver on its own database;
- ``orm-pg``: our saver in this process (``from_conn_string("postgresql://...")``);
- ``remote-pg``: the remote saver, against the service as production runs it (gunicorn with
  uvicorn workers, ``project.asgi``) on 127.0.0.1, its store our PostgreSQL saver on a
  database of its own.

Turns per second (median of the threads' runs, each thread its own turns in sequence) and
the ratio to ``lg-postgres``. Each database (``checkpoint_bench_remote*``) is dropped and
made again at the start, and dropped at the end; the service is stopped.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psycopg

from bench.graph import build_graph, run_turn

ROOT = Path(__file__).resolve().parent.parent
PG = os.environ.get("CHECKPOINTS_BENCH_PG", "postgresql://postgres@127.0.0.1:5432/")
DATABASES = (
    "checkpoint_bench_remote_lg",
    "checkpoint_bench_remote_ours",
    "checkpoint_bench_remote_svc",
)
TOKEN_SCRIPT = (
    "from django.contrib.auth.models import User\n"
    "from rest_framework.authtoken.models import Token\n"
    "u = User.objects.create_superuser('bench', '', 'bench')\n"
    "print('TOKEN', Token.objects.create(user=u).key)\n"
)


def _reset(*names: str, create: bool = True) -> None:
    with psycopg.connect(PG + "postgres", autocommit=True) as conn:
        for name in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            if create:
                conn.execute(f'CREATE DATABASE "{name}"')


class Service:
    """gunicorn + uvicorn workers on a free port, as scripts/serve.sh runs the service."""

    def __init__(self, database: str, workers: int) -> None:
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.folder = tempfile.mkdtemp(prefix="bench-remote-")
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")},
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DJANGO_DEBUG": "0",
            "DJANGO_SECRET_KEY": "bench-only-" + "0123456789abcdef" * 4,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "DATABASE_URL": PG + database,
            "LLM_PROVIDER_CHECKPOINT": "postgres",
            "CHECKPOINTS_DATA_DIR": self.folder,
            "REDIS_URL": os.environ.get("CHECKPOINTS_BENCH_REDIS_URL", "redis://127.0.0.1:6379/13"),
        }
        self.workers = workers
        self.process: subprocess.Popen | None = None
        self.token = ""

    def start(self) -> None:
        manage = [sys.executable, "manage.py"]
        subprocess.run([*manage, "migrate", "-v", "0"], cwd=ROOT, env=self.env, check=True)
        out = subprocess.run(
            [*manage, "shell", "-c", TOKEN_SCRIPT],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        self.token = next(line.split()[1] for line in out.splitlines() if line.startswith("TOKEN"))
        log = open(Path(self.folder) / "service.log", "w")  # noqa: SIM115 - the server's
        self.process = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("gunicorn")),
                "project.asgi:application",
                "--worker-class",
                "uvicorn_worker.UvicornWorker",
                "--bind",
                f"127.0.0.1:{self.port}",
                "--workers",
                str(self.workers),
            ],
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.post(f"http://127.0.0.1:{self.port}/store/v1/info", timeout=2)
                return
            except httpx.TransportError as exc:
                if time.monotonic() > deadline or self.process.poll() is not None:
                    log = (Path(self.folder) / "service.log").read_text()[-3000:]
                    raise RuntimeError(log) from exc
                time.sleep(0.3)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(30)


def _turns(saver, label: str, turns: int, threads: int, documents) -> float:
    """Turns per second: the median over ``threads`` threads run one after the other."""
    graph = build_graph(saver, documents=documents)
    rates = []
    for n in range(threads):
        thread_id = f"{label}-{'heavy' if documents else 'chat'}-{n}"
        run_turn(graph, thread_id, 0)  # warm: connections, prepared statements
        started = time.perf_counter()
        for turn in range(1, turns + 1):
            run_turn(graph, thread_id, turn)
        rates.append(turns / (time.perf_counter() - started))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2, help="the service's gunicorn workers")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from langgraph.checkpoint.postgres import PostgresSaver

    from checkpoints import from_conn_string
    from checkpoints.remote import RemoteSaver

    _reset(*DATABASES)
    service = Service(DATABASES[2], args.workers)
    documents = ["d" * 65536, "e" * 65536]
    results: dict[str, dict[str, float]] = {}
    try:
        service.start()
        with (
            PostgresSaver.from_conn_string(PG + DATABASES[0]) as theirs,
            from_conn_string(PG + DATABASES[1]) as ours,
            RemoteSaver(f"http://127.0.0.1:{service.port}", api_key=service.token) as remote,
        ):
            theirs.setup()
            for label, saver in (("lg-postgres", theirs), ("orm-pg", ours), ("remote-pg", remote)):
                results[label] = {
                    "chat": _turns(saver, label, args.turns, args.threads, None),
                    "heavy": _turns(saver, label, args.turns, args.threads, documents),
                }
    finally:
        service.stop()
        _reset(*DATABASES, create=False)
    base = results["lg-postgres"]
    print(f"{'saver':14} {'chat turns/s':>13} {'x lg':>6} {'heavy turns/s':>14} {'x lg':>6}")
    for label, found in results.items():
        print(
            f"{label:14} {found['chat']:13.1f} {found['chat'] / base['chat']:6.2f} "
            f"{found['heavy']:14.1f} {found['heavy'] / base['heavy']:6.2f}"
        )


if __name__ == "__main__":
    main()
