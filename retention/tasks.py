"""Celery tasks: the sweep, and one sweep run fanned out to workers in batches."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from celery import group, shared_task

from checkpoints import audit
from checkpoints.conf import setting
from checkpoints.store.capabilities import HOST
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.fanout import fan_out, run_batch
from retention.sweep import sweep_checkpoints as run_sweep
from retention.sweep import sweep_threads


def _when(now: str | None) -> datetime | None:
    return datetime.fromisoformat(now) if now else None


def _saver():
    return get_saver()


@shared_task(name="retention.tasks.sweep_checkpoints")
def sweep_checkpoints(dry_run: bool = False, now: str | None = None) -> dict[str, Any]:
    """Run one sweep of the deployment's store; return its result as a dict."""
    with audit.acting(origin="task", name="retention.tasks.sweep_checkpoints"):
        return run_sweep(dry_run=dry_run, now=_when(now), triggered_by="celery").as_dict()


@shared_task(name="retention.tasks.sweep_thread_batch")
def sweep_thread_batch(
    thread_ids: list[str], dry_run: bool = False, now: str | None = None
) -> dict[str, Any]:
    """Sweep these thread ids as a sweep of their own (it takes the store's lock)."""
    with audit.acting(origin="task", name="retention.tasks.sweep_thread_batch"):
        return sweep_threads(
            thread_ids, dry_run=dry_run, now=_when(now), triggered_by="celery-batch"
        ).as_dict()


@shared_task(bind=True, name="retention.tasks.fan_out_sweep")
def fan_out_sweep(
    self, max_batches: int | None = None, now: str | None = None, queue: str | None = None
) -> dict[str, Any]:
    """Open one sweep run under the store's lease and queue one task per batch.

    The batches go to ``queue``, by default the queue this task came from. A held lease
    is recorded as a refused run and reported, not raised.
    """
    when = _when(now) or utcnow()
    with audit.acting(origin="task", name="retention.tasks.fan_out_sweep"):
        planned = fan_out(
            _saver(), now=when, max_batches=max_batches, triggered_by="celery-fan-out"
        )
    if planned.batches:
        route = queue or (self.request.delivery_info or {}).get("routing_key")
        group(
            sweep_run_batch.s(planned.run.pk, index, ids, when.isoformat())
            for index, ids in enumerate(planned.batches)
        ).apply_async(**({"queue": route} if route else {}))
    return planned.as_dict()


@shared_task(bind=True, name="retention.tasks.sweep_run_batch")
def sweep_run_batch(
    self, run_id: int, index: int, thread_ids: list[str], now: str
) -> dict[str, Any]:
    """One batch of a fanned-out run, under the run's lease; retried up to the bound."""
    retries = max(0, int(setting("SWEEP_BATCH_RETRIES")))
    with audit.acting(origin="task", name="retention.tasks.sweep_run_batch"):
        outcome = run_batch(
            _saver(),
            run_id,
            index,
            thread_ids,
            now=datetime.fromisoformat(now),
            worker=self.request.hostname or HOST,
            final=self.request.retries >= retries,
        )
    if outcome["retry"]:
        raise self.retry(countdown=float(setting("SWEEP_BATCH_RETRY_SECONDS")), max_retries=retries)
    return outcome
