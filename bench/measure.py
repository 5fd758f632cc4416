"""Timing samples and the statistics the report prints."""

from __future__ import annotations

import math
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

OPS = ("put", "put_writes", "get_latest", "get_by_id", "list50", "delete_thread", "e2e")


class Samples:
    """Nanosecond timings per (subject label, operation)."""

    def __init__(self) -> None:
        self.data: dict[str, dict[str, list[int]]] = defaultdict(lambda: defaultdict(list))
        # Per subject label: [graph turns, saver CPU ns, process CPU ns] (`SaverCpu`).
        self.cpu: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])

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


SAVER_CALLS = ("put", "put_writes", "get_tuple")


class SaverCpu:
    """CPU time of the calling thread spent in a saver's calls, per call name.

    LangGraph runs a graph's saver calls in worker threads of a pool it makes for every
    invocation, so the thread's CPU time (`time.thread_time_ns`) is what each call cost,
    whatever the machine's load; the wall time is kept too (on PostgreSQL the server's share
    is not CPU of this process). ``spent[name]`` is [calls, cpu ns, wall ns].
    """

    def __init__(self) -> None:
        self.spent: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
        self._lock = threading.Lock()

    def _wrapper(self, call: Callable[..., Any], name: str) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            start, wall = time.thread_time_ns(), time.perf_counter_ns()
            try:
                return call(*args, **kwargs)
            finally:
                took = time.thread_time_ns() - start
                waited = time.perf_counter_ns() - wall
                with self._lock:
                    row = self.spent[name]
                    row[0] += 1
                    row[1] += took
                    row[2] += waited

        return counted

    def wrap(self, saver: Any, names: tuple[str, ...] = SAVER_CALLS) -> None:
        """Count ``saver``'s calls from now on (instance attributes shadow its methods)."""
        for name in names:
            setattr(saver, name, self._wrapper(getattr(saver, name), name))

    @contextmanager
    def counting(self, saver: Any, names: tuple[str, ...] = SAVER_CALLS) -> Iterator[None]:
        """Count ``saver``'s calls inside the block only; its methods are restored after.

        LangGraph binds the saver's methods when an invocation starts, so wrapping around
        ``graph.invoke`` counts every call of that turn, including a durability="async"
        put that a worker thread finishes before the invocation returns.
        """
        own = {name: saver.__dict__[name] for name in names if name in vars(saver)}
        self.wrap(saver, names)
        try:
            yield
        finally:
            for name in names:
                if name in own:
                    setattr(saver, name, own[name])
                else:
                    delattr(saver, name)

    def cpu_ns(self) -> int:
        return sum(row[1] for row in self.spent.values())

    def clear(self) -> None:
        with self._lock:
            self.spent.clear()


def timed_turn(samples: Samples, label: str, saver: Any, turn: Callable[[], Any]) -> Any:
    """Time one graph turn as ``e2e`` and add its saver CPU and process CPU to ``samples``."""
    meter = SaverCpu()
    cpu = time.process_time_ns()
    with meter.counting(saver):
        result = samples.timed(label, "e2e", turn)
    row = samples.cpu[label]
    row[0] += 1
    row[1] += meter.cpu_ns()
    row[2] += time.process_time_ns() - cpu
    return result
