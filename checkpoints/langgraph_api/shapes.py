"""The Platform's JSON shapes (langgraph-sdk's ``schema.py``) built from what is stored."""

from __future__ import annotations

from typing import Any

from checkpoints.codec.render import plain_mapping, to_plain
from checkpoints.errors import (
    CheckpointCodecError,
    CheckpointEncryptionError,
    CheckpointNotFound,
    ThreadNotFound,
)
from checkpoints.langgraph_api.models import ThreadMetadata
from checkpoints.langgraph_api.records import metadata_row, travel
from checkpoints.selectors import ThreadInfo
from checkpoints.timetravel.snapshot import thread_config

THREAD_FIELDS = (
    "thread_id",
    "created_at",
    "updated_at",
    "state_updated_at",
    "metadata",
    "config",
    "context",
    "status",
    "values",
    "interrupts",
)
# Only on a listed thread whose state cannot be read (`listed_thread_body`).
ERROR_FIELD = "error"
STATE_FIELDS = (
    "values",
    "next",
    "tasks",
    "checkpoint",
    "metadata",
    "created_at",
    "parent_checkpoint",
    "interrupts",
)


def iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def checkpoint_ref(config: dict | None) -> dict | None:
    if not config:
        return None
    conf = config.get("configurable") or {}
    return {
        "thread_id": conf.get("thread_id"),
        "checkpoint_ns": conf.get("checkpoint_ns") or "",
        "checkpoint_id": conf.get("checkpoint_id"),
        "checkpoint_map": conf.get("checkpoint_map") or {},
    }


def _interrupt(item: dict) -> dict:
    return {"value": to_plain(item.get("value"), path="interrupts"), "id": item.get("id")}


def tasks_of(saver, snapshot, subgraphs: bool | None = None) -> list[dict]:
    """The snapshot's next tasks. ``subgraphs`` None (history) leaves a subgraph task bare;
    False points it at the subgraph's namespace (``checkpoint``); True nests the subgraph's
    own state (``state``), as LangGraph's ``get_state(subgraphs=...)`` does."""
    tasks = []
    # The thread's time travel, made once for all its tasks (it reads the thread's graph).
    reader = travel(saver, snapshot.config["configurable"]["thread_id"])
    for task in snapshot.pending_tasks:
        body = {
            "id": task["id"],
            "name": task["name"],
            "path": list(task.get("path") or ()),
            "error": task.get("error"),
            "interrupts": [_interrupt(i) for i in task.get("interrupts") or []],
            "checkpoint": None,
            "state": None,
            "result": None,
        }
        if subgraphs is not None:
            nested = subgraph_state(reader, snapshot, task)
            if nested is not None and subgraphs:
                body["state"] = state_body(saver, nested, subgraphs=True)
            elif nested is not None:
                conf = nested.config["configurable"]
                body["checkpoint"] = {
                    "thread_id": conf["thread_id"],
                    "checkpoint_ns": conf["checkpoint_ns"],
                }
        tasks.append(body)
    return tasks


def subgraph_state(reader, snapshot, task: dict):
    """The newest state a subgraph run by ``task`` stored (its namespace is the task's node
    and id under the snapshot's own), or None: the task ran no subgraph here. ``reader``:
    the thread's time travel (`travel`)."""
    conf = snapshot.config["configurable"]
    outer = conf.get("checkpoint_ns") or ""
    ns = f"{outer}|{task['name']}:{task['id']}" if outer else f"{task['name']}:{task['id']}"
    try:
        return reader.get_state(conf["thread_id"], checkpoint_ns=ns)
    except (ThreadNotFound, CheckpointNotFound):
        return None


def status_of(snapshot) -> str:
    """What the stored head says: a failed task, a pending interrupt, a run mid-way, or none."""
    if snapshot is None:
        return "idle"
    tasks = snapshot.pending_tasks
    if any(task.get("error") for task in tasks):
        return "error"
    if any(task.get("interrupts") for task in tasks):
        return "interrupted"
    # A task's writes saved before its superstep's checkpoint: a run is mid-step.
    if snapshot.pending_writes:
        return "busy"
    return "idle"


