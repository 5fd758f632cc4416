"""The faithful JSON codec, compression and encryption of stored values, and their rendering.

``json`` holds the codec (its writer and reader in ``writer`` and ``reader``), ``exception``
the record stored exceptions come back as, ``compression`` and ``encryption`` what every
saver applies to stored bytes, and ``render`` the one way admin and API show stored values.

The names below load on first use: the strict reader (``msgpack_read``, ``budget``,
``serde``) is imported by the remote saver in a worker that has no Django, and importing
this package must not load the settings-bound modules for it.
"""

from __future__ import annotations

import importlib
from typing import Any

_NAMES = {
    "ENVELOPE_KEY": "checkpoints.codec.envelope",
    "JSON_TYPE": "checkpoints.codec.json",
    "ZSTD_SUFFIX": "checkpoints.codec.compression",
    "CheckpointedException": "checkpoints.codec.exception",
    "FaithfulJSONCodec": "checkpoints.codec.json",
    "compress_typed": "checkpoints.codec.compression",
    "decompress_typed": "checkpoints.codec.compression",
}

__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
