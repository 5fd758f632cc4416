"""A real Celery worker process runs the sweep task against the shared PostgreSQL store."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from celery import Celery
from django.db import connections

from checkpoints.savers.base import utcnow
from checkpoints.savers.orm import forget_format_checks
from retention.models import SweepRun
from retention.runs import mark_finished
from tests.conftest import need_service
from tests.retention_fixtures import holds, write

BROKER = os.environ.get("CHECKPOINTS_TEST_CELERY_BROKER", "redis://127.0.0.1:6379/14")
ROOT = Path(__file__).resolve().parents[2]


def _broker_unavailable() -> str | None:
    try:
        import redis

        redis.Redis.from_url(BROKER, socket_connect_timeout=2).ping()
        return None
    except Exception as exc:  # noqa: BLE001
        return f"the Celery test broker {BROKER} is not reachable: {exc}"


def _database_url() -> str:
    entry = connections["pg"].settings_dict
    auth = entry["USER"] + (f":{entry['PASSWORD']}" if entry["PASSWORD"] else "")
    return f"postgres://{auth}@{entry['HOST']}:{entry['PORT'] or 5432}/{entry['NAME']}"


@pytest.mark.parametrize("provider", ["postgres"])
def test_a_worker_runs_the_sweep_task_on_the_deployment_store(store, tmp_path):
    need_service(_broker_unavailable())
    # The flush between tests drops the recorded format; record it again for the worker.
    forget_format_checks()
    store.ensure_format()
    write(store, "done")
    write(store, "open")
    mark_finished(store, "done", now=utcnow() - timedelta(days=2))

    queue = f"sweep-test-{uuid.uuid4().hex}"
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLM_PROVIDER_CHECKPOINT", "CELERY_", "PYTEST_", "DJANGO_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=_database_url(),
        LLM_PROVIDER_CHECKPOINT="postgres",
        CELERY_BROKER_URL=BROKER,
        CELERY_RESULT_BACKEND=BROKER,
        REDIS_URL=BROKER,
        CHECKPOINTS_DATA_DIR=str(tmp_path),
    )
    log = open(tmp_path / "worker.log", "w")  # noqa: SIM115 - closed in finally
    worker = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "celery"),
            "-A",
            "project",
            "worker",
            "--pool=solo",
            "-Q",
            queue,
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "--without-heartbeat",
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    client = Celery("sweep-test-client", broker=BROKER, backend=BROKER)
    try:
        pending = client.send_task(
            "retention.tasks.sweep_checkpoints",
            kwargs={"now": utcnow().isoformat()},
            queue=queue,
        )
        try:
            result = pending.get(timeout=90)
        except Exception:
            log.flush()
            pytest.fail(f"worker did not sweep:\n{(tmp_path / 'worker.log').read_text()[-4000:]}")
    finally:
        worker.terminate()
        try:
            worker.wait(20)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait(10)
        log.close()
        client.close()

    assert result["provider"] == "postgres"
    assert (result["swept_count"], result["finished_swept"]) == (1, 1)
    assert not holds(store, "done") and holds(store, "open")
    run = SweepRun.objects.using("pg").get(pk=result["sweep_run_id"])
    assert run.triggered_by == "celery" and run.finished_swept == 1
