"""Writing: turn one value into JSON-ready data, refusing what could not be read back."""

from __future__ import annotations

import base64
import dataclasses
import functools
import logging
import sys
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Mapping
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

from langchain_core.load.serializable import Serializable
from langgraph.types import Send
from pydantic import BaseModel
from pydantic_core import PydanticUndefined, TzInfo

from checkpoints.codec.envelope import (
    _MARK,
    _NOT_ALLOWED,
    PERMISSIVE,
    _class_allowed,
    _key_segment,
    _lc_reviver,
    _Refusal,
    _short_repr,
    _type_name,
    _writable_class,
)
from checkpoints.codec.exception import CheckpointedException

_PLAIN_LEAVES = frozenset({str, bool, type(None)})  # written as-is; ints and floats need checks

logger = logging.getLogger(__name__)


def _big_int_bits() -> float:
    digits = sys.get_int_max_str_digits()
    # Leave a margin under the interpreter's decimal-conversion limit (0 means no limit).
    return float("inf") if digits == 0 else (digits - 2) * 3.3


def _exact_repr(exc: BaseException) -> str | None:
    try:
        text = repr(exc)
    except Exception:  # a broken __repr__: the derived form stands in
        return None
    return text if type(text) is str else None


# --- writing -----------------------------------------------------------------------------


class _Writer:
    """Turns one value into JSON-ready data, refusing what could not be read back."""

    __slots__ = ("allowed", "max_depth", "big_int_bits")

    def __init__(self, allowed: tuple[str, ...] | None, max_depth: int) -> None:
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

    def plain_dict(self, v: dict[Any, Any], depth: int) -> Any:
        # OrderedDict and defaultdict read back as a plain dict (same items, same order),
        # as InMemorySaver returns them; their factory and ordering methods are not state.
        return self.mapping(dict(v), depth)

    def tuple_(self, v: tuple[Any, ...], depth: int) -> dict[str, Any]:
        return {_MARK: "tuple", "items": self.items(v, depth)}

    def set_(self, v: set[Any], depth: int) -> dict[str, Any]:
        return {_MARK: "set", "items": self.items(_in_order(v), depth)}

    def frozenset_(self, v: frozenset[Any], depth: int) -> dict[str, Any]:
        return {_MARK: "frozenset", "items": self.items(_in_order(v), depth)}

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
            repr_text = exc.repr_text
        else:
            cls = type(exc)
            ident = [*cls.__module__.split("."), cls.__qualname__]
            try:
                message = str(exc)
            except Exception:
                message = _short_repr(exc)
            # LangGraph reads task errors as this text; kept only when not derivable.
            repr_text = _exact_repr(exc)
            if repr_text == CheckpointedException.derived_repr(cls.__name__, message):
                repr_text = None
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
        out = {
            _MARK: "exception",
            "id": ident,
            "message": message,
            "kwargs": kwargs,
            "repr_kwargs": repr_kwargs,
            "cause": stored_cause,
        }
        if repr_text is not None:
            out["repr"] = repr_text
        return out

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
        if isinstance(v, str):
            # A str subclass (langchain-core's message.text is one) is stored as its text, as
            # LangGraph's own serializer does: state that wrote `message.text` must work.
            return str.__str__(v)
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
        if (
            "<locals>" in cls.__qualname__
            and self.allowed is not None
            and PERMISSIVE in self.allowed
        ):
            # No process can import a class defined inside a function. LangGraph's own
            # (permissive) serializer reads such a model back as its fields, and a graph's
            # state schema validates them into the model again; do the same, and say so once
            # per class. Strict mode refuses it, naming it (class_path below).
            _warn_local_model(cls)
            return self.fields(v.model_dump(mode="python", round_trip=True), depth)
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
        if not _class_allowed(cls.__module__, cls.__name__, self.allowed):
            raise _Refusal(
                f"class {_type_name(cls)} is in module {cls.__module__!r}, {_NOT_ALLOWED},"
                " so it could not be read back"
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
    OrderedDict: _Writer.plain_dict,
    defaultdict: _Writer.plain_dict,
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


@functools.lru_cache(maxsize=256)
def _warn_local_model(cls: type) -> None:
    logger.warning(
        "pydantic model %s.%s is defined inside a function: it is stored as its fields (a "
        "dict), as LangGraph's serializer reads it back; define it at module level to get "
        "the model back",
        cls.__module__,
        cls.__qualname__,
    )


def _in_order(items: set[Any] | frozenset[Any]) -> Iterable[Any]:
    """A set's items sorted where they sort: a set of str iterates in an order set by the
    process's salted str hashes, so the same set stored by two processes (a worker's put
    through the service and one in process) would otherwise be different bytes. Items of
    kinds that do not compare keep the set's own order."""
    try:
        return sorted(items)
    except TypeError:
        return items
