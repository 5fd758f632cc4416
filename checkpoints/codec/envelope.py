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

# The lone-surrogate walk lives apart, free of Django, so the remote saver names the place too.
from checkpoints.surrogates import (  # noqa: F401 - this module's names, kept for its callers
    _DELTA_SNAPSHOT,
    LONE_SURROGATE_REASON,
    TOO_DEEP,
    _key_segment,
    _model_dump,
    _short_repr,
    lone_surrogate_path,
    lone_surrogate_refusal,
)

ENVELOPE_KEY = "$type"
"""The reserved key that marks a JSON object as a typed envelope."""

_MARK = ENVELOPE_KEY
PERMISSIVE = "*"
"""In an allowlist: also any class of a module already imported (the codec's default)."""
_CLASS_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


class _Refusal(Exception):
    """Internal: why a value cannot be written or read, with the path built on the way out."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.trail: list[str] = []  # innermost segment first

    def error(self, verb: str, root: str) -> CheckpointCodecError:
        where = root + "".join(reversed(self.trail))
        return CheckpointCodecError(f"cannot {verb} {where}: {self.reason}", field=where)


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


# LangGraph's msgpack options less OPT_REPLACE_SURROGATES: a lone surrogate raises.
_STRICT_MSGPACK = _lg_jsonplus._option & ~ormsgpack.OPT_REPLACE_SURROGATES


class _Unhandled(Exception):
    pass


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
