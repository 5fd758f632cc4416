"""The sweep: the one operation that deletes checkpoint threads.

Safety rules, in order:
1. A thread is deleted only when it is past a horizon: finished and past its due time (every
   provider), or idle past its waiting horizon (ORM providers; Redis keys expire on their
   own and memory lives with the process).
2. Before any thread of a batch is deleted, its holds (an operator's "keep for
   investigation", `retention.holds`) and every live-thread filter are asked about the whole
   batch; a thread any of them claims is spared, with why in words (and a finished one
   stays marked).
3. A filter that fails fails the sweep: nothing from that batch onwards is deleted.
4. Candidates are read in bounded batches, so memory follows the batch size, not the store
   (a dry run deletes nothing, so it lists the candidate ids once instead).
5. One sweep at a time per store (see ``locks``); a second one returns at once.
6. The run rule: a new run's write on a finished thread does not take it out of the
   finished set (that would cost every put a query); instead the sweep compares the
   finished mark's time with the thread's last write (`last_writes`, one read per batch)
   and spares, reporting it as ``written-since-finished``, a thread written since it was
   marked. Its mark stays (the admin and the API show "finished, written since"): the
   run's owner marks it again when that run ends, and until then it is swept only by the
   waiting horizon, counted from its last write (ORM stores; Redis keys expire on their
   TTL, memory lives with the process). A run through `retention.runs.thread_run` on a
   caller's thread still takes it out of the set when it starts.
7. A sweep can be fanned out to Celery workers as one run in batches (see ``fanout``).
8. A thread is deleted only while its last write is still the one the sweep judged it on
   (the idle listing's, or the one read for the run rule): the store checks it in the same
   unit as the delete (`StoreSaver.delete_threads_unwritten`), so a write acknowledged
   while the filters were asked is never lost. Such a thread is kept whole and reported as
   ``written-during-sweep`` (``written_during`` counts them).
9. Where the run's record and the store share a database, a batch's delete and its
   progress commit in one transaction, so a killed sweep's record counts exactly what it
   deleted (elsewhere the record follows right after; see `batches.Sweeper.batch_unit`).
10. A run records every id it deleted (`DeletedThread`, one row each, written with the
    batch's progress), so its record says which threads went, not only how many; a dry
    run lists the very ids it counts.

The walk over the candidates is in ``batches``, the filters' registry in ``live_filters``,
the run's record in ``run_record`` and the result's type in ``result``; this module runs a
sweep under the store's lock and is the public entrance.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from checkpoints.errors import CheckpointStoreError
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention import metrics
from retention.batches import Sweeper, sweep_listed
from retention.errors import SweepAlreadyRunning, SweepFailed
from retention.live_filters import register_live_thread_filter, unregister_live_thread_filter
from retention.locks import sweep_lock
from retention.result import FINISHED, WAITING, SweepResult, new_result
from retention.run_record import close_run, open_run

__all__ = [
    "SweepResult",
    "compact_store",
    "register_live_thread_filter",
    "sweep_checkpoints",
    "sweep_threads",
    "unregister_live_thread_filter",
]

logger = logging.getLogger(__name__)


def _run(
    saver: StoreSaver,
    *,
    dry_run: bool,
    triggered_by: str,
    work: Callable[[Sweeper], None],
    now: datetime | None,
) -> SweepResult:
    now = now or utcnow()
    result = new_result(saver, dry_run)
    started = utcnow()
    clock = time.monotonic()
    label = "true" if dry_run else "false"
    try:
        with sweep_lock(saver) as keep_alive:
            run = None if dry_run else open_run(result, started, triggered_by)
            sweeper = Sweeper(saver, now, dry_run, result, run)
            sweeper.keep_alive = keep_alive
            try:
                work(sweeper)
                if not dry_run:
                    sweeper.reclaim_space(final=True)
            except Exception as exc:
                metrics.SWEEP_RUNS.labels(outcome="failed", dry_run=label).inc()
                logger.error("checkpoint sweep on %s failed: %s", saver.provider, exc)
                if run is not None:
                    close_run(run, result, triggered_by, error=f"{type(exc).__name__}: {exc}")
                if isinstance(exc, CheckpointStoreError):
                    raise
                raise SweepFailed(
                    f"checkpoint sweep on the {saver.provider} store failed after deleting "
                    f"{result.swept_count} thread(s): {type(exc).__name__}: {exc}"
                ) from exc
    except SweepAlreadyRunning:
        metrics.SWEEP_RUNS.labels(outcome="locked", dry_run=label).inc()
        raise
    finally:
        metrics.SWEEP_DURATION.labels(provider=saver.provider).observe(time.monotonic() - clock)
    metrics.SWEEP_RUNS.labels(outcome="ok", dry_run=label).inc()
    if run is not None:
        close_run(run, result, triggered_by)
    logger.info(
        "checkpoint sweep on %s%s: %d deleted (%d finished, %d waiting), %d spared",
        result.provider,
        " (dry run)" if dry_run else "",
        result.swept_count,
        result.finished_swept,
        result.waiting_swept,
        len(result.spared),
    )
    return result


def sweep_checkpoints(
    dry_run: bool = False,
    now: datetime | None = None,
    saver: StoreSaver | None = None,
    *,
    triggered_by: str = "",
) -> SweepResult:
    """Delete the threads past a horizon that no live-thread filter claims.

    ``saver`` defaults to the deployment's store; ``now`` moves the clock (tests, replays).
    Raises SweepAlreadyRunning when another sweep holds the store's lock, LiveFilterFailed
    when a filter fails, CheckpointDeleteError when a writer keeps re-filling a thread.
    """
    if saver is None:
        saver = get_saver()

    def work(sweeper: Sweeper) -> None:
        sweeper.sweep(FINISHED)
        if saver.supports_idle_sweep:
            sweeper.sweep(WAITING)

    return _run(saver, dry_run=dry_run, triggered_by=triggered_by, work=work, now=now)


def sweep_threads(
    thread_ids: Iterable[str],
    *,
    dry_run: bool = False,
    now: datetime | None = None,
    saver: StoreSaver | None = None,
    triggered_by: str = "",
) -> SweepResult:
    """Sweep only the given threads (a fanned-out batch), re-checking each one's horizon.

    A thread is deleted only if it is still past a horizon at ``now`` and unclaimed, so a
    batch listed earlier is safe to sweep later or twice.
    """
    if saver is None:
        saver = get_saver()
    ids = list(dict.fromkeys(str(t) for t in thread_ids))
    return _run(
        saver,
        dry_run=dry_run,
        triggered_by=triggered_by,
        work=lambda sweeper: sweep_listed(sweeper, ids),
        now=now,
    )


def compact_store(saver: StoreSaver | None = None) -> dict[str, Any]:
    """Compact the store under its sweep lease, so no sweep deletes meanwhile; the store's
    report of the space before and after (`StoreSaver.compact`).

    Raises SweepAlreadyRunning while a sweep holds the lease.
    """
    if saver is None:
        saver = get_saver()
    with sweep_lock(saver):
        return saver.compact()
