"""A live-thread filter the real-worker fan-out test loads into its workers (``--include``).

It is slow enough (``SLOW`` seconds a call) that two workers share the batches, fails once
for a batch holding a ``flaky-`` thread (a file in ``CHECKPOINTS_TEST_FILTER_DIR`` remembers
across workers that it did), and always fails for one holding a ``doomed-`` thread.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from retention.sweep import register_live_thread_filter

SLOW = 0.4


def test_filter(ids: list[str]) -> set[str]:
    time.sleep(SLOW)
    if any(t.startswith("doomed-") for t in ids):
        raise RuntimeError("this filter is always down for doomed threads")
    if any(t.startswith("flaky-") for t in ids):
        marker = Path(os.environ["CHECKPOINTS_TEST_FILTER_DIR"]) / "flaky-failed-once"
        try:
            marker.open("x").close()
        except FileExistsError:
            return set()
        raise ConnectionError("this filter failed once for the flaky batch")
    return set()


register_live_thread_filter("worker-test", test_filter)
