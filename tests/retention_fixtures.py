"""Helpers for the retention and sweep tests: write threads, mark them, move the clock,
size the sweep's batches, clean filters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.store.planning import utcnow
from retention import live_filters
from retention.runs import mark_finished
from tests.store_helpers import backing_saver, config_for

WAITING = 10080
FINISHED = 1440


def write(saver, thread_id: str, *, steps: int = 1) -> dict:
    """Put ``steps`` checkpoints on the thread; return the last stored config."""
    config = config_for(thread_id, ns="")
    version = None
    for step in range(steps):
        checkpoint = empty_checkpoint()
        version = saver.get_next_version(version, None)
        checkpoint["channel_values"] = {"count": step}
        checkpoint["channel_versions"] = {"count": version}
        config = saver.put(config, checkpoint, {"source": "loop", "step": step}, {"count": version})
    return config


def holds(saver, thread_id: str) -> bool:
    return saver.get_tuple({"configurable": {"thread_id": thread_id}}) is not None


def finished_past_due(saver, thread_id: str, now):
    """A thread with a checkpoint, marked finished long enough ago to be due at ``now``."""
    write(saver, thread_id)
    mark_finished(
        backing_saver(saver), thread_id, owner="tests", now=now - timedelta(minutes=FINISHED + 1)
    )


def minutes_from_now(minutes: float):
    return utcnow() + timedelta(minutes=minutes)


def batch_size(n: int):
    """The sweep's batches of ``n`` threads, inside the ``with``."""
    return override_settings(CHECKPOINTS={**settings.CHECKPOINTS, "SWEEP_BATCH_SIZE": n})


@pytest.fixture(autouse=True)
def _forget_registered_filters():
    """Filters a test registers in code do not leak into the next test."""
    before = dict(live_filters._registered)
    yield
    live_filters._registered.clear()
    live_filters._registered.update(before)
