"""The storage requests a store flow yields: one small type per primitive a saver supplies.

`StoreSaver.perform` (and each saver's ``aperform``) matches on these, so a put can be
followed by reading from `StoreSaver.put` through `StoreCheckpoint` to the saver's
``_store_checkpoint`` and its SQL, Lua or dict code.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from checkpoints.store.planning.put import PutPlan
from checkpoints.store.planning.writes import WritesPlan


@dataclass(frozen=True, slots=True)
class DurabilityOf:
    """The stamp stored beside a checkpoint (the namespace's newest when no id)."""

    thread_id: str
    ns: str
    checkpoint_id: str | None


@dataclass(frozen=True, slots=True)
class StoreCheckpoint:
    """Write a checkpoint, its new blobs and its stamped metadata as one unit."""

    plan: PutPlan


@dataclass(frozen=True, slots=True)
class StoreHead:
    """Write a checkpoint as the thread's new head and bump the thread's version, as one
    unit (a rollback): with ``expected`` set, a thread at another version refuses with
    ThreadVersionConflict and nothing is written; a refused put leaves the version."""

    plan: PutPlan
    expected: int | None


@dataclass(frozen=True, slots=True)
class StoreWrites:
    """Store a task's writes (and move the thread's last write) as one unit."""

    plan: WritesPlan


@dataclass(frozen=True, slots=True)
class StoreBatch:
    """Several checkpoints of one thread, then writes against them, as one unit where the
    store can (an import's thread): existing write slots are kept."""

    plans: list[PutPlan]
    writes: list[WritesPlan]
    # What the saver's `_encode_batch` made of them beforehand (`prepare_many`), if anything.
    encoded: Any = None


@dataclass(frozen=True, slots=True)
class PreparedBatch:
    """A thread's batch as `StoreSaver.prepare_many` made it, for `put_prepared`: not a
    request, what one is made of."""

    plans: list[PutPlan]
    writes: list[WritesPlan]
    encoded: Any = None


@dataclass(frozen=True, slots=True)
class DeleteRound:
    """Delete the threads once; answers what each one still holding rows holds."""

    thread_ids: list[str]


@dataclass(frozen=True, slots=True)
class ForgetThreads:
    """Drop the finished marks of threads a delete left empty."""

    thread_ids: list[str]


@dataclass(frozen=True, slots=True)
class DeleteUnwritten:
    """The sweep's delete: each thread only if its last write is still the judged one."""

    judged: dict[str, datetime | None]


@dataclass(frozen=True, slots=True)
class DeleteRuns:
    """Delete the checkpoints (with their writes and orphaned blobs) of these runs."""

    run_ids: list[str]


@dataclass(frozen=True, slots=True)
class CopyThread:
    """Copy a thread whole as one unit; answers a `planning.CopyOutcome`."""

    source: str
    target: str


@dataclass(frozen=True, slots=True)
class PruneThread:
    """Apply the prune keep-set to each namespace of the thread; answers how many went."""

    thread_id: str
    keep_last: int


@dataclass(frozen=True, slots=True)
class CountThread:
    """How many checkpoints and writes the thread holds (a `planning.ThreadHoldings`)."""

    thread_id: str


StoreRequest = (
    DurabilityOf
    | StoreCheckpoint
    | StoreHead
    | StoreWrites
    | StoreBatch
    | DeleteRound
    | ForgetThreads
    | DeleteUnwritten
    | DeleteRuns
    | CopyThread
    | PruneThread
    | CountThread
)
