"""Pure rules of the store: what a write, prune, copy or delete means, with no I/O.

Every saver reads and writes its own storage, then asks these functions what to do, so
each rule is written once: the keys a config names, the thread-id rule, the split of a
checkpoint into body, blobs and metadata, the DeltaChannel keep-set of a prune, the
repeat-until-empty delete, the format-generation verdict, and the refusals' wording.
"""

from __future__ import annotations

import enum
import json
from collections import ChainMap
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    EXCLUDED_METADATA_KEYS,
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from checkpoints.channels import TASKS
from checkpoints.codec.compression import refuse_large_checkpoint
from checkpoints.errors import (
    CheckpointDeleteError,
    CheckpointStoreFormatError,
    InvalidCheckpointInput,
    ThreadExists,
    UnreadableValue,
)

# Bumped whenever stored bytes change shape; a store written by another generation is refused.
FORMAT_GENERATION = 4
FORMAT_ERROR_HINT = (
    "reset the checkpoint store before starting this version; to keep its threads, export "
    "them with the version that wrote them (manage.py export_checkpoints --output FILE), "
    "reset (manage.py reset_checkpoint_store), then import FILE with this version "
    "(manage.py import_checkpoints FILE)"
)
DELETE_ROUNDS = 100
# Every provider's key index can hold this much; a longer thread id is refused up front.
MAX_THREAD_ID_BYTES = 1024


def utcnow() -> datetime:
    return datetime.now(UTC)


# -- records the ledgers hand out ---------------------------------------------------------
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

    @classmethod
    def platform(cls) -> ThreadRetention:
        """The deployment's values (``RETENTION_*_MINUTES``): every thread's default."""
        from checkpoints.conf import setting

        return cls(
            int(setting("RETENTION_WAITING_MINUTES")), int(setting("RETENTION_FINISHED_MINUTES"))
        )

    def in_force(self, platform: ThreadRetention | None = None) -> ThreadRetention:
        """The horizons in force: each declared value over the platform's; an unset finished
        is the platform's, capped at the waiting in force. The one rule (the sweep's SQL
        form: `idle_writes` of the ORM ledger; Redis's: its scripts' TTL)."""
        platform = platform or ThreadRetention.platform()
        waiting = self.waiting_in_force(platform.waiting_minutes)
        finished = self.finished_minutes or min(platform.finished_minutes, waiting)
        return ThreadRetention(waiting, finished)

    def waiting_in_force(self, platform_waiting: int) -> int:
        """The waiting horizon in force, given the platform's (see `in_force`)."""
        return self.waiting_minutes or platform_waiting


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


# -- keys and ids -------------------------------------------------------------------------
def config_keys(config: RunnableConfig | None, *, need_checkpoint: bool = False):
    """(thread_id, checkpoint_ns, checkpoint_id) from a config, refusing a bad one clearly."""
    if type(config) is dict and type(config.get("configurable")) is dict:
        pass  # the usual case, without the abstract-class checks below
    elif not isinstance(config, Mapping) or not isinstance(config.get("configurable"), Mapping):
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
    return (
        thread_id,
        check_key(ns, "checkpoint_ns") if ns else "",
        check_key(checkpoint_id, "checkpoint_id") if checkpoint_id else None,
    )


def list_bounds(
    config: RunnableConfig | None, before: RunnableConfig | None
) -> tuple[str | None, str | None, str | None, str | None]:
    """(thread_id, checkpoint_ns, checkpoint_id, before's checkpoint id) of a list call,
    each checked as a key; None where the call names none (no namespace: every one)."""
    thread_id = ns = checkpoint_id = before_id = None
    if config is not None:
        thread_id, _, checkpoint_id = config_keys(config)
        ns = config["configurable"].get("checkpoint_ns")
        if ns is not None:
            ns = check_key(ns, "checkpoint_ns")
    if before is not None:
        before_id = (before.get("configurable") or {}).get("checkpoint_id")
        if before_id is not None:
            before_id = check_key(before_id, "before")
    return thread_id, ns, checkpoint_id, before_id


