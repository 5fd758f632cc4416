"""One sweep run fanned out over Celery workers: one run, one lease, many batches.

The fan-out takes the store's sweep lease under a token of the run's own (not tied to its
process, which may exit while the batches run), opens one SweepRun recording the token,
lists every candidate and records one SweepBatch per batch before any is queued. A batch
never takes the store-wide lock (its siblings hold it, so it would be refused): it renews
the lease under the run's token, and stops with LeaseLost when another holder took it.
It sweeps its ids with the shared sweep code (`sweep_listed`): each horizon is checked
again at the run's clock and every live-thread filter is asked before anything is deleted.

Every attempt is recorded on its batch (worker, attempts, error). A failed attempt is
retried up to SWEEP_BATCH_RETRIES times; after that the batch is failed. Deleted counts
add up over attempts (a failed attempt may have deleted part of its batch); spared
threads are those of the last attempt, which asked the filters again. Each attempt is
recorded under a row lock on the run, and the run's totals are then set to the sum of its
batches; the attempt that leaves no batch unfinished closes the run (ok, or failed when a
batch failed) and releases the lease, so exactly one closes it however the batches race.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import transaction
from django.db.models import Count, F, Q, Sum

from checkpoints.store.capabilities import HOST, LockHeld
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import utcnow
from retention import metrics
from retention.batches import Sweeper, candidate_batches, sweep_listed
from retention.locks import LOCK_NAME
from retention.models import SparedThread, SweepBatch, SweepRun
from retention.result import SweepResult, new_result
from retention.run_record import close_run, open_run, record_deleted

logger = logging.getLogger(__name__)


@dataclass
class FanOut:
    """A fan-out's run (refused, closed at once, or running) and the batches to queue."""

    run: SweepRun
    batches: list[list[str]]

    def as_dict(self) -> dict[str, Any]:
        return {
            "sweep_run_id": self.run.pk,
            "status": self.run.status,
            "batches": len(self.batches),
            "threads": sum(len(b) for b in self.batches),
            **({"error": self.run.error} if self.run.error else {}),
        }


def fan_out(
    saver: StoreSaver, *, now: datetime, max_batches: int | None, triggered_by: str
) -> FanOut:
    """Take the lease for a new run and record its batches; a held lease is recorded, refused."""
    token = f"sweep-run:{HOST}:{uuid.uuid4().hex}"
    result = new_result(saver, dry_run=False)
    started = utcnow()
    try:
        saver.take_lease(LOCK_NAME, token)
    except LockHeld as held:
        metrics.SWEEP_RUNS.labels(outcome="locked", dry_run="false").inc()
        refused = SweepRun.objects.create(
            status=SweepRun.REFUSED,
            started_at=started,
            finished_at=utcnow(),
            provider=result.provider,
            waiting_minutes=result.waiting_minutes,
            finished_minutes=result.finished_minutes,
            skipped=result.skipped,
            error=f"another sweep is running on the {saver.provider} store ({held.how}); "
            "this fan-out deleted nothing, try again when it ends",
            triggered_by=triggered_by[:150],
        )
        return FanOut(refused, [])
    run = None
    try:
        run = open_run(result, started, triggered_by)
        batches = candidate_batches(saver, now=now, max_batches=max_batches)
        SweepBatch.objects.bulk_create(
            [SweepBatch(run=run, index=i, thread_count=len(ids)) for i, ids in enumerate(batches)],
            batch_size=500,
        )
        SweepRun.objects.filter(pk=run.pk).update(lease_token=token, batches_total=len(batches))
    except Exception as exc:
        # Nothing was queued: close what was opened and give the lease back.
        if run is not None:
            close_run(run, result, triggered_by, error=f"{type(exc).__name__}: {exc}")
        saver.release_lease(LOCK_NAME, token)
        raise
    if not batches:
        close_run(run, result, triggered_by)
        saver.release_lease(LOCK_NAME, token)
        metrics.SWEEP_RUNS.labels(outcome="ok", dry_run="false").inc()
    run.refresh_from_db()
    return FanOut(run, batches)


