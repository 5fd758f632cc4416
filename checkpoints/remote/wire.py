"""The remote saver's wire format, shared by the client and the service (`/store/v1/`).

Loads neither Django nor a database driver: a worker imports it with LangGraph only.

Every call is one POST of a msgpack map; a success answers a msgpack map ``{"r": result}``,
a failure a JSON ``{"error": {"code", "message", "field"}}`` with a 4xx or 5xx status.
Values travel as the serializer's ``(type, bytes)`` pairs (``[type, bin]``), never
re-encoded: the service checks them with the strict reader and stores the client's bytes.
A checkpoint travels as its body (plain data: ids, versions, versions seen) with its
``channel_values`` as such pairs.

``ormsgpack.unpackb`` reads the first document and ignores whatever follows, so
`unpack_whole` frames the body between an array header and an end marker no client can
know (16 random bytes a process draws once): the marker is where the body's document
ended only when nothing trailed it, and a truncated body swallows the marker and fails.
"""

from __future__ import annotations

import os
from typing import Any

import ormsgpack

from checkpoints.errors import CheckpointCodecError

API_PATH = "store/v1/"
CONTENT_TYPE = "application/vnd.checkpoints.store+msgpack"
# The envelope around the values of the largest body the service takes: keys, ids, the
# checkpoint's body, metadata (the values themselves are held to MAX_CHECKPOINT_BYTES).
ENVELOPE_BYTES = 1024 * 1024
# The type tags a client may send: LangGraph's serializer's own, never pickle, never ours
# (compressed or sealed values are the store's stored forms, made by the store).
VALUE_TYPES = frozenset({"msgpack", "json", "bytes", "bytearray", "null"})

_END = os.urandom(16)
_FRAME_HEAD = b"\x92"  # an array of two: the document, then the end marker
_FRAME_TAIL = b"\xc4\x10" + _END  # bin 8 of 16 bytes


class WireFormatError(CheckpointCodecError):
    """A request or answer body that is not one whole msgpack document of the wire's shape
    (malformed, truncated, trailing bytes, a part of the wrong type): names what was wrong."""

    code = "malformed_body"
    status = 400


def pack(obj: Any) -> bytes:
    """A wire document: msgpack of plain data (dict keys may be any msgpack scalar)."""
    return ormsgpack.packb(obj, option=ormsgpack.OPT_NON_STR_KEYS)


def _no_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack ext code {code} in the envelope, which carries plain data only")


def unpack_whole(data: bytes, what: str = "the request body", ext_hook=_no_ext) -> Any:
    """The one msgpack document ``data`` holds, all of it; WireFormatError naming ``what``
    for anything else (malformed, truncated, trailing bytes)."""
    if not data:
        raise WireFormatError(f"{what} is empty; a msgpack document was expected", field=what)
    try:
        framed = ormsgpack.unpackb(
            _FRAME_HEAD + bytes(data) + _FRAME_TAIL,
            ext_hook=ext_hook,
            option=ormsgpack.OPT_NON_STR_KEYS,
        )
    except (ValueError, TypeError) as exc:
        raise WireFormatError(f"{what} is not msgpack: {exc}", field=what) from None
    if type(framed) is not list or len(framed) != 2 or framed[1] != _END:
        raise WireFormatError(
            f"{what} is not one whole msgpack document: bytes trail it, or it is truncated",
            field=what,
        )
    return framed[0]


def stored_pair(value: Any, what: str) -> tuple[str, bytes]:
    """``[type, bin]`` of an answer as a ``(type, bytes)`` pair, whatever its type: a stored
    value the reader cannot read (pickle, an unknown type) is its refusal to make, naming
    where the value is, not the wire's."""
    if (
        type(value) not in (list, tuple)
        or len(value) != 2
        or type(value[0]) is not str
        or type(value[1]) is not bytes
    ):
        raise WireFormatError(f"{what} is not a [type, bytes] pair", field=what)
    return value[0], value[1]


def typed_pair(value: Any, what: str) -> tuple[str, bytes]:
    """``[type, bin]`` from the wire as a ``(type, bytes)`` pair, its type one a client may
    send; WireFormatError naming ``what`` otherwise."""
    type_, data = stored_pair(value, what)
    if type_ not in VALUE_TYPES:
        raise WireFormatError(
            f"{what} has type {type_!r}; a value travels as one of "
            f"{', '.join(sorted(VALUE_TYPES))}",
            field=what,
        )
    return type_, data


def field(body: Any, name: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
    """``body[name]`` when it is of ``kind`` (None allowed when ``optional``)."""
    if type(body) is not dict:
        raise WireFormatError("the request body is not a map", field="body")
    value = body.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, kind) or isinstance(value, bool) and bool not in _kinds(kind):
        raise WireFormatError(
            f"{name} is {type(value).__name__}, not {_kind_text(kind)}", field=name
        )
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_text(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


# Configurable keys LangGraph's savers read or merge into metadata: plain scalars only
# travel (LangGraph's own ``__pregel_*`` entries are callables of this process).
_SCALARS = (str, int, float, bool)


def wire_config(config: Any) -> dict[str, Any] | None:
    """What of a RunnableConfig the store reads: its configurable scalars and its
    ``metadata`` scalars (merged into checkpoint metadata as LangGraph's savers do)."""
    if config is None:
        return None
    out: dict[str, Any] = {}
    for part in ("configurable", "metadata"):
        given = config.get(part)
        if not given:
            continue
        kept = {
            k: v
            for k, v in dict(given).items()
            if isinstance(k, str) and not k.startswith("__") and isinstance(v, _SCALARS)
        }
        if kept:
            out[part] = kept
    return out