def check_key(value: Any, field: str) -> str:
    """``value`` as text every store can key by (no NUL, no lone surrogate), or
    InvalidCheckpointInput naming ``field``."""
    value = str(value)
    if "\x00" in value:
        raise InvalidCheckpointInput(f"{field} must not contain NUL characters", field=field)
    if not value.isascii():
        _utf8_size(value, field)
    return value


def _utf8_size(text: str, field: str) -> int:
    # A lone surrogate ("\ud800") is a str but no UTF-8: every store would fail on it.
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidCheckpointInput(
            f"{field} holds a lone surrogate {text[exc.start]!r}, which is not UTF-8: "
            "no store can keep it",
            field=field,
        ) from None


def check_thread_id(thread_id: Any, *, field: str = "thread_id") -> str:
    """A thread id as the store keeps it, or InvalidCheckpointInput naming ``field``.

    The one thread-id rule: the store, the API and every entrance apply this function.
    """
    thread_id = str(thread_id)
    if not thread_id:
        raise InvalidCheckpointInput(f"{field} must not be empty", field=field)
    if "\x00" in thread_id:
        raise InvalidCheckpointInput(f"{field} must not contain NUL characters", field=field)
    if thread_id.isascii():
        size = len(thread_id)
    else:
        size = _utf8_size(thread_id, field)
    if size > MAX_THREAD_ID_BYTES:
        raise InvalidCheckpointInput(
            f"{field} is {size} bytes long; the store takes at most {MAX_THREAD_ID_BYTES} "
            "bytes of UTF-8",
            field=field,
        )
    return thread_id


def check_limit(limit: Any) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise InvalidCheckpointInput(f"limit must be a whole number >= 0, got {limit!r}")


def stored_config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


# -- reads --------------------------------------------------------------------------------
# The body's fields a reader indexes into, with the types they must have when present.
_BODY_FIELDS = (
    ("channel_versions", dict),
    ("versions_seen", dict),
    ("pending_sends", (list, tuple)),
    ("updated_channels", (list, tuple, type(None))),
)


def body_shape(checkpoint: Any, versions: Any = MISSING) -> Any:
    """A decoded body once it has a checkpoint's shape, else UnreadableValue saying what
    is wrong (savers call it inside `decode_at`, which adds the place).

    ``versions``: the channel versions a store keeps beside the body (the ORM's column),
    set into it once checked. One type check per field: this runs on every read.
    """
    if type(checkpoint) is not dict:
        raise UnreadableValue(f"it is {_kind(checkpoint)}, not a checkpoint (a dict)")
    if versions is not MISSING:
        checkpoint["channel_versions"] = {} if versions is None else versions
    for name, kind in _BODY_FIELDS:
        value = checkpoint.get(name, MISSING)
        if value is not MISSING and not isinstance(value, kind):
            raise UnreadableValue(f"its {name} is {_kind(value)}, not {_kind(kind)}")
    for node, seen in (checkpoint.get("versions_seen") or {}).items():
        if type(seen) is not dict:
            raise UnreadableValue(f"its versions_seen[{node!r}] is {_kind(seen)}, not a dict")
    return checkpoint


def metadata_shape(metadata: Any) -> dict[str, Any]:
    """Stored metadata (JSON text or already parsed) once it is an object, else
    UnreadableValue (savers call it inside `decode_at`, which adds the place)."""
    if isinstance(metadata, (str, bytes)):
        metadata = json.loads(metadata)
    if type(metadata) is not dict:
        raise UnreadableValue(f"it is {_kind(metadata)}, not metadata (an object)")
    return metadata


def _kind(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, tuple) and all(isinstance(k, type) for k in value):
        return " or ".join(_kind(k) for k in value if k is not type(None))
    name = value.__name__ if isinstance(value, type) else type(value).__name__
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


