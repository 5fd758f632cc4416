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

Rules this module keeps:

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

import base64
import dataclasses
import functools
import importlib
import json
import re
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import zstandard
from langchain_core.load.load import Reviver
from langchain_core.load.serializable import Serializable
from langgraph.types import Send
from pydantic import BaseModel
from pydantic_core import PydanticUndefined, TzInfo

from checkpoints.conf import setting
from checkpoints.errors import CheckpointCodecError

__all__ = [
    "ENVELOPE_KEY",
    "JSON_TYPE",
    "ZSTD_SUFFIX",
    "CheckpointedException",
    "FaithfulJSONCodec",
    "compress_typed",
    "decompress_typed",
]

ENVELOPE_KEY = "$type"
"""The reserved key that marks a JSON object as a typed envelope."""

JSON_TYPE = "json"
"""The type tag of an uncompressed payload; a compressed one adds ``ZSTD_SUFFIX``."""

ZSTD_SUFFIX = "+zstd"
"""Appended to a type tag when its bytes are zstd-compressed (``json+zstd``, ``msgpack+zstd``)."""

DEFAULT_PATH = "value"

_FROM_SETTINGS: Any = object()  # "not given": read the CHECKPOINTS setting at call time
_MARK = ENVELOPE_KEY
_CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_REPR_LIMIT = 200
_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})
_PLAIN_LEAVES = frozenset({str, bool, type(None)})  # written as-is; ints and floats need checks


class CheckpointedException(Exception):
    """An exception read back from a checkpoint, carrying the record it was stored as.

    The original class is never imported or rebuilt: ``id`` names it (module parts, then the
    class name), ``message`` is its ``str()``, ``kwargs`` its public attributes (an attribute
    that held an exception is itself a ``CheckpointedException``), ``repr_kwargs`` names the
    attributes kept only as their ``repr()``, and ``cause`` is the exception it was raised
    from, or None. Writing one again stores the same record.
    """

    def __init__(
        self,
        id: Sequence[str],
        message: str,
        kwargs: Mapping[str, Any] | None = None,
        repr_kwargs: Iterable[str] = (),
        cause: CheckpointedException | None = None,
    ) -> None:
        super().__init__(message)
        self.id = list(id)
        self.message = message
        self.kwargs = dict(kwargs or {})
        self.repr_kwargs = list(repr_kwargs)
        self.cause = cause
        # Tracebacks then print the stored chain the way Python printed the original.
        self.__cause__ = cause

    @property
    def type_name(self) -> str:
        """The original exception's dotted class name, such as ``builtins.TimeoutError``."""
        return ".".join(self.id)

    @property
    def record(self) -> dict[str, Any]:
        """The readable record: exception-valued attributes and the cause as nested records."""
        return {
            "id": list(self.id),
            "message": self.message,
            "kwargs": {
                name: value.record if isinstance(value, CheckpointedException) else value
                for name, value in self.kwargs.items()
            },
            "repr_kwargs": list(self.repr_kwargs),
            "cause": None if self.cause is None else self.cause.record,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CheckpointedException:
        """Build one from a record shaped like :attr:`record` (the cause is rebuilt too)."""
        cause = record.get("cause")
        return cls(
            record["id"],
            record["message"],
            record.get("kwargs") or {},
            record.get("repr_kwargs") or (),
            None if cause is None else cls.from_record(cause),
        )

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"

    def __repr__(self) -> str:
        return f"CheckpointedException({self.type_name}: {self.message!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CheckpointedException):
            return NotImplemented
        return (
            self.id == other.id
            and self.message == other.message
            and self.kwargs == other.kwargs
            and self.repr_kwargs == other.repr_kwargs
            and self.cause == other.cause
        )

    def __hash__(self) -> int:
        return hash((tuple(self.id), self.message))

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.id, self.message, self.kwargs, self.repr_kwargs, self.cause))


class FaithfulJSONCodec:
    """LangGraph serializer that stores values as JSON and reads back the same types.

    Implements ``SerializerProtocol`` (``dumps_typed``/``loads_typed``) plus untyped
    ``dumps``/``loads``. ``compress_bytes`` overrides ``INLINE_COMPRESS_BYTES`` (None turns
    compression off); the other limits are read from the ``CHECKPOINTS`` setting at each
    call, so ``override_settings`` applies. One instance is safe to share across threads.
    """

    def __init__(self, *, compress_bytes: int | None = _FROM_SETTINGS) -> None:
        self._compress_bytes = compress_bytes

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
        max_bytes = setting("CODEC_MAX_BYTES")
        writer = _Writer(tuple(setting("CODEC_ALLOWED_MODULES")), setting("CODEC_MAX_DEPTH"))
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
            # A string holds a lone surrogate: \u escapes keep it exactly, UTF-8 cannot.
            payload = json.dumps(
                encoded, allow_nan=False, check_circular=False, separators=(",", ":")
            ).encode("ascii")
        if max_bytes is not None and len(payload) > max_bytes:
            raise CheckpointCodecError(
                f"cannot store {path}: it encodes to {len(payload)} bytes, over"
                f" CODEC_MAX_BYTES ({max_bytes})",
                field=path,
            )
        return payload

    def loads(self, data: bytes | bytearray | memoryview | str, *, path: str = DEFAULT_PATH) -> Any:
        """Decode uncompressed JSON written by :meth:`dumps`."""
        max_bytes = setting("CODEC_MAX_BYTES")
        reader = _Reader(tuple(setting("CODEC_ALLOWED_MODULES")), setting("CODEC_MAX_DEPTH"))
        try:
            if isinstance(data, (bytes, bytearray, memoryview)):
                raw = bytes(data)
            elif isinstance(data, str):
                raw = data.encode("utf-8")
            else:
                raise _Refusal(f"expected bytes, got {type(data).__name__}")
            if max_bytes is not None and len(raw) > max_bytes:
                raise _Refusal(f"{len(raw)} bytes is over CODEC_MAX_BYTES ({max_bytes})")
            parsed = json.loads(raw.decode("utf-8"), parse_constant=_refuse_constant)
            return reader.value(parsed, 0)
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


