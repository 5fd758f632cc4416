"""The sweep's result names the threads it deleted (a dry run: would delete), exactly."""

from __future__ import annotations

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from retention.policy import declare_retention
from retention.result import FINISHED, WAITING
from retention.sweep import sweep_checkpoints
from tests.retention_fixtures import holds, minutes_from_now, write
from tests.store_helpers import backing_saver

ORM = ["sqlite", "postgres"]


def _threads_sharing_a_horizon(store) -> list[str]:
    ids = [f"shared-{n}" for n in range(4)]
    for thread_id in ids:
        write(store, thread_id, steps=2)
        declare_retention(backing_saver(store), thread_id, waiting_minutes=60, finished_minutes=30)
    write(store, "fresh")
    return ids


@pytest.mark.parametrize("provider", ORM)
def test_the_dry_run_lists_exactly_the_ids_the_sweep_then_deletes(store):
    ids = _threads_sharing_a_horizon(store)
    later = minutes_from_now(120)
    dry = sweep_checkpoints(dry_run=True, saver=backing_saver(store), now=later)
    assert sorted(dry.deleted_ids[WAITING]) == ids and dry.deleted_ids[FINISHED] == []
    assert dry.waiting_swept == len(dry.deleted_ids[WAITING]) == 4
    assert all(holds(store, t) for t in ids)
    done = sweep_checkpoints(saver=backing_saver(store), now=later)
    assert done.deleted_ids == dry.deleted_ids
    assert not any(holds(store, t) for t in ids) and holds(store, "fresh")


@pytest.mark.parametrize("provider", ORM)
def test_threads_sharing_a_declared_horizon_are_listed_once_in_one_query_each(store):
    ids = _threads_sharing_a_horizon(store)
    with CaptureQueriesContext(connections[backing_saver(store).db_alias]) as queries:
        found = backing_saver(store).idle_writes(minutes_from_now(120), 10080)
    assert sorted(found) == ids
    # The undeclared listing, the distinct horizons, one listing for the one horizon.
    assert len(queries) == 3, [q["sql"] for q in queries]
