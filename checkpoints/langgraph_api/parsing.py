"""What a LangGraph-API request body may say: each field read, checked and bounded.

Every refusal here is an InvalidCheckpointInput naming the field (a 422 in the Platform's
shape); the views only read what these return.
"""

from __future__ import annotations

import json
import re

from django.conf import settings
from langgraph.types import StateUpdate

from checkpoints.api.base import check_thread_id
from checkpoints.api.serializers import MAX_SUPERSTEPS
from checkpoints.errors import InvalidCheckpointInput, ValueTooLarge
from checkpoints.langgraph_api import shapes
from checkpoints.store.planning import check_key
from retention.policy import declare_retention, validate_retention

STATUSES = ("idle", "busy", "interrupted", "error")
SORT_BY = ("thread_id", "status", "created_at", "updated_at", "state_updated_at")
SEARCH_MAX = 1000
# How many thread ids one search or count may name, and one prune may delete: each is a
# thread read (or deleted) in one request.
IDS_MAX = 1000
PRUNE_MAX = 100
# What a search's ``extract`` may read, and how many paths one search may ask for.
EXTRACT_ROOTS = ("values", "metadata", "config", "interrupts")
EXTRACT_MAX = 10


def body_of(request) -> dict:
    data = request.data
    if data is None or data == {}:
        return {}
    if not isinstance(data, dict):
        raise InvalidCheckpointInput("the request body must be a JSON object", field="body")
    return data


def field(data: dict, name: str, kinds, default=None, choices=None):
    value = data.get(name, default)
    if value is None:
        return default
    if isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,)):
        raise InvalidCheckpointInput(f"{name} must be {_kind_name(kinds)}", field=name)
    if not isinstance(value, kinds):
        raise InvalidCheckpointInput(f"{name} must be {_kind_name(kinds)}", field=name)
    if choices is not None and value not in choices:
        raise InvalidCheckpointInput(
            f"{name} must be one of {', '.join(choices)}, got {value!r}", field=name
        )
    return value


def _kind_name(kinds) -> str:
    names = {dict: "an object", list: "a list", str: "a string", int: "an integer", bool: "a bool"}
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def bounded(data: dict, name: str, default: int, low: int, high: int) -> int:
    value = field(data, name, int, default)
    if not low <= value <= high:
        raise InvalidCheckpointInput(f"{name} must be {low} to {high}, got {value}", field=name)
    return value


def ttl_minutes(data: dict) -> int | None:
    """The SDK's ``ttl`` (``{"ttl": minutes, "strategy": "delete"}``) as whole minutes."""
    ttl = data.get("ttl")
    if ttl is None:
        return None
    if not isinstance(ttl, dict):
        ttl = {"ttl": ttl}
    strategy = ttl.get("strategy", "delete")
    if strategy != "delete":
        raise InvalidCheckpointInput(
            f"ttl.strategy {strategy!r} is not supported: the retention sweep deletes threads",
            field="ttl.strategy",
        )
    minutes = ttl.get("ttl")
    if isinstance(minutes, float) and minutes.is_integer():
        minutes = int(minutes)
    if isinstance(minutes, bool) or not isinstance(minutes, int) or minutes <= 0:
        raise InvalidCheckpointInput(
            f"ttl.ttl must be a whole number of minutes above zero, got {minutes!r}",
            field="ttl.ttl",
        )
    return minutes


def check_ttl(minutes: int | None) -> None:
    if minutes is not None:
        validate_retention(waiting_minutes=minutes)


def declare_ttl(saver, thread_id: str, minutes: int | None) -> None:
    if minutes is not None:
        declare_retention(saver, thread_id, waiting_minutes=minutes)


