"""`manage.py check` refuses a bad sweep schedule or an unimportable live-thread filter."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from checkpoints.conf import store_settings


def _with(**values):
    return override_settings(CHECKPOINTS={**store_settings(), **values})


def test_bad_sweep_schedule_is_refused():
    with _with(SWEEP_SCHEDULE="every tuesday"), pytest.raises(SystemCheckError) as caught:
        call_command("check")
    assert "retention.E001" in str(caught.value)
    assert "every tuesday" in str(caught.value)


def test_unimportable_filter_is_refused_naming_the_path():
    filters = {"ghost": "retention.filters.no_such_filter"}
    with _with(LIVE_THREAD_FILTERS=filters), pytest.raises(SystemCheckError) as caught:
        call_command("check")
    assert "retention.E002" in str(caught.value)
    assert "retention.filters.no_such_filter" in str(caught.value)


def test_good_settings_pass():
    with _with(SWEEP_SCHEDULE="*/15 * * * *"):
        call_command("check")


@pytest.mark.parametrize(
    "key, value",
    [
        ("SWEEP_BATCH_SIZE", 0),
        ("SWEEP_BATCH_RETRIES", "three"),
        ("SWEEP_BATCH_RETRIES", -1),
        ("SWEEP_BATCH_RETRY_SECONDS", "soon"),
    ],
)
def test_bad_fan_out_settings_are_refused_naming_the_variable(key, value):
    with _with(**{key: value}), pytest.raises(SystemCheckError) as caught:
        call_command("check")
    assert f"CHECKPOINTS_{key}" in str(caught.value) and repr(value) in str(caught.value)
