"""What the codec's writer and reader share: the envelope marker, refusals that build the
value's path, and the class allowlist checked before anything is imported."""

from __future__ import annotations

import functools
import importlib
import re
import sys
from typing import Any

from langchain_core.load.load import Reviver

from checkpoints.errors import CheckpointCodecError

ENVELOPE_KEY = "$type"
"""The reserved key that marks a JSON object as a typed envelope."""

_MARK = ENVELOPE_KEY
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
