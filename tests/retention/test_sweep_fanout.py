"""A sweep run fanned out in batches: one run and one lease, batches recorded, retried, closed.

The batches run here in this process (the Celery tasks are thin; see test_celery_worker
for real workers); every provider holds the lease its own way.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints.store.capabilities import LeaseLost, LockHeld
from checkpoints.store.planning import utcnow
from retention.errors import SweepAlreadyRunning
from retention.fanout import fan_out, run_batch
from retention.locks import LOCK_NAME
from retention.models import SparedThread, SweepBatch, SweepRun
from retention.sweep import register_live_thread_filter, sweep_checkpoints
from tests.retention_fixtures import batch_size, finished_past_due, holds
from tests.store_helpers import backing_saver


def seeded(store, count: int, now) -> list[str]:
    names = [f"t{i:02d}" for i in range(count)]
    for name in names:
        finished_past_due(store, name, now)
    return names


def run_all(store, planned, now, *, final=True):
    return [
        run_batch(
            backing_saver(store), planned.run.pk, i, ids, now=now, worker="w-test", final=final
        )
        for i, ids in enumerate(planned.batches)
    ]


def test_one_run_sweeps_every_batch_under_its_lease_and_closes(store):
    now = utcnow()
    names = seeded(store, 5, now)
    with batch_size(2):
        planned = fan_out(backing_saver(store), now=now, max_batches=None, triggered_by="test")
    assert planned.run.status == SweepRun.RUNNING and len(planned.batches) == 3
    assert planned.run.lease_token.startswith("sweep-run:")
    # The run holds the store's lease: another sweep or fan-out is refused, and recorded.
    with pytest.raises(SweepAlreadyRunning):
        sweep_checkpoints(saver=backing_saver(store), now=now)
    refused = fan_out(backing_saver(store), now=now, max_batches=None, triggered_by="second")
    assert refused.run.status == SweepRun.REFUSED and refused.batches == []
    assert "another sweep is running" in refused.run.error
    assert SweepRun.objects.get(pk=refused.run.pk).triggered_by == "second"

    outcomes = run_all(store, planned, now)
    assert [o["status"] for o in outcomes] == ["ok"] * 3
    run = SweepRun.objects.get(pk=planned.run.pk)
    batches = list(SweepBatch.objects.filter(run=run))
    assert [(b.index, b.thread_count, b.deleted, b.attempts) for b in batches] == [
        (0, 2, 2, 1),
        (1, 2, 2, 1),
        (2, 1, 1, 1),
    ]
    assert {b.worker for b in batches} == {"w-test"}
    assert run.status == SweepRun.OK and run.finished_at is not None
    assert run.swept_count == run.finished_swept == sum(b.deleted for b in batches) == 5
    assert not any(holds(store, n) for n in names)
    # Closed: the lease is free again.
    backing_saver(store).take_lease(LOCK_NAME, "next")
    assert backing_saver(store).release_lease(LOCK_NAME, "next")


def test_a_batch_rechecks_and_asks_the_filters_before_deleting(store):
    now = utcnow()
    seeded(store, 3, now)
    with batch_size(10):
        planned = fan_out(backing_saver(store), now=now, max_batches=None, triggered_by="test")
    register_live_thread_filter("keeper", lambda ids: {"t01"})
    store.unmark_finished("t02")  # no longer past a horizon since it was listed
    [outcome] = run_all(store, planned, now)
    assert (outcome["deleted"], outcome["spared"]) == (1, 1)
    assert holds(store, "t01") and holds(store, "t02") and not holds(store, "t00")
    spared = SparedThread.objects.get(sweep_run_id=planned.run.pk)
    assert (spared.thread_id, spared.owner, spared.batch.index) == ("t01", "keeper", 0)


def test_a_failed_attempt_is_recorded_and_the_retry_succeeds(store):
    now = utcnow()
    seeded(store, 2, now)
    with batch_size(10):
        planned = fan_out(backing_saver(store), now=now, max_batches=None, triggered_by="test")
    calls = []

    def flaky(ids):
        calls.append(ids)
        if len(calls) == 1:
            raise ConnectionError("filter backend down")
        return set()

    register_live_thread_filter("flaky", flaky)
    [ids] = planned.batches
    first = run_batch(
        backing_saver(store), planned.run.pk, 0, ids, now=now, worker="w1", final=False
    )
    assert first["retry"] and first["status"] == "retrying"
    assert "filter backend down" in first["error"]
    assert SweepRun.objects.get(pk=planned.run.pk).status == SweepRun.RUNNING
    second = run_batch(
        backing_saver(store), planned.run.pk, 0, ids, now=now, worker="w2", final=False
    )
    assert not second["retry"] and second["status"] == "ok"
    batch = SweepBatch.objects.get(run=planned.run)
    assert (batch.attempts, batch.deleted, batch.worker, batch.error) == (2, 2, "w2", "")
    assert SweepRun.objects.get(pk=planned.run.pk).status == SweepRun.OK


def test_a_batch_failing_past_the_bound_fails_the_run_with_exact_counts(store):
    now = utcnow()
    seeded(store, 4, now)
    with batch_size(2):
        planned = fan_out(backing_saver(store), now=now, max_batches=None, triggered_by="test")
    doomed = set(planned.batches[1])

    def broken(ids):
        if doomed & set(ids):
            raise RuntimeError("always down for this batch")
        return set()

    register_live_thread_filter("broken", broken)
    good = run_batch(
        backing_saver(store), planned.run.pk, 0, planned.batches[0], now=now, worker="w", final=True
    )
    bad = [
        run_batch(
            backing_saver(store),
            planned.run.pk,
            1,
            planned.batches[1],
            now=now,
            worker="w",
            final=final,
        )
        for final in (False, False, True)
    ]
    assert good["status"] == "ok" and [b["status"] for b in bad] == ["retrying"] * 2 + ["failed"]
    run = SweepRun.objects.get(pk=planned.run.pk)
    assert run.status == SweepRun.FAILED and run.swept_count == 2
    assert "1 of 2 batch(es) failed (batch 1 after 3 attempt(s)" in run.error
    assert all(holds(store, t) for t in doomed)
    # A redelivered message of a done batch changes nothing.
    again = run_batch(
        backing_saver(store), planned.run.pk, 1, planned.batches[1], now=now, worker="w", final=True
    )
    assert again["attempts"] == 3 and SweepBatch.objects.get(run=run, index=1).attempts == 3
    backing_saver(store).take_lease(LOCK_NAME, "next")  # released on close
    backing_saver(store).release_lease(LOCK_NAME, "next")


def test_a_batch_whose_run_lost_the_lease_deletes_nothing(store):
    now = utcnow()
    names = seeded(store, 2, now)
    planned = fan_out(backing_saver(store), now=now, max_batches=None, triggered_by="test")
    backing_saver(store).release_lease(LOCK_NAME, planned.run.lease_token)
    backing_saver(store).take_lease(LOCK_NAME, "an-other-sweep")
    try:
        outcome = run_batch(
            backing_saver(store),
            planned.run.pk,
            0,
            planned.batches[0],
            now=now,
            worker="w",
            final=True,
        )
    finally:
        backing_saver(store).release_lease(LOCK_NAME, "an-other-sweep")
    assert outcome["status"] == "failed" and "LeaseLost" in outcome["error"]
    assert all(holds(store, n) for n in names)
    assert SweepRun.objects.get(pk=planned.run.pk).status == SweepRun.FAILED


def test_nothing_due_closes_the_run_at_once(store):
    planned = fan_out(backing_saver(store), now=utcnow(), max_batches=None, triggered_by="test")
    assert planned.batches == [] and planned.run.status == SweepRun.OK
    backing_saver(store).take_lease(LOCK_NAME, "next")
    with pytest.raises(LockHeld):
        backing_saver(store).take_lease(LOCK_NAME, "third")
    backing_saver(store).release_lease(LOCK_NAME, "next")


def test_max_batches_leaves_the_rest_for_the_next_run(store):
    now = utcnow() + timedelta(seconds=1)
    seeded(store, 5, now)
    with batch_size(2):
        planned = fan_out(backing_saver(store), now=now, max_batches=1, triggered_by="test")
    assert len(planned.batches) == 1 and planned.run.batches_total == 1
    assert backing_saver(store).release_lease(LOCK_NAME, planned.run.lease_token)


def test_leases_by_token_and_batched_reads_on_every_provider(store):
    backing_saver(store).take_lease("job", "first")
    with pytest.raises(LockHeld):
        backing_saver(store).take_lease("job", "second")
    backing_saver(store).renew_lease("job", "first")
    with pytest.raises(LeaseLost):
        backing_saver(store).renew_lease("job", "second")
    assert not backing_saver(store).release_lease("job", "second")
    assert backing_saver(store).release_lease("job", "first")
    backing_saver(store).take_lease("job", "second")
    assert backing_saver(store).release_lease("job", "second")

    now = utcnow()
    seeded(store, 2, now)
    marks = backing_saver(store).finished_marks(["t00", "t01", "missing"])
    assert sorted(marks) == ["t00", "t01"] and marks["t00"].owner == "tests"
    writes = backing_saver(store).last_writes(["t00", "missing"])
    assert list(writes) == ["t00"] and now - timedelta(minutes=1) < writes["t00"] <= utcnow()
