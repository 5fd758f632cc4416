"""Celery tasks: the sweep, and batches of threads fanned out to workers."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from celery import group, shared_task

from checkpoints import audit
from checkpoints.store.planning import utcnow
from retention.sweep import candidate_batches, sweep_threads
from retention.sweep import sweep_checkpoints as run_sweep


def _when(now: str | None) -> datetime | None:
    return datetime.fromisoformat(now) if now else None


@shared_task(name="retention.tasks.sweep_checkpoints")
def sweep_checkpoints(dry_run: bool = False, now: str | None = None) -> dict[str, Any]:
    """Run one sweep of the deployment's store; return its result as a dict."""
    with audit.acting(origin="task", name="retention.tasks.sweep_checkpoints"):
        return run_sweep(dry_run=dry_run, now=_when(now), triggered_by="celery").as_dict()


@shared_task(name="retention.tasks.sweep_thread_batch")
def sweep_thread_batch(
    thread_ids: list[str], dry_run: bool = False, now: str | None = None
) -> dict[str, Any]:
    """Sweep one batch of thread ids; each is re-checked against its horizon first."""
    with audit.acting(origin="task", name="retention.tasks.sweep_thread_batch"):
        return sweep_threads(
            thread_ids, dry_run=dry_run, now=_when(now), triggered_by="celery-batch"
        ).as_dict()


@shared_task(name="retention.tasks.fan_out_sweep")
def fan_out_sweep(max_batches: int = 10, now: str | None = None) -> dict[str, Any]:
    """List up to ``max_batches`` batches past a horizon and queue one task per batch."""
    from checkpoints.store.registry import get_saver

    when = _when(now) or utcnow()
    batches = candidate_batches(get_saver(), now=when, max_batches=max_batches)
    if batches:
        group(
            sweep_thread_batch.s(batch, False, when.isoformat()) for batch in batches
        ).apply_async()
    return {"batches": len(batches), "threads": sum(len(b) for b in batches)}
