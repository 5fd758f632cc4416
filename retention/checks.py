"""System checks for the retention settings: the sweep schedule and the live-thread filters."""

from __future__ import annotations

from django.core.checks import Error, Tags, register

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError
from retention.live_filters import live_thread_filters
from retention.schedule import parse_schedule


@register(Tags.compatibility)
def check_retention_settings(app_configs=None, **kwargs):
    errors = []
    try:
        parse_schedule(setting("SWEEP_SCHEDULE"))
    except CheckpointConfigError as exc:
        errors.append(
            Error(
                f"CHECKPOINTS_SWEEP_SCHEDULE (CHECKPOINTS['SWEEP_SCHEDULE']): {exc.message}",
                hint="Use a number of seconds or a five-field crontab, or leave it unset.",
                id="retention.E001",
            )
        )
    try:
        live_thread_filters()
    except CheckpointConfigError as exc:
        errors.append(
            Error(
                f"CHECKPOINTS['LIVE_THREAD_FILTERS']: {exc.message}",
                hint="Each value must be the dotted path of an importable function.",
                id="retention.E002",
            )
        )
    return errors