# --- compression shared by every saver ---------------------------------------------------

_local = threading.local()
_READ_CHUNK = 1 << 20


def compress_typed(
    typed: tuple[str, bytes], threshold: int | None = _FROM_SETTINGS
) -> tuple[str, bytes]:
    """Zstd-compress ``(type, data)`` when data is over ``threshold`` bytes, tagging ``+zstd``.

    ``threshold`` defaults to ``INLINE_COMPRESS_BYTES``; None leaves every value as it is, and
    so does a tag that already says it is compressed.
    """
    type_tag, data = typed
    if threshold is _FROM_SETTINGS:
        threshold = setting("INLINE_COMPRESS_BYTES")
    if threshold is None or len(data) <= threshold or type_tag.endswith(ZSTD_SUFFIX):
        return typed
    compressor = getattr(_local, "compressor", None)
    if compressor is None:  # a ZstdCompressor must not be shared between threads
        compressor = _local.compressor = zstandard.ZstdCompressor()
    return type_tag + ZSTD_SUFFIX, compressor.compress(bytes(data))


def decompress_typed(
    typed: tuple[str, bytes], max_bytes: int | None = _FROM_SETTINGS
) -> tuple[str, bytes]:
    """Undo :func:`compress_typed`; values without the ``+zstd`` tag pass through unchanged.

    Output is capped at ``max_bytes`` (default ``CODEC_MAX_BYTES``), so a small hostile frame
    cannot expand without bound; any failure is a ``CheckpointCodecError``.
    """
    type_tag, data = typed
    if not (isinstance(type_tag, str) and type_tag.endswith(ZSTD_SUFFIX)):
        return typed
    if max_bytes is _FROM_SETTINGS:
        max_bytes = setting("CODEC_MAX_BYTES")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointCodecError(f"a {type_tag!r} value must be bytes")
    limit = sys.maxsize if max_bytes is None else max_bytes
    data = bytes(data)
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise CheckpointCodecError(
            f"a {type_tag!r} value is not a valid zstd frame: {exc}"
        ) from exc
    if declared > limit:
        raise CheckpointCodecError(
            f"a {type_tag!r} value expands past CODEC_MAX_BYTES ({max_bytes})"
        )
    if declared >= 0:
        # The frame states its size (ours always do): one call, checked against that size
        # by zstd itself, so the stated size is also the most it can produce.
        try:
            return type_tag[: -len(ZSTD_SUFFIX)], zstandard.ZstdDecompressor().decompress(data)
        except zstandard.ZstdError as exc:
            raise CheckpointCodecError(
                f"a {type_tag!r} value is not a valid zstd frame: {exc}"
            ) from exc
    chunks: list[bytes] = []
    size = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            while True:
                chunk = reader.read(min(_READ_CHUNK, limit - size + 1))
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise CheckpointCodecError(
                        f"a {type_tag!r} value expands past CODEC_MAX_BYTES ({max_bytes})"
                    )
                chunks.append(chunk)
    except zstandard.ZstdError as exc:
        raise CheckpointCodecError(
            f"a {type_tag!r} value is not a valid zstd frame: {exc}"
        ) from exc
    return type_tag[: -len(ZSTD_SUFFIX)], b"".join(chunks)


# --- shared machinery ----------------------------------------------------------------------


