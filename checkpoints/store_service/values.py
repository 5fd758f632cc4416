"""Values on the service side: checked as the client sent them, stored and read as bytes.

A value arrives as the client serializer's ``(type, bytes)`` pair. `check_value` holds it
to what the in-process saver holds a value it encodes to (the object budget of its read,
whole well-formed msgpack with no lone surrogate and no ext code LangGraph never writes,
``CODEC_MAX_BYTES``), reading it without rebuilding any object. `WireValue` carries it
through the store contract: `WireSerde` hands a saver the client's bytes to store, and
hands the service a stored value's bytes back instead of reviving it, so a type only the
worker knows travels both ways untouched.
"""

from __future__ import annotations

import json
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from checkpoints.codec.budget import UnreadableWhenStored, refuse_unreadable
from checkpoints.codec.compression import refuse_large_value
from checkpoints.codec.msgpack_read import EXT_DELTA_SNAPSHOT
from checkpoints.errors import CheckpointCodecError
from checkpoints.remote.wire import WireFormatError, typed_pair, unpack_whole

# LangGraph's ext codes (`checkpoints.codec.msgpack_read`): each payload is msgpack again.
_EXT_CODES = frozenset(range(EXT_DELTA_SNAPSHOT + 1))
# The keys a stored checkpoint body may hold (`WireSerde.loads_typed`).
_BODY_KEYS = frozenset(
    {
        "v",
        "id",
        "ts",
        "channel_versions",
        "versions_seen",
        "updated_channels",
        "pending_sends",
    }
)


class WireValue:
    """A value as its serializer's bytes, stored and sent back as they are."""

    __slots__ = ("data", "type")

    def __init__(self, type_: str, data: bytes) -> None:
        self.type = type_
        self.data = data

    def pair(self) -> list:
        return [self.type, self.data]

    def __eq__(self, other: object) -> bool:
        return type(other) is WireValue and other.type == self.type and other.data == self.data

    def __hash__(self) -> int:
        return hash((self.type, self.data))

    def __repr__(self) -> str:
        return f"WireValue({self.type!r}, {len(self.data)} bytes)"


class _Ext:
    """Checks an ext payload as msgpack in its turn, building nothing of it."""

    def __init__(self, what: str) -> None:
        self.what = what

    def __call__(self, code: int, data: bytes) -> Any:
        if code not in _EXT_CODES:
            raise ValueError(f"msgpack ext code {code}, which LangGraph never writes")
        unpack_whole(data, f"{self.what} (an ext payload)", ext_hook=self)
        return None


def check_value(pair: Any, what: str) -> WireValue:
    """The ``[type, bytes]`` pair from a request as a `WireValue`, once it holds what the
    in-process saver would store; a 4xx naming ``what`` otherwise."""
    type_, data = typed_pair(pair, what)
    refuse_large_value(len(data), what)
    if type_ == "msgpack":
        try:
            refuse_unreadable(data)
        except UnreadableWhenStored as exc:
            raise CheckpointCodecError(f"cannot store {what}: {exc}", field=what) from None
        try:
            unpack_whole(data, what, ext_hook=_Ext(what))
        except WireFormatError as exc:
            raise CheckpointCodecError(
                f"cannot store {what}: it is not a value LangGraph's msgpack reads ({exc.message})",
                field=what,
            ) from None
    elif type_ == "json":
        try:
            refuse_unreadable(data, as_json=True)
            json.loads(data.decode("utf-8"))
        except (UnreadableWhenStored, ValueError, RecursionError) as exc:
            raise CheckpointCodecError(
                f"cannot store {what}: it is not JSON the store reads ({exc})", field=what
            ) from None
    elif type_ == "null" and data:
        raise CheckpointCodecError(f"{what} is typed null but holds bytes", field=what)
    return WireValue(type_, bytes(data))


def _looks_like_body(data: bytes) -> bool:
    """Whether msgpack ``data`` opens as a map whose first key is a checkpoint body's."""
    head = data[:1]
    if not head:
        return False
    first = head[0]
    if 0x81 <= first <= 0x8F:
        at = 1
    elif first == 0xDE:
        at = 3
    elif first == 0xDF:
        at = 5
    else:
        return False
    return data[at : at + 2] == b"\xa1v" or data[at : at + 3] in (b"\xa2id", b"\xa2ts")


class WireSerde:
    """A saver's serializer on the service: `WireValue` in and out, the saver's own for
    the rest (a checkpoint's body, which the saver reads itself)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if type(obj) is WireValue:
            return obj.type, obj.data
        return self.inner.dumps_typed(obj)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, payload = data
        payload = bytes(payload)
        if type_ == "msgpack" and _looks_like_body(payload):
            # A checkpoint's body is the saver's to read (plain data: ids and versions); a
            # value that merely opens like one is read as plain data only to be told apart.
            shape = ormsgpack.unpackb(payload, ext_hook=_opaque, option=ormsgpack.OPT_NON_STR_KEYS)
            if type(shape) is dict and {"v", "id", "ts"} <= shape.keys() <= _BODY_KEYS:
                return self.inner.loads_typed((type_, payload))
        return WireValue(type_, payload)

    def loads_many(self, typed: list[tuple[str, bytes]]) -> list[Any]:
        return [self.loads_typed(one) for one in typed]

    def with_msgpack_allowlist(self, extra: Any) -> WireSerde:
        return self


def _opaque(code: int, data: bytes) -> Any:
    return None


def value_pair(value: Any, serde: Any, what: str) -> list:
    """A value the saver read, as ``[type, bytes]`` for the answer."""
    if type(value) is WireValue:
        return value.pair()
    # Made by the store itself (a pre-v4 checkpoint's migrated sends): its own encoding.
    type_, data = serde.dumps_typed(value)
    return [type_, data]


def stored_as_sent(serde: Any) -> bool:
    """Whether ``serde`` stores LangGraph's serializer's bytes (what a client sends) as they
    are, so the service may hand them through; a codec with a stored form of its own (the
    faithful JSON codec) would need each value rebuilt."""
    return isinstance(serde, JsonPlusSerializer)
