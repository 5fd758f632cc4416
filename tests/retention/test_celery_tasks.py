"""Celery entrances: the beat schedule, and the tasks run in-process."""

from __future__ import annotations

from datetime import timedelta

import pytest
from celery.schedules import crontab
from django.conf import settings
from django.test import override_settings

from checkpoints.errors import CheckpointConfigError
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from project.celery import _install_beat_schedule, app
from retention.models import SweepRun
from retention.runs import mark_finished
from retention.schedule import parse_schedule, sweep_beat_schedule
from retention.sweep import register_live_thread_filter
from retention.tasks import fan_out_sweep, sweep_checkpoints, sweep_thread_batch
from tests.retention_fixtures import holds, write


def schedule(value):
    return override_settings(CHECKPOINTS={**settings.CHECKPOINTS, "SWEEP_SCHEDULE": value})


def test_nothing_is_scheduled_by_default():
    with schedule(None):
        assert sweep_beat_schedule() == {}


def test_a_crontab_string_or_seconds_schedules_the_sweep_task():
    with schedule("*/15 3 * * 1-5"):
        entry = sweep_beat_schedule()["sweep-checkpoints"]
    assert entry["task"] == "retention.tasks.sweep_checkpoints"
    assert entry["schedule"] == crontab(minute="*/15", hour="3", day_of_week="1-5")
    assert parse_schedule("3600") == 3600.0 and parse_schedule(900) == 900.0


@pytest.mark.parametrize("bad", ["every hour", "61 * * * *", 0, "-5", True])
def test_a_bad_schedule_is_refused_naming_it(bad):
    with pytest.raises(CheckpointConfigError, match="SWEEP_SCHEDULE"):
        parse_schedule(bad)


def test_the_celery_app_installs_the_entry_only_when_configured():
    saved = dict(app.conf.beat_schedule or {})
    try:
        app.conf.beat_schedule = {}
        with schedule(None):
            _install_beat_schedule(app)
        assert "sweep-checkpoints" not in app.conf.beat_schedule
        with schedule(600):
            _install_beat_schedule(app)
        assert app.conf.beat_schedule["sweep-checkpoints"]["schedule"] == 600.0
    finally:
        app.conf.beat_schedule = saved
    assert "retention.tasks.sweep_checkpoints" in app.tasks


@pytest.mark.django_db(transaction=True)
def test_the_sweep_task_returns_the_result_dict():
    saver = get_saver()
    write(saver, "done")
    mark_finished(saver, "done", now=utcnow() - timedelta(days=2))
    result = sweep_checkpoints.apply(kwargs={"now": utcnow().isoformat()}).get()
    assert result["provider"] == "sqlite" and result["finished_swept"] == 1
    assert not holds(saver, "done")


@pytest.mark.django_db(transaction=True)
def test_fan_out_runs_one_sweep_run_whose_batches_each_recheck_their_threads():
    saver = get_saver()
    for name in ("a", "b", "c"):
        write(saver, name)
        mark_finished(saver, name, now=utcnow() - timedelta(days=2))
    write(saver, "fresh")
    mark_finished(saver, "fresh")
    app.conf.task_always_eager = True
    try:
        with override_settings(CHECKPOINTS={**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": 2}):
            sent = fan_out_sweep.apply(kwargs={"max_batches": 5}).get()
    finally:
        app.conf.task_always_eager = False
    assert (sent["batches"], sent["threads"], sent["status"]) == (2, 3, "running")
    assert [n for n in ("a", "b", "c", "fresh") if holds(saver, n)] == ["fresh"]
    # The last batch closed the one run; its totals are the sum of its batches.
    run = SweepRun.objects.get(pk=sent["sweep_run_id"])
    assert (run.status, run.swept_count, run.batches_total) == ("ok", 3, 2)
    assert sorted(run.batches.values_list("deleted", flat=True)) == [1, 2]
    assert run.triggered_by == "celery-fan-out"
    again = sweep_thread_batch.apply(args=[["a", "fresh"]]).get()
    assert again["swept_count"] == 0


@pytest.mark.django_db(transaction=True)
def test_a_failing_batch_task_is_retried_up_to_the_bound():
    saver = get_saver()
    write(saver, "a")
    mark_finished(saver, "a", now=utcnow() - timedelta(days=2))
    register_live_thread_filter("down", lambda ids: 1 / 0)
    app.conf.task_always_eager = True
    try:
        with override_settings(CHECKPOINTS={**settings.CHECKPOINTS, "SWEEP_BATCH_RETRIES": 2}):
            sent = fan_out_sweep.apply().get()
    finally:
        app.conf.task_always_eager = False
    run = SweepRun.objects.get(pk=sent["sweep_run_id"])
    batch = run.batches.get()
    assert (batch.status, batch.attempts) == ("failed", 3)
    assert "ZeroDivisionError" in batch.error and run.status == "failed"
    assert holds(saver, "a")
