"""Checkpoints written before format v4: their pending sends, moved from the parent."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from checkpoints.channels import TASKS


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
