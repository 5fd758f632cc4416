"""Helpers for the retention and sweep tests: write threads, move the clock, clean filters."""

from __future__ import annotations

from datetime import timedelta

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.store.planning import utcnow
from retention import sweep as sweep_module

WAITING = 10080
FINISHED = 1440


def write(saver, thread_id: str, *, steps: int = 1) -> dict:
    """Put ``steps`` checkpoints on the thread; return the last stored config."""
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
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


def minutes_from_now(minutes: float):
    return utcnow() + timedelta(minutes=minutes)


@pytest.fixture(autouse=True)
def _forget_registered_filters():
    """Filters a test registers in code do not leak into the next test."""
    before = dict(sweep_module._registered)
    yield
    sweep_module._registered.clear()
    sweep_module._registered.update(before)
