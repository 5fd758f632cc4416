"""Values on the service side: checked as the client sent them, stored and read as bytes.

A value arrives as the client serializer's ``(type, bytes)`` pair. `check_value` holds it
to what the in-process saver holds a value it encodes to (the object budget of its read,
whole well-formed msgpack with no lone surrogate and no ext code LangGraph never writes,
``CODEC_MAX_BYTES``), reading it without rebuilding any object. `WireValue` carries it
through the store contract: `WireSerde` hands a saver the client's bytes to store, and
hands the service a stored value's bytes back instead of reviving it, so a type only the
worker knows travels both ways untouched.

A store whose stored form is not the serializer's (Redis's faithful JSON codec) gets
`ConvertingSerde` instead: each sent value is read with the store's strict reader (what an
in-process read of those bytes would rebuild, nothing more, within the same limits) and
written in the store's form; a value read back goes to the client as the serializer's bytes
again. A type the service cannot rebuild is refused rather than stored as its bare data,
which the client would read back as something other than it sent; except, as the codec does
in process, a class no process can import (defined inside a function), kept as its fields.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from checkpoints.codec.budget import UnreadableWhenStored, charge_msgpack, refuse_unreadable
from checkpoints.codec.compression import refuse_large_value
from checkpoints.codec.json import FaithfulJSONCodec
from checkpoints.codec.msgpack_read import EXT_DELTA_SNAPSHOT, loaded_class, unpack
from checkpoints.codec.serde import StoreSerializer
from checkpoints.errors import CheckpointCodecError, UnreadableValue
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

    __slots__ = ("data", "type", "what")

    def __init__(self, type_: str, data: bytes, what: str = "value") -> None:
        self.type = type_
        self.data = data
        # What the request called it: a store that converts it names it in a refusal.
        self.what = what

    def pair(self) -> list:
        return [self.type, self.data]

    def held(self) -> Any:
        """What the bytes hold, read by the store's strict reader: only to say what a stored
        checkpoint body that is not one holds (`planning.reads.body_shape`)."""
        return _client_form().loads_typed((self.type, self.data))

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
    return WireValue(type_, bytes(data), what)


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

    def sent(self, value: WireValue) -> Any:
        """The object a sent value holds (the metadata the saver files), read strictly."""
        return self.inner.loads_typed((value.type, value.data))

    def as_received(self, checkpoint: dict) -> dict:
        """``checkpoint`` with its values read, for `checkpoint_created`'s receivers, as an
        in-process put hands them the objects it stored. A value this service's reader
        refuses stays a `WireValue`: the put is committed, a receiver must not undo that.
        Only the channels the put wrote are there (a worker sends those alone)."""
        values = {}
        for channel, value in (checkpoint.get("channel_values") or {}).items():
            if type(value) is WireValue:
                try:
                    value = self.sent(value)
                except CheckpointCodecError:
                    pass
            values[channel] = value
        return {**checkpoint, "channel_values": values}


class ConvertingSerde(WireSerde):
    """`WireSerde` for a store with a stored form of its own: a sent value is rebuilt by the
    strict reader and stored in the store's form; what the store reads back is an object,
    which `value_pair` turns into the serializer's bytes for the client."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.reader = client_serializer()
        # Rebuilt or refused: a type handed back as its bare data would be stored as data,
        # and the client would read a dict where it wrote its object.
        self.reader._blocked_raise = True
        self._permissive = self.reader._allowed_msgpack_modules is True
        self._paths = isinstance(inner, FaithfulJSONCodec)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if type(obj) is not WireValue:
            return self.inner.dumps_typed(obj)
        value = self.sent(obj)
        if self._paths:
            return self.inner.dumps_typed(value, path=obj.what)
        return self.inner.dumps_typed(value)

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        return self.inner.loads_typed(data)

    def sent(self, value: WireValue) -> Any:
        try:
            if value.type != "msgpack":
                return self.reader.loads_typed((value.type, value.data))
            charge_msgpack(value.data)
            found, blocked, unreadable = unpack(self.reader._unpack_ext_hook, value.data)
        except UnreadableValue as exc:
            raise self._refusal(value, exc.message) from None
        if unreadable:
            raise self._refusal(value, f"it holds {unreadable[0]}")
        refused = [(name, why) for name, why in blocked if not self._kept_as_fields(name)]
        if refused:
            name, why = refused[0]
            raise self._refusal(
                value,
                f"it holds {name}, which this service does not rebuild ({why}); add it to "
                "CHECKPOINTS['ALLOWED_MSGPACK_MODULES'] or import its module in the service",
            )
        return found

    def _kept_as_fields(self, name: str) -> bool:
        """Whether the class ``name`` is one no process can import, whose fields the codec
        keeps in process (permissive mode, as LangGraph's own serializer reads it back):
        its module is loaded but holds no such class, so it was defined in a function."""
        module, _, attr = name.rpartition(".")
        return self._permissive and module in sys.modules and loaded_class(module, attr)[0] is None

    @staticmethod
    def _refusal(value: WireValue, why: str) -> CheckpointCodecError:
        return CheckpointCodecError(
            f"cannot store {value.what}: {why} (this service's store keeps values in a form of "
            "its own, so it stores only what it can rebuild)",
            field=value.what,
        )


def _opaque(code: int, data: bytes) -> Any:
    return None


def value_pair(value: Any, serde: Any, what: str) -> list:
    """A value the saver read, as ``[type, bytes]`` for the answer."""
    if type(value) is WireValue:
        return value.pair()
    if type(value) is list and value and all(type(v) is WireValue for v in value):
        # A pre-v4 checkpoint's migrated sends: a list of values as their clients sent them.
        return _list_pair(value, serde)
    if not stored_as_sent(serde):
        # Read from a store's own form (`ConvertingSerde`): the client reads the serializer's.
        serde = _client_form()
    # Else made by the store itself (a pre-v4 checkpoint's migrated sends): its own encoding.
    type_, data = serde.dumps_typed(value)
    return [type_, data]


def _list_pair(values: list, serde: Any) -> list:
    """LangGraph's msgpack of a list of wire values: an array header, then each msgpack
    document as it was sent (nothing revived); any other kind of value is read to encode."""
    if not all(v.type == "msgpack" for v in values):
        reader = _client_form() if not stored_as_sent(serde) else serde
        return list(reader.dumps_typed([reader.loads_typed((v.type, v.data)) for v in values]))
    n = len(values)
    if n < 16:
        head = bytes([0x90 | n])
    elif n < 2**16:
        head = b"\xdc" + n.to_bytes(2, "big")
    else:
        head = b"\xdd" + n.to_bytes(4, "big")
    return ["msgpack", head + b"".join(v.data for v in values)]


@functools.cache
def _client_form() -> StoreSerializer:
    # Writing is the same whatever the allowlist: one serializer serves every answer.
    return client_serializer()


def client_serializer() -> StoreSerializer:
    """The serializer whose bytes a client sends and reads, with the store's strict reader."""
    return StoreSerializer()


def service_serde(serde: Any) -> WireSerde:
    """The serializer the service's saver uses in place of the store's ``serde``."""
    return WireSerde(serde) if stored_as_sent(serde) else ConvertingSerde(serde)


def stored_as_sent(serde: Any) -> bool:
    """Whether ``serde`` stores LangGraph's serializer's bytes (what a client sends) as they
    are, so the service may hand them through; a codec with a stored form of its own (the
    faithful JSON codec) has each value rebuilt (`ConvertingSerde`)."""
    return isinstance(serde, JsonPlusSerializer)