def state_body(saver, snapshot, select=None, subgraphs: bool | None = None) -> dict:
    """A ``ThreadState``; ``metadata`` is the checkpoint's own, as LangGraph stored it;
    ``subgraphs`` as `tasks_of` reads it."""
    tup = saver.get_tuple(snapshot.config)
    ts = snapshot.metadata.get("timestamp")
    checkpoint = checkpoint_ref(snapshot.config)
    if checkpoint["checkpoint_ns"] and tup is not None:
        # A subgraph's checkpoint names its place in every enclosing namespace, as
        # LangGraph's does: the parents its metadata records, then itself.
        parents = tup.metadata.get("parents") if isinstance(tup.metadata, dict) else None
        checkpoint["checkpoint_map"] = {
            **(parents if isinstance(parents, dict) else {}),
            checkpoint["checkpoint_ns"]: checkpoint["checkpoint_id"],
        }
    body = {
        "values": plain_mapping(snapshot.values, path="values"),
        "next": list(snapshot.next),
        "tasks": tasks_of(saver, snapshot, subgraphs),
        "checkpoint": checkpoint,
        "metadata": to_plain(dict(tup.metadata or {}), path="metadata") if tup else {},
        "created_at": str(ts) if ts else None,
        "parent_checkpoint": checkpoint_ref(tup.parent_config) if tup else None,
        "interrupts": [_interrupt(i) for i in snapshot.interrupts],
    }
    return pick(body, select, STATE_FIELDS)


def pick(body: dict, select, allowed) -> dict:
    if not select:
        return body
    picked = {name: body[name] for name in allowed if name in select}
    if ERROR_FIELD in body and ERROR_FIELD not in allowed:
        # Why the fields picked are empty: the marker outlives any select.
        picked[ERROR_FIELD] = body[ERROR_FIELD]
    return picked


def head_snapshot(saver, thread_id: str):
    try:
        return travel(saver, thread_id).get_state(thread_id)
    except (ThreadNotFound, CheckpointNotFound):
        return None


_UNREAD = object()


def thread_record(info: ThreadInfo, row: ThreadMetadata | None) -> dict:
    """A ``Thread``'s fields that its head's state does not decide."""
    created = info.created_at or (row.created_at if row else None) or info.last_write_at
    updated = info.last_write_at or created
    return {
        "thread_id": info.thread_id,
        "created_at": iso(created),
        "updated_at": iso(updated),
        "state_updated_at": iso(updated),
        "metadata": dict(row.metadata) if row else {},
        "config": {},
        "context": {},
    }


def thread_body(saver, info: ThreadInfo, select=None, row=_UNREAD) -> dict:
    """A ``Thread``: metadata from its record, values, status and interrupts from the head.

    ``row``: the thread's `ThreadMetadata` (or None) when the caller read it already."""
    if row is _UNREAD:
        row = metadata_row(saver, info.thread_id)
    snapshot = head_snapshot(saver, info.thread_id)
    interrupts: dict[str, list] = {}
    for task in snapshot.pending_tasks if snapshot else []:
        if task.get("interrupts"):
            interrupts[task["id"]] = [_interrupt(i) for i in task["interrupts"]]
    body = {
        **thread_record(info, row),
        "status": status_of(snapshot),
        # The Platform's null for a thread no state was written to.
        "values": plain_mapping(snapshot.values, path="values")
        if snapshot and snapshot.channel_versions
        else None,
        "interrupts": interrupts,
    }
    return pick(body, select, THREAD_FIELDS)


def listed_thread_body(saver, info: ThreadInfo, row=_UNREAD) -> dict:
    """`thread_body` for one thread of many (a search): a thread whose stored state cannot
    be read is listed all the same, with status "error", values null and ``error`` naming
    what failed, so one bad thread never fails a search over the others."""
    if row is _UNREAD:
        row = metadata_row(saver, info.thread_id)
    try:
        return thread_body(saver, info, row=row)
    except (CheckpointCodecError, CheckpointEncryptionError) as exc:
        return {
            **thread_record(info, row),
            "status": "error",
            "values": None,
            "interrupts": {},
            ERROR_FIELD: {"code": exc.code, "detail": exc.message},
        }


def root_config(thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None):
    return thread_config(thread_id, checkpoint_id, checkpoint_ns)


def plain(value: Any) -> Any:
    return to_plain(value)
