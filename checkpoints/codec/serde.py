"""The serializer the ORM and memory savers use: LangGraph's own, built as its savers build it.

``JsonPlusSerializer`` with LangGraph's default allowlist: permissive (every type
InMemorySaver round-trips comes back as itself) unless ``LANGGRAPH_STRICT_MSGPACK`` is set,
in which case only LangGraph's safe types plus the graph's schema types (which LangGraph
adds through ``with_allowlist`` when it compiles the graph) are revived.
``CHECKPOINTS["ALLOWED_MSGPACK_MODULES"]`` overrides that choice for a deployment: a list of
``"module.Class"`` names (or ``[module, Class]`` pairs) makes the serializer strict with
those types allowed, ``True`` makes it permissive whatever the environment says.

Where LangGraph's strict mode would hand back a blocked object's raw fields as a plain
dict (with only a log line), this serializer raises :class:`BlockedTypeError` naming the
type: a value never silently changes type.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from langgraph.checkpoint.serde import _msgpack as lg_msgpack
from langgraph.checkpoint.serde.event_hooks import register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from checkpoints.codec.envelope import LONE_SURROGATE_REASON, lone_surrogate_path
from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError, UnreadableValue

_BLOCKED_KINDS = ("msgpack_blocked", "msgpack_method_blocked")
_seen = threading.local()


class BlockedTypeError(UnreadableValue):
    """A stored value holds a type the msgpack allowlist does not let LangGraph revive."""

    code = "blocked_type"


class LoneSurrogateError(ValueError):
    """A string to store holds a lone surrogate, which has no UTF-8 form."""


def _on_serde_event(event: dict[str, Any]) -> None:
    # LangGraph reports a blocked type only through this event (its reader then returns the
    # raw fields); note it for the read in progress on this thread, which raises.
    blocked = getattr(_seen, "blocked", None)
    if blocked is not None and event.get("kind") in _BLOCKED_KINDS:
        blocked.append(event)


register_serde_event_listener(_on_serde_event)


def configured_msgpack_allowlist() -> Any:
    """The allowlist for a new serializer: LangGraph's default unless the deployment set one."""
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


class StoreSerializer(JsonPlusSerializer):
    """LangGraph's serializer (never pickle) that raises where strict mode would drop a type."""

    def __init__(self, *, allowed_msgpack_modules: Any = lg_msgpack._SENTINEL) -> None:
        if allowed_msgpack_modules is lg_msgpack._SENTINEL:
            allowed_msgpack_modules = configured_msgpack_allowlist()
        super().__init__(pickle_fallback=False, allowed_msgpack_modules=allowed_msgpack_modules)

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        try:
            typed = super().dumps_typed(obj)
        except TypeError as exc:  # ormsgpack refuses one in a dict key outright
            if "surrogates" in str(exc):
                self._refuse_lone_surrogate(obj)
            raise
        # LangGraph's msgpack replaces a lone surrogate with "?"; only then look for one.
        if typed[0] == "msgpack" and b"?" in typed[1]:
            self._refuse_lone_surrogate(obj)
        return typed

    @staticmethod
    def _refuse_lone_surrogate(obj: Any) -> None:
        where = lone_surrogate_path(obj)
        if where is not None:
            # A ValueError the saver wraps with the channel it was writing.
            raise LoneSurrogateError(f"value{where}: {LONE_SURROGATE_REASON}")

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        outer = getattr(_seen, "blocked", None)
        _seen.blocked = blocked = []
        try:
            value = super().loads_typed(data)
        finally:
            _seen.blocked = outer
        if blocked:
            names = sorted(
                {".".join(filter(None, (e.get("module"), e.get("name"), e.get("method"))))
                 for e in blocked}
            )  # fmt: skip
            raise BlockedTypeError(
                f"stored value holds {', '.join(names)}, which the msgpack allowlist does not "
                "allow; add it to CHECKPOINTS['ALLOWED_MSGPACK_MODULES'] (or to the graph's "
                "state schema) to read it back",
                field=names[0],
            )
        return value

    def loads_many(self, typed: list[tuple[str, bytes]]) -> list[Any]:
        """Plain values (no seal, no frame) read in one go, for a checkpoint's channels.

        Raises on the first problem without naming it: callers read the values again one
        by one (``loads_typed`` through ``decode_at``) to say which value failed and why.
        """
        outer = getattr(_seen, "blocked", None)
        _seen.blocked = blocked = []
        load = super().loads_typed
        try:
            values = [load(one) for one in typed]
        finally:
            _seen.blocked = outer
        if blocked:
            raise BlockedTypeError("a stored value holds a type the allowlist blocks")
        return values


def store_serializer() -> StoreSerializer:
    """A new serializer for a saver, allowlist as configured now."""
    return StoreSerializer()
