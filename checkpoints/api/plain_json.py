"""Render checkpoint values as JSON a client can read without knowing our codec.

Values go through the faithful JSON codec first, so what the API shows is what the store
would write; its typed envelopes are then made plain where a plain JSON form says the same
thing (tuples and sets as lists, datetimes as ISO-8601 strings, decimals, UUIDs and big
integers as strings, models and dataclasses as their fields, LangChain objects as
LangChain's own ``{"lc": 1, "type": "constructor", ...}`` form). Envelopes with no plain
form (bytes, timedeltas, time zones, exceptions, ``Send``) are shown as the envelope
itself. A value the codec refuses is rendered part by part; a part with no JSON form at all
is shown as an ``unrenderable`` envelope naming why, so one odd value never fails the
whole response.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel

from checkpoints.codec import ENVELOPE_KEY, FaithfulJSONCodec
from checkpoints.errors import CheckpointCodecError

_codec = FaithfulJSONCodec(compress_bytes=None)
_AS_LIST = {"tuple", "set", "frozenset"}
_AS_STRING = {"decimal", "uuid", "date"}
_AS_FIELDS = {"model", "dataclass", "namedtuple"}


def to_plain(value: Any, *, path: str = "value") -> Any:
    """``value`` as plain JSON data; never raises for an unencodable value."""
    try:
        encoded = json.loads(_codec.dumps(value, path=path))
    except CheckpointCodecError as exc:
        return _piecewise(value, path, exc)
    return _plain(encoded)


def _piecewise(value: Any, path: str, exc: CheckpointCodecError) -> Any:
    """Render a refused value part by part, so only the parts at fault are marked.

    Classes outside CODEC_ALLOWED_MODULES are refused for storage (they could not be read
    back), but showing an object already in memory imports nothing, so its fields are shown.
    """
    if isinstance(value, Enum):
        return to_plain(value.value, path=f"{path}.value")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return plain_mapping(fields, path=path)
    if isinstance(value, BaseModel):
        names = type(value).model_fields
        return plain_mapping({k: v for k, v in value.__dict__.items() if k in names}, path=path)
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return plain_mapping(value._asdict(), path=path)
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value) and ENVELOPE_KEY not in value:
            return plain_mapping(value, path=path)
        return {
            ENVELOPE_KEY: "dict",
            "items": [[to_plain(k, path=path), to_plain(v, path=path)] for k, v in value.items()],
        }
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_plain(item, path=f"{path}[{i}]") for i, item in enumerate(value)]
    return {
        ENVELOPE_KEY: "unrenderable",
        "type": f"{type(value).__module__}.{type(value).__qualname__}",
        "reason": exc.message,
    }


def plain_mapping(values: Mapping[str, Any] | None, *, path: str) -> dict[str, Any]:
    """Each entry rendered on its own, so one bad entry spoils only itself."""
    return {str(k): to_plain(v, path=f"{path}.{k}") for k, v in (values or {}).items()}


def _plain(encoded: Any) -> Any:
    if isinstance(encoded, list):
        return [_plain(item) for item in encoded]
    if not isinstance(encoded, dict):
        return encoded
    kind = encoded.get(ENVELOPE_KEY)
    if kind is None:
        return {key: _plain(item) for key, item in encoded.items()}
    if kind in _AS_LIST:
        return [_plain(item) for item in encoded.get("items", [])]
    if kind in _AS_STRING:
        return encoded.get("v")
    if kind == "int":
        return str(int(encoded["hex"], 16))
    if kind in ("datetime", "time"):
        return _codec.loads(json.dumps(encoded)).isoformat()
    if kind == "enum":
        return _plain(encoded.get("value"))
    if kind in _AS_FIELDS:
        return _plain(encoded.get("fields"))
    if kind == "dict":
        return _plain_dict(encoded)
    if kind == "lc":
        return {
            "lc": 1,
            "type": "constructor",
            "id": encoded.get("id"),
            "kwargs": _plain(encoded.get("kwargs")),
        }
    if kind == "send":
        return {**encoded, "arg": _plain(encoded.get("arg"))}
    if kind == "exception":
        return {
            **encoded,
            "kwargs": _plain(encoded.get("kwargs")),
            "cause": _plain(encoded.get("cause")),
        }
    return encoded


def _plain_dict(encoded: dict[str, Any]) -> Any:
    pairs = [(_plain(k), _plain(v)) for k, v in encoded.get("items", [])]
    if all(isinstance(k, str) for k, _ in pairs) and not any(k == ENVELOPE_KEY for k, _ in pairs):
        return dict(pairs)
    # Keys JSON objects cannot hold (numbers, tuples, "$type") keep the pairs form.
    return {ENVELOPE_KEY: "dict", "items": [[k, v] for k, v in pairs]}
