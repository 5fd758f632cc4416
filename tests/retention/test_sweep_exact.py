"""The sweep's accounting is exact: each thread is deleted, spared or kept once per sweep,
everything due is swept however many are spared, and a failed or killed sweep leaves a
record of exactly what it deleted."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections
from prometheus_client import REGISTRY

from checkpoints.store.planning import utcnow
from retention.models import SparedThread, SweepRun
from retention.policy import declare_retention
from retention.sweep import register_live_thread_filter, sweep_checkpoints
from tests.retention_fixtures import (
    FINISHED,
    WAITING,
    batch_size,
    finished_past_due,
    holds,
    write,
)
from tests.store_helpers import backing_saver

ORM = ("sqlite", "postgres")


def deleted_total(horizon: str) -> float:
    value = REGISTRY.get_sample_value("checkpoint_sweep_deleted_total", {"horizon": horizon})
    return value or 0.0


@pytest.mark.parametrize("provider", ORM)
def test_threads_sharing_a_declared_horizon_are_counted_once(store):
    ids = [f"shared-{i}" for i in range(6)]
    for thread_id in ids:
        write(store, thread_id)
        declare_retention(backing_saver(store), thread_id, waiting_minutes=30)
    write(store, "kept-live")
    declare_retention(backing_saver(store), "kept-live", waiting_minutes=30)
    register_live_thread_filter("tests", lambda batch: {t for t in batch if t == "kept-live"})
    now = utcnow() + timedelta(minutes=31)

    with batch_size(2):
        dry = sweep_checkpoints(saver=backing_saver(store), now=now, dry_run=True)
        assert (dry.swept_count, dry.waiting_swept) == (6, 6)
        assert dry.spared == [
            {
                "thread_id": "kept-live",
                "horizon": "waiting",
                "owner": "tests",
                "reason": "live-thread filter 'tests' claims it",
            }
        ]
        before = deleted_total("waiting")
        result = sweep_checkpoints(saver=backing_saver(store), now=now)

    assert (result.swept_count, result.waiting_swept, result.finished_swept) == (6, 6, 0)
    assert [s["thread_id"] for s in result.spared] == ["kept-live"]
    assert deleted_total("waiting") - before == 6
    run = SweepRun.objects.get(pk=result.sweep_run_id)
    assert (run.status, run.swept_count, run.waiting_swept) == ("ok", 6, 6)
    assert list(SparedThread.objects.filter(sweep_run=run).values_list("thread_id", flat=True)) == [
        "kept-live"
    ]
    assert not any(holds(store, t) for t in ids) and holds(store, "kept-live")


@pytest.mark.parametrize("provider", ORM)
def test_a_thread_past_both_horizons_is_counted_once(store):
    now = utcnow() + timedelta(minutes=WAITING + 5)
    finished_past_due(store, "both", now)
    result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert (result.swept_count, result.finished_swept, result.waiting_swept) == (1, 1, 0)


@pytest.mark.parametrize("provider", ORM)
def test_tied_write_times_are_each_handled_once(store):
    from checkpoints.models import Thread

    for i in range(9):
        write(store, f"tie-{i}")
    stamp = utcnow() - timedelta(minutes=WAITING + 10)
    Thread.objects.using(backing_saver(store).using).update(last_write_at=stamp)
    register_live_thread_filter("tests", lambda batch: {t for t in batch if t.endswith(("1", "4"))})
    with batch_size(2):
        result = sweep_checkpoints(saver=backing_saver(store))
    assert result.waiting_swept == 7
    assert sorted(s["thread_id"] for s in result.spared) == ["tie-1", "tie-4"]


def _many_due(store, due: int, spared: int, now) -> None:
    past = now - timedelta(minutes=FINISHED + 1)
    for i in range(due + spared):
        thread_id = f"due-{i:05d}" if i < due else f"live-{i:05d}"
        write(store, thread_id)
        store.mark_finished(thread_id, past, "tests")


@pytest.mark.parametrize(
    ("provider", "due", "spared", "batch"),
    [("memory", 10_000, 5_000, 100), ("sqlite", 1_000, 500, 20), ("postgres", 600, 300, 10)],
)
def test_everything_due_is_swept_however_many_are_spared(store, due, spared, batch):
    now = utcnow()
    _many_due(store, due, spared, now)
    register_live_thread_filter("tests", lambda ids: {t for t in ids if t.startswith("live-")})
    with batch_size(batch):
        result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert result.finished_swept == due
    assert len(result.spared) == spared == len({s["thread_id"] for s in result.spared})
    assert [
        e.thread_id
        for e in backing_saver(store).finished_due(now, limit=None)
        if e.thread_id[:4] == "due-"
    ] == []
    again = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert again.swept_count == 0 and len(again.spared) == spared


@pytest.mark.parametrize("provider", ["sqlite"])
def test_a_killed_sweep_is_recorded_interrupted_and_finished_by_the_next(store, tmp_path):
    """A real process, killed with SIGKILL between two batches."""
    now = utcnow()
    for i in range(6):
        finished_past_due(store, f"doomed-{i}", now)
    connections.close_all()
    database = settings.DATABASES["default"]["NAME"]
    script = tmp_path / "sweep_and_die.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import os, signal
            import django
            os.environ["DJANGO_SETTINGS_MODULE"] = "tests.settings"
            django.setup()
            from django.conf import settings
            from django.test import override_settings
            settings.DATABASES["default"]["NAME"] = {database!r}
            from retention.sweep import register_live_thread_filter, sweep_checkpoints
            calls = []
            def dies_on_third_batch(ids):
                calls.append(ids)
                if len(calls) == 3:
                    os.kill(os.getpid(), signal.SIGKILL)
                return set()
            register_live_thread_filter("killer", dies_on_third_batch)
            with override_settings(
                CHECKPOINTS={{**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": 2,
                             "PROVIDER": "sqlite", "CONN_STRING": None}}
            ):
                sweep_checkpoints(triggered_by="doomed process")
            """
        )
    )
    env = {**os.environ, "PYTHONPATH": str(settings.BASE_DIR)}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=settings.BASE_DIR, env=env, capture_output=True
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
    killed = SweepRun.objects.get()
    assert (killed.status, killed.swept_count, killed.finished_at) == ("running", 4, None)
    assert sum(holds(store, f"doomed-{i}") for i in range(6)) == 2

    result = sweep_checkpoints(saver=backing_saver(store), now=now)
    assert result.finished_swept == 2
    killed.refresh_from_db()
    assert killed.status == "interrupted" and f"sweep run {result.sweep_run_id}" in killed.error
    assert SweepRun.objects.get(pk=result.sweep_run_id).status == "ok"
