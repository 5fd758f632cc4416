"""The serializer the ORM and memory savers use: LangGraph's own, built as its savers build it.

``JsonPlusSerializer`` with LangGraph's default allowlist: permissive (every type
InMemorySaver round-trips comes back as itself) unless ``LANGGRAPH_STRICT_MSGPACK`` is set,
in which case only LangGraph's safe types plus the graph's schema types (which LangGraph
adds through ``with_allowlist`` when it compiles the graph) are revived.
``CHECKPOINTS["ALLOWED_MSGPACK_MODULES"]`` overrides that choice for a deployment: a list of
``"module.Class"`` names (or ``[module, Class]`` pairs) makes the serializer strict with
those types allowed, ``True`` makes it permissive whatever the environment says.

Reading never imports a module and never calls what the stored bytes name, in every one
of those modes: ``checkpoints.codec.msgpack_read`` states the rule. A type it does not
rebuild comes back as its stored data with a warning, as LangGraph's strict mode hands it
back; ``CHECKPOINTS["BLOCKED_TYPES"] = "raise"`` refuses it as :class:`BlockedTypeError`
naming the type instead.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from ormsgpack import OPT_NON_STR_KEYS, unpackb

from checkpoints.codec import msgpack_read
from checkpoints.codec.budget import charge_json, charge_msgpack, refuse_unreadable, setting
from checkpoints.codec.envelope import (
    _lc_reviver,
    lone_surrogate_path,
    lone_surrogate_refusal,
    may_hold_lone_surrogate,
    strict_msgpack,
)
from checkpoints.codec.msgpack_read import CheckingExtHook, SafeExtHook, unpack
from checkpoints.errors import CheckpointConfigError, UnreadableValue

_FROM_SETTINGS: Any = object()  # "not given": this process's CHECKPOINTS settings


class BlockedTypeError(UnreadableValue):
    """A stored value holds a type the msgpack allowlist does not let LangGraph revive."""

    code = "blocked_type"


class LoneSurrogateError(ValueError):
    """A string to store holds a lone surrogate, which has no UTF-8 form."""


def configured_msgpack_allowlist(configured: Any = _FROM_SETTINGS) -> Any:
    """The allowlist for a new serializer: LangGraph's default unless the deployment set one
    (``configured``: an ``ALLOWED_MSGPACK_MODULES`` value; by default this process's)."""
    if configured is _FROM_SETTINGS:
        configured = setting("ALLOWED_MSGPACK_MODULES")
    if configured is None:
        return True if not lg_msgpack.STRICT_MSGPACK_ENABLED else None
    if configured is True:
        return True
    if isinstance(configured, (str, bytes)) or not isinstance(configured, Iterable):
        raise CheckpointConfigError(
            "CHECKPOINTS['ALLOWED_MSGPACK_MODULES'] must be None, True or a list of "
            f"'module.Class' names, got {configured!r}",
            field="ALLOWED_MSGPACK_MODULES",
        )
    return tuple(_entry(item) for item in configured)


def _entry(item: Any) -> tuple[str, ...]:
    if isinstance(item, str) and "." in item.strip("."):
        module, _, name = item.rpartition(".")
        return (module, name)
    if isinstance(item, (list, tuple)) and len(item) >= 2 and all(isinstance(p, str) for p in item):
        return tuple(item)
    raise CheckpointConfigError(
        f"CHECKPOINTS['ALLOWED_MSGPACK_MODULES'] entry {item!r} is neither 'module.Class' "
        "nor a [module, Class] pair",
        field="ALLOWED_MSGPACK_MODULES",
    )


_lg_dumps_typed = JsonPlusSerializer.dumps_typed


class Verbatim:
    """A value read from another store as its stored msgpack, to be stored as it is.

    LangGraph's savers and ours write a value as the same ``("msgpack", bytes)``, so an
    import that decoded each value only to encode it again would spend its time making
    the bytes it started from (and reviving every model in them). A reader hands this out
    instead, once `StoreSerializer.check_typed` has passed the bytes (what a read of them
    would refuse is refused there); `StoreSerializer.dumps_typed` returns the bytes, and the
    saver then holds them to its size limits, compresses and seals them as any value. Only
    for a saver that encodes each value on its own (`Capabilities.stores_values_verbatim`):
    one that encodes a whole body at once would meet this object inside it.
    """

    __slots__ = ("typed",)

    def __init__(self, typed: tuple[str, bytes]) -> None:
        self.typed = typed

    def __repr__(self) -> str:
        return f"Verbatim({self.typed[0]!r}, {len(self.typed[1])} bytes)"


class StoreSerializer(JsonPlusSerializer):
    """LangGraph's serializer (never pickle) whose reading never imports or calls what the
    bytes name (``checkpoints.codec.msgpack_read`` states the rule)."""

    def __init__(
        self,
        *,
        allowed_msgpack_modules: Any = lg_msgpack._SENTINEL,
        policy: Mapping[str, Any] | None = None,
    ) -> None:
        """``policy``: the CHECKPOINTS values the reader follows (``ALLOWED_MSGPACK_MODULES``,
        ``BLOCKED_TYPES``, ``CODEC_MAX_BYTES``, ``MAX_CHECKPOINT_BYTES``) when they are not
        this process's settings: the remote saver's, as its service answers them."""
        listed: frozenset = frozenset()
        if allowed_msgpack_modules is lg_msgpack._SENTINEL:
            allowed_msgpack_modules = configured_msgpack_allowlist(
                policy["ALLOWED_MSGPACK_MODULES"] if policy is not None else _FROM_SETTINGS
            )
            if isinstance(allowed_msgpack_modules, tuple):
                listed = frozenset(allowed_msgpack_modules)
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=allowed_msgpack_modules)
        self._listed = listed
        self._blocked_raise = blocked_types_raise(
            policy["BLOCKED_TYPES"] if policy is not None else _FROM_SETTINGS
        )
        # None: the object budget's limits are this process's settings (`budget.Limits`).
        self._limits = (
            None
            if policy is None
            else {k: policy[k] for k in ("CODEC_MAX_BYTES", "MAX_CHECKPOINT_BYTES")}
        )
        self._safe_hook()

    def _safe_hook(self) -> None:
        self._unpack_ext_hook = SafeExtHook(self._allowed_msgpack_modules, self._listed)
        self._check_ext_hook = CheckingExtHook(self._allowed_msgpack_modules, self._listed)

    def with_msgpack_allowlist(self, extra_allowlist: Any) -> StoreSerializer:
        clone = super().with_msgpack_allowlist(extra_allowlist)
        if clone is not self:
            clone._safe_hook()
        return clone

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if type(obj) is Verbatim:
            return obj.typed  # checked when it was read (`check_typed`)
        typed = self._dumps_typed(obj)
        if typed[0] == "msgpack":
            refuse_unreadable(typed[1], limits=self._limits)
        return typed

    def _dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj is not None and not isinstance(obj, (bytes, bytearray)):
            try:
                # LangGraph's own bytes for most values, with no "?" left to look into.
                return "msgpack", strict_msgpack(obj)
            except Exception as exc:  # noqa: BLE001 - another type, or a surrogate
                if "surrogates" in str(exc):
                    # The encoder met one itself: refused, wherever the walk can name it.
                    self._refuse_lone_surrogate(obj, certain=True)
        try:
            # Named, not super(): this runs for every value stored.
            typed = _lg_dumps_typed(self, obj)
        except TypeError as exc:  # ormsgpack refuses one in a dict key outright
            if "surrogates" in str(exc):
                self._refuse_lone_surrogate(obj, certain=True)
            raise
        # LangGraph's msgpack replaces a lone surrogate with "?"; only then look for one,
        # and walk to name it only when the probe says there may be one (most "?" are text).
        if typed[0] == "msgpack" and b"?" in typed[1] and may_hold_lone_surrogate(obj):
            self._refuse_lone_surrogate(obj)
        return typed

    @staticmethod
    def _refuse_lone_surrogate(obj: Any, *, certain: bool = False) -> None:
        where = lone_surrogate_path(obj)
        if where is not None or certain:
            # A ValueError the saver wraps with the channel it was writing.
            raise LoneSurrogateError(lone_surrogate_refusal(where))

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        type_, data_ = data
        if type_ == "msgpack":
            return self._unpacked(data_)
        if type_ == "json":
            return self._json(data_)
        return super().loads_typed(data)

    def check_typed(self, data: tuple[str, bytes]) -> None:
        """Refuse msgpack ``data`` as `loads_typed` would (unreadable, a blocked type under
        ``BLOCKED_TYPES = "raise"``, past the object budget), rebuilding nothing
        (`msgpack_read.CheckingExtHook`): the check before a `Verbatim` is handed out."""
        type_, data_ = data
        if type_ != "msgpack":
            raise ValueError(f"only msgpack is checked without being read, not {type_!r}")
        self._unpacked(data_, self._check_ext_hook)

    def _unpacked(self, data: bytes, hook: SafeExtHook | None = None) -> Any:
        charge_msgpack(data, self._limits)
        value, blocked, unreadable = unpack(hook or self._unpack_ext_hook, data)
        if unreadable:
            raise UnreadableValue(f"stored value holds {unreadable[0]}")
        if blocked and self._blocked_raise:
            names = sorted({name for name, _ in blocked})
            raise BlockedTypeError(
                f"stored value holds {', '.join(names)}, which was not rebuilt "
                f"({blocked[0][1]}); add it to CHECKPOINTS['ALLOWED_MSGPACK_MODULES'] (or to "
                "the graph's state schema, and import its module) to read it back, or set "
                "CHECKPOINTS['BLOCKED_TYPES'] = 'warn' to read its stored data",
                field=names[0],
            )
        return value

    def _json(self, data: bytes) -> Any:
        # LangGraph's pre-msgpack format: LangChain envelopes revived by the same rule.
        charge_json(data, self._limits)
        try:
            return json.loads(data, object_hook=self._revive_json)
        except _JsonRefusal as refusal:
            raise UnreadableValue(f"stored value holds {refusal}") from None

    def _revive_json(self, value: dict[str, Any]) -> Any:
        ident = value.get("id")
        if value.get("type") != "constructor" or type(ident) is not list or len(ident) < 2:
            return value
        if not all(type(part) is str for part in ident):
            return value
        args, kwargs = value.get("args") or [], value.get("kwargs") or {}
        if type(args) is not list or type(kwargs) is not dict:
            raise _JsonRefusal(f"a {'.'.join(ident)} envelope whose arguments are malformed")
        if value.get("lc") == 1:
            return self._revive_lc1(ident, kwargs, value)
        if value.get("lc") != 2:
            return value
        module, name = ".".join(ident[:-1]), ident[-1]
        key = (module, name)
        table = msgpack_read.CONSTRUCTORS.get(key)
        cls, why = (table, "") if table is not None else msgpack_read.loaded_class(module, name)
        if cls is not None and table is None:
            why = self._unpack_ext_hook.refusal(key, cls)
        if cls is not None and not why:
            try:
                return cls(*args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - hand back the data, as below
                why = f"rebuilding it failed: {type(exc).__name__}"
        return self._blocked_json(".".join(ident), why, kwargs or args)

    def _revive_lc1(self, ident: list[str], kwargs: dict, value: dict) -> Any:
        reviver = _lc_reviver()
        key = tuple(ident)
        path = reviver.import_mappings.get(key, key)
        module = ".".join(path[:-1])
        if reviver.allowed_class_paths is not None and key not in reviver.allowed_class_paths:
            return self._blocked_json(".".join(ident), "not a LangChain core class", kwargs)
        if module not in sys.modules:
            return self._blocked_json(
                ".".join(ident), "its module is not loaded, and reading never imports", kwargs
            )
        try:
            return reviver(value)
        except Exception as exc:  # noqa: BLE001
            return self._blocked_json(
                ".".join(ident), f"rebuilding it failed: {type(exc).__name__}", kwargs
            )

    def _blocked_json(self, name: str, why: str, payload: Any) -> Any:
        if self._blocked_raise:
            raise BlockedTypeError(f"stored value holds {name}, which was not rebuilt ({why})")
        msgpack_read.warn_blocked(tuple(name.split(".")), why)
        return payload

    def loads_many(self, typed: list[tuple[str, bytes]]) -> list[Any]:
        """Plain values (no seal, no frame) read in one go, for a checkpoint's channels.

        Raises on the first problem without naming it: callers read the values again one
        by one (``loads_typed`` through ``decode_at``) to say which value failed and why.
        """
        hook = self._unpack_ext_hook
        outer = hook.begin()
        try:
            values = [
                self._unpack_charged(hook, data, self._limits)
                if type_ == "msgpack"
                else self.loads_typed((type_, data))
                for type_, data in typed
            ]
        finally:
            blocked, unreadable = hook.end(outer)
        if unreadable or (blocked and self._blocked_raise):
            raise UnreadableValue("a stored value cannot be read as it was written")
        return values

    @staticmethod
    def _unpack_charged(hook: SafeExtHook, data: bytes, limits: Any) -> Any:
        charge_msgpack(data, limits)
        return unpackb(data, ext_hook=hook, option=OPT_NON_STR_KEYS)


class _JsonRefusal(Exception):
    """Internal: a LangChain envelope in a "json" value that cannot be read at all."""


def blocked_types_raise(mode: Any = _FROM_SETTINGS) -> bool:
    """Whether a type the reader does not rebuild is refused (else: its data, warned);
    ``mode``: a ``BLOCKED_TYPES`` value, by default this process's."""
    if mode is _FROM_SETTINGS:
        mode = setting("BLOCKED_TYPES")
    if mode not in ("warn", "raise"):
        raise CheckpointConfigError(
            f"CHECKPOINTS['BLOCKED_TYPES'] must be 'warn' or 'raise', got {mode!r}",
            field="BLOCKED_TYPES",
        )
    return mode == "raise"


def store_serializer() -> StoreSerializer:
    """A new serializer for a saver, allowlist as configured now."""
    return StoreSerializer()
