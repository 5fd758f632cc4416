"""Reading: turn parsed JSON back into the values that were written, refusing anything else."""

from __future__ import annotations

import base64
import dataclasses
import sys
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from langchain_core.load.serializable import Serializable
from langgraph.types import Send
from pydantic import BaseModel

from checkpoints.codec.envelope import (
    _MARK,
    _NOT_ALLOWED,
    _class_allowed,
    _key_segment,
    _lc_reviver,
    _readable_class,
    _Refusal,
    _short_repr,
)
from checkpoints.codec.exception import CheckpointedException

_JSON_LEAVES = frozenset({str, int, float, bool, type(None)})


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

    def __init__(self, allowed: tuple[str, ...] | None, max_depth: int) -> None:
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
        import_path = reviver.import_mappings.get(key, key)
        module = ".".join(import_path[:-1])
        if not _class_allowed(module, import_path[-1], self.allowed):
            raise _Refusal(
                f"LangChain class {'.'.join(key)} is in module {module!r}, {_NOT_ALLOWED};"
                " it was not imported"
            )
        if module not in sys.modules:
            # LangChain's loader imports the class's module; reading never imports.
            raise _Refusal(
                f"LangChain class {'.'.join(key)} is in module {module!r}, which this process"
                " has not imported; reading never imports"
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
            _need(env, "repr", str) if env.get("repr") is not None else None,
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
