"""Declared retention: shorter only, refused loudly otherwise, and the effective horizons."""

from __future__ import annotations

import pytest
from django.test import override_settings

from retention.errors import InvalidRetention, RetentionError, RetentionTooLong
from retention.policy import declare_retention, effective_retention
from tests.retention_fixtures import FINISHED, WAITING
from tests.store_helpers import backing_saver


def test_a_shorter_declaration_is_stored_and_used(store):
    declare_retention(backing_saver(store), "t1", waiting_minutes=600, finished_minutes=60)
    assert effective_retention(backing_saver(store), "t1") == (600, 60)


def test_undeclared_thread_gets_the_platform_values(store):
    assert effective_retention(backing_saver(store), "nobody") == (WAITING, FINISHED)


def test_unset_finished_is_the_platforms_capped_at_the_threads_waiting(store):
    declare_retention(backing_saver(store), "short", waiting_minutes=30)
    assert effective_retention(backing_saver(store), "short") == (30, 30)
    declare_retention(backing_saver(store), "long", waiting_minutes=5000)
    assert effective_retention(backing_saver(store), "long") == (5000, FINISHED)


def test_unset_waiting_is_the_platforms(store):
    declare_retention(backing_saver(store), "t1", finished_minutes=15)
    assert effective_retention(backing_saver(store), "t1") == (WAITING, 15)


def test_a_longer_waiting_is_refused_naming_both_values(store):
    with pytest.raises(RetentionTooLong) as caught:
        declare_retention(backing_saver(store), "t1", waiting_minutes=WAITING + 1)
    assert str(WAITING + 1) in str(caught.value) and str(WAITING) in str(caught.value)
    assert caught.value.status == 400 and caught.value.code == "retention_too_long"


def test_a_longer_finished_is_refused_naming_both_values(store):
    with pytest.raises(RetentionTooLong) as caught:
        declare_retention(backing_saver(store), "t1", finished_minutes=FINISHED + 5)
    assert str(FINISHED + 5) in str(caught.value) and str(FINISHED) in str(caught.value)


def test_finished_longer_than_the_declared_waiting_is_refused(store):
    with pytest.raises(RetentionTooLong) as caught:
        declare_retention(backing_saver(store), "t1", waiting_minutes=100, finished_minutes=200)
    assert "200" in str(caught.value) and "100" in str(caught.value)


def test_non_positive_or_non_integer_minutes_are_refused(store):
    for bad in (0, -5, 1.5, "60", True):
        for key in ("waiting_minutes", "finished_minutes"):
            with pytest.raises(InvalidRetention) as caught:
                declare_retention(backing_saver(store), "t1", **{key: bad})
            assert key in str(caught.value) and repr(bad) in str(caught.value)
    assert effective_retention(backing_saver(store), "t1") == (WAITING, FINISHED)


def test_a_refused_declaration_leaves_the_earlier_one_intact(store):
    declare_retention(backing_saver(store), "t1", waiting_minutes=600, finished_minutes=60)
    with pytest.raises(RetentionError):
        declare_retention(backing_saver(store), "t1", waiting_minutes=600, finished_minutes=6000)
    assert effective_retention(backing_saver(store), "t1") == (600, 60)


def test_the_ceiling_follows_the_platform_setting(store):
    with override_settings(
        CHECKPOINTS={"RETENTION_WAITING_MINUTES": 120, "RETENTION_FINISHED_MINUTES": 60}
    ):
        with pytest.raises(RetentionTooLong):
            declare_retention(backing_saver(store), "t1", waiting_minutes=121)
        assert effective_retention(backing_saver(store), "t1") == (120, 60)
