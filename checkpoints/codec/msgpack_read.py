"""Reading LangGraph's msgpack without running what the stored bytes name.

LangGraph's serializer turns an ext payload ``(module, name, args)`` into
``getattr(import_module(module), name)(*args)``: whoever can write one row can import any
module and call any callable (``os.system``, ``subprocess.Popen``, ``eval``). The rule here,
in every mode (permissive, strict, with a deployment list):

* Nothing is imported. A class is looked up only in a module this process already holds,
  in the module's own namespace (never through a module ``__getattr__``, which may import).
* Nothing the bytes name is called, except through the fixed table below: our own
  references to the constructors LangGraph itself writes (datetimes, UUIDs, decimals, paths,
  IP addresses, sets, deques, zone infos, patterns, ``Send``).
* A class is rebuilt only when it is a type rebuilt from its data: a pydantic model, a
  dataclass, an enum or a named tuple (LangChain's serializables are pydantic models; the
  graph's schema types are among these). Never an exception, never any other class, unless
  the deployment listed it by name in ``CHECKPOINTS["ALLOWED_MSGPACK_MODULES"]``.
* Strict mode (``LANGGRAPH_STRICT_MSGPACK`` or a deployment list) further needs the class on
  the allowlist: LangGraph's safe types, the deployment's list, the graph's schema types.
* Anything else comes back as its payload (what LangGraph's strict mode hands back), with a
  warning; ``CHECKPOINTS["BLOCKED_TYPES"] = "raise"`` refuses it instead.
* An ext code LangGraph never writes, or a malformed payload, is unreadable: refused, never
  read as ``None``.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import pathlib
import re
import sys
import threading
from collections import deque
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo

import ormsgpack
from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde.types import _DeltaSnapshot
from langgraph.types import Send
from pydantic import BaseModel

logger = logging.getLogger("checkpoints.codec")

# LangGraph's ext codes (langgraph.checkpoint.serde.jsonplus), as stored.
EXT_CONSTRUCTOR_SINGLE_ARG = 0
EXT_CONSTRUCTOR_POS_ARGS = 1
EXT_CONSTRUCTOR_KW_ARGS = 2
EXT_METHOD_SINGLE_ARG = 3
EXT_PYDANTIC_V1 = 4
EXT_PYDANTIC_V2 = 5
EXT_NUMPY_ARRAY = 6
EXT_DELTA_SNAPSHOT = 7

_OPTION = ormsgpack.OPT_NON_STR_KEYS


def _send(*args: Any) -> Send:
    if len(args) == 2:
        return Send(*args)
    node, arg, timeout = args
    return Send(node, arg, timeout=timeout)


# (module, name) -> the constructor we call for it. Each is ours to name: the bytes only
# pick an entry. Only what LangGraph's writer emits for these types.
CONSTRUCTORS: dict[tuple[str, str], Callable[..., Any]] = {
    ("datetime", "datetime"): datetime,
    ("datetime", "date"): date,
    ("datetime", "time"): time,
    ("datetime", "timedelta"): timedelta,
    ("datetime", "timezone"): timezone,
    ("uuid", "UUID"): UUID,
    ("decimal", "Decimal"): Decimal,
    ("builtins", "set"): set,
    ("builtins", "frozenset"): frozenset,
    ("collections", "deque"): deque,
    ("zoneinfo", "ZoneInfo"): ZoneInfo,
    ("re", "compile"): re.compile,
    ("langgraph.types", "Send"): _send,
    **{
        ("ipaddress", name): getattr(ipaddress, name)
        for name in (
            "IPv4Address",
            "IPv4Interface",
            "IPv4Network",
            "IPv6Address",
            "IPv6Interface",
            "IPv6Network",
        )
    },
    **{
        (module, name): getattr(pathlib, name)
        for module in ("pathlib", "pathlib._local")
        for name in ("Path", "PosixPath", "WindowsPath")
    },
}
_METHODS: dict[tuple[str, str, str], Callable[[Any], Any]] = {
    ("datetime", "datetime", "fromisoformat"): datetime.fromisoformat,
}
_PAYLOAD_CODES = frozenset(
    {
        EXT_CONSTRUCTOR_SINGLE_ARG,
        EXT_CONSTRUCTOR_POS_ARGS,
        EXT_CONSTRUCTOR_KW_ARGS,
        EXT_METHOD_SINGLE_ARG,
        EXT_PYDANTIC_V1,
        EXT_PYDANTIC_V2,
    }
)
_WARN_LIMIT = 1000
_warned: set[tuple[str, ...]] = set()
_warned_lock = threading.Lock()


class Unreadable(Exception):
    """Internal: why one ext payload cannot be read (raised once the unpacking ends)."""


def loaded_class(module: str, name: str) -> tuple[type | None, str]:
    """``(the class module.name, "")`` from a module this process already imported, else
    ``(None, why not)``."""
    held = sys.modules.get(module)
    if held is None:
        return None, "its module is not loaded, and reading never imports"
    try:
        found = vars(held).get(name)
    except TypeError:  # a module object without a __dict__
        found = None
    if not isinstance(found, type):
        return None, "not a class"
    return found, ""


def _pydantic_v1_model(cls: type) -> bool:
    v1 = sys.modules.get("pydantic.v1")
    base = getattr(v1, "BaseModel", None) if v1 is not None else None
    return base is not None and issubclass(cls, base)


def rebuilt_from_data(cls: type) -> bool:
    """Whether ``cls`` is a kind of type that is rebuilt from its own data when called."""
    if issubclass(cls, BaseException):
        return False
    return (
        issubclass(cls, (BaseModel, Enum))
        or dataclasses.is_dataclass(cls)
        or (issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple))
        or _pydantic_v1_model(cls)
    )


def warn_blocked(key: tuple[str, ...], why: str) -> None:
    with _warned_lock:
        if key in _warned or len(_warned) >= _WARN_LIMIT:
            return
        _warned.add(key)
    logger.warning(
        "stored value holds %s, which was not rebuilt (%s); its stored data was read instead",
        ".".join(key),
        why,
    )


class SafeExtHook:
    """An ``ext_hook`` for ``ormsgpack.unpackb`` following the module docstring's rule.

    ``allowed`` is the strict allowlist of ``(module, name)`` pairs, or ``True`` for the
    permissive mode. ``listed`` holds the pairs the deployment named itself: those classes
    are rebuilt whatever their kind. One hook per serializer; per-read state lives in
    ``blocked``/``unreadable`` of the thread's current read (see ``reading``).
    """

    def __init__(self, allowed: set[tuple[str, ...]] | bool | None, listed: frozenset) -> None:
        self.allowed = allowed
        self.listed = listed
        self.local = threading.local()

    # Per-read state ------------------------------------------------------------------------
    def begin(self) -> tuple[Any, Any]:
        outer = (getattr(self.local, "blocked", None), getattr(self.local, "unreadable", None))
        self.local.blocked = []
        self.local.unreadable = []
        return outer

    def end(self, outer: tuple[Any, Any]) -> tuple[list, list]:
        found = (self.local.blocked, self.local.unreadable)
        self.local.blocked, self.local.unreadable = outer
        return found

    def _refuse(self, why: str) -> Any:
        unreadable = getattr(self.local, "unreadable", None)
        if unreadable is not None:
            unreadable.append(why)
        raise Unreadable(why)

    def _block(self, key: tuple[str, ...], why: str, payload: Any) -> Any:
        blocked = getattr(self.local, "blocked", None)
        if blocked is not None:
            blocked.append((".".join(key), why))
        warn_blocked(key, why)
        return payload

    # The hook ------------------------------------------------------------------------------
    def __call__(self, code: int, data: bytes) -> Any:
        if code == EXT_DELTA_SNAPSHOT:
            return _DeltaSnapshot(ormsgpack.unpackb(data, ext_hook=self, option=_OPTION))
        if code == EXT_NUMPY_ARRAY:
            return self._numpy(data)
        if code not in _PAYLOAD_CODES:
            return self._refuse(f"msgpack ext code {code!r}, which LangGraph never writes")
        tup = ormsgpack.unpackb(data, ext_hook=self, option=_OPTION)
        size = 4 if code == EXT_METHOD_SINGLE_ARG else 3
        if (
            type(tup) not in (list, tuple)
            or len(tup) < size
            or type(tup[0]) is not str
            or type(tup[1]) is not str
        ):
            return self._refuse(f"msgpack ext code {code} payload is not (module, name, data)")
        module, name, payload = tup[0], tup[1], tup[2]
        if code == EXT_METHOD_SINGLE_ARG:
            method = tup[3]
            call = _METHODS.get((module, name, method)) if type(method) is str else None
            if call is None:
                return self._block((module, name, str(method)), "a method call", payload)
            return self._build((module, name), call, payload, code)
        key = (module, name)
        table = CONSTRUCTORS.get(key)
        if table is not None and code <= EXT_CONSTRUCTOR_KW_ARGS:
            return self._build(key, table, payload, code)
        cls, why = loaded_class(module, name)
        if cls is None:
            return self._block(key, why, payload)
        why = self.refusal(key, cls)
        if why:
            return self._block(key, why, payload)
        if code in (EXT_PYDANTIC_V1, EXT_PYDANTIC_V2):
            return self._model(key, cls, payload)
        return self._build(key, cls, payload, code)

    def refusal(self, key: tuple[str, str], cls: type) -> str:
        """Why ``cls`` (found at ``key``) is not rebuilt, or "" when it is."""
        if key in self.listed:
            return ""
        if not rebuilt_from_data(cls):
            return "not a type rebuilt from its data"
        if self.allowed is not True and key not in lg_msgpack.SAFE_MSGPACK_TYPES:
            if not self.allowed or key not in self.allowed:
                return "not on the msgpack allowlist"
        return ""

    def _build(
        self, key: tuple[str, str], call: Callable[..., Any], payload: Any, code: int
    ) -> Any:
        try:
            if code == EXT_CONSTRUCTOR_POS_ARGS:
                if type(payload) not in (list, tuple):
                    raise TypeError("positional arguments are not a list")
                return call(*payload)
            if code == EXT_CONSTRUCTOR_KW_ARGS:
                if type(payload) is not dict or not all(type(k) is str for k in payload):
                    raise TypeError("keyword arguments are not an object of names")
                return call(**payload)
            return call(payload)
        except Exception as exc:  # noqa: BLE001 - LangGraph hands back the data too
            return self._block(key, f"rebuilding it failed: {type(exc).__name__}", payload)

    def _model(self, key: tuple[str, str], cls: type, payload: Any) -> Any:
        if type(payload) is not dict or not all(type(k) is str for k in payload):
            return self._block(key, "its fields are not an object of names", payload)
        try:
            return cls(**payload)
        except Exception:  # noqa: BLE001 - as LangGraph: the fields as stored, unvalidated
            construct = getattr(cls, "model_construct", None) or cls.construct
            try:
                return construct(**payload)
            except Exception as exc:  # noqa: BLE001
                return self._block(key, f"rebuilding it failed: {type(exc).__name__}", payload)

    def _numpy(self, data: bytes) -> Any:
        meta = ormsgpack.unpackb(data, ext_hook=self, option=_OPTION)
        np = sys.modules.get("numpy")
        if np is None:
            return self._block(("numpy", "ndarray"), "numpy is not loaded", meta)
        try:
            dtype, shape, order, buf = meta
            dtype = np.dtype(dtype)
            if dtype.hasobject:
                raise TypeError("object arrays are not stored data")
            return np.frombuffer(buf, dtype=dtype).reshape(shape, order=order)
        except Exception as exc:  # noqa: BLE001
            return self._refuse(f"bad numpy array payload: {type(exc).__name__}: {exc}")


def unpack(hook: SafeExtHook, data: bytes) -> tuple[Any, list, list]:
    """Unpack ``data`` with ``hook``: (value, blocked types, reasons it is unreadable)."""
    outer = hook.begin()
    failed = None
    try:
        value = ormsgpack.unpackb(data, ext_hook=hook, option=_OPTION)
    except ValueError as exc:  # ormsgpack's "ext_hook failed" hides our reason
        value, failed = None, exc
    finally:
        blocked, unreadable = hook.end(outer)
    if failed is not None and not unreadable:
        raise failed
    return value, blocked, unreadable


class CheckingExtHook(SafeExtHook):
    """`SafeExtHook`'s verdict on every ext payload (unreadable, blocked or rebuilt), with
    nothing rebuilt: what an import that moves a value's stored bytes as they are needs to
    know (`serde.StoreSerializer.check_typed`), at the price of unpacking alone. A class
    whose own constructor would fail on its data is the one verdict it cannot give: such a
    value is read back as its data, warned (or refused under ``BLOCKED_TYPES = "raise"``),
    when it is read, as it would be from the peer's store."""

    def _build(
        self, key: tuple[str, str], call: Callable[..., Any], payload: Any, code: int
    ) -> Any:
        if code == EXT_CONSTRUCTOR_POS_ARGS and type(payload) not in (list, tuple):
            return self._block(key, "rebuilding it failed: TypeError", payload)
        if code == EXT_CONSTRUCTOR_KW_ARGS and (
            type(payload) is not dict or not all(type(k) is str for k in payload)
        ):
            return self._block(key, "rebuilding it failed: TypeError", payload)
        return None

    def _model(self, key: tuple[str, str], cls: type, payload: Any) -> Any:
        if type(payload) is not dict or not all(type(k) is str for k in payload):
            return self._block(key, "its fields are not an object of names", payload)
        return None
