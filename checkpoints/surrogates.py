"""Where a value holds a lone surrogate (a string UTF-8 cannot store), as a path to name.

Free of Django: the store's codec (`checkpoints.codec.envelope`) and the remote saver, which
loads no Django, refuse such a value naming the same place.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.serde import jsonplus as _lg_jsonplus

_REPR_LIMIT = 200
_DELTA_SNAPSHOT = getattr(_lg_jsonplus, "_DeltaSnapshot", None) or ()


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


def _model_dump(value: Any) -> Any:
    """The bound ``model_dump`` LangGraph's encoder would store a pydantic v2 model by (its
    own duck test), else None."""
    dump = getattr(value, "model_dump", None)
    return dump if callable(dump) and not isinstance(value, type) else None


def lone_surrogate_path(value: Any, max_depth: int = 200) -> str | None:
    """The path below ``value`` of the first string holding a lone surrogate, else None.

    Such a string (``"a\\ud800b"``) has no UTF-8 form: LangGraph's msgpack would store it as
    ``"a?b"``. Only called once an encoder has met one (or might have), so speed matters less
    than reaching every string: containers, keys of any type, dataclass fields, attributes,
    and a pydantic model's dump (what LangGraph stores, its serializers applied). Whatever is
    nested deeper than ``max_depth`` is not looked into: its path is returned, marked
    `TOO_DEEP`, so it is refused rather than stored unchecked.
    """
    seen: set[int] = set()

    def bad(text: str) -> bool:
        if text.isascii():
            return False
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False

    def walk(v: Any, depth: int) -> str | None:
        if isinstance(v, str):
            return "" if bad(v) else None
        if v is None or isinstance(v, (int, float, bytes, bytearray)):
            return None
        if depth > max_depth:
            return TOO_DEEP
        if id(v) in seen:
            return None
        seen.add(id(v))
        if isinstance(v, dict):
            for key, item in v.items():
                if isinstance(key, str):
                    if bad(key):
                        return f"[{_short_repr(key)}] (the key)"
                elif walk(key, depth + 1) is not None:  # an Enum, a tuple...: its strings
                    return f"[{_short_repr(key)}] (the key)"
                found = walk(item, depth + 1)
                if found is not None:
                    return _key_segment(key) + found
            return None
        dump = None if isinstance(v, _DELTA_SNAPSHOT) else _model_dump(v)
        if dump is not None:
            try:
                dumped = dump()
            except Exception:  # noqa: BLE001 - its encoder fails on it as well: not stored
                return None
            if isinstance(dumped, dict):
                for name, item in dumped.items():
                    found = walk(item, depth + 1)
                    if found is not None:
                        return f".{name}" + found
                return None
        if isinstance(v, (list, tuple, set, frozenset)) or type(v).__name__ == "deque":
            for index, item in enumerate(v):
                found = walk(item, depth + 1)
                if found is not None:
                    return f"[{index}]" + found
            return None
        attributes = getattr(v, "__dict__", None)
        if isinstance(attributes, dict):
            extra = getattr(v, "__pydantic_extra__", None) or {}
            for name, item in [*attributes.items(), *extra.items()]:
                found = walk(item, depth + 1)
                if found is not None:
                    return f".{name}" + found
        for name in getattr(type(v), "__slots__", ()):
            found = walk(getattr(v, name, None), depth + 1)
            if found is not None:
                return f".{name}" + found
        return None

    return walk(value, 0)


# A `lone_surrogate_path` ending: the walk stopped there, so what is below is refused.
TOO_DEEP = " (nested deeper than the lone-surrogate check walks)"

LONE_SURROGATE_REASON = (
    "a string holds a lone surrogate (such as '\\ud800'), which UTF-8 cannot store; "
    "it was refused rather than stored as '?'"
)


def lone_surrogate_refusal(where: str | None) -> str:
    """The refusal of a value `lone_surrogate_path` found ``where`` in (None: an encoder
    met one the walk could not place)."""
    if where is None:
        return f"value: {LONE_SURROGATE_REASON}"
    if where.endswith(TOO_DEEP):
        return (
            f"value{where[: -len(TOO_DEEP)]}: nested deeper than the lone-surrogate check "
            "walks, where a string may hold one (such as '\\ud800'), which UTF-8 cannot "
            "store; it was refused rather than stored as '?'"
        )
    return f"value{where}: {LONE_SURROGATE_REASON}"
