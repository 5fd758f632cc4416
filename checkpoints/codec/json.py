"""Store a run's state as JSON and read back the same types: the faithful JSON codec.

JSON holds None, bools, numbers, strings, lists and string-keyed objects. Every other value
a LangGraph run's state may hold is written as a *typed envelope*: a JSON object carrying the
reserved key ``"$type"`` plus the fields its type needs, for example::

    {"$type": "datetime", "v": "2024-03-31T02:30:00", "fold": 1,
     "tz": {"$type": "zoneinfo", "key": "Europe/Paris"}}
    {"$type": "tuple", "items": [1, "a"]}
    {"$type": "dict", "items": [[1, "one"], [{"$type": "tuple", "items": [1, 2]}, "pair"]]}

Any JSON object with a ``"$type"`` key is an envelope; a plain dict whose keys are all
strings and which has no ``"$type"`` key is written as itself. A dict that has non-string
keys, or a ``"$type"`` key of its own, is written as a ``"dict"`` envelope of key/value
pairs, so stored data never reads back as something it was not.

Envelope types: ``int`` (integers too long for JSON's decimal form), ``bytes``,
``bytearray``, ``tuple``, ``set``, ``frozenset``, ``dict``, ``decimal``, ``uuid``, ``date``,
``datetime``, ``time``, ``timedelta``, ``timezone``, ``zoneinfo``, ``enum``, ``model``
(pydantic v2), ``dataclass``, ``namedtuple``, ``send`` (LangGraph's ``Send``), ``lc``
(objects LangChain's own loader revives) and ``exception``.

Rules the codec keeps (this module, with its ``writer`` and ``reader``):

- Writing refuses, with :class:`CheckpointCodecError` naming the value's path (such as
  ``channel_values.messages[3].additional_kwargs.when``), any value it cannot read back
  as the same type: unknown types, NaN and infinite floats, a tzinfo that is neither a
  fixed offset nor a keyed ``ZoneInfo``, classes outside ``CODEC_ALLOWED_MODULES`` or not
  importable by module path, LangChain objects LangChain's loader would not revive.
- Reading raises nothing but :class:`CheckpointCodecError`, whatever the bytes hold.
  Classes are revived only from modules on ``CHECKPOINTS["CODEC_ALLOWED_MODULES"]``, and
  the allowlist is checked before anything is imported: stored data never chooses what
  gets imported. Pydantic models, dataclasses and named tuples are restored field by
  field without calling their constructors or validators.
- Both directions stop at ``CODEC_MAX_DEPTH`` levels of nesting and ``CODEC_MAX_BYTES``
  bytes. Payloads over ``INLINE_COMPRESS_BYTES`` are zstd-compressed and tagged
  ``json+zstd``; decompression stops at ``CODEC_MAX_BYTES``.
- Exceptions are written as readable records (``id``, ``message``, ``kwargs``,
  ``repr_kwargs``, ``cause``) and read back as :class:`CheckpointedException`. ``kwargs``
  holds the public attributes (an attribute this codec cannot store is kept as its
  ``repr()`` and named in ``repr_kwargs``); ``cause`` is ``__cause__``, else
  ``__context__`` unless ``raise ... from None`` suppressed it: the chain a traceback shows.
- Only floats must be finite: ``Decimal("NaN")`` and ``Decimal("Infinity")`` have an exact
  string form and are kept.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from checkpoints.codec.budget import UnreadableWhenStored, charge_json, refuse_unreadable
from checkpoints.codec.compression import (
    _FROM_SETTINGS,
    ZSTD_SUFFIX,
    compress_typed,
    decompress_typed,
    limit_text,
    refuse_large_value,
)
from checkpoints.codec.envelope import (
    LONE_SURROGATE_REASON,
    PERMISSIVE,
    _Refusal,
    lone_surrogate_path,
)
from checkpoints.codec.reader import _Reader
from checkpoints.codec.serde import configured_msgpack_allowlist
from checkpoints.codec.writer import _Writer
from checkpoints.conf import setting
from checkpoints.errors import CheckpointCodecError, UnreadableValue

JSON_TYPE = "json"
"""The type tag of an uncompressed payload; a compressed one adds ``ZSTD_SUFFIX``."""

DEFAULT_PATH = "value"


class FaithfulJSONCodec:
    """LangGraph serializer that stores values as JSON and reads back the same types.

    Implements ``SerializerProtocol`` (``dumps_typed``/``loads_typed``) plus untyped
    ``dumps``/``loads``. ``compress_bytes`` overrides ``INLINE_COMPRESS_BYTES`` (None turns
    compression off); the other limits are read from the ``CHECKPOINTS`` setting at each
    call, so ``override_settings`` applies. One instance is safe to share across threads.
    """

    def __init__(self, *, compress_bytes: int | None = _FROM_SETTINGS) -> None:
        self._compress_bytes = compress_bytes
        self._extra_classes: tuple[tuple[str, ...], ...] = ()

    def allowed_classes(self) -> tuple[str, ...]:
        """What classes may be stored and revived.

        Permissive (LangGraph's default): any module-level class of a module this process
        has imported, plus CODEC_ALLOWED_MODULES (read back only once imported: reading
        never imports).
        Strict (LANGGRAPH_STRICT_MSGPACK, or a list in ALLOWED_MSGPACK_MODULES): modules on
        CODEC_ALLOWED_MODULES, the classes ALLOWED_MSGPACK_MODULES lists, and the graph's
        schema classes given to :meth:`with_msgpack_allowlist`.
        """
        listed = configured_msgpack_allowlist()
        if listed is True:
            return (PERMISSIVE, *setting("CODEC_ALLOWED_MODULES"))
        classes = (*(listed or ()), *self._extra_classes)
        return (
            *setting("CODEC_ALLOWED_MODULES"),
            *(f"{'.'.join(entry[:-1])}:{entry[-1]}" for entry in classes),
        )

    def with_msgpack_allowlist(self, extra: Any) -> FaithfulJSONCodec:
        """A codec that also allows ``extra`` classes (``(module, Class)`` pairs or types)."""
        added = tuple(
            (e.__module__, e.__qualname__) if isinstance(e, type) else tuple(e) for e in extra
        )
        clone = copy.copy(self)
        clone._extra_classes = (*self._extra_classes, *added)
        return clone

    def dumps_typed(self, obj: Any, *, path: str = DEFAULT_PATH) -> tuple[str, bytes]:
        """Encode ``obj`` to ``(type tag, bytes)``; a refusal names the path below ``path``."""
        return compress_typed((JSON_TYPE, self.dumps(obj, path=path)), self._compress_bytes)

    def loads_typed(self, data: tuple[str, bytes], *, path: str = DEFAULT_PATH) -> Any:
        """Decode what :meth:`dumps_typed` wrote; any failure is a ``CheckpointCodecError``."""
        try:
            type_tag, payload = data
        except (TypeError, ValueError):
            raise CheckpointCodecError("a stored value must be a (type, bytes) pair") from None
        if type_tag == JSON_TYPE + ZSTD_SUFFIX:
            type_tag, payload = decompress_typed((type_tag, payload))
        if type_tag != JSON_TYPE:
            raise CheckpointCodecError(
                f"cannot read {path}: type tag {type_tag!r} is not one this codec writes"
                f" ({JSON_TYPE!r} or {JSON_TYPE + ZSTD_SUFFIX!r})",
                field=path,
            )
        return self.loads(payload, path=path)

    def dumps(self, obj: Any, *, path: str = DEFAULT_PATH) -> bytes:
        """Encode ``obj`` to uncompressed UTF-8 JSON."""
        writer = _Writer(self.allowed_classes(), setting("CODEC_MAX_DEPTH"))
        try:
            encoded = writer.value(obj, 0)
        except _Refusal as refusal:
            raise refusal.error("store", path) from refusal.__cause__
        except RecursionError:
            raise CheckpointCodecError(
                f"cannot store {path}: nested too deeply for this interpreter's recursion limit"
                " (lower CODEC_MAX_DEPTH)",
                field=path,
            ) from None
        text = json.dumps(
            encoded,
            ensure_ascii=False,
            allow_nan=False,
            check_circular=False,
            separators=(",", ":"),
        )
        try:
            payload = text.encode("utf-8")
        except UnicodeEncodeError:
            # Refused, as on every provider (LangGraph's msgpack would store "?"): escaping
            # it would keep it here but break every reader that expects UTF-8 text.
            where = path + (lone_surrogate_path(obj) or "")
            raise CheckpointCodecError(
                f"cannot store {where}: {LONE_SURROGATE_REASON}", field=where
            ) from None
        refuse_large_value(len(payload), path)
        try:
            refuse_unreadable(payload, as_json=True)
        except UnreadableWhenStored as exc:
            raise CheckpointCodecError(f"cannot store {path}: {exc}", field=path) from None
        return payload

    def loads(self, data: bytes | bytearray | memoryview | str, *, path: str = DEFAULT_PATH) -> Any:
        """Decode uncompressed JSON written by :meth:`dumps`."""
        max_bytes = setting("CODEC_MAX_BYTES")
        reader = _Reader(self.allowed_classes(), setting("CODEC_MAX_DEPTH"))
        try:
            if isinstance(data, (bytes, bytearray, memoryview)):
                raw = bytes(data)
            elif isinstance(data, str):
                raw = data.encode("utf-8")
            else:
                raise _Refusal(f"expected bytes, got {type(data).__name__}")
            if max_bytes is not None and len(raw) > max_bytes:
                raise _Refusal(
                    f"{len(raw)} bytes is over {limit_text('CODEC_MAX_BYTES', max_bytes)}"
                )
            charge_json(raw)  # before the parser builds what the text describes
            parsed = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
            return reader.value(parsed, 0)
        except UnreadableValue:
            raise
        except _Refusal as refusal:
            raise refusal.error("read", path) from refusal.__cause__
        except RecursionError:
            raise CheckpointCodecError(
                f"cannot read {path}: nested too deeply to parse", field=path
            ) from None
        except Exception as exc:
            raise CheckpointCodecError(
                f"cannot read {path}: not valid codec JSON ({type(exc).__name__}: {exc})",
                field=path,
            ) from exc


def _refuse_constant(name: str) -> Any:
    raise _Refusal(f"{name} is not a number JSON can hold")
