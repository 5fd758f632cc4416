"""The store contract every saver adds to LangGraph's BaseCheckpointSaver.

LangGraph's interface (get_tuple, list, put, put_writes, delete_thread, delete_for_runs,
copy_thread, prune, get_delta_channel_history, get_next_version, and their async twins)
is implemented by each provider. On top of it this module fixes what all our savers share:
the durability stamp, the strict serializer, the format generation, the repeat-until-empty
delete, the finished-marks ledger, declared retention, and metadata filters as data.
"""

from __future__ import annotations

import logging
import random
from abc import ABCMeta, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from checkpoints.codec.serde import store_serializer as strict_serializer
from checkpoints.conf import setting
from checkpoints.errors import (
    CheckpointCodecError,
    CheckpointConfigError,
    CheckpointDeleteError,
    InvalidCheckpointInput,
)

logger = logging.getLogger(__name__)

# Bumped whenever stored bytes change shape; a store written by another generation is refused.
FORMAT_GENERATION = 3
FORMAT_ERROR_HINT = "reset the checkpoint store before starting this version"
DELETE_ROUNDS = 100
DURABILITY_KEY = "_durability"
# Every provider's key index can hold this much; a longer thread id is refused up front.
MAX_THREAD_ID_BYTES = 1024


@dataclass(frozen=True)
class FinishedEntry:
    """A thread in the finished-marks ledger."""

    thread_id: str
    marked_at: datetime
    due_at: datetime
    owner: str = ""


@dataclass(frozen=True)
class ThreadRetention:
    """The retention a thread's owner declared; None means the platform's value."""

    waiting_minutes: int | None = None
    finished_minutes: int | None = None


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


def utcnow() -> datetime:
    return datetime.now(UTC)


def config_keys(config: RunnableConfig | None, *, need_checkpoint: bool = False):
    """(thread_id, checkpoint_ns, checkpoint_id) from a config, refusing a bad one clearly."""
    if not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
        raise InvalidCheckpointInput(
            "config must be a dict with a 'configurable' dict holding 'thread_id'",
            field="config",
        )
    conf = config["configurable"]
    thread_id = conf.get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidCheckpointInput(
            "config['configurable']['thread_id'] is required", field="thread_id"
        )
    thread_id = check_thread_id(thread_id)
    ns = conf.get("checkpoint_ns") or ""
    checkpoint_id = conf.get("checkpoint_id") or None
    if need_checkpoint and not checkpoint_id:
        raise InvalidCheckpointInput(
            "config['configurable']['checkpoint_id'] is required for this call",
            field="checkpoint_id",
        )
    return thread_id, str(ns), (str(checkpoint_id) if checkpoint_id else None)


def check_thread_id(thread_id: Any) -> str:
    """A thread id as the store keeps it, or InvalidCheckpointInput saying what is wrong."""
    thread_id = str(thread_id)
    if not thread_id:
        raise InvalidCheckpointInput("thread_id must not be empty", field="thread_id")
    if "\x00" in thread_id:
        raise InvalidCheckpointInput("thread_id must not contain NUL characters", field="thread_id")
    size = len(thread_id.encode("utf-8", "surrogatepass"))
    if size > MAX_THREAD_ID_BYTES:
        raise InvalidCheckpointInput(
            f"thread_id is {size} bytes long; the store takes at most {MAX_THREAD_ID_BYTES}",
            field="thread_id",
        )
    return thread_id


