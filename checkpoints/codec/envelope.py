"""What the codec's writer and reader share: the envelope marker, refusals that build the
value's path, and the class allowlist checked before anything is imported."""

from __future__ import annotations

import functools
import re
import sys
from typing import Any

import ormsgpack
from langchain_core.load.load import Reviver
from langgraph.checkpoint.serde import jsonplus as _lg_jsonplus

from checkpoints.errors import CheckpointCodecError

ENVELOPE_KEY = "$type"
"""The reserved key that marks a JSON object as a typed envelope."""

_MARK = ENVELOPE_KEY
PERMISSIVE = "*"
"""In an allowlist: also any class of a module already imported (the codec's default)."""
_CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_REPR_LIMIT = 200


class _Refusal(Exception):
    """Internal: why a value cannot be written or read, with the path built on the way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.trail: list[str] = []  # innermost segment first

    def error(self, verb: str, root: str) -> CheckpointCodecError:
        where = root + "".join(reversed(self.trail))
        return CheckpointCodecError(f"cannot {verb} {where}: {self.reason}", field=where)


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


def _module_allowed(module: str, allowed: tuple[str, ...] | None) -> bool:
    """Whether classes of ``module`` may be stored and revived; None allows every module."""
    if allowed is None:
        return True
    return any(module == prefix or module.startswith(prefix + ".") for prefix in allowed)


def _class_allowed(module: str, qualname: str, allowed: tuple[str, ...] | None) -> bool:
    """A listed module, the exact ``module:qualname`` listed, or (permissive) a loaded module.

    ``PERMISSIVE`` in ``allowed`` admits classes of any module this process has already
    imported (the graph's own): such classes round-trip, yet stored data still never makes
    the codec import a module it names.
    """
    if allowed is None or _module_allowed(module, allowed) or f"{module}:{qualname}" in allowed:
        return True
    return PERMISSIVE in allowed and module in sys.modules


_NOT_ALLOWED = (
    "which is not on CHECKPOINTS['CODEC_ALLOWED_MODULES'] (nor loaded, in the default "
    "permissive mode; nor on CHECKPOINTS['ALLOWED_MSGPACK_MODULES'] in strict mode)"
)


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


@functools.lru_cache(maxsize=1024)
def _writable_class(cls: type, allowed: tuple[str, ...] | None) -> tuple[str | None, str | None]:
    """``(class path, None)`` when ``cls`` can be revived later, else ``(None, reason)``."""
    module, qualname = cls.__module__, cls.__qualname__
    if "<locals>" in qualname:
        return None, (
            f"class {_type_name(cls)} is defined inside a function, so it cannot be"
            " imported by module path when read back; define it at module level"
        )
    if not _class_allowed(module, qualname, allowed):
        return None, (
            f"class {_type_name(cls)} is in module {module!r}, {_NOT_ALLOWED},"
            " so it could not be read back"
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
def _readable_class(path: str, allowed: tuple[str, ...] | None) -> type:
    """The class a stored ``module:qualname`` names, from a module already imported.

    Reading never imports: a module on the allowlist that this process has not loaded
    is refused, so stored data cannot choose which module's import-time code runs.
    """
    if not _CLASS_PATH.fullmatch(path):
        raise _Refusal(f"{path!r} is not a class path (module:qualname)")
    module, qualname = path.split(":")
    if not _class_allowed(module, qualname, allowed):
        raise _Refusal(f"class {path} is in module {module!r}, {_NOT_ALLOWED}; it was not imported")
    found: Any = sys.modules.get(module)
    if found is None:
        raise _Refusal(
            f"class {path} is in module {module!r}, which this process has not imported;"
            " reading never imports"
        )
    for part in qualname.split("."):
        # The namespace itself, never getattr: a module's __getattr__ (PEP 562) is how lazy
        # packages import a submodule for a name, so asking it would import.
        try:
            found = vars(found).get(part)
        except TypeError:  # an object without a __dict__
            found = None
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


# LangGraph's msgpack options less OPT_REPLACE_SURROGATES: a lone surrogate raises.
_STRICT_MSGPACK = _lg_jsonplus._option & ~ormsgpack.OPT_REPLACE_SURROGATES
_DELTA_SNAPSHOT = getattr(_lg_jsonplus, "_DeltaSnapshot", None) or ()


class _Unhandled(Exception):
    pass


def _model_dump(value: Any) -> Any:
    """The bound ``model_dump`` LangGraph's encoder would store a pydantic v2 model by (its
    own duck test), else None."""
    dump = getattr(value, "model_dump", None)
    return dump if callable(dump) and not isinstance(value, type) else None


def _strict_default(value: Any) -> Any:
    # LangGraph's layout for a pydantic v2 model (jsonplus._msgpack_default); any other type
    # ends the attempt, and LangGraph's own encoder takes the value.
    dump = None if isinstance(value, _DELTA_SNAPSHOT) else _model_dump(value)
    if dump is None:
        raise _Unhandled
    cls = value.__class__
    return ormsgpack.Ext(
        _lg_jsonplus.EXT_PYDANTIC_V2,
        strict_msgpack((cls.__module__, cls.__name__, dump(), "model_validate_json")),
    )


def strict_msgpack(value: Any) -> bytes:
    """LangGraph's msgpack bytes for ``value``, whose strings hold no lone surrogate.

    For values of msgpack's own types and pydantic models (a chat's messages): the bytes are
    LangGraph's, since the options and the models' layout are its own, except that a lone
    surrogate raises instead of becoming "?". Any other type raises TypeError too: the
    caller then takes LangGraph's encoder and its checks.
    """
    return ormsgpack.packb(value, default=_strict_default, option=_STRICT_MSGPACK)


class _Found(Exception):
    pass


def _probe_default(value: Any) -> Any:
    # A pydantic model's strings are its dump's, as LangGraph's encoder stores them; any
    # other object is walked (and stands as None for the rest of the probe).
    dump = _model_dump(value)
    if dump is not None:
        return dump()
    if lone_surrogate_path(value) is not None:
        raise _Found
    return None


def may_hold_lone_surrogate(value: Any) -> bool:
    """False when no string below ``value`` holds a lone surrogate; True when one may.

    The question `lone_surrogate_path` answers, asked of the C encoder without the option
    that replaces them (LangGraph's encoder sets it): a message list holding a "?" costs
    this about a fifth of the walk, which then only runs to name the place. Anything the
    probe cannot go through answers True, and the walk decides.
    """
    try:
        ormsgpack.packb(value, default=_probe_default, option=_STRICT_MSGPACK)
    except Exception:  # noqa: BLE001 - a surrogate, or a value the walk must judge
        return True
    return False


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