def run_batch(
    saver: StoreSaver,
    run_id: int,
    index: int,
    thread_ids: list[str],
    *,
    now: datetime,
    worker: str,
    final: bool,
) -> dict[str, Any]:
    """One attempt at one batch of a run, recorded; ``retry`` says whether to try again."""
    run = SweepRun.objects.get(pk=run_id)
    batch = SweepBatch.objects.get(run_id=run_id, index=index)
    if batch.status in SweepBatch.DONE:
        # A redelivered message of a batch already recorded does nothing.
        return _summary(batch, retry=False)
    result = new_result(saver, dry_run=False)
    result.sweep_run_id = run.pk
    error = ""
    if run.status != SweepRun.RUNNING:
        error = f"sweep run {run.pk} is already {run.status}; the batch did not run"
        final = True
    else:
        SweepBatch.objects.filter(pk=batch.pk).update(
            status=SweepBatch.RUNNING, attempts=F("attempts") + 1, worker=worker[:200],
            started_at=utcnow(),
        )  # fmt: skip
        sweeper = Sweeper(saver, now, False, result)
        sweeper.keep_alive = lambda: saver.renew_lease(LOCK_NAME, run.lease_token)
        try:
            sweeper.keep_alive()  # the run still holds the lease: else LeaseLost
            sweep_listed(sweeper, list(dict.fromkeys(str(t) for t in thread_ids)))
        except Exception as exc:  # noqa: BLE001 - any failure is recorded; the bound decides
            error = f"{type(exc).__name__}: {exc}"
            logger.warning("sweep run %s batch %s failed: %s", run.pk, index, error)
    if not error:
        status = SweepBatch.OK
    else:
        status = SweepBatch.FAILED if final else SweepBatch.RETRYING
    closed = _record_attempt(run, batch, result, status, error)
    if closed is not None:
        saver.release_lease(LOCK_NAME, run.lease_token)
        outcome = "failed" if closed.status == SweepRun.FAILED else "ok"
        metrics.SWEEP_RUNS.labels(outcome=outcome, dry_run="false").inc()
    batch.refresh_from_db()
    return _summary(batch, retry=status == SweepBatch.RETRYING)


def _summary(batch, *, retry: bool) -> dict[str, Any]:
    return {
        "sweep_run_id": batch.run_id,
        "index": batch.index,
        "status": batch.status,
        "attempts": batch.attempts,
        "deleted": batch.deleted,
        "spared": batch.spared,
        "worker": batch.worker,
        "error": batch.error,
        "retry": retry,
    }


def _record_attempt(
    run: SweepRun, batch, result: SweepResult, status: str, error: str
) -> SweepRun | None:
    """Record one attempt under the run's row lock; close the run when it was the last."""
    with transaction.atomic():
        locked = SweepRun.objects.select_for_update().get(pk=run.pk)
        SparedThread.objects.filter(batch_id=batch.pk).delete()
        SparedThread.objects.bulk_create(
            [SparedThread(sweep_run_id=run.pk, batch_id=batch.pk, **e) for e in result.spared],
            batch_size=500,
        )
        # Deleted ids add up over attempts, as the counts do: each attempt's are its own.
        record_deleted(run.pk, result.deleted_ids, batch_id=batch.pk)
        SweepBatch.objects.filter(pk=batch.pk).update(
            status=status,
            deleted=F("deleted") + result.swept_count,
            finished_swept=F("finished_swept") + result.finished_swept,
            waiting_swept=F("waiting_swept") + result.waiting_swept,
            spared=len(result.spared),
            error=error,
            finished_at=utcnow() if status in SweepBatch.DONE else None,
        )
        batches = SweepBatch.objects.filter(run_id=run.pk)
        sums = batches.aggregate(
            swept_count=Sum("deleted", default=0),
            finished_swept=Sum("finished_swept", default=0),
            waiting_swept=Sum("waiting_swept", default=0),
            done=Count("pk", filter=Q(status__in=SweepBatch.DONE)),
        )
        done = sums.pop("done")
        SweepRun.objects.filter(pk=run.pk).update(**sums)
        if locked.status != SweepRun.RUNNING or done < locked.batches_total:
            return None
        totals = _new_result_from(locked, sums)
        failed = list(
            batches.filter(status=SweepBatch.FAILED)
            .order_by("index")
            .values_list("index", "attempts", "error")
        )
        message = ""
        if failed:
            index, attempts, first = failed[0]
            message = (
                f"{len(failed)} of {locked.batches_total} batch(es) failed "
                f"(batch {index} after {attempts} attempt(s): {first})"
            )
        close_run(locked, totals, locked.triggered_by, error=message)
    locked.refresh_from_db()
    return locked


def _new_result_from(run: SweepRun, sums: dict[str, int]) -> SweepResult:
    result = SweepResult(
        provider=run.provider,
        waiting_minutes=run.waiting_minutes,
        finished_minutes=run.finished_minutes,
        skipped=run.skipped,
        sweep_run_id=run.pk,
        **sums,
    )
    result.spared = list(
        SparedThread.objects.filter(sweep_run_id=run.pk).values(
            "thread_id", "horizon", "owner", "reason"
        )
    )
    return result