def validate_filter(filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """A metadata filter as plain data: keys must be strings; nothing else is interpreted."""
    if not filter:
        return {}
    if not isinstance(filter, Mapping):
        raise InvalidCheckpointInput(
            "filter must be a dict of metadata key to value", field="filter"
        )
    for key in filter:
        if not isinstance(key, str):
            raise InvalidCheckpointInput(f"filter key {key!r} is not a string", field="filter")
    return dict(filter)


def metadata_matches(metadata: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """True when every filter key is a metadata key spelled exactly so, with an equal value."""
    for key, wanted in filter.items():
        if key not in metadata:
            return False
        if not _json_equal(metadata[key], wanted):
            return False
    return True


def _json_equal(stored: Any, wanted: Any) -> bool:
    # Stored metadata went through JSON (tuples came back as lists); compare in that shape,
    # keeping True apart from 1.
    return _json_shape(stored) == _json_shape(wanted)


def _json_shape(value: Any) -> Any:
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (list, tuple)):
        return [_json_shape(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_shape(v) for k, v in value.items()}
    return value


def json_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """The metadata to store: LangGraph's merge of config keys, cleaned for JSON columns."""
    merged = get_checkpoint_metadata(config, metadata)
    merged.pop("writes", None)
    return _clean_json(merged, "metadata")


def _clean_json(value: Any, path: str) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "")
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidCheckpointInput(f"{path} is {value!r}, which JSON cannot hold", field=path)
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidCheckpointInput(
                    f"{path} has key {k!r}; metadata keys must be strings", field=path
                )
            out[k.replace("\x00", "")] = _clean_json(v, f"{path}.{k}")
        return out
    if isinstance(value, (list, tuple)):
        return [_clean_json(v, f"{path}[{i}]") for i, v in enumerate(value)]
    raise InvalidCheckpointInput(
        f"{path} holds a {type(value).__name__}; checkpoint metadata must be JSON data",
        field=path,
    )


class StoreSaver(BaseCheckpointSaver[str], metaclass=ABCMeta):
    """The contract shared by the ORM, Redis and memory savers."""

    provider: str = ""
    # Whether the store can answer "threads idle past their waiting horizon" itself.
    supports_idle_sweep = False
    # Redis stops at the first round (from the second) that makes no progress.
    delete_stops_without_progress = False

    def __init__(self, *, serde=None, max_checkpoints: int | None = None) -> None:
        super().__init__(serde=serde or strict_serializer())
        if max_checkpoints is None:
            max_checkpoints = setting("MAX_CHECKPOINTS") or 0
        if not isinstance(max_checkpoints, int) or max_checkpoints < 0:
            raise InvalidCheckpointInput(
                f"max_checkpoints must be a whole number >= 0, got {max_checkpoints!r}",
                field="max_checkpoints",
            )
        self.max_checkpoints = max_checkpoints

    def _encode(self, value: Any, where: str) -> tuple[str, bytes]:
        """The serializer's bytes for ``value``; a refusal names where the value was."""
        try:
            return self.serde.dumps_typed(value)
        except CheckpointCodecError:
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            raise CheckpointCodecError(
                f"{where} holds a {type(value).__name__} the serializer cannot store: {exc}",
                field=where,
            ) from exc

    # -- durability -----------------------------------------------------------------------
    @property
    @abstractmethod
    def durability(self) -> str:
        """The level this store guarantees for an acknowledged write."""
        ...

    def _stamp(self, metadata: dict[str, Any]) -> dict[str, Any]:
        metadata[DURABILITY_KEY] = {"level": self.durability, "at": utcnow().isoformat()}
        return metadata

    # -- versions -------------------------------------------------------------------------
    def get_next_version(self, current: str | int | float | None, channel: None = None) -> str:
        """Zero-padded counter plus a random tail: strings that sort in write order."""
        if current is None:
            number = 0
        elif isinstance(current, (int, float)):
            number = int(current)
        else:
            number = int(str(current).split(".", 1)[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- delete that repeats until the thread is empty ------------------------------------
    def delete_thread(self, thread_id: str) -> None:
        self.delete_threads([thread_id])

    def delete_threads(self, thread_ids: Sequence[str]) -> None:
        """Delete every thread named, repeating while writers re-add rows.

        A thread still holding rows after a round is deleted again, up to DELETE_ROUNDS
        rounds; Redis gives up at the first round (from the second) that makes no progress.
        Either way CheckpointDeleteError names the thread and what it still holds.
        """
        pending = list(dict.fromkeys(check_thread_id(t) for t in thread_ids))
        before: dict[str, ThreadHoldings] = {}
        for round_no in range(1, DELETE_ROUNDS + 1):
            if not pending:
                return
            left = self._delete_threads_round(pending)
            self._forget_threads([t for t in pending if t not in left])
            if self.delete_stops_without_progress and round_no >= 2:
                stuck = [
                    t for t, held in left.items() if t in before and held.total >= before[t].total
                ]
                if stuck:
                    raise CheckpointDeleteError(
                        f"thread {stuck[0]!r} still holds {left[stuck[0]]} after delete round "
                        f"{round_no}: a writer keeps adding to it"
                    )
            before = left
            pending = list(left)
        if pending:
            raise CheckpointDeleteError(
                f"thread {pending[0]!r} still holds {before[pending[0]]} after {DELETE_ROUNDS} "
                "delete rounds: a writer keeps adding to it"
                + (f" (and {len(pending) - 1} more thread(s))" if len(pending) > 1 else "")
            )

    def _delete_threads_round(self, thread_ids: list[str]) -> dict[str, ThreadHoldings]:
        """Delete the threads once; return what each one still holding rows holds."""
        left = {}
        for thread_id in thread_ids:
            held = self._delete_thread_round(thread_id)
            if not held.empty:
                left[thread_id] = held
        return left

    def _forget_threads(self, thread_ids: list[str]) -> None:
        for thread_id in thread_ids:
            self._forget_thread(thread_id)

    @abstractmethod
    def _delete_thread_round(self, thread_id: str) -> ThreadHoldings:
        """Delete everything the thread holds once; return what is there afterwards."""
        ...

    def _forget_thread(self, thread_id: str) -> None:
        """Drop the thread's ledger entries once it is empty."""
        self.unmark_finished(thread_id)

    # -- prune ----------------------------------------------------------------------------
    def prune(
        self,
        thread_ids: Sequence[str],
        *,
        strategy: str = "keep_latest",
        keep_last: int | None = None,
    ) -> int:
        """Keep the newest checkpoints per thread and namespace; return how many went.

        ``strategy="keep_latest"`` keeps one (``keep_last`` more when given),
        ``strategy="delete"`` removes everything. Ancestors a kept checkpoint's
        DeltaChannel values are rebuilt from are kept too.
        """
        if strategy not in ("keep_latest", "delete"):
            raise InvalidCheckpointInput(
                f"prune strategy {strategy!r} is unknown; use 'keep_latest' or 'delete'",
                field="strategy",
            )
        if keep_last is not None and (not isinstance(keep_last, int) or keep_last < 1):
            raise InvalidCheckpointInput(
                f"keep_last must be a whole number >= 1, got {keep_last!r}", field="keep_last"
            )
        if isinstance(thread_ids, str):
            thread_ids = [thread_ids]
        deleted = 0
        for thread_id in thread_ids:
            if strategy == "delete":
                deleted += self._count(str(thread_id)).checkpoints
                self.delete_thread(str(thread_id))
            else:
                deleted += self._prune_thread(str(thread_id), keep_last or 1)
        return deleted

    @abstractmethod
    def _prune_thread(self, thread_id: str, keep_last: int) -> int: ...

    @abstractmethod
    def _count(self, thread_id: str) -> ThreadHoldings: ...

    # -- reset ----------------------------------------------------------------------------
    @abstractmethod
    def reset_store(self) -> int:
        """Delete everything this store holds and record the current format generation."""
        ...

    # -- store-wide views -----------------------------------------------------------------
    @abstractmethod
    def threads(self, *, limit: int | None = None) -> list[str]:
        """Thread ids the store holds checkpoints for, newest write first."""
        ...

    def thread_holdings(self, thread_id: str) -> ThreadHoldings:
        return self._count(str(thread_id))

    # -- finished-marks ledger ------------------------------------------------------------
    @abstractmethod
    def mark_finished(self, thread_id: str, due_at: datetime, owner: str = "") -> FinishedEntry: ...

    @abstractmethod
    def unmark_finished(self, thread_id: str) -> bool: ...

    @abstractmethod
    def finished_mark(self, thread_id: str) -> FinishedEntry | None: ...

    @abstractmethod
    def finished_due(self, now: datetime, *, limit: int | None = None) -> list[FinishedEntry]:
        """Marks whose due time is at or before ``now``, earliest first."""
        ...

    # -- thread version (rollback bumps it; API callers send it back in If-Match) ---------
    @abstractmethod
    def thread_version(self, thread_id: str) -> int:
        """The thread's version, 0 when the store has no record of it."""
        ...

    @abstractmethod
    def bump_thread_version(self, thread_id: str, expected: int | None = None) -> int:
        """Add one to the version; raise ThreadVersionConflict when it is not ``expected``."""
        ...

    # -- declared retention ---------------------------------------------------------------
    @abstractmethod
    def set_thread_retention(self, thread_id: str, retention: ThreadRetention) -> None: ...

    @abstractmethod
    def thread_retention(self, thread_id: str) -> ThreadRetention: ...

    def idle_threads(
        self, now: datetime, waiting_minutes: int, *, limit: int | None = None
    ) -> list[str]:
        """Threads whose newest checkpoint is older than their waiting horizon (ORM only)."""
        raise CheckpointConfigError(
            f"the {self.provider} store cannot list idle threads: its keys expire instead"
        )

    # -- shared helpers -------------------------------------------------------------------
    def _acknowledge(self, thread_id: str, ns: str, checkpoint, metadata) -> RunnableConfig:
        """The config a committed put returns; sends `checkpoint_created` with the envelope."""
        from checkpoints.signals import checkpoint_created

        stored = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": str(checkpoint["id"]),
            }
        }
        if checkpoint_created.has_listeners(type(self)):
            checkpoint_created.send(
                sender=type(self),
                saver=self,
                thread_id=thread_id,
                checkpoint_ns=ns,
                checkpoint_id=str(checkpoint["id"]),
                envelope={"config": stored, "checkpoint": checkpoint, "metadata": metadata},
            )
        return stored

    @staticmethod
    def _blob_versions(checkpoint, new_versions: ChannelVersions):
        values = checkpoint.get("channel_values") or {}
        for channel, version in new_versions.items():
            yield channel, str(version), values.get(channel, _MISSING)


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()
