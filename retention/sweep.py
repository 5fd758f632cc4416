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
   deleted (elsewhere the record follows right after; see `_Sweeper.batch_unit`).
10. A run records every id it deleted (`DeletedThread`, one row each, written with the
    batch's progress), so its record says which threads went, not only how many; a dry
    run lists the very ids it counts.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import router, transaction
from django.utils.module_loading import import_string

from checkpoints import audit, tracing
from checkpoints.codec.render import moment_text as when
from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, CheckpointStoreError, InvalidCheckpointInput
from checkpoints.store.contract import StoreSaver
from checkpoints.store.planning import utcnow
from retention import metrics
from retention.errors import LiveFilterFailed, SweepAlreadyRunning, SweepFailed
from retention.holds import HOLD_OWNER, held
from retention.locks import sweep_lock
from retention.policy import platform_retention

if TYPE_CHECKING:
    from retention.models import SweepRun

logger = logging.getLogger(__name__)

FINISHED = "finished"
WAITING = "waiting"
# The owner a thread spared by the run rule (written since it was marked) is reported under.
WRITTEN_SINCE = "written-since-finished"
# The owner a thread kept because it was written after the sweep judged it is reported under.
WRITTEN_DURING = "written-during-sweep"
SKIP_REASONS = {
    "redis": "redis: keys expire on their TTL (the waiting retention), so the sweep does "
    "not delete idle threads",
    "memory": "memory: threads live with the process, so the sweep does not delete idle threads",
}

LiveThreadFilter = Callable[..., Iterable[str]]
_registered: dict[str, LiveThreadFilter] = {}


@dataclass
class SweepResult:
    """What one sweep did (or, in a dry run, would do)."""

    provider: str
    waiting_minutes: int
    finished_minutes: int
    swept_count: int = 0
    finished_swept: int = 0
    waiting_swept: int = 0
    # {thread_id, horizon, owner, reason}: who spared it, and why in words.
    spared: list[dict[str, str]] = field(default_factory=list)
    # Threads past a horizon, unclaimed, but written after the sweep judged them: kept.
    written_during: int = 0
    written_during_ids: list[str] = field(default_factory=list)
    # horizon -> the ids this sweep deleted (a dry run: would delete), in the order it did.
    deleted_ids: dict[str, list[str]] = field(default_factory=lambda: {FINISHED: [], WAITING: []})
    skipped: str | None = None
    dry_run: bool = False
    sweep_run_id: int | None = None
    # Bytes the store gave back after the deletes; None where it does not measure them.
    bytes_freed: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# -- live-thread filters --------------------------------------------------------------------
def register_live_thread_filter(owner: str, func: LiveThreadFilter) -> None:
    """Ask ``func(thread_ids) -> set`` before every delete; ``owner`` names it in results."""
    if not isinstance(owner, str) or not owner.strip():
        raise InvalidCheckpointInput(
            f"a live-thread filter needs an owner name, got {owner!r}", field="owner"
        )
    if not callable(func):
        raise InvalidCheckpointInput(
            f"live-thread filter {owner!r} must be callable, got {func!r}", field="func"
        )
    _registered[owner] = func


def unregister_live_thread_filter(owner: str) -> None:
    """Stop asking the filter registered in code under ``owner``."""
    _registered.pop(owner, None)


def live_thread_filters() -> dict[str, LiveThreadFilter]:
    """Every filter the sweep asks: holds first (an operator's word, never configured away),
    then the configured dotted paths, then those registered in code."""
    found: dict[str, LiveThreadFilter] = {HOLD_OWNER: held}
    for owner, path in (setting("LIVE_THREAD_FILTERS") or {}).items():
        try:
            found[owner] = import_string(path)
        except ImportError as exc:
            raise CheckpointConfigError(
                f"live-thread filter {owner!r}: cannot import {path!r} ({exc})",
                field="LIVE_THREAD_FILTERS",
            ) from exc
    found.update(_registered)
    return found


def _call_filter(func: LiveThreadFilter, ids: list[str], **context: Any) -> Iterable[str]:
    # Filters see the sweep's own saver and clock when they accept them.
    params = inspect.signature(func).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    passed = {k: v for k, v in context.items() if takes_any or k in params}
    return func(list(ids), **passed)


def claimed_threads(
    ids: list[str], *, filters: dict[str, LiveThreadFilter], saver: StoreSaver, now: datetime
) -> dict[str, str]:
    """thread id -> the owner of the first filter claiming it; a failing filter raises."""
    found = claims_with_reasons(ids, filters=filters, saver=saver, now=now)
    return {thread_id: owner for thread_id, (owner, _) in found.items()}


def claims_with_reasons(
    ids: list[str], *, filters: dict[str, LiveThreadFilter], saver: StoreSaver, now: datetime
) -> dict[str, tuple[str, str]]:
    """thread id -> (owner, why in words) of the first filter claiming it; a filter that
    answers a plain set is reported as claiming it. A failing filter raises."""
    claims: dict[str, tuple[str, str]] = {}
    wanted = set(ids)
    for owner, func in filters.items():
        try:
            answer = _call_filter(func, ids, saver=saver, now=now)
            reasons = (
                {str(t): str(why) for t, why in answer.items()}
                if isinstance(answer, Mapping)
                else dict.fromkeys((str(t) for t in answer), "")
            )
        except Exception as exc:
            raise LiveFilterFailed(
                f"live-thread filter {owner!r} failed on a batch of {len(ids)} thread(s): "
                f"{type(exc).__name__}: {exc}",
                owner=owner,
            ) from exc
        for thread_id in reasons.keys() & wanted:
            why = reasons[thread_id] or f"live-thread filter {owner!r} claims it"
            claims.setdefault(thread_id, (owner, why))
    return claims


# -- the sweep -------------------------------------------------------------------------------
class _Sweeper:
    """One sweep's walk over the candidates: every thread is deleted, spared or kept once.

    Candidates are listed oldest first, ``len(handled) + batch`` at a time: the ids already
    handled in this sweep (spared ones stay past their horizon, and a deleted thread that a
    writer re-created is listed again) are skipped, so each batch holds fresh ids only and
    the walk ends only when the listing has nothing fresh left, however many were spared.
    Every filter is asked about a batch before that batch is deleted; a failing filter
    stops the sweep with what was already deleted recorded exactly.
    """

    def __init__(
        self,
        saver: StoreSaver,
        now: datetime,
        dry_run: bool,
        result: SweepResult,
        run: SweepRun | None = None,
    ):
        self.saver = saver
        self.now = now
        self.dry_run = dry_run
        self.result = result
        self.run = run
        self.filters = live_thread_filters()
        self.batch = max(1, int(setting("SWEEP_BATCH_SIZE")))
        self.handled: set[str] = set()
        self.spared_ids: set[str] = set()
        # Finished marks' times as listed, and the ids the finished horizon passed over
        # because they were written since (they stay listed as due, so they are skipped).
        self.marked_at: dict[str, datetime] = {}
        self.passed_over: set[str] = set()
        # The last write each candidate was judged on (None: the store had no record of
        # it); the delete goes through only while it is still the thread's last write.
        self.judged: dict[str, datetime | None] = {}
        self.keep_alive: Callable[[], None] = lambda: None

    def candidates(self, horizon: str, limit: int | None) -> list[str]:
        if horizon == FINISHED:
            entries = self.saver.finished_due(self.now, limit=limit)
            self.marked_at.update((e.thread_id, e.marked_at) for e in entries)
            return [e.thread_id for e in entries]
        writes = self.saver.idle_writes(self.now, self.result.waiting_minutes, limit=limit)
        self.judged.update(writes)
        return list(writes)

    def judge_idle(self, ids: list[str]) -> list[str]:
        """Those of ``ids`` idle past their waiting horizon, each judged on its last write.

        The write is read before the horizon is checked: one landing in between makes the
        thread not idle, and one landing after changes the write the delete compares.
        """
        writes = self.saver.last_writes(ids)
        idle = self.saver.idle_among(ids, self.now, self.result.waiting_minutes)
        self.judged.update((t, writes.get(t)) for t in idle)
        return idle

    def seen(self, horizon: str) -> set[str]:
        return self.handled | self.passed_over if horizon == FINISHED else self.handled

    def fresh(self, listed: list[str], horizon: str) -> list[str]:
        seen = self.seen(horizon)
        return [t for t in dict.fromkeys(listed) if t not in seen]

    def sweep(self, horizon: str) -> None:
        if self.dry_run:
            # Nothing is deleted, so one listing holds every candidate.
            everything = self.fresh(self.candidates(horizon, None), horizon)
            for start in range(0, len(everything), self.batch):
                self.handle(horizon, everything[start : start + self.batch])
                self.keep_alive()
            return
        while True:
            limit = len(self.seen(horizon)) + self.batch
            listed = self.candidates(horizon, limit)
            fresh = self.fresh(listed, horizon)
            if not fresh:
                return
            self.handle(horizon, fresh[: self.batch])
            self.keep_alive()
            if len(listed) < limit and len(fresh) <= self.batch:
                return

    def handle(self, horizon: str, ids: list[str]) -> list[str]:
        """Spare what the filters claim, delete the rest; return the spared ids."""
        provider = getattr(self.saver, "provider", "")
        with tracing.span("sweep batch", provider=provider, horizon=horizon) as span:
            spared = self._handle(horizon, ids)
            tracing.set_attributes(
                span,
                thread_count=len(ids),
                spared_count=len(spared),
                dry_run=bool(self.dry_run),
            )
            return spared

    def _handle(self, horizon: str, ids: list[str]) -> list[str]:
        ids = [t for t in dict.fromkeys(ids) if t not in self.handled]
        spared = []
        if horizon == FINISHED:
            ids, spared = self.pass_over_written(ids)
        claims = claims_with_reasons(ids, filters=self.filters, saver=self.saver, now=self.now)
        doomed = []
        for thread_id in ids:
            claim = claims.get(thread_id)
            if claim is not None:
                self.spare(horizon, thread_id, *claim)
                spared.append(thread_id)
            else:
                doomed.append(thread_id)
        # What _restore puts back if the batch's transaction rolls back.
        before = (
            _counts(self.result),
            len(self.result.spared),
            len(spared),
            len(self.result.deleted_ids[horizon]),
        )
        try:
            with self.batch_unit():
                if doomed and not self.dry_run:
                    # One set-based delete per batch, of the threads still as judged.
                    kept = self.saver.delete_threads_unwritten({t: self.judged[t] for t in doomed})
                    for thread_id in [t for t in doomed if t in kept]:
                        self.spare(horizon, thread_id, WRITTEN_DURING)
                        spared.append(thread_id)
                    doomed = [t for t in doomed if t not in kept]
                self._tally(horizon, doomed)
                if self.run is not None:
                    _progress(self.run, self.result, horizon, spared, doomed)
        except Exception:
            if self.shares_database():
                # The batch's delete rolled back with its record: nothing of it happened.
                self._restore(horizon, before, spared)
            raise
        if doomed and not self.dry_run:
            metrics.SWEEP_DELETED.labels(horizon=horizon).inc(len(doomed))
            self.reclaim_space()
        self.handled.update(ids)
        return spared

    def reclaim_space(self, *, final: bool = False) -> None:
        """The store's hook giving the deleted rows' space back, bounded per call."""
        freed = self.saver.reclaim_space(final=final)
        if freed is not None:
            self.result.bytes_freed = (self.result.bytes_freed or 0) + freed

    def _tally(self, horizon: str, doomed: list[str]) -> None:
        deleted = len(doomed)
        self.result.deleted_ids[horizon].extend(doomed)
        self.result.swept_count += deleted
        if horizon == FINISHED:
            self.result.finished_swept += deleted
        else:
            self.result.waiting_swept += deleted
        self.result.written_during = len(self.result.written_during_ids)

    def _restore(
        self, horizon: str, before: tuple[dict[str, int], int, int, int], spared: list[str]
    ) -> None:
        """Put the result back as it was before a batch whose transaction rolled back."""
        counts, spared_len, batch_spared, deleted_len = before
        del self.result.deleted_ids[horizon][deleted_len:]
        for key, value in counts.items():
            setattr(self.result, key, value)
        for entry in self.result.spared[spared_len:]:
            if entry["owner"] == WRITTEN_DURING:
                self.result.written_during_ids.remove(entry["thread_id"])
        del self.result.spared[spared_len:]
        del spared[batch_spared:]

    def shares_database(self) -> bool:
        """Whether the run's record lives in the store's own database."""
        if self.run is None or self.dry_run:
            return False
        return self.saver.db_alias == router.db_for_write(type(self.run), instance=self.run)

    def batch_unit(self) -> AbstractContextManager[Any]:
        """The unit a batch's delete and its progress record are committed in.

        One transaction where the store and the run's record share a database. Elsewhere
        (Redis, memory, an ORM store on another database than the record) no transaction
        spans both, so the record is written right after the delete: a sweep killed in
        between leaves its record short by that batch, and the next sweep marks it
        interrupted.
        """
        if not self.shares_database():
            return nullcontext()
        return transaction.atomic(using=self.saver.db_alias)

    def pass_over_written(self, ids: list[str]) -> tuple[list[str], list[str]]:
        """The run rule: (ids to sweep as finished, ids spared as written since marked).

        A thread written since its mark that is also idle past its waiting horizon is left
        to the waiting horizon, which deletes it (after asking the filters) unreported here.
        """
        writes = self.saver.last_writes(ids)
        self.judged.update((t, writes.get(t)) for t in ids)
        written = [
            t for t in ids if t in writes and t in self.marked_at and writes[t] > self.marked_at[t]
        ]
        if not written:
            return ids, []
        self.passed_over.update(written)
        idle = (
            set(self.saver.idle_among(written, self.now, self.result.waiting_minutes))
            if self.saver.supports_idle_sweep
            else set()
        )
        spared = [t for t in written if t not in idle]
        for thread_id in spared:
            self.spare(
                FINISHED,
                thread_id,
                WRITTEN_SINCE,
                f"written {when(writes[thread_id])}, after its finished mark at "
                f"{when(self.marked_at[thread_id])}: its run's owner marks it again",
            )
        return [t for t in ids if t not in self.passed_over], spared

    def spare(self, horizon: str, thread_id: str, owner: str, why: str = "") -> None:
        if owner == WRITTEN_DURING:
            judged = self.judged.get(thread_id)
            on = f" (judged on its write at {when(judged)})" if judged else ""
            why = f"written after the sweep judged it{on}: kept whole"
            self.result.written_during_ids.append(thread_id)
        why = why or f"live-thread filter {owner!r} claims it"
        logger.warning(
            "sweep spared thread %r past the %s horizon, claimed by %r: %s",
            thread_id,
            horizon,
            owner,
            why,
            # Fields of their own for a structured log (the service's JSON lines).
            extra={"thread_id": thread_id, "horizon": horizon, "owner": owner},
        )
        if not self.dry_run:
            metrics.SWEEP_SPARED.labels(horizon=horizon, owner=owner).inc()
        self.spared_ids.add(thread_id)
        self.result.spared.append(
            {"thread_id": thread_id, "horizon": horizon, "owner": owner, "reason": why}
        )


def _new_result(saver: StoreSaver, dry_run: bool) -> SweepResult:
    waiting, finished = platform_retention()
    return SweepResult(
        provider=saver.provider,
        waiting_minutes=waiting,
        finished_minutes=finished,
        skipped=None
        if saver.supports_idle_sweep
        else SKIP_REASONS.get(saver.provider, f"{saver.provider}: idle threads are not swept"),
        dry_run=dry_run,
    )


def _open_run(result: SweepResult, started: datetime, triggered_by: str) -> SweepRun:
    """The run's record, written first so a killed sweep still leaves one.

    Called with the store's sweep lock held, so an older run of this store still marked
    running cannot be running: it was killed, and is marked interrupted.
    """
    from retention.models import SweepRun

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


def _counts(result: SweepResult) -> dict[str, int]:
    return {
        "swept_count": result.swept_count,
        "finished_swept": result.finished_swept,
        "waiting_swept": result.waiting_swept,
        "written_during": result.written_during,
    }


def _progress(
    run: SweepRun, result: SweepResult, horizon: str, spared: list[str], deleted: list[str]
) -> None:
    """Record one batch: the totals so far, the threads it spared and those it deleted."""
    from retention.models import SparedThread, SweepRun

    entries = result.spared[len(result.spared) - len(spared) :]
    with transaction.atomic():
        SweepRun.objects.filter(pk=run.pk).update(**_counts(result))
        SparedThread.objects.bulk_create(
            [SparedThread(sweep_run_id=run.pk, **entry) for entry in entries], batch_size=500
        )
        record_deleted(run.pk, {horizon: deleted})


def record_deleted(run_id: int, deleted: dict[str, list[str]], batch_id: int | None = None) -> None:
    """One DeletedThread row per id a run (or one batch attempt of it) deleted."""
    from retention.models import DeletedThread

    DeletedThread.objects.bulk_create(
        [
            DeletedThread(sweep_run_id=run_id, batch_id=batch_id, thread_id=t, horizon=horizon)
            for horizon, ids in deleted.items()
            for t in ids
        ],
        batch_size=500,
    )


def _close_run(run: SweepRun, result: SweepResult, triggered_by: str, error: str = "") -> None:
    from retention.models import DeletedThread, SweepRun

    SweepRun.objects.filter(pk=run.pk).update(
        status=SweepRun.FAILED if error else SweepRun.OK,
        finished_at=utcnow(),
        error=error,
        bytes_freed=result.bytes_freed,
        **_counts(result),
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


def _run(
    saver: StoreSaver,
    *,
    dry_run: bool,
    triggered_by: str,
    work: Callable[[_Sweeper], None],
    now: datetime | None,
) -> SweepResult:
    now = now or utcnow()
    result = _new_result(saver, dry_run)
    started = utcnow()
    clock = time.monotonic()
    label = "true" if dry_run else "false"
    try:
        with sweep_lock(saver) as keep_alive:
            run = None if dry_run else _open_run(result, started, triggered_by)
            sweeper = _Sweeper(saver, now, dry_run, result, run)
            sweeper.keep_alive = keep_alive
            try:
                work(sweeper)
                if not dry_run:
                    sweeper.reclaim_space(final=True)
            except Exception as exc:
                metrics.SWEEP_RUNS.labels(outcome="failed", dry_run=label).inc()
                logger.error("checkpoint sweep on %s failed: %s", saver.provider, exc)
                if run is not None:
                    _close_run(run, result, triggered_by, error=f"{type(exc).__name__}: {exc}")
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
        _close_run(run, result, triggered_by)
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
        from checkpoints.store.registry import get_saver

        saver = get_saver()

    def work(sweeper: _Sweeper) -> None:
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
        from checkpoints.store.registry import get_saver

        saver = get_saver()
    ids = list(dict.fromkeys(str(t) for t in thread_ids))
    return _run(
        saver,
        dry_run=dry_run,
        triggered_by=triggered_by,
        work=lambda sweeper: sweep_listed(sweeper, ids),
        now=now,
    )


def sweep_listed(sweeper: _Sweeper, ids: list[str]) -> None:
    """Sweep ids listed earlier: each one's horizon is checked again at the sweep's clock."""
    finished, waiting = past_horizon(sweeper.saver, ids, sweeper.now, sweeper.marked_at)
    if finished:
        sweeper.handle(FINISHED, finished)
        sweeper.keep_alive()
    if sweeper.passed_over and sweeper.saver.supports_idle_sweep:
        # Written since marked: swept only if idle past the waiting horizon.
        waiting += sorted(sweeper.passed_over - set(waiting))
    if waiting:
        # Judged on the last write read now, the horizon checked again after that read.
        sweeper.handle(WAITING, sweeper.judge_idle(waiting))


def past_horizon(
    saver: StoreSaver,
    thread_ids: list[str],
    now: datetime,
    marked_at: dict[str, datetime] | None = None,
) -> tuple[list[str], list[str]]:
    """Split ids into (finished past due, idle past the waiting horizon); drop the rest.

    The marks' times of the finished ones go into ``marked_at`` (for the run rule).
    """
    finished = []
    marks = saver.finished_marks(thread_ids)
    for thread_id in thread_ids:
        mark = marks.get(thread_id)
        if mark is not None and mark.due_at <= now:
            finished.append(thread_id)
            if marked_at is not None:
                marked_at[thread_id] = mark.marked_at
    if not saver.supports_idle_sweep:
        return finished, []
    platform_waiting, _ = platform_retention()
    rest = [t for t in thread_ids if t not in set(finished)]
    return finished, saver.idle_among(rest, now, platform_waiting)


def candidate_batches(
    saver: StoreSaver, *, now: datetime, max_batches: int | None = None
) -> list[list[str]]:
    """Batches of the thread ids past a horizon (all of them, or ``max_batches``), to fan out."""
    size = max(1, int(setting("SWEEP_BATCH_SIZE")))
    limit = size * max_batches if max_batches else None
    ids = list(dict.fromkeys(e.thread_id for e in saver.finished_due(now, limit=limit)))
    if saver.supports_idle_sweep and (limit is None or len(ids) < limit):
        waiting, _ = platform_retention()
        seen = set(ids)
        idle = saver.idle_threads(now, waiting, limit=(limit - len(ids)) if limit else None)
        ids += [t for t in idle if t not in seen]
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def compact_store(saver: StoreSaver | None = None) -> dict[str, Any]:
    """Compact the store under its sweep lease, so no sweep deletes meanwhile; the store's
    report of the space before and after (`StoreSaver.compact`).

    Raises SweepAlreadyRunning while a sweep holds the lease.
    """
    if saver is None:
        from checkpoints.store.registry import get_saver

        saver = get_saver()
    with sweep_lock(saver):
        return saver.compact()
