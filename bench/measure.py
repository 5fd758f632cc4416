"""Timing samples and the statistics the report prints."""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

OPS = ("put", "put_writes", "get_latest", "get_by_id", "list50", "delete_thread", "e2e")


class Samples:
    """Nanosecond timings per (subject label, operation)."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))

    def timed(
        self, label: str, op: str, call: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> Any:
        start = time.perf_counter_ns()
        result = call(*args, **kwargs)
        self.data[label][op].append(time.perf_counter_ns() - start)
        return result

    def get(self, label: str, op: str) -> list[int]:
        return self.data.get(label, {}).get(op, [])


def percentile(values: list[int], pct: float) -> float:
    """Nearest-rank percentile of nanosecond values, in milliseconds."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(pct / 100 * len(ordered)) - 1))
    return ordered[rank] / 1e6


def ops_per_second(values: list[int]) -> float:
    return len(values) / (sum(values) / 1e9) if values else float("nan")


def median_ms(values: list[int]) -> float:
    return percentile(values, 50)
