"""A real Celery worker process runs the sweep task against the shared PostgreSQL store."""

from __future__ import annotations

import os
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from celery import Celery
from django.db import connections

from bench import sweep_fanout as fanout_workers
from checkpoints.dburl import database_url
from checkpoints.models import StoreLease
from checkpoints.store.orm.ledger import forget_format_checks
from checkpoints.store.planning import utcnow
from retention.models import SweepBatch, SweepRun
from retention.runs import mark_finished
from tests.retention_fixtures import holds, write
from tests.services import celery_test_broker, need_service
from tests.store_helpers import backing_saver

BROKER = celery_test_broker()
ROOT = Path(__file__).resolve().parents[2]


def _broker_unavailable() -> str | None:
    try:
        import redis

        redis.Redis.from_url(BROKER, socket_connect_timeout=2).ping()
        return None
    except Exception as exc:  # noqa: BLE001
        return f"the Celery test broker {BROKER} is not reachable: {exc}"


def start_worker(tmp_path, queue: str, name: str, **env_extra: str):
    """A real worker on ``queue`` named ``name@host``, importing this worktree's code."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLM_PROVIDER_CHECKPOINT", "CELERY_", "PYTEST_", "DJANGO_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DATABASE_URL=database_url(connections["pg"].settings_dict),
        LLM_PROVIDER_CHECKPOINT="postgres",
        CELERY_BROKER_URL=BROKER,
        CELERY_RESULT_BACKEND=BROKER,
        REDIS_URL=BROKER,
        CHECKPOINTS_DATA_DIR=str(tmp_path),
        PYTHONPATH=str(ROOT),
        **env_extra,
    )
    return fanout_workers.start_worker(
        queue,
        name,
        env=env,
        log_path=tmp_path / f"worker-{name}.log",
        loglevel="INFO",
        include=env_extra.get("WORKER_INCLUDE"),
    )


stop_worker = fanout_workers.stop_worker


def worker_logs(tmp_path) -> str:
    return "\n".join(p.read_text()[-3000:] for p in sorted(tmp_path.glob("worker-*.log")))


@pytest.mark.parametrize("provider", ["postgres"])
def test_a_worker_runs_the_sweep_task_on_the_deployment_store(store, tmp_path):
    need_service(_broker_unavailable())
    # The flush between tests drops the recorded format; record it again for the worker.
    forget_format_checks()
    backing_saver(store).ensure_format()
    write(store, "done")
    write(store, "open")
    mark_finished(backing_saver(store), "done", now=utcnow() - timedelta(days=2))

    queue = f"sweep-test-{uuid.uuid4().hex}"
    worker, log = start_worker(tmp_path, queue, "solo")
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
            pytest.fail(f"worker did not sweep:\n{worker_logs(tmp_path)}")
    finally:
        stop_worker(worker, log)
        client.close()

    assert result["provider"] == "postgres"
    assert (result["swept_count"], result["finished_swept"]) == (1, 1)
    assert not holds(store, "done") and holds(store, "open")
    run = SweepRun.objects.using("pg").get(pk=result["sweep_run_id"])
    assert run.triggered_by == "celery" and run.finished_swept == 1


@pytest.mark.parametrize("provider", ["postgres"])
def test_one_fanned_out_run_is_swept_by_two_workers_under_its_lease(store, tmp_path):
    need_service(_broker_unavailable())
    forget_format_checks()
    backing_saver(store).ensure_format()
    # Due in this order, three to a batch: three plain batches, then one holding a thread
    # the filter fails on once, then one holding a thread it always fails on.
    order = [f"n{i:02d}" for i in range(9)] + ["flaky-0", "n09", "n10", "doomed-0", "n11"]
    now = utcnow()
    for i, name in enumerate(order):
        write(store, name)
        mark_finished(
            backing_saver(store), name, now=now - timedelta(days=2) + timedelta(seconds=i)
        )
    write(store, "open")

    queue = f"sweep-fanout-{uuid.uuid4().hex}"
    extra = dict(
        CHECKPOINTS_SWEEP_BATCH_SIZE="3",
        CHECKPOINTS_SWEEP_BATCH_RETRIES="2",
        CHECKPOINTS_SWEEP_BATCH_RETRY_SECONDS="3",
        CHECKPOINTS_TEST_FILTER_DIR=str(tmp_path),
        WORKER_INCLUDE="tests.retention.worker_filters",
    )
    workers = [start_worker(tmp_path, queue, name, **extra) for name in ("one", "two")]
    client = Celery("sweep-fanout-client", broker=BROKER, backend=BROKER)
    try:
        when = utcnow().isoformat()
        first = client.send_task("retention.tasks.fan_out_sweep", kwargs={"now": when}, queue=queue)
        try:
            planned = first.get(timeout=90)
            # The run holds the lease while its batches run (the doomed one is retried for
            # seconds): a second fan-out is refused and recorded.
            second = client.send_task(
                "retention.tasks.fan_out_sweep", kwargs={"now": when}, queue=queue
            ).get(timeout=90)
        except Exception:
            pytest.fail(f"the workers did not fan out:\n{worker_logs(tmp_path)}")
        runs = SweepRun.objects.using("pg")
        deadline = time.monotonic() + 120
        while runs.get(pk=planned["sweep_run_id"]).status == SweepRun.RUNNING:
            if time.monotonic() > deadline:
                pytest.fail(f"the run did not close:\n{worker_logs(tmp_path)}")
            time.sleep(0.5)
    finally:
        for worker, log in workers:
            stop_worker(worker, log)
        client.close()

    assert (planned["batches"], planned["threads"], planned["status"]) == (5, 14, "running")
    assert second["status"] == SweepRun.REFUSED and "another sweep is running" in second["error"]
    refused = runs.get(pk=second["sweep_run_id"])
    assert refused.status == SweepRun.REFUSED and refused.swept_count == 0

    run = runs.get(pk=planned["sweep_run_id"])
    batches = list(SweepBatch.objects.using("pg").filter(run_id=run.pk).order_by("index"))
    assert [b.index for b in batches] == [0, 1, 2, 3, 4]
    assert [(b.status, b.attempts) for b in batches] == [
        ("ok", 1), ("ok", 1), ("ok", 1), ("ok", 2), ("failed", 3),
    ]  # fmt: skip
    assert "failed once" not in batches[3].error and "always down" in batches[4].error
    # Batches ran on both workers, each recorded with its worker's name.
    assert {b.worker.split("@")[0] for b in batches} == {"one", "two"}
    gone = [n for n in order if not holds(store, n)]
    assert gone == [n for n in order if n not in ("doomed-0", "n11")]
    assert holds(store, "open")
    assert run.status == SweepRun.FAILED and "batch 4 after 3 attempt(s)" in run.error
    assert run.swept_count == run.finished_swept == sum(b.deleted for b in batches) == len(gone)
    assert [b.deleted for b in batches] == [3, 3, 3, 3, 0]
    assert not StoreLease.objects.using("pg").exists()  # the closing batch released it


@pytest.mark.parametrize("provider", ["postgres"])
def test_health_pings_the_worker_and_fails_without_one(store, tmp_path):
    """`service_checks(celery=True)` asks a worker for a pong on the deployment's queue:
    503 naming the check while none answers, 200 with one, 503 again once it stops."""
    from health_check.contrib.celery import Ping

    from checkpoints.health import CeleryBroker, service_checks
    from tests.reliability_fixtures import health

    need_service(_broker_unavailable())
    assert {CeleryBroker, Ping} <= {c if isinstance(c, type) else c[0] for c in
                                    service_checks(celery=True, databases=[])}  # fmt: skip
    queue = f"health-test-{uuid.uuid4().hex}"
    app = Celery("health-probe", broker=BROKER, backend=BROKER)
    app.conf.task_default_queue = queue
    checks = [(CeleryBroker, {"app": app}), (Ping, {"app": app, "timeout": timedelta(seconds=2)})]
    try:
        status, body = health(checks)
        ping = next(name for name in body if name.startswith("Ping("))
        assert status == 503 and "Celery workers unavailable" in body[ping], body
        worker, log = start_worker(tmp_path, queue, f"health-{uuid.uuid4().hex[:8]}")
        try:
            deadline = time.monotonic() + 60
            while (status := health(checks)[0]) != 200 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert status == 200, worker_logs(tmp_path)
        finally:
            stop_worker(worker, log)
        status, body = health(checks)
        assert status == 503 and "Celery workers unavailable" in body[ping], body
        assert body["CeleryBroker()"] == "OK", body
    finally:
        app.close()
