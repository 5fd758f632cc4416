"""The Celery app: configured from Django settings under the CELERY_ namespace."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")

app = Celery("project")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_finalize.connect
def _install_beat_schedule(sender: Celery, **kwargs) -> None:
    # Nothing sweeps by default: the entry exists only when SWEEP_SCHEDULE is set.
    from retention.schedule import sweep_beat_schedule

    sender.conf.beat_schedule = {**(sender.conf.beat_schedule or {}), **sweep_beat_schedule()}