# -- metadata -----------------------------------------------------------------------------
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
    # Cleaned as stored metadata is (NULs dropped; NaN, infinity, bytes refused), so a
    # filter means the same on every store and never reaches a driver that would choke.
    cleaned = _clean_json(dict(filter), "filter")
    _utf8_size(json.dumps(cleaned, ensure_ascii=False), "filter")
    step = cleaned.get("step")
    # Stores compare a step filter with their step column; past what a step may be stored
    # as, the driver overflows (SQLite at 64 bits) instead of matching nothing.
    if type(step) is int and not STEP_MIN <= step <= STEP_MAX:
        raise InvalidCheckpointInput(
            f"filter step {step} is outside the 32-bit range a step is stored in "
            f"({STEP_MIN} to {STEP_MAX})",
            field="filter.step",
        )
    return cleaned


def metadata_matches(metadata: Mapping[str, Any], filter: Mapping[str, Any]) -> bool:
    """True when every filter key names a metadata value equal to the filter's.

    A key names the metadata key spelled exactly so; a dotted key no metadata key is
    spelled as names the nested value along its path (``"user.level"`` is
    ``metadata["user"]["level"]``), as SqliteSaver reads it (PostgresSaver and
    InMemorySaver read only the exact key: the exact key wins, so those still match).
    """
    for key, wanted in filter.items():
        found = _metadata_value(metadata, key)
        if found is MISSING or _json_shape(found) != _json_shape(wanted):
            return False
    return True


def exact_filter(filter: Mapping[str, Any]) -> dict[str, Any]:
    """The filter keys a store may match by exact key alone (the rest may be paths, which
    `metadata_matches` reads): what a database's containment test can be given."""
    return {k: v for k, v in filter.items() if "." not in k}


def _metadata_value(metadata: Mapping[str, Any], key: str) -> Any:
    if key in metadata:
        return metadata[key]
    if "." not in key:
        return MISSING
    value: Any = metadata
    for part in key.split("."):
        if type(value) is not dict or part not in value:
            return MISSING
        value = value[part]
    return value


