"""Prometheus metrics of the sweep, declared once; labels stay low-cardinality (no thread ids)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

SWEEP_RUNS = Counter(
    "checkpoint_sweep_runs",
    "Checkpoint sweeps by outcome (ok, failed, locked) and whether they were dry runs.",
    ["outcome", "dry_run"],
)
SWEEP_DELETED = Counter(
    "checkpoint_sweep_deleted",
    "Threads the sweep deleted, by the horizon they were past.",
    ["horizon"],
)
SWEEP_SPARED = Counter(
    "checkpoint_sweep_spared",
    "Threads past a horizon that a live-thread filter claimed, by horizon and filter owner.",
    ["horizon", "owner"],
)
SWEEP_DURATION = Histogram(
    "checkpoint_sweep_duration_seconds",
    "Wall time of one sweep, by provider.",
    ["provider"],
    buckets=(0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600),
)
