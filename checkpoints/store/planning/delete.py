"""Delete that repeats until the thread is empty, and when it gives up."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from checkpoints.errors import (
    CheckpointDeleteError,
)
from checkpoints.store.planning import check_thread_id
from checkpoints.store.planning.records import ThreadHoldings

DELETE_ROUNDS = 100


class DeleteRounds:
    """The repeat-until-empty rule: feed it what each round left; it says when to stop.

    A thread still holding rows after a round is deleted again, up to DELETE_ROUNDS
    rounds; with ``stop_without_progress`` (Redis) it gives up at the first round, from
    the second, that makes no progress. Either way CheckpointDeleteError names the thread
    and what it still holds.
    """

    def __init__(self, thread_ids: Iterable[Any], *, stop_without_progress: bool) -> None:
        self.pending = list(dict.fromkeys(check_thread_id(t) for t in thread_ids))
        self.stop_without_progress = stop_without_progress
        self.round = 0
        self._before: dict[str, ThreadHoldings] = {}

    def __iter__(self):
        while self.pending:
            if self.round >= DELETE_ROUNDS:
                first = self.pending[0]
                more = len(self.pending) - 1
                raise CheckpointDeleteError(
                    f"thread {first!r} still holds {self._before[first]} after {DELETE_ROUNDS} "
                    "delete rounds: a writer keeps adding to it"
                    + (f" (and {more} more thread(s))" if more else "")
                )
            self.round += 1
            yield list(self.pending)

    def left(self, left: Mapping[str, ThreadHoldings]) -> list[str]:
        """Record what this round left; return the threads now empty."""
        gone = [t for t in self.pending if t not in left]
        if self.stop_without_progress and self.round >= 2:
            stuck = [
                t
                for t, held in left.items()
                if t in self._before and held.total >= self._before[t].total
            ]
            if stuck:
                raise CheckpointDeleteError(
                    f"thread {stuck[0]!r} still holds {left[stuck[0]]} after delete round "
                    f"{self.round}: a writer keeps adding to it"
                )
        self._before = dict(left)
        self.pending = list(left)
        return gone
