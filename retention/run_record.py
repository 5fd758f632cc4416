"""A sweep run's record: opened before the first delete, each batch's progress, closed once.

The record (`SweepRun`, with its `SparedThread` and `DeletedThread` rows) is written as the
sweep goes, so a killed sweep still leaves one that counts what it deleted; the audit log
gets one entry per run when it closes.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import transaction

from checkpoints import audit
from checkpoints.store.planning import utcnow
from retention.holds import HOLD_OWNER
from retention.result import SweepResult, counts

if TYPE_CHECKING:
    from retention.models import SweepRun

# The models are imported in the functions below: a plain script imports the sweep (and so
# this module) before `from_conn_string` sets Django up, and models need Django set up.


def open_run(result: SweepResult, started: datetime, triggered_by: str) -> SweepRun:
    """The run's record, written first so a killed sweep still leaves one.

    Called with the store's sweep lock held, so an older run of this store still marked
    running cannot be running: it was killed, and is marked interrupted.
    """
    from retention.models import SweepRun  # see the note at the top

    run = SweepRun.objects.create(
        status=SweepRun.RUNNING,
        started_at=started,
        provider=result.provider,
        dry_run=False,
        waiting_minutes=result.waiting_minutes,
        finished_minutes=result.finished_minutes,
        skipped=result.skipped,
        triggered_by=triggered_by[:150],
    )
    SweepRun.objects.filter(provider=result.provider, status=SweepRun.RUNNING).exclude(
        pk=run.pk
    ).update(
        status=SweepRun.INTERRUPTED,
        error=f"interrupted: it stopped before finishing; sweep run {run.pk} found it "
        "unfinished while holding the store's sweep lock",
    )
    result.sweep_run_id = run.pk
    return run


def record_progress(
    run: SweepRun, result: SweepResult, horizon: str, spared: list[str], deleted: list[str]
) -> None:
    """Record one batch: the totals so far, the threads it spared and those it deleted."""
    from retention.models import SparedThread, SweepRun  # see the note at the top

    entries = result.spared[len(result.spared) - len(spared) :]
    with transaction.atomic():
        SweepRun.objects.filter(pk=run.pk).update(**counts(result))
        SparedThread.objects.bulk_create(
            [SparedThread(sweep_run_id=run.pk, **entry) for entry in entries], batch_size=500
        )
        record_deleted(run.pk, {horizon: deleted})


def record_deleted(run_id: int, deleted: dict[str, list[str]], batch_id: int | None = None) -> None:
    """One DeletedThread row per id a run (or one batch attempt of it) deleted."""
    from retention.models import DeletedThread  # see the note at the top

    DeletedThread.objects.bulk_create(
        [
            DeletedThread(sweep_run_id=run_id, batch_id=batch_id, thread_id=t, horizon=horizon)
            for horizon, ids in deleted.items()
            for t in ids
        ],
        batch_size=500,
    )


def close_run(run: SweepRun, result: SweepResult, triggered_by: str, error: str = "") -> None:
    """Close the run ok (or failed, with ``error``) with its totals, and audit it."""
    from retention.models import DeletedThread, SweepRun  # see the note at the top

    SweepRun.objects.filter(pk=run.pk).update(
        status=SweepRun.FAILED if error else SweepRun.OK,
        finished_at=utcnow(),
        error=error,
        bytes_freed=result.bytes_freed,
        **counts(result),
    )
    audit.record(
        "sweep",
        provider=result.provider,
        detail={
            "sweep_run_id": run.pk,
            "status": SweepRun.FAILED if error else SweepRun.OK,
            "swept_count": result.swept_count,
            # The ids themselves are the run's DeletedThread rows (the admin's run page and
            # GET /api/checkpoints/sweeps/<id>/deleted/ page through them).
            "deleted_ids_recorded": DeletedThread.objects.filter(sweep_run_id=run.pk).count(),
            "spared_count": len(result.spared),
            "held_count": sum(1 for s in result.spared if s["owner"] == HOLD_OWNER),
            "triggered_by": triggered_by[:150],
            **({"error": error} if error else {}),
        },
    )
