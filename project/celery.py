"""The Celery app: configured from Django settings under the CELERY_ namespace."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_process_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")


@worker_process_init.connect(weak=False)
def _trace_worker(**kwargs) -> None:
    # Per worker process: spans from a forked pool would share the parent's exporter.
    from project.otel import setup

    setup()


app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _install_beat_schedule(sender: Celery, **kwargs) -> None:
    # Nothing sweeps by default: the entry exists only when SWEEP_SCHEDULE is set.
    from retention.schedule import sweep_beat_schedule

    sender.conf.beat_schedule = {**(sender.conf.beat_schedule or {}), **sweep_beat_schedule()}
