"""Prune: which checkpoints (and DeltaChannel history) a thread keeps."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from checkpoints.errors import (
    InvalidCheckpointInput,
)


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
