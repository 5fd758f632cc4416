"""The Platform's JSON shapes (langgraph-sdk's ``schema.py``) built from what is stored.

Values (state, history, a thread's and a search's ``values``, interrupts, metadata, a copy's
answer) are written as LangGraph Server writes them (its orjson encoder and that encoder's
fallback, `server_json`), from the values the store's strict reader decoded: nothing a
stored byte names is imported or called to build them. Where that differs from the REST API
(``/api/``, which keeps the faithful codec's plain form, :func:`checkpoints.codec.render.to_plain`):

- a LangChain message is its fields (``model_dump()``: ``{"type": "human", "content": ...,
  "id": ..., "additional_kwargs": {}, ...}``), not ``{"lc": 1, "type": "constructor", ...}``;
  any pydantic model is its ``model_dump()``, a named tuple its fields by name;
- bytes are base64 text (the REST API keeps a ``{"$type": "bytes"}`` envelope); a timedelta
  is its seconds, a time zone its name, a Decimal a number (an int when it has no
  fraction), big integers numbers (the REST API writes those three as strings);
- an exception is ``{"error": class name, "message": ...}``, the message kept only for the
  kinds LangGraph's server shows (ValueError, TypeError, ... its own graph errors);
- ``Send`` is ``{"node": ..., "args": ...}``; a value with no JSON form at all is null;
- NaN and infinities are null; a NUL character in text is U+FFFD.
"""

from __future__ import annotations

import base64
import dataclasses
import math
import re
from collections import deque
from collections.abc import Mapping
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from enum import Enum
from ipaddress import (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
)
from pathlib import Path
from typing import Any
from uuid import UUID

from langgraph.types import Send

from checkpoints.codec.exception import CheckpointedException
from checkpoints.codec.render import to_plain
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


def update_body(config: dict) -> dict:
    """update_state's answer as LangGraph's server gives it: the new checkpoint (no map),
    the same as ``configurable``, and its id again at the top."""
    ref = checkpoint_ref(config)
    checkpoint = {key: ref[key] for key in ("thread_id", "checkpoint_ns", "checkpoint_id")}
    return {
        "checkpoint": checkpoint,
        "configurable": dict(checkpoint),
        "checkpoint_id": checkpoint["checkpoint_id"],
    }


def _interrupt(item: dict) -> dict:
    return {"value": safe_json(item.get("value"), "interrupts"), "id": item.get("id")}


# --- values as LangGraph Server writes them ------------------------------------------------
# The exceptions whose message LangGraph's server shows (by class name: a stored exception
# is read back as a record naming its class, never as the class); any other is
# "An internal error occurred", as there.
SHOWN_ERRORS = frozenset(
    {
        "ValueError",
        "TypeError",
        "KeyError",
        "AttributeError",
        "RuntimeError",
        "RecursionError",
        "TimeoutError",
        "InvalidUpdateError",
        "GraphBubbleUp",
        "GraphInterrupt",
        "NodeInterrupt",
        "ParentCommand",
        "GraphRecursionError",
        "EmptyInputError",
        "TaskNotFound",
        "HTTPException",
        "UserInterrupt",
    }
)
HIDDEN_ERROR = "An internal error occurred"
# Written as their str().
_TEXT_TYPES = (
    IPv4Address,
    IPv4Interface,
    IPv4Network,
    IPv6Address,
    IPv6Interface,
    IPv6Network,
    Path,
)


def server_values(values: Mapping[str, Any] | None, path: str = "values") -> dict[str, Any]:
    """Each entry as `server_json` writes it, on its own: an entry that cannot be written so
    is the REST API's plain form (with its ``unrenderable`` marker), never a failed answer."""
    return {str(k): safe_json(v, f"{path}.{k}") for k, v in (values or {}).items()}


def safe_json(value: Any, path: str) -> Any:
    """`server_json`, or the REST API's plain form where a rebuilt model's own code fails."""
    try:
        return server_json(value)
    except Exception:  # a rebuilt model's own model_dump() failed: this value alone
        return to_plain(value, path=path)


def server_json(value: Any) -> Any:
    """``value`` (as the store's reader decoded it) as the JSON data LangGraph's server
    writes for it: orjson's own types as orjson writes them, then its encoder's fallback."""
    if value is None or isinstance(value, (bool, int)) and not isinstance(value, Enum):
        return value
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Enum):
        return server_json(value.value)
    if isinstance(value, Mapping) and not _has_fields(value):
        return {_key(k): server_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not hasattr(value, "_asdict"):
        return [server_json(item) for item in value]
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, UUID):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: server_json(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return server_json(value.tolist())
    return server_json(_fallback(value))


def _has_fields(value: Any) -> bool:
    # A mapping that is also a model (rare) is written by its model_dump, as there.
    return hasattr(value, "model_dump") and not isinstance(value, dict)


def _key(key: Any) -> str:
    """A key as orjson's OPT_NON_STR_KEYS writes it."""
    if isinstance(key, str):
        return key
    if key is None or isinstance(key, bool):
        return {None: "null", True: "true", False: "false"}[key]
    if isinstance(key, Enum):
        return _key(key.value)
    if isinstance(key, (datetime, date, time)):
        return key.isoformat()
    return str(key)


def _fallback(value: Any) -> Any:
    """What LangGraph's server encoder answers for a type orjson does not write itself."""
    if isinstance(value, Send):
        return {"node": value.node, "args": value.arg}
    if isinstance(value, type):
        return None
    for method in ("model_dump", "dict", "_asdict"):
        if callable(getattr(value, method, None)):
            return getattr(value, method)()
    if isinstance(value, CheckpointedException):
        name = value.id[-1] if value.id else "Exception"
        return {"error": name, "message": value.message if name in SHOWN_ERRORS else HIDDEN_ERROR}
    if isinstance(value, BaseException):
        name = type(value).__name__
        shown = any(k.__name__ in SHOWN_ERRORS for k in type(value).__mro__)
        return {"error": name, "message": str(value) if shown else HIDDEN_ERROR}
    if isinstance(value, (set, frozenset, deque)):
        return list(value)
    if isinstance(value, (timezone, tzinfo)):
        return value.tzname(None)
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return (
            float(value) if not value.is_finite() or value.as_tuple().exponent < 0 else int(value)
        )
    if isinstance(value, _TEXT_TYPES):
        return str(value)
    if isinstance(value, re.Pattern):
        return value.pattern
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode()
    return None


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
        "values": server_values(snapshot.values),
        "next": list(snapshot.next),
        "tasks": tasks_of(saver, snapshot, subgraphs),
        "checkpoint": checkpoint,
        "metadata": server_values(tup.metadata, "metadata") if tup else {},
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
        "values": server_values(snapshot.values)
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
