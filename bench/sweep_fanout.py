"""The parts of `python -m bench.sweep` that need other processes: two real Celery workers
sweeping one fanned-out run, and the admin and API lists timed in a process whose
deployment store is the bench's PostgreSQL database."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BROKER = os.environ.get("CHECKPOINTS_BENCH_BROKER_URL", "redis://127.0.0.1:6379/12")


def deployment_env(database: dict, **extra: str) -> dict[str, str]:
    """The environment of a process whose store (and default database) is ``database``."""
    from checkpoints.dburl import database_url

    url = database_url(database)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLM_PROVIDER_CHECKPOINT", "CELERY_", "DJANGO_", "CHECKPOINTS_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DJANGO_DEBUG="0",
        # DEBUG off refuses the dev key and "*" hosts; the benchmark's workers serve no one.
        DJANGO_SECRET_KEY="bench-only-" + "0123456789abcdef" * 4,
        DJANGO_ALLOWED_HOSTS="127.0.0.1",
        LOG_LEVEL="WARNING",
        DATABASE_URL=url,
        LLM_PROVIDER_CHECKPOINT="postgres",
        CELERY_BROKER_URL=BROKER,
        CELERY_RESULT_BACKEND=BROKER,
        PYTHONPATH=str(ROOT),
        **extra,
    )
    return env


def start_worker(queue: str, name: str, *, env: dict, log_path: Path, loglevel="WARNING",
                 include: str | None = None):  # fmt: skip
    """A real Celery worker process (solo pool) on ``queue``, named ``name@host``, writing
    to ``log_path``; returns (process, log file) for `stop_worker`."""
    log = open(log_path, "w")  # noqa: SIM115 - closed by stop_worker
    worker = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "project",
            "worker",
            "--pool=solo",
            "-n",
            f"{name}@%h",
            "-Q",
            queue,
            "--prefetch-multiplier=1",
            f"--loglevel={loglevel}",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
            *(["--include", include] if include else []),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return worker, log


def stop_worker(worker, log) -> None:
    worker.terminate()
    try:
        worker.wait(20)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait(10)
    log.close()


def time_lists(database: dict, long_thread: str, *options: str) -> dict:
    """Run `bench.lists` against ``database`` (``long_thread``: the id of its long thread);
    its JSON summary."""
    done = subprocess.run(
        [sys.executable, "-m", "bench.lists", "--long-thread", long_thread, *options],
        cwd=ROOT,
        env=deployment_env(database),
        stdout=subprocess.PIPE,
        check=True,
        text=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def fan_out_on_two_workers(database: dict, alias: str, now, log_dir: Path) -> tuple[float, dict]:
    """Seconds from sending `fan_out_sweep` until its run closed, and the run's record."""
    from celery import Celery

    from retention.models import SweepRun

    queue = f"bench-fanout-{uuid.uuid4().hex[:8]}"
    env = deployment_env(database)
    log_dir.mkdir(parents=True, exist_ok=True)
    workers = [
        start_worker(queue, name, env=env, log_path=log_dir / f"worker-{name}.log")
        for name in ("one", "two")
    ]
    client = Celery("bench-fanout", broker=BROKER, backend=BROKER)
    try:
        # Wait until both workers answer, so their start-up is not timed.
        deadline = time.monotonic() + 60
        while len(client.control.ping(timeout=1.0) or []) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the workers did not start; see {log_dir}")
        start = time.perf_counter()
        sent = client.send_task(
            "retention.tasks.fan_out_sweep", kwargs={"now": now.isoformat()}, queue=queue
        ).get(timeout=600)
        runs = SweepRun.objects.using(alias)
        while runs.get(pk=sent["sweep_run_id"]).status == SweepRun.RUNNING:
            time.sleep(0.05)
        elapsed = time.perf_counter() - start
        run = runs.get(pk=sent["sweep_run_id"])
        workers_used = sorted(
            {w.split("@")[0] for w in run.batches.using(alias).values_list("worker", flat=True)}
        )
        return elapsed, {
            "status": run.status,
            "swept_count": run.swept_count,
            "batches": run.batches_total,
            "workers": workers_used,
        }
    finally:
        for worker, log in workers:
            stop_worker(worker, log)
        client.close()
