"""The start of put_writes: a task's writes checked and numbered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
)

from checkpoints.codec.compression import refuse_large_checkpoint
from checkpoints.store.planning import check_key, config_keys


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
