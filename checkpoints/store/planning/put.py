"""The start of put: a checkpoint split into its body, blobs and stamped metadata."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
)

from checkpoints.codec.compression import refuse_large_checkpoint
from checkpoints.errors import (
    InvalidCheckpointInput,
)
from checkpoints.store.planning import check_key, check_step, config_keys
from checkpoints.store.planning.metadata import json_metadata
from checkpoints.store.planning.records import MISSING


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
    check_step(cleaned.get("step"), "metadata.step")
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


def _check_names(versions: Mapping[Any, Any], field: str) -> None:
    """Each channel name and its version as `check_key` takes them, naming ``field``."""
    for name, version in versions.items():
        if type(name) is not str or not name.isascii() or "\x00" in name:
            check_key(name, field)
        if type(version) is not int:
            check_key(version, f"{field} {name!r} version")
