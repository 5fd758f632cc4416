"""Compress large encoded values with zstd, marking it in the type tag."""

from __future__ import annotations

import zstandard

from checkpoints.conf import setting
from checkpoints.errors import CheckpointCodecError

SUFFIX = "+zstd"
_compressor = zstandard.ZstdCompressor(level=3)


def compress_typed(typed: tuple[str, bytes], threshold: int | None) -> tuple[str, bytes]:
    """``typed`` compressed when its bytes exceed ``threshold`` (None: never)."""
    type_, data = typed
    if threshold is None or data is None or len(data) <= threshold or type_.endswith(SUFFIX):
        return typed
    return type_ + SUFFIX, _compressor.compress(data)


def decompress_typed(typed: tuple[str, bytes]) -> tuple[str, bytes]:
    """The original (type, bytes) of a value ``compress_typed`` may have compressed."""
    type_, data = typed
    if not type_.endswith(SUFFIX):
        return typed
    limit = setting("CODEC_MAX_BYTES")
    try:
        reader = zstandard.ZstdDecompressor().decompressobj()
        out = reader.decompress(bytes(data))
    except zstandard.ZstdError as exc:
        raise CheckpointCodecError(f"stored {type_} value is not valid zstd data: {exc}") from exc
    if limit and len(out) > limit:
        raise CheckpointCodecError(
            f"stored {type_} value expands past CODEC_MAX_BYTES ({limit} bytes)"
        )
    return type_[: -len(SUFFIX)], out