def checkpoint_of(data: dict, name: str = "checkpoint") -> dict:
    value = field(data, name, dict, {})
    for key in ("checkpoint_id", "checkpoint_ns", "thread_id"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise InvalidCheckpointInput(f"{name}.{key} must be a string", field=f"{name}.{key}")
        if value.get(key):
            check_key(value[key], f"{name}.{key}")
    return value


def _at_most(items: list, where: str, what: str, bound: str) -> None:
    if len(items) > MAX_SUPERSTEPS:
        raise InvalidCheckpointInput(
            f"{where} holds {len(items)} {what}; {bound} at most {MAX_SUPERSTEPS}",
            field="supersteps",
        )


def updates_of(supersteps) -> list[list[StateUpdate]]:
    if not isinstance(supersteps, list):
        raise InvalidCheckpointInput("supersteps must be a list", field="supersteps")
    # The REST API's bulk update bound: each superstep is a checkpoint written.
    _at_most(supersteps, "supersteps", "supersteps", "one request writes")
    steps = []
    for i, step in enumerate(supersteps):
        updates = step.get("updates") if isinstance(step, dict) else None
        if not isinstance(updates, list):
            raise InvalidCheckpointInput(
                f"supersteps[{i}] must be an object with an updates list", field="supersteps"
            )
        _at_most(updates, f"supersteps[{i}]", "updates", "a superstep holds")
        row = []
        for j, update in enumerate(updates):
            where = f"supersteps[{i}].updates[{j}]"
            if not isinstance(update, dict):
                raise InvalidCheckpointInput(f"{where} must be an object", field="supersteps")
            if update.get("command") is not None:
                raise InvalidCheckpointInput(
                    f"{where}.command is not supported: send values", field="supersteps"
                )
            as_node = update.get("as_node")
            if as_node is not None and not isinstance(as_node, str):
                raise InvalidCheckpointInput(f"{where}.as_node must be a string", field=where)
            row.append(StateUpdate(update.get("values"), as_node))
        steps.append(row)
    return steps


def thread_ids_of(data: dict, name: str, most: int) -> list[str] | None:
    """The body's list of thread ids, each checked by the store's rule, duplicates dropped;
    at most ``most`` of them."""
    ids = field(data, name, list, None)
    if ids is None:
        return None
    if len(ids) > most:
        raise InvalidCheckpointInput(
            f"{name} names {len(ids)} threads; one request names at most {most}", field=name
        )
    for i, thread_id in enumerate(ids):
        if not isinstance(thread_id, str):
            raise InvalidCheckpointInput(
                f"{name}[{i}] must be a string, got {type(thread_id).__name__}",
                field=f"{name}[{i}]",
            )
        check_thread_id(thread_id, f"{name}[{i}]")
    return list(dict.fromkeys(ids))


def extract_of(data: dict) -> dict[str, list]:
    """The search's ``extract`` ({alias: "values.messages[-1].content"}) as parsed paths."""
    extract = field(data, "extract", dict, {})
    if len(extract) > EXTRACT_MAX:
        raise InvalidCheckpointInput(
            f"extract names at most {EXTRACT_MAX} paths, got {len(extract)}", field="extract"
        )
    paths = {}
    for alias, path in extract.items():
        if not alias.isidentifier() or not alias.isascii():
            raise InvalidCheckpointInput(
                f"extract alias {alias!r} must be letters, digits and _ (not first a digit)",
                field="extract",
            )
        if alias in shapes.THREAD_FIELDS:
            raise InvalidCheckpointInput(
                f"extract alias {alias!r} is a thread field's name; choose another",
                field="extract",
            )
        if not isinstance(path, str) or not path:
            raise InvalidCheckpointInput(
                f"extract path of {alias!r} must be a non-empty string", field="extract"
            )
        steps = path_steps(path)
        if steps is None or steps[0] not in EXTRACT_ROOTS:
            raise InvalidCheckpointInput(
                f"extract path {path!r} must start with one of {', '.join(EXTRACT_ROOTS)} and "
                "go on with .key and [index] steps",
                field="extract",
            )
        paths[alias] = steps
    return paths


_STEP = re.compile(r"\.([^.\[\]]+)|\[(-?\d+)\]")


def path_steps(path: str) -> list | None:
    """``values.messages[-1].content`` -> ["values", "messages", -1, "content"]; None when
    the path is not a key followed by .key and [index] steps."""
    root = re.match(r"[^.\[\]]+", path)
    if root is None:
        return None
    steps: list = [root.group()]
    at = root.end()
    while at < len(path):
        found = _STEP.match(path, at)
        if found is None:
            return None
        key, index = found.groups()
        steps.append(int(index) if index is not None else key)
        at = found.end()
    return steps


def extracted(body: dict, steps: list):
    """The value at ``steps`` in the thread's answer, or None where the path leads nowhere."""
    value = body
    for step in steps:
        if isinstance(step, int):
            if not isinstance(value, list) or not -len(value) <= step < len(value):
                return None
        elif not isinstance(value, dict) or step not in value:
            return None
        value = value[step]
    return value


def flag(value: str | None, name: str) -> bool:
    """A boolean query parameter as the SDK sends it (``true``/``false``)."""
    if value is None or value.lower() in ("false", "0", ""):
        return False
    if value.lower() in ("true", "1"):
        return True
    raise InvalidCheckpointInput(f"{name} must be true or false, got {value!r}", field=name)


def select_of(value) -> list[str] | None:
    if value is None or value == []:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidCheckpointInput("select must be a list of field names", field="select")
    return value


def check_metadata_size(metadata: dict) -> None:
    """A thread's metadata as a whole holds no more than one request may carry: updates
    merge into it, so without a bound each one grows the row (and every search that lists
    it) by a request's worth."""
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if limit is None:
        return
    size = len(json.dumps(metadata, ensure_ascii=False).encode())
    if size > limit:
        raise ValueTooLarge(
            f"the thread's metadata would come to {size} bytes of JSON, over "
            f"DATA_UPLOAD_MAX_MEMORY_SIZE ({limit} bytes), the most a thread's metadata holds",
            field="metadata",
            limit="DATA_UPLOAD_MAX_MEMORY_SIZE",
            size=size,
        )
