"""What one sweep did: its result, the horizons it reports and the owners of what it kept."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from checkpoints.store.contract import StoreSaver
from retention.policy import platform_retention

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


def new_result(saver: StoreSaver, dry_run: bool) -> SweepResult:
    """An empty result at the platform's horizons, saying why idle threads are skipped."""
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


def counts(result: SweepResult) -> dict[str, int]:
    """The result's totals, as a run's record stores them."""
    return {
        "swept_count": result.swept_count,
        "finished_swept": result.finished_swept,
        "waiting_swept": result.waiting_swept,
        "written_during": result.written_during,
    }