class _Refusal(Exception):
    """Internal: why a value cannot be written or read, with the path built on the way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.trail: list[str] = []  # innermost segment first

    def error(self, verb: str, root: str) -> CheckpointCodecError:
        where = root + "".join(reversed(self.trail))
        return CheckpointCodecError(f"cannot {verb} {where}: {self.reason}", field=where)


def _refuse_constant(name: str) -> Any:
    raise _Refusal(f"{name} is not a number JSON can hold")


def _short_repr(value: Any) -> str:
    try:
        text = repr(value)
    except Exception:  # a broken __repr__ must not hide the real error
        text = f"<{type(value).__name__} object>"
    return text if len(text) <= _REPR_LIMIT else text[: _REPR_LIMIT - 3] + "..."


def _key_segment(key: Any) -> str:
    if type(key) is str and key.isidentifier():
        return "." + key
    return f"[{_short_repr(key)}]"


def _module_allowed(module: str, allowed: tuple[str, ...]) -> bool:
    return any(module == prefix or module.startswith(prefix + ".") for prefix in allowed)


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@functools.lru_cache(maxsize=1024)
def _writable_class(cls: type, allowed: tuple[str, ...]) -> tuple[str | None, str | None]:
    """``(class path, None)`` when ``cls`` can be revived later, else ``(None, reason)``."""
    module, qualname = cls.__module__, cls.__qualname__
    if "<locals>" in qualname:
        return None, (
            f"class {_type_name(cls)} is defined inside a function, so it cannot be"
            " imported by module path when read back"
        )
    if not _module_allowed(module, allowed):
        return None, (
            f"class {_type_name(cls)} is in module {module!r}, which is not on"
            " CHECKPOINTS['CODEC_ALLOWED_MODULES'], so it could not be read back"
        )
    found: Any = sys.modules.get(module)
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if found is not cls:
        return None, (
            f"class {_type_name(cls)} is not importable as {module}:{qualname}, so it could"
            " not be read back"
        )
    return f"{module}:{qualname}", None


@functools.lru_cache(maxsize=1024)
def _readable_class(path: str, allowed: tuple[str, ...]) -> type:
    """The class a stored ``module:qualname`` names; the allowlist is checked before import."""
    if not _CLASS_PATH.fullmatch(path):
        raise _Refusal(f"{path!r} is not a class path (module:qualname)")
    module, qualname = path.split(":")
    if not _module_allowed(module, allowed):
        raise _Refusal(
            f"class {path} is in module {module!r}, which is not on"
            " CHECKPOINTS['CODEC_ALLOWED_MODULES']; it was not imported"
        )
    try:
        found: Any = importlib.import_module(module)
    except Exception as exc:
        raise _Refusal(f"cannot import module {module!r} for class {path}: {exc}") from exc
    for part in qualname.split("."):
        found = getattr(found, part, None)
    if not isinstance(found, type):
        raise _Refusal(f"{path} does not name a class")
    # Only a class's own path, as written: a name re-exported into an allowed module
    # must not open a way to classes defined elsewhere.
    if found.__module__ != module or found.__qualname__ != qualname:
        raise _Refusal(f"{path} names {_type_name(found)}, not a class defined there")
    return found


@functools.cache
def _lc_reviver() -> Reviver:
    # LangChain's own loader with its default "core" allowlist: messages, documents,
    # prompts and the other langchain_core classes in its serialization mapping.
    return Reviver(allowed_objects="core")


def _big_int_bits() -> float:
    digits = sys.get_int_max_str_digits()
    # Leave a margin under the interpreter's decimal-conversion limit (0 means no limit).
    return float("inf") if digits == 0 else (digits - 2) * 3.3


# --- writing -----------------------------------------------------------------------------


class _Writer:
    """Turns one value into JSON-ready data, refusing what could not be read back."""

    __slots__ = ("allowed", "max_depth", "big_int_bits")

    def __init__(self, allowed: tuple[str, ...], max_depth: int) -> None:
        self.allowed = allowed
        self.max_depth = max_depth
        self.big_int_bits = _big_int_bits()

    def value(self, v: Any, depth: int) -> Any:
        t = type(v)
        if t is str or t is bool or v is None:
            return v
        if t is int:
            if v.bit_length() <= self.big_int_bits:
                return v
            return {_MARK: "int", "hex": hex(v)}
        if t is float:
            if v - v == 0.0:  # false only for NaN and the infinities
                return v
            raise _Refusal(f"float {v!r} cannot be stored: JSON holds no NaN or infinity")
        if depth >= self.max_depth:
            raise _Refusal(f"nested deeper than CODEC_MAX_DEPTH ({self.max_depth}) levels")
        depth += 1
        if t is list:
            return self.items(v, depth)
        if t is dict:
            return self.mapping(v, depth)
        write = _WRITERS.get(t)
        try:
            if write is not None:
                return write(self, v, depth)
            return self.other(v, depth)
        except (_Refusal, RecursionError):
            raise
        except Exception as exc:
            refusal = _Refusal(f"{_type_name(t)} could not be encoded: {type(exc).__name__}: {exc}")
            raise refusal from exc

    def items(self, values: Iterable[Any], depth: int) -> list[Any]:
        out: list[Any] = []
        append = out.append
        value = self.value
        index = 0
        try:
            for index, item in enumerate(values):  # noqa: B007 - index names a refusal's path
                # JSON's own leaves inline: the common case skips a call per item.
                append(item if type(item) in _PLAIN_LEAVES else value(item, depth))
        except _Refusal as refusal:
            refusal.trail.append(f"[{index}]")
            raise
        return out

    def mapping(self, mapping: dict[Any, Any], depth: int) -> Any:
        if _MARK in mapping:
            return self.pairs(mapping, depth)
        out: dict[str, Any] = {}
        value = self.value
        key: Any = None
        try:
            for key, item in mapping.items():
                if type(key) is not str:
                    break
                out[key] = item if type(item) in _PLAIN_LEAVES else value(item, depth)
            else:
                return out
        except _Refusal as refusal:
            refusal.trail.append(_key_segment(key))
            raise
        return self.pairs(mapping, depth)  # a non-string key: store key/value pairs

    def pairs(self, mapping: dict[Any, Any], depth: int) -> dict[str, Any]:
        out: list[list[Any]] = []
        key: Any = None
        for key, item in mapping.items():
            try:
                encoded_key = self.value(key, depth)
            except _Refusal as refusal:
                refusal.reason = f"dict key cannot be stored: {refusal.reason}"
                refusal.trail.append(f"[{_short_repr(key)}]")
                raise
            try:
                out.append([encoded_key, self.value(item, depth)])
            except _Refusal as refusal:
                refusal.trail.append(_key_segment(key))
                raise
        return {_MARK: "dict", "items": out}

    def fields(self, values: Mapping[str, Any], depth: int) -> Any:
        return self.mapping(dict(values), depth)

    def class_path(self, cls: type) -> str:
        path, reason = _writable_class(cls, self.allowed)
        if path is None:
            raise _Refusal(reason or "class cannot be stored")
        return path

    # Exact types ------------------------------------------------------------------------

    def tuple_(self, v: tuple[Any, ...], depth: int) -> dict[str, Any]:
        return {_MARK: "tuple", "items": self.items(v, depth)}

    def set_(self, v: set[Any], depth: int) -> dict[str, Any]:
        return {_MARK: "set", "items": self.items(v, depth)}

    def frozenset_(self, v: frozenset[Any], depth: int) -> dict[str, Any]:
        return {_MARK: "frozenset", "items": self.items(v, depth)}

    def bytes_(self, v: bytes, depth: int) -> dict[str, Any]:
        return {_MARK: "bytes", "b64": base64.b64encode(v).decode("ascii")}

    def bytearray_(self, v: bytearray, depth: int) -> dict[str, Any]:
        return {_MARK: "bytearray", "b64": base64.b64encode(v).decode("ascii")}

    def decimal(self, v: Decimal, depth: int) -> dict[str, Any]:
        return {_MARK: "decimal", "v": str(v)}

    def uuid(self, v: UUID, depth: int) -> dict[str, Any]:
        return {_MARK: "uuid", "v": str(v)}

    def date(self, v: date, depth: int) -> dict[str, Any]:
        return {_MARK: "date", "v": v.isoformat()}

    def datetime(self, v: datetime, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {_MARK: "datetime", "v": v.replace(tzinfo=None).isoformat()}
        return self.clock(v, out)

    def time(self, v: time, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {_MARK: "time", "v": v.replace(tzinfo=None).isoformat()}
        return self.clock(v, out)

    def clock(self, v: datetime | time, out: dict[str, Any]) -> dict[str, Any]:
        if v.fold:
            out["fold"] = 1
        if v.tzinfo is not None:
            out["tz"] = self.tz(v.tzinfo)
        return out

    def tz(self, tz: tzinfo) -> dict[str, Any]:
        t = type(tz)
        if t is ZoneInfo:
            if tz.key is None:  # type: ignore[attr-defined]
                raise _Refusal(
                    "its ZoneInfo was read from a file and has no key; use ZoneInfo(key) so"
                    " the zone can be found again when read back"
                )
            return {_MARK: "zoneinfo", "key": tz.key}  # type: ignore[attr-defined]
        if t is timezone:
            init_args = tz.__getinitargs__()  # type: ignore[attr-defined]
            return self.fixed_offset(init_args[0], init_args[1] if len(init_args) > 1 else None)
        if t is TzInfo:
            # pydantic's parsed offsets come back as datetime.timezone, same offset and name
            return self.fixed_offset(tz.utcoffset(None), tz.tzname(None))
        raise _Refusal(
            f"tzinfo {_type_name(t)} is neither a fixed offset (datetime.timezone) nor an"
            " IANA zone (zoneinfo.ZoneInfo with a key)"
        )

    def fixed_offset(self, offset: timedelta | None, name: str | None) -> dict[str, Any]:
        if offset is None:
            raise _Refusal("its tzinfo has no UTC offset")
        out: dict[str, Any] = {_MARK: "timezone", "seconds": offset.days * 86400 + offset.seconds}
        if offset.microseconds:
            out["microseconds"] = offset.microseconds
        if name is not None:
            out["name"] = name
        return out

    def tzinfo_(self, v: tzinfo, depth: int) -> dict[str, Any]:
        return self.tz(v)

    def timedelta(self, v: timedelta, depth: int) -> dict[str, Any]:
        return {
            _MARK: "timedelta",
            "days": v.days,
            "seconds": v.seconds,
            "microseconds": v.microseconds,
        }

    def send(self, v: Send, depth: int) -> dict[str, Any]:
        if type(v.node) is not str:
            raise _Refusal(f"Send node {_short_repr(v.node)} is not a string")
        out: dict[str, Any] = {_MARK: "send", "node": v.node}
        try:
            out["arg"] = self.value(v.arg, depth)
        except _Refusal as refusal:
            refusal.trail.append(".arg")
            raise
        timeout = getattr(v, "timeout", None)  # older langgraph versions have no Send timeout
        if timeout is not None:
            out["timeout"] = self.value(timeout, depth)
        return out

    def exception(self, exc: BaseException, depth: int, chain: tuple[int, ...] = ()) -> Any:
        chain = (*chain, id(exc))
        if type(exc) is CheckpointedException:
            ident, message = exc.id, exc.message
            kwargs = self.fields(exc.kwargs, depth)
            repr_kwargs = list(exc.repr_kwargs)
            cause: BaseException | None = exc.cause
        else:
            cls = type(exc)
            ident = [*cls.__module__.split("."), cls.__qualname__]
            try:
                message = str(exc)
            except Exception:
                message = _short_repr(exc)
            attributes: dict[str, Any] = {}
            repr_kwargs = []
            for name, attribute in getattr(exc, "__dict__", {}).items():
                if type(name) is not str or name.startswith("_"):
                    continue
                try:
                    attributes[name] = self.value(attribute, depth)
                except _Refusal:
                    # Kept readable rather than refusing the whole write: errors are evidence.
                    attributes[name] = _short_repr(attribute)
                    repr_kwargs.append(name)
            kwargs: Any = attributes
            if _MARK in attributes:  # an attribute literally named "$type": store as pairs
                kwargs = {_MARK: "dict", "items": [[k, item] for k, item in attributes.items()]}
            # The chain Python's traceback shows: the explicit cause, else the exception
            # being handled when this one was raised (unless `from None` suppressed it).
            cause = exc.__cause__
            if cause is None and not exc.__suppress_context__:
                cause = exc.__context__
        stored_cause = None
        if cause is not None and id(cause) not in chain:
            if depth >= self.max_depth:
                raise _Refusal(f"nested deeper than CODEC_MAX_DEPTH ({self.max_depth}) levels")
            try:
                stored_cause = self.exception(cause, depth + 1, chain)
            except _Refusal as refusal:
                refusal.trail.append(".cause")
                raise
        return {
            _MARK: "exception",
            "id": ident,
            "message": message,
            "kwargs": kwargs,
            "repr_kwargs": repr_kwargs,
            "cause": stored_cause,
        }

    # Classes and everything else ------------------------------------------------------------

    def other(self, v: Any, depth: int) -> Any:
        cls = type(v)
        if isinstance(v, Enum):
            out: dict[str, Any] = {_MARK: "enum", "class": self.class_path(cls)}
            try:
                out["value"] = self.value(v.value, depth)
            except _Refusal as refusal:
                refusal.trail.append(".value")
                raise
            return out
        if isinstance(v, BaseException):
            return self.exception(v, depth)
        if isinstance(v, Serializable):
            return self.langchain(v, depth)
        if isinstance(v, BaseModel):
            return self.model(v, depth)
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            path = self.class_path(cls)
            values = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
            return {_MARK: "dataclass", "class": path, "fields": self.fields(values, depth)}
        if isinstance(v, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
            path = self.class_path(cls)
            return {_MARK: "namedtuple", "class": path, "fields": self.fields(v._asdict(), depth)}
        if isinstance(v, tzinfo):
            return self.tz(v)
        raise _Refusal(f"type {_type_name(cls)} is not one the checkpoint codec can store")

    def model(self, v: BaseModel, depth: int) -> dict[str, Any]:
        cls = type(v)
        path = self.class_path(cls)
        names = cls.model_fields
        values = {name: value for name, value in v.__dict__.items() if name in names}
        out: dict[str, Any] = {_MARK: "model", "class": path, "fields": self.fields(values, depth)}
        fields_set = v.__pydantic_fields_set__
        if fields_set != values.keys():
            out["set"] = sorted(fields_set)
        if v.__pydantic_extra__:
            out["extra"] = self.fields(v.__pydantic_extra__, depth)
        private = v.__pydantic_private__
        if private:
            kept = {k: value for k, value in private.items() if value is not PydanticUndefined}
            if kept:
                out["private"] = self.fields(kept, depth)
        return out

    def langchain(self, v: Serializable, depth: int) -> dict[str, Any]:
        cls = type(v)
        serialized = v.to_json()
        if serialized.get("type") != "constructor":
            raise _Refusal(
                f"LangChain object {_type_name(cls)} is not serializable by LangChain, so its"
                " loader would not revive it"
            )
        key = tuple(serialized["id"])
        reviver = _lc_reviver()
        if reviver.allowed_class_paths is not None and key not in reviver.allowed_class_paths:
            raise _Refusal(
                f"LangChain's loader will not revive {_type_name(cls)} (class id"
                f" {'.'.join(key)} is not among the classes it may load)"
            )
        import_path = reviver.import_mappings.get(key, key)
        if ".".join(import_path[:-1]) != cls.__module__ or import_path[-1] != cls.__name__:
            raise _Refusal(
                f"LangChain's loader would revive {_type_name(cls)} as"
                f" {'.'.join(import_path)}, a different class"
            )
        if not _module_allowed(cls.__module__, self.allowed):
            raise _Refusal(
                f"class {_type_name(cls)} is in module {cls.__module__!r}, which is not on"
                " CHECKPOINTS['CODEC_ALLOWED_MODULES'], so it could not be read back"
            )
        kwargs = serialized["kwargs"]
        for name, value in kwargs.items():
            if isinstance(value, dict) and value.get("lc") == 1 and value.get("type") == "secret":
                raise _Refusal(f"LangChain object {_type_name(cls)} holds a secret in {name!r}")
        if reviver.init_validator is not None:
            try:
                reviver.init_validator(key, kwargs)
            except Exception as exc:
                raise _Refusal(
                    f"LangChain's loader will not revive {_type_name(cls)}: {exc}"
                ) from exc
        return {_MARK: "lc", "id": list(key), "kwargs": self.fields(kwargs, depth)}


_WRITERS: dict[type, Callable[[_Writer, Any, int], Any]] = {
    tuple: _Writer.tuple_,
    set: _Writer.set_,
    frozenset: _Writer.frozenset_,
    bytes: _Writer.bytes_,
    bytearray: _Writer.bytearray_,
    Decimal: _Writer.decimal,
    UUID: _Writer.uuid,
    date: _Writer.date,
    datetime: _Writer.datetime,
    time: _Writer.time,
    timedelta: _Writer.timedelta,
    timezone: _Writer.tzinfo_,
    ZoneInfo: _Writer.tzinfo_,
    TzInfo: _Writer.tzinfo_,
    Send: _Writer.send,
    CheckpointedException: _Writer.exception,
}


# --- reading -----------------------------------------------------------------------------


def _need(env: dict[str, Any], key: str, kind: type) -> Any:
    value = env.get(key)
    if isinstance(value, kind) and not (kind is int and type(value) is bool):
        return value
    raise _Refusal(
        f"{env[_MARK]!r} envelope needs {key!r} as {kind.__name__}, found {_short_repr(value)}"
    )


def _string_list(env: dict[str, Any], key: str) -> list[str]:
    value = _need(env, key, list)
    if not all(type(item) is str for item in value):
        raise _Refusal(f"{env[_MARK]!r} envelope needs {key!r} as a list of strings")
    return value


class _Reader:
    """Turns parsed JSON back into the values that were written, refusing anything else."""

    __slots__ = ("allowed", "max_depth")

    def __init__(self, allowed: tuple[str, ...], max_depth: int) -> None:
        self.allowed = allowed
        self.max_depth = max_depth

    def value(self, v: Any, depth: int) -> Any:
        t = type(v)
        if t in _JSON_LEAVES:
            return v
        if depth >= self.max_depth:
            raise _Refusal(f"nested deeper than CODEC_MAX_DEPTH ({self.max_depth}) levels")
        depth += 1
        if t is list:
            return self.items(v, depth)
        tag = v.get(_MARK)
        if tag is None and _MARK not in v:
            # A plain object: revive its envelopes in place (json.loads built it for us).
            value = self.value
            key = None
            try:
                for key, item in v.items():
                    if type(item) not in _JSON_LEAVES:
                        v[key] = value(item, depth)
            except _Refusal as refusal:
                refusal.trail.append(_key_segment(key))
                raise
            return v
        read = _READERS.get(tag) if type(tag) is str else None
        if read is None:
            raise _Refusal(f"unknown envelope type {_short_repr(tag)}")
        try:
            return read(self, v, depth)
        except (_Refusal, RecursionError):
            raise
        except ZoneInfoNotFoundError as exc:
            raise _Refusal(
                f"time zone {v.get('key')!r} is not in this host's zone database"
            ) from exc
        except Exception as exc:
            raise _Refusal(f"bad {tag!r} envelope: {type(exc).__name__}: {exc}") from exc

    def items(self, values: list[Any], depth: int) -> list[Any]:
        value = self.value
        index = 0
        try:
            for index, item in enumerate(values):
                if type(item) not in _JSON_LEAVES:
                    values[index] = value(item, depth)
        except _Refusal as refusal:
            refusal.trail.append(f"[{index}]")
            raise
        return values

    def field(self, env: dict[str, Any], key: str, depth: int) -> Any:
        try:
            return self.value(env.get(key), depth)
        except _Refusal as refusal:
            refusal.trail.append(_key_segment(key))
            raise

    def fields(self, env: dict[str, Any], key: str, depth: int) -> dict[str, Any]:
        values = self.field(env, key, depth)
        if type(values) is not dict or not all(type(name) is str for name in values):
            raise _Refusal(f"{env[_MARK]!r} envelope needs {key!r} as an object of named values")
        return values

    def cls(self, env: dict[str, Any]) -> type:
        return _readable_class(_need(env, "class", str), self.allowed)

    # Envelopes -------------------------------------------------------------------------------

    def int_(self, env: dict[str, Any], depth: int) -> int:
        return int(_need(env, "hex", str), 16)

    def bytes_(self, env: dict[str, Any], depth: int) -> bytes:
        return base64.b64decode(_need(env, "b64", str), validate=True)

    def bytearray_(self, env: dict[str, Any], depth: int) -> bytearray:
        return bytearray(self.bytes_(env, depth))

    def sequence(self, env: dict[str, Any], depth: int) -> list[Any]:
        return self.items(_need(env, "items", list), depth)

    def tuple_(self, env: dict[str, Any], depth: int) -> tuple[Any, ...]:
        return tuple(self.sequence(env, depth))

    def set_(self, env: dict[str, Any], depth: int) -> set[Any]:
        return set(self.sequence(env, depth))

    def frozenset_(self, env: dict[str, Any], depth: int) -> frozenset[Any]:
        return frozenset(self.sequence(env, depth))

    def dict_(self, env: dict[str, Any], depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for index, pair in enumerate(_need(env, "items", list)):
            if type(pair) is not list or len(pair) != 2:
                raise _Refusal(f"'dict' envelope item {index} is not a [key, value] pair")
            try:
                key = self.value(pair[0], depth)
            except _Refusal as refusal:
                refusal.trail.append(f"[key {index}]")
                raise
            try:
                out[key] = self.value(pair[1], depth)
            except _Refusal as refusal:
                refusal.trail.append(_key_segment(key))
                raise
        return out

    def decimal(self, env: dict[str, Any], depth: int) -> Decimal:
        return Decimal(_need(env, "v", str))

    def uuid(self, env: dict[str, Any], depth: int) -> UUID:
        return UUID(_need(env, "v", str))

    def date(self, env: dict[str, Any], depth: int) -> date:
        return date.fromisoformat(_need(env, "v", str))

    def datetime(self, env: dict[str, Any], depth: int) -> datetime:
        return self.clock(env, datetime.fromisoformat(_need(env, "v", str)), depth)

    def time(self, env: dict[str, Any], depth: int) -> time:
        return self.clock(env, time.fromisoformat(_need(env, "v", str)), depth)

    def clock(self, env: dict[str, Any], value: Any, depth: int) -> Any:
        if value.tzinfo is not None:
            raise _Refusal(f"{env[_MARK]!r} envelope holds an offset in its wall-clock value")
        fold = env.get("fold", 0)
        if fold not in (0, 1) or type(fold) is not int:
            raise _Refusal(f"{env[_MARK]!r} envelope has fold {_short_repr(fold)}, not 0 or 1")
        tz = None
        if env.get("tz") is not None:
            tz = self.field(env, "tz", depth)
            if type(tz) not in (timezone, ZoneInfo):
                raise _Refusal(f"{env[_MARK]!r} envelope's tz is not a time zone")
        return value.replace(tzinfo=tz, fold=fold)

    def timedelta(self, env: dict[str, Any], depth: int) -> timedelta:
        return timedelta(
            days=_need(env, "days", int),
            seconds=_need(env, "seconds", int),
            microseconds=_need(env, "microseconds", int),
        )

    def timezone(self, env: dict[str, Any], depth: int) -> timezone:
        offset = timedelta(
            seconds=_need(env, "seconds", int),
            microseconds=_need(env, "microseconds", int) if "microseconds" in env else 0,
        )
        if "name" in env:
            return timezone(offset, _need(env, "name", str))
        return timezone(offset)

    def zoneinfo(self, env: dict[str, Any], depth: int) -> ZoneInfo:
        return ZoneInfo(_need(env, "key", str))

    def enum(self, env: dict[str, Any], depth: int) -> Enum:
        cls = self.cls(env)
        if not issubclass(cls, Enum):
            raise _Refusal(f"{env['class']} is not an enum")
        return cls(self.field(env, "value", depth))

    def model(self, env: dict[str, Any], depth: int) -> BaseModel:
        cls = self.cls(env)
        if not issubclass(cls, BaseModel) or issubclass(cls, Serializable):
            # LangChain objects come back only through LangChain's loader ("lc").
            raise _Refusal(f"{env['class']} is not a pydantic model this codec revives")
        stored = self.fields(env, "fields", depth)
        declared = cls.model_fields
        values: dict[str, Any] = {}
        for name, info in declared.items():
            if name in stored:
                values[name] = stored[name]
            elif info.is_required():
                raise _Refusal(f"stored {env['class']} lacks its required field {name!r}")
            else:  # a field added since the value was written
                values[name] = info.get_default(call_default_factory=True, validated_data=values)
        unknown = stored.keys() - declared.keys()
        if unknown:
            raise _Refusal(f"{env['class']} has no field {sorted(unknown)[0]!r}")
        fields_set = set(_string_list(env, "set")) if "set" in env else set(stored)
        extra = None
        if cls.model_config.get("extra") == "allow":
            extra = self.fields(env, "extra", depth) if "extra" in env else {}
        private = None
        if cls.__private_attributes__:
            private = self.fields(env, "private", depth) if "private" in env else {}
        # Restore the instance's state as pydantic's own copy and unpickling do: no
        # validators or model_post_init run on stored data.
        model = cls.__new__(cls)
        object.__setattr__(model, "__dict__", values)
        object.__setattr__(model, "__pydantic_fields_set__", fields_set)
        object.__setattr__(model, "__pydantic_extra__", extra)
        object.__setattr__(model, "__pydantic_private__", private)
        return model

    def dataclass(self, env: dict[str, Any], depth: int) -> Any:
        cls = self.cls(env)
        if not dataclasses.is_dataclass(cls):
            raise _Refusal(f"{env['class']} is not a dataclass")
        stored = self.fields(env, "fields", depth)
        declared = {f.name: f for f in dataclasses.fields(cls)}
        unknown = stored.keys() - declared.keys()
        if unknown:
            raise _Refusal(f"{env['class']} has no field {sorted(unknown)[0]!r}")
        instance = cls.__new__(cls)
        for name, spec in declared.items():
            if name in stored:
                value = stored[name]
            elif spec.default is not dataclasses.MISSING:
                value = spec.default
            elif spec.default_factory is not dataclasses.MISSING:
                value = spec.default_factory()
            else:
                raise _Refusal(f"stored {env['class']} lacks its field {name!r}")
            # object.__setattr__ also fills frozen and slotted dataclasses, without __init__.
            object.__setattr__(instance, name, value)
        return instance

    def namedtuple(self, env: dict[str, Any], depth: int) -> tuple[Any, ...]:
        cls = self.cls(env)
        names = getattr(cls, "_fields", None)
        if not issubclass(cls, tuple) or not isinstance(names, tuple):
            raise _Refusal(f"{env['class']} is not a named tuple")
        stored = self.fields(env, "fields", depth)
        unknown = stored.keys() - set(names)
        if unknown:
            raise _Refusal(f"{env['class']} has no field {sorted(unknown)[0]!r}")
        defaults = cls._field_defaults  # type: ignore[attr-defined]
        values = []
        for name in names:
            if name in stored:
                values.append(stored[name])
            elif name in defaults:
                values.append(defaults[name])
            else:
                raise _Refusal(f"stored {env['class']} lacks its field {name!r}")
        return tuple.__new__(cls, values)

    def send(self, env: dict[str, Any], depth: int) -> Send:
        node, arg = _need(env, "node", str), self.field(env, "arg", depth)
        if env.get("timeout") is None:
            return Send(node, arg)
        return Send(node, arg, timeout=self.field(env, "timeout", depth))

    def langchain(self, env: dict[str, Any], depth: int) -> Serializable:
        key = tuple(_string_list(env, "id"))
        reviver = _lc_reviver()
        if not key or (
            reviver.allowed_class_paths is not None and key not in reviver.allowed_class_paths
        ):
            raise _Refusal(f"LangChain's loader does not revive {'.'.join(key)!r}")
        module = ".".join(reviver.import_mappings.get(key, key)[:-1])
        if not _module_allowed(module, self.allowed):
            raise _Refusal(
                f"LangChain class {'.'.join(key)} is in module {module!r}, which is not on"
                " CHECKPOINTS['CODEC_ALLOWED_MODULES']; it was not imported"
            )
        kwargs = self.fields(env, "kwargs", depth)
        # The reviver checks the id and kwargs again, then builds the object; kwargs are
        # already Python values, so nothing in them is interpreted as LangChain markup.
        revived = reviver({"lc": 1, "type": "constructor", "id": list(key), "kwargs": kwargs})
        if not isinstance(revived, Serializable):
            raise _Refusal(f"LangChain's loader did not revive {'.'.join(key)}")
        return revived

    def exception(self, env: dict[str, Any], depth: int) -> CheckpointedException:
        ident = _string_list(env, "id")
        if not ident:
            raise _Refusal("'exception' envelope has an empty id")
        cause = None
        if env.get("cause") is not None:
            cause = self.field(env, "cause", depth)
            if type(cause) is not CheckpointedException:
                raise _Refusal("'exception' envelope's cause is not an exception record")
        return CheckpointedException(
            ident,
            _need(env, "message", str),
            self.fields(env, "kwargs", depth),
            _string_list(env, "repr_kwargs"),
            cause,
        )


_READERS: dict[str, Callable[[_Reader, dict[str, Any], int], Any]] = {
    "int": _Reader.int_,
    "bytes": _Reader.bytes_,
    "bytearray": _Reader.bytearray_,
    "tuple": _Reader.tuple_,
    "set": _Reader.set_,
    "frozenset": _Reader.frozenset_,
    "dict": _Reader.dict_,
    "decimal": _Reader.decimal,
    "uuid": _Reader.uuid,
    "date": _Reader.date,
    "datetime": _Reader.datetime,
    "time": _Reader.time,
    "timedelta": _Reader.timedelta,
    "timezone": _Reader.timezone,
    "zoneinfo": _Reader.zoneinfo,
    "enum": _Reader.enum,
    "model": _Reader.model,
    "dataclass": _Reader.dataclass,
    "namedtuple": _Reader.namedtuple,
    "send": _Reader.send,
    "lc": _Reader.langchain,
    "exception": _Reader.exception,
}
