"""The Celery beat entry for the sweep, built from CHECKPOINTS["SWEEP_SCHEDULE"]."""

from __future__ import annotations

from typing import Any

from celery.schedules import crontab

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError

TASK_NAME = "retention.tasks.sweep_checkpoints"


def parse_schedule(value: Any) -> crontab | float | None:
    """None (no schedule), seconds (a number or digits), or a five-field crontab string."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise CheckpointConfigError(
            f"SWEEP_SCHEDULE {value!r} is neither seconds nor a crontab", field="SWEEP_SCHEDULE"
        )
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and value.strip().replace(".", "", 1).isdigit():
        seconds = float(value.strip())
    elif isinstance(value, str):
        fields = value.split()
        if len(fields) != 5:
            raise CheckpointConfigError(
                f"SWEEP_SCHEDULE {value!r} must be seconds or a crontab of five fields "
                "(minute hour day-of-month month day-of-week)",
                field="SWEEP_SCHEDULE",
            )
        minute, hour, day_of_month, month, day_of_week = fields
        try:
            return crontab(
                minute=minute,
                hour=hour,
                day_of_month=day_of_month,
                month_of_year=month,
                day_of_week=day_of_week,
            )
        except ValueError as exc:
            raise CheckpointConfigError(
                f"SWEEP_SCHEDULE {value!r} is not a valid crontab: {exc}", field="SWEEP_SCHEDULE"
            ) from exc
    else:
        raise CheckpointConfigError(
            f"SWEEP_SCHEDULE {value!r} is neither seconds nor a crontab", field="SWEEP_SCHEDULE"
        )
    if seconds <= 0:
        raise CheckpointConfigError(
            f"SWEEP_SCHEDULE {value!r} seconds must be above zero", field="SWEEP_SCHEDULE"
        )
    return seconds


def sweep_beat_schedule() -> dict[str, dict[str, Any]]:
    """The beat entries to install: one for the sweep when a schedule is set, else none."""
    schedule = parse_schedule(setting("SWEEP_SCHEDULE"))
    if schedule is None:
        return {}
    return {"sweep-checkpoints": {"task": TASK_NAME, "schedule": schedule}}
