"""A put racing a prune on PostgreSQL keeps its values (PostgresSaver's own prune test asks
the same; it reads the peer's tables, so the harness cannot run it on ours)."""

from __future__ import annotations

import threading

import pytest
from django.db import connections
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from checkpoints.store.orm import prune
from checkpoints.store.registry import get_saver

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "pg"])


def _put(saver, parent, step: int, values: dict, versions: dict):
    conf = {"thread_id": "race", "checkpoint_ns": ""}
    if parent:
        conf["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    checkpoint = empty_checkpoint()
    checkpoint.update(id=str(uuid6(clock_seq=step)), channel_values=values)
    checkpoint["channel_versions"] = versions
    metadata = {"source": "loop", "step": step, "parents": {}}
    return saver.put({"configurable": conf}, checkpoint, metadata, {k: versions[k] for k in values})


def test_a_put_landing_while_a_prune_judges_blobs_keeps_its_values(monkeypatch):
    saver = get_saver("postgres", using="pg")
    head = None
    for step, a in enumerate(([1], [1, 2], [1, 2, 3])):
        values = {"a": a, "s": ["shared"]} if step == 0 else {"a": a}
        head = _put(saver, head, step, values, {"a": str(step + 1), "s": "1"})
    written = []

    def writer():
        try:
            other = get_saver("postgres", using="pg")
            written.append(_put(other, head, 3, {"a": [1, 2, 3, 4]}, {"a": "4", "s": "1"}))
        finally:
            connections.close_all()

    racer = threading.Thread(target=writer)
    real = prune.OrmPrune._referenced_blobs

    def a_put_lands_after_the_used_blobs_are_read(self, pk):
        referenced = real(self, pk)
        # Given a second, the put commits before the prune reads the blob rows (it waits
        # on the thread row the prune holds instead).
        racer.start()
        racer.join(timeout=1.0)
        return referenced

    monkeypatch.setattr(
        prune.OrmPrune, "_referenced_blobs", a_put_lands_after_the_used_blobs_are_read
    )
    assert saver.prune(["race"]) == 2
    racer.join(timeout=30)
    assert not racer.is_alive() and written
    values = saver.get_tuple(written[0]).checkpoint["channel_values"]
    assert values == {"a": [1, 2, 3, 4], "s": ["shared"]}