def _json_shape(value: Any) -> Any:
    # Stored metadata went through JSON (tuples came back as lists); compare in that shape,
    # keeping True apart from 1.
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (list, tuple)):
        return [_json_shape(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_shape(v) for k, v in value.items()}
    return value


def json_metadata(config: RunnableConfig, metadata: CheckpointMetadata) -> dict[str, Any]:
    """The metadata to store: LangGraph's merge of config keys, cleaned for JSON columns.

    A ``writes`` key stays, as InMemorySaver and SqliteSaver keep it (issue 30). The merge
    follows `get_checkpoint_metadata`'s rule in the same pass as the cleaning (it ran on
    every put, and walked the values twice): the graph's keys first, then each string or
    number of ``config["metadata"]``, then of ``config["configurable"]``, whose key is not
    taken yet, not one of LangGraph's excluded keys and not ``__``-prefixed.
    """
    if type(metadata) is not dict:
        return _clean_json(get_checkpoint_metadata(config, metadata), "metadata")
    out = _clean_json(metadata, "metadata")
    taken = None
    for given in (config.get("metadata"), config.get("configurable")):
        if not given:
            continue
        if type(given) is ChainMap:
            # LangGraph hands a ChainMap; walking its items builds a dict key by key.
            flat: dict = {}
            for layer in reversed(given.maps):
                flat.update(layer)
            given = flat
        for key, v in given.items():
            if (
                key in metadata
                or key in EXCLUDED_METADATA_KEYS
                or key.startswith("__")
                or (taken is not None and key in taken)
            ):
                continue
            if isinstance(v, (str, int, float)):  # bool is an int
                out[_clean_text(key, "metadata", key=True)] = _clean_json(v, ("metadata", key))
                if taken is None:
                    taken = set()
                taken.add(key)
    return out


def _clean_json(value: Any, path: Any) -> Any:
    # ``path`` is text, or (parent, segment) pairs turned into text only for a refusal
    # (a str segment is a key, an int an index): formatting every key's path cost more
    # than the cleaning (this runs on every put).
    t = type(value)
    if t is str:
        return value.replace("\x00", "") if value.isascii() else _clean_text(value, path)
    if value is None or t is bool or t is int:
        return value
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                return _clean_any(value, path)
            kind = type(v)
            # Scalars inline: most metadata values are, and a call each cost more.
            if kind is str:
                v = v.replace("\x00", "") if v.isascii() else _clean_text(v, (path, k))
            elif not (v is None or kind is bool or kind is int):
                v = _clean_json(v, (path, k))
            out[k.replace("\x00", "") if k.isascii() else _clean_text(k, path, key=True)] = v
        return out
    if t is list or t is tuple:
        return [_clean_json(v, (path, i)) for i, v in enumerate(value)]
    return _clean_any(value, path)


def _path_text(path: Any) -> str:
    parts = []
    while isinstance(path, tuple):
        path, segment = path
        parts.append(f".{segment}" if isinstance(segment, str) else f"[{segment}]")
    return path + "".join(reversed(parts))


def _clean_text(text: str, path: Any, *, key: bool = False) -> str:
    """Non-ASCII metadata text without NULs, or InvalidCheckpointInput for a lone surrogate
    (no UTF-8 form: PostgreSQL's jsonb refuses it, the other stores would keep it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        where = _path_text(path)
        raise InvalidCheckpointInput(
            f"{where} holds a lone surrogate {text[exc.start]!r}"
            + (f" in its key {text!r}" if key else "")
            + ", which is not UTF-8: no store can keep it",
            field=where,
        ) from None
    return text.replace("\x00", "")


def _clean_any(value: Any, path: Any) -> Any:
    if isinstance(value, str):
        return _clean_text(str.__str__(value), path)
    if value is None or isinstance(value, (bool, int)):
        return value
    text = _path_text(path)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidCheckpointInput(f"{text} is {value!r}, which JSON cannot hold", field=text)
        return value
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidCheckpointInput(
                    f"{text} has key {k!r}; metadata keys must be strings", field=text
                )
            out[_clean_text(k, path, key=True)] = _clean_json(v, (path, k))
        return out
    if isinstance(value, (list, tuple)):
        return [_clean_json(v, (path, i)) for i, v in enumerate(value)]
    raise InvalidCheckpointInput(
        f"{text} holds a {type(value).__name__}; checkpoint metadata must be JSON data",
        field=text,
    )


# -- the start of put ---------------------------------------------------------------------
@dataclass
class PutPlan:
    """One checkpoint write, split into what every store keeps."""

    thread_id: str
    ns: str
    parent_id: str | None
    checkpoint_id: str
    checkpoint: Checkpoint
    # (channel, version, value or MISSING) for each channel this write gives a new version.
    blobs: list[tuple[str, str, Any]]
    metadata: dict[str, Any]
    # The caller's user id as given (config["configurable"]["user_id"]), "" when none.
    owner: str
    # {"level", "at"}: what the store guarantees for this write, set by the store as it
    # commits and kept beside the checkpoint, never inside its metadata.
    durability: dict[str, str] | None = None
    # Plain bytes of the values encoded so far (`charge`), bounded by MAX_CHECKPOINT_BYTES.
    plain_bytes: int = 0

    def charge(self, size: int, where: Any) -> None:
        """Count one encoded value's plain bytes; ValueTooLarge once they are too many."""
        self.plain_bytes += size
        refuse_large_checkpoint(
            self.plain_bytes, where, (self.thread_id, self.ns, self.checkpoint_id)
        )

    def body(self, *, without: Iterable[str] = ("channel_values",)) -> dict[str, Any]:
        """The checkpoint without the parts a store keeps elsewhere."""
        dropped = set(without)
        return {k: v for k, v in self.checkpoint.items() if k not in dropped}

    @property
    def versions(self) -> dict[str, Any]:
        return dict(self.checkpoint.get("channel_versions") or {})

    @property
    def run_id(self) -> str | None:
        run_id = self.metadata.get("run_id")
        return None if run_id is None else str(run_id)

    @property
    def step(self) -> int | None:
        step = self.metadata.get("step")
        return step if isinstance(step, int) and not isinstance(step, bool) else None

    @property
    def source(self) -> str:
        return str(self.metadata.get("source") or "")


def plan_put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> PutPlan:
    """Keys, the thread-id check, the blobs to write and the metadata of one put."""
    thread_id, ns, parent_id = config_keys(config)
    if not checkpoint.get("id"):
        raise InvalidCheckpointInput("checkpoint['id'] is required", field="checkpoint.id")
    checkpoint_id = check_key(checkpoint["id"], "checkpoint.id")
    values = checkpoint.get("channel_values") or {}
    # Channel names and versions are keys and text columns of every store, as thread ids are.
    _check_names(new_versions, "channel")
    stored_versions = checkpoint.get("channel_versions")
    if isinstance(stored_versions, Mapping) and stored_versions is not new_versions:
        _check_names(stored_versions, "channel")
    cleaned = json_metadata(config, metadata)
    step = cleaned.get("step")
    if type(step) is int and not STEP_MIN <= step <= STEP_MAX:
        raise InvalidCheckpointInput(
            f"metadata.step is {step}, outside the 32-bit range a step is stored in "
            f"({STEP_MIN} to {STEP_MAX})",
            field="metadata.step",
        )
    owner = (config.get("configurable") or {}).get("user_id")
    return PutPlan(
        thread_id=thread_id,
        ns=ns,
        parent_id=parent_id,
        checkpoint_id=checkpoint_id,
        checkpoint=checkpoint,
        blobs=[
            (channel, str(version), values.get(channel, MISSING))
            for channel, version in new_versions.items()
        ],
        metadata=cleaned,
        owner=check_key(owner, "user_id") if owner else "",
    )


# metadata["step"] is kept in a 32-bit column (PostgreSQL's integer); every store refuses
# what one could not keep.
STEP_MIN, STEP_MAX = -(2**31), 2**31 - 1


def _check_names(versions: Mapping[Any, Any], field: str) -> None:
    """Each channel name and its version as `check_key` takes them, naming ``field``."""
    for name, version in versions.items():
        if type(name) is not str or not name.isascii() or "\x00" in name:
            check_key(name, field)
        if type(version) is not int:
            check_key(version, f"{field} {name!r} version")


@dataclass
class WritesPlan:
    """One task's pending writes against one checkpoint."""

    thread_id: str
    ns: str
    checkpoint_id: str
    task_id: str
    task_path: str
    # (idx, channel, value); a negative idx is a special write that replaces its slot.
    items: list[tuple[int, str, Any]] = field(default_factory=list)
    plain_bytes: int = 0

    def charge(self, size: int, where: Any) -> None:
        """As `PutPlan.charge`, for the writes of this call."""
        self.plain_bytes += size
        refuse_large_checkpoint(
            self.plain_bytes,
            where,
            (self.thread_id, self.ns, self.checkpoint_id),
            f"the writes of task {self.task_id!r}",
        )

    @property
    def special(self) -> bool:
        return all(idx < 0 for idx, _, _ in self.items)


def plan_writes(
    config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
) -> WritesPlan:
    thread_id, ns, checkpoint_id = config_keys(config, need_checkpoint=True)
    task_id = check_key(task_id, "task_id")
    task_path = check_key(task_path, "task_path") if task_path else ""
    items = [
        (WRITES_IDX_MAP.get(channel, idx), channel, value)
        for idx, (channel, value) in enumerate(writes)
    ]
    for _, channel, _ in items:
        if type(channel) is not str or not channel.isascii() or "\x00" in channel:
            check_key(channel, "channel")
    if len(items) > 1 and any(item[0] < 0 for item in items):
        # One slot per index, as InMemorySaver keeps them: a special channel written twice
        # in one call keeps its last value (a set-based upsert may not touch a row twice).
        # Only special channels share an index: the others take their position in the call.
        slots: dict[int, tuple[int, str, Any]] = {}
        for item in items:
            if item[0] < 0 or item[0] not in slots:
                slots[item[0]] = item
        items = list(slots.values())
    return WritesPlan(thread_id, ns, checkpoint_id, task_id, task_path, items)


# -- prune --------------------------------------------------------------------------------
@dataclass(frozen=True)
class PruneRow:
    """What a prune needs to know of one checkpoint of one namespace."""

    checkpoint_id: str
    parent_id: str | None
    # Channels this checkpoint's DeltaChannel values are rebuilt from ancestors for.
    delta_channels: frozenset[str]
    versions: Mapping[str, Any]
    # The root graph's checkpoint a subgraph call started from (metadata["parents"][""]).
    root: str | None = None
    # A checkpoint from before format v4 reads its parent's pending sends
    # (`migrate_parent_sends`): that parent, when it holds some, else None.
    sends_parent: str | None = None


def delta_channels(metadata: Mapping[str, Any] | None) -> frozenset[str]:
    return frozenset(((metadata or {}).get("counters_since_delta_snapshot") or {}).keys())


def root_of(metadata: Mapping[str, Any] | None) -> str | None:
    """The root graph's checkpoint a subgraph's checkpoint was written under."""
    parents = (metadata or {}).get("parents")
    root = parents.get("") if isinstance(parents, Mapping) else None
    return root if isinstance(root, str) and root else None


def prune_thread_plan(
    by_ns: Mapping[str, Iterable[PruneRow]],
    keep_last: int,
    has_value: Callable[[str], Callable[[str, str], bool]],
    has_row: Callable[[str], Callable[[str, str], bool]] | None = None,
) -> dict[str, list[str]]:
    """The checkpoint ids of each namespace of one thread a prune deletes.

    Each namespace is planned by `prune_plan`. Then, as PostgresSaver 3.2.0 prunes: a
    subgraph call's namespace (its task id follows a ``:``, unlike a ``checkpointer=True``
    subgraph's, whose state outlives each call) goes whole with the root checkpoint the
    call started from, once that one is stored and not kept. ``has_value(ns)`` gives the
    namespace's ``has_value`` for `prune_plan`, ``has_row(ns)`` its ``has_row``.
    """
    rows = {ns: list(found) for ns, found in by_ns.items()}
    doomed = {
        ns: prune_plan(found, keep_last, has_value(ns), has_row(ns) if has_row else None)
        for ns, found in rows.items()
    }
    root_ids = {row.checkpoint_id for row in rows.get("", ())}
    root_kept = root_ids - set(doomed.get("", ()))
    for ns, found in rows.items():
        if ":" not in ns or not found:
            continue
        head = max(found, key=lambda row: row.checkpoint_id)
        if head.root in root_ids and head.root not in root_kept:
            doomed[ns] = sorted((row.checkpoint_id for row in found), reverse=True)
    return {ns: ids for ns, ids in doomed.items() if ids}


def check_prune_args(strategy: str, keep_last: Any) -> None:
    if strategy not in ("keep_latest", "delete"):
        raise InvalidCheckpointInput(
            f"prune strategy {strategy!r} is unknown; use 'keep_latest' or 'delete'",
            field="strategy",
        )
    if keep_last is not None and (not isinstance(keep_last, int) or keep_last < 1):
        raise InvalidCheckpointInput(
            f"keep_last must be a whole number >= 1, got {keep_last!r}", field="keep_last"
        )


def prune_plan(
    rows: Iterable[PruneRow],
    keep_last: int,
    has_value: Callable[[str, str], bool],
    has_row: Callable[[str, str], bool] | None = None,
) -> list[str]:
    """The checkpoint ids of one namespace a prune deletes, newest first.

    Keeps the newest ``keep_last`` (with the parent a checkpoint from before format v4
    reads its pending sends from) and every ancestor a kept checkpoint's delta channels
    replay from, up to and including the one holding a stored value (the seed):
    deleting any of them would sever the chain. ``has_value(channel, version)`` says
    whether the store holds a value for that channel version. ``has_row``, where a store
    can tell a version it holds nothing for from one it holds "no value" for: a kept
    checkpoint's channel at a version with nothing stored is replayed from ancestors too
    (LangGraph's reading of such a version; a DeltaChannel whose counters the metadata
    lost reads so, and PostgresSaver refuses to prune it). A kept checkpoint whose
    parent is deleted is left with no parent, as PostgresSaver leaves it: its
    ``parent_config`` never names a checkpoint that is gone.
    """
    by_id = {row.checkpoint_id: row for row in rows}
    if len(by_id) <= keep_last:
        return []
    ordered = sorted(by_id, reverse=True)
    keep = set(ordered[:keep_last])
    # A kept checkpoint from before v4 reads its sends from its parent (PostgresSaver
    # keeps that parent too).
    keep |= {by_id[cid].sends_parent for cid in keep if by_id[cid].sends_parent in by_id}
    for cid in list(keep):
        row = by_id[cid]
        channels = set(row.delta_channels)
        if has_row is not None:
            channels |= {ch for ch, ver in row.versions.items() if not has_row(ch, str(ver))}
        current: str | None = cid
        while channels and current in by_id:
            versions = by_id[current].versions
            channels -= {
                ch for ch in channels if ch in versions and has_value(ch, str(versions[ch]))
            }
            keep.add(current)
            current = by_id[current].parent_id
    return [cid for cid in ordered if cid not in keep]


# -- checkpoints written before format v4 ---------------------------------------------------
def needs_parent_sends(checkpoint: Mapping[str, Any], parent_id: str | None) -> bool:
    """Whether a checkpoint predates format v4 and may hold its parent's pending sends."""
    version = checkpoint.get("v", 4)
    return (
        isinstance(version, int)
        and version < 4
        and bool(parent_id)
        and TASKS not in (checkpoint.get("channel_values") or {})
    )


def migrate_parent_sends(
    checkpoint: dict[str, Any], sends: list[Any], next_version: Callable[[], Any]
) -> None:
    """LangGraph's rule for a checkpoint before format v4 (PostgresSaver reads them so):
    its TASKS channel holds the parent's pending sends (in task path, task id, index
    order), at the newest of its channel versions."""
    if not sends:
        return
    checkpoint["channel_values"] = {**(checkpoint.get("channel_values") or {}), TASKS: sends}
    versions = dict(checkpoint.get("channel_versions") or {})
    versions[TASKS] = max(versions.values()) if versions else next_version()
    checkpoint["channel_versions"] = versions


# -- delete that repeats until the thread is empty ----------------------------------------
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


# -- copy ---------------------------------------------------------------------------------
class CopyOutcome(enum.Enum):
    COPIED = "copied"
    NO_SOURCE = "no source"
    TARGET_HOLDS = "target holds checkpoints"


def copy_outcome(source: str, target: str, outcome: CopyOutcome) -> None:
    """Raise what a copy that ended so means to the caller (nothing to copy is no error)."""
    if outcome is CopyOutcome.TARGET_HOLDS:
        raise ThreadExists(
            f"cannot copy thread {source!r} onto {target!r}: the target already holds checkpoints"
        )


# -- format generation --------------------------------------------------------------------
def format_verdict(recorded: Iterable[Any], *, holds_checkpoints: bool, where: str) -> bool:
    """True when the store must record FORMAT_GENERATION now; raise when it is refused.

    ``recorded`` are the generations the store records, ``where`` names the store in the
    refusal ("the redis checkpoint store at 127.0.0.1:6379").
    """
    found = {str(g) for g in recorded}
    if not found:
        if holds_checkpoints:
            raise CheckpointStoreFormatError(
                f"{where} holds checkpoints but records no format generation: {FORMAT_ERROR_HINT}"
            )
        return True
    if found != {str(FORMAT_GENERATION)}:
        shown = max(found, key=lambda g: (len(g), g))
        raise CheckpointStoreFormatError(
            f"{where} is in format generation {shown}, this version writes "
            f"{FORMAT_GENERATION}: {FORMAT_ERROR_HINT}"
        )
    return False
