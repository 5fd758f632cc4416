"""An import holds a bounded number of threads whatever it imports (issue 56: RSS flat):
the open transaction's group and the batch being read, never every thread it wrote."""

from __future__ import annotations

import gc

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.transfer import copy_threads, open_source
from checkpoints.transfer.copy import COMMIT_EVERY
from checkpoints.transfer.records import ThreadRecord

THREADS = 6 * COMMIT_EVERY


@pytest.mark.parametrize("provider", ["sqlite"], indirect=True)
def test_threads_held_stay_bounded_while_importing(lg_sqlite, target):
    for n in range(THREADS):
        body = empty_checkpoint()
        body["channel_values"] = {"messages": [f"message {n}"]}
        body["channel_versions"] = {"messages": "00000000000000000000000000000001.0"}
        config = {"configurable": {"thread_id": f"t{n:04}", "checkpoint_ns": ""}}
        lg_sqlite.put(config, body, {"step": 0}, dict(body["channel_versions"]))
    lg_sqlite.conn.commit()
    held: list[int] = []

    def progress(summary) -> None:
        if summary.threads % 25 == 0:
            held.append(sum(type(o) is ThreadRecord for o in gc.get_objects()))

    with open_source(f"langgraph+sqlite:///{lg_sqlite.path}") as source:
        summary = copy_threads(source, target, progress=progress)

    assert summary.threads == THREADS
    # The open group (COMMIT_EVERY) and the record in hand; not the threads written.
    assert held and max(held) <= COMMIT_EVERY + 5, held
