"""The sweep's walk over its candidates, batch by batch: each batch is asked of every
live-thread filter, then deleted (only the threads still as judged) and recorded."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import router, transaction

from checkpoints import tracing
from checkpoints.codec.render import moment_text as when
from checkpoints.conf import setting
from checkpoints.store.contract import StoreSaver
from retention import metrics
from retention.live_filters import claims_with_reasons, live_thread_filters
from retention.policy import platform_retention
from retention.result import FINISHED, WAITING, WRITTEN_DURING, WRITTEN_SINCE, SweepResult, counts
from retention.run_record import record_progress

if TYPE_CHECKING:
    from retention.models import SweepRun

# The sweep's one logger whichever of its modules writes, so a log setup names it once.
logger = logging.getLogger("retention.sweep")


class Sweeper:
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
            counts(self.result),
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
                    record_progress(self.run, self.result, horizon, spared, doomed)
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


def sweep_listed(sweeper: Sweeper, ids: list[str]) -> None:
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
