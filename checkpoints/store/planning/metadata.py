"""Checkpoint metadata as JSON: what a put stores, and the filters list and search match."""

from __future__ import annotations

import json
from collections import ChainMap
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    EXCLUDED_METADATA_KEYS,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from checkpoints.errors import (
    InvalidCheckpointInput,
)
from checkpoints.store.planning import _utf8_size, check_step
from checkpoints.store.planning.records import MISSING


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
    check_step(cleaned.get("step"), "filter.step")
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


# The deepest metadata a put keeps: every store's read parses it back with a recursive
# JSON parser (psycopg's, json.loads), which fails past Python's recursion limit.
METADATA_MAX_DEPTH = 100


def _refuse_depth(path: Any) -> None:
    text = _path_text(path)
    raise InvalidCheckpointInput(
        f"{text} nests deeper than {METADATA_MAX_DEPTH} levels; checkpoint metadata may "
        f"nest at most {METADATA_MAX_DEPTH}",
        field=text,
    )


def _clean_json(value: Any, path: Any, depth: int = 0) -> Any:
    # ``path`` is text, or (parent, segment) pairs turned into text only for a refusal
    # (a str segment is a key, an int an index): formatting every key's path cost more
    # than the cleaning (this runs on every put).
    t = type(value)
    if t is str:
        return value.replace("\x00", "") if value.isascii() else _clean_text(value, path)
    if value is None or t is bool or t is int:
        return value
    if depth >= METADATA_MAX_DEPTH:
        _refuse_depth(path)
    depth += 1
    if t is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                return _clean_any(value, path, depth)
            kind = type(v)
            # Scalars inline: most metadata values are, and a call each cost more.
            if kind is str:
                v = v.replace("\x00", "") if v.isascii() else _clean_text(v, (path, k))
            elif not (v is None or kind is bool or kind is int):
                v = _clean_json(v, (path, k), depth)
            out[k.replace("\x00", "") if k.isascii() else _clean_text(k, path, key=True)] = v
        return out
    if t is list or t is tuple:
        return [_clean_json(v, (path, i), depth) for i, v in enumerate(value)]
    return _clean_any(value, path, depth)


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


def _clean_any(value: Any, path: Any, depth: int = 0) -> Any:
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
            out[_clean_text(k, path, key=True)] = _clean_json(v, (path, k), depth)
        return out
    if isinstance(value, (list, tuple)):
        return [_clean_json(v, (path, i), depth) for i, v in enumerate(value)]
    raise InvalidCheckpointInput(
        f"{text} holds a {type(value).__name__}; checkpoint metadata must be JSON data",
        field=text,
    )
