"""The records the ledgers hand out: finished marks, a thread's holdings and storage."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class FinishedEntry:
    """A thread in the finished-marks ledger."""

    thread_id: str
    marked_at: datetime
    due_at: datetime
    owner: str = ""


@dataclass(frozen=True)
class ThreadHoldings:
    """What a thread still holds: how many checkpoints and pending writes."""

    checkpoints: int
    writes: int

    @property
    def empty(self) -> bool:
        return self.checkpoints == 0 and self.writes == 0

    @property
    def total(self) -> int:
        return self.checkpoints + self.writes

    def __str__(self) -> str:
        return f"{self.checkpoints} checkpoint(s) and {self.writes} pending write(s)"


STORAGE_TABLES = ("checkpoints", "channel_values", "pending_writes")


@dataclass(frozen=True)
class ThreadStorage:
    """Stored bytes of a thread's payloads (after compression and sealing), by table and
    by channel; keys, ids and metadata are not counted, so every provider sizes alike."""

    tables: dict[str, int]
    channels: dict[str, int]

    @property
    def total(self) -> int:
        return sum(self.tables.values())


def thread_storage(
    bodies: Iterable[int], values: Iterable[tuple[str, int]], writes: Iterable[tuple[str, int]]
) -> ThreadStorage:
    """Sum the sizes of checkpoint bodies, (channel, size) values and (channel, size) writes."""
    tables = dict.fromkeys(STORAGE_TABLES, 0)
    channels: dict[str, int] = {}
    tables["checkpoints"] = sum(bodies)
    for table, rows in (("channel_values", values), ("pending_writes", writes)):
        for channel, size in rows:
            tables[table] += size
            channels[channel] = channels.get(channel, 0) + size
    return ThreadStorage(tables, dict(sorted(channels.items())))


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


# A channel the checkpoint versions but holds no value for (stored as "no value").
MISSING = _Missing()
