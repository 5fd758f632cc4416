"""Zstd compression of stored ``(type, bytes)`` pairs, shared by every saver and the codec."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from typing import Any

import zstandard

from checkpoints.conf import setting
from checkpoints.errors import CheckpointCodecError

# zstd level 3 (zstd's default): on prose-like documents and message lists levels -5 to 3
# compress at the same speed here and 3 makes the smallest frames (`python -m
# bench.compression`, bench/README.md).
LEVEL = 3
ZSTD_SUFFIX = "+zstd"
"""Appended to a type tag when its bytes are zstd-compressed (``json+zstd``, ``msgpack+zstd``)."""
_FROM_SETTINGS: Any = object()  # "not given": read the CHECKPOINTS setting at call time

_local = threading.local()
_READ_CHUNK = 1 << 20
# Frames this process compressed or decompressed lately -> their plain bytes, so a value
# read again (the latest checkpoint's document, the same blob in every row of a list) is
# not decompressed again: zstd costs ~10x msgpack's unpacking of the same value.
FRAME_CACHE_BYTES = 32 << 20
# Smaller frames are not cached: zstd decompresses them about as fast as a lookup.
FRAME_MIN_BYTES = 1024


def _fingerprint(frame: bytes) -> tuple[int, bytes, bytes]:
    # Hashing a whole 70 KB frame costs ~14 us on every lookup, a hit or not; a frame's
    # length and ends cost nothing, and a hit is confirmed by comparing the frames (~1 us).
    return len(frame), frame[:48], frame[-48:]


class _FrameCache:
    """A bounded LRU of compressed frame -> plain bytes (a pure function, so always valid).

    Entries are found by a fingerprint of the frame and kept with the frame itself, which
    must equal the one looked up: two frames sharing a fingerprint never stand for each other.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.held = 0
        self.items: OrderedDict[tuple, tuple[bytes, bytes]] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, frame: bytes) -> bytes | None:
        key = _fingerprint(frame)
        with self.lock:
            entry = self.items.get(key)
            if entry is None or (entry[0] is not frame and entry[0] != frame):
                return None
            self.items.move_to_end(key)
            return entry[1]

    def put(self, frame: bytes, plain: bytes) -> None:
        cost = len(frame) + len(plain)
        if len(frame) < FRAME_MIN_BYTES or cost > self.budget // 8:
            return
        key = _fingerprint(frame)
        with self.lock:
            old = self.items.get(key)
            if old is not None:
                if old[0] == frame:
                    return
                del self.items[key]  # another frame with the same fingerprint: the newer wins
                self.held -= len(old[0]) + len(old[1])
            self.items[key] = (frame, plain)
            self.held += cost
            while self.held > self.budget:
                _, (old_frame, old_plain) = self.items.popitem(last=False)
                self.held -= len(old_frame) + len(old_plain)

    def clear(self) -> None:
        with self.lock:
            self.items.clear()
            self.held = 0


FRAMES = _FrameCache(FRAME_CACHE_BYTES)


def compress_typed(
    typed: tuple[str, bytes], threshold: int | None = _FROM_SETTINGS
) -> tuple[str, bytes]:
    """Zstd-compress ``(type, data)`` when data is over ``threshold`` bytes, tagging ``+zstd``.

    ``threshold`` defaults to ``INLINE_COMPRESS_BYTES``; None leaves every value as it is, and
    so does a tag that already says it is compressed.
    """
    type_tag, data = typed
    if threshold is _FROM_SETTINGS:
        threshold = setting("INLINE_COMPRESS_BYTES")
    if threshold is None or len(data) <= threshold or type_tag.endswith(ZSTD_SUFFIX):
        return typed
    compressor = getattr(_local, "compressor", None)
    if compressor is None:  # a ZstdCompressor must not be shared between threads
        compressor = _local.compressor = zstandard.ZstdCompressor(level=LEVEL)
    plain = bytes(data)
    frame = compressor.compress(plain)
    FRAMES.put(frame, plain)  # what is written is what is read next (the latest checkpoint)
    return type_tag + ZSTD_SUFFIX, frame


def decompress_typed(
    typed: tuple[str, bytes], max_bytes: int | None = _FROM_SETTINGS
) -> tuple[str, bytes]:
    """Undo :func:`compress_typed`; values without the ``+zstd`` tag pass through unchanged.

    Output is capped at ``max_bytes`` (default ``CODEC_MAX_BYTES``), so a small hostile frame
    cannot expand without bound; any failure is a ``CheckpointCodecError``.
    """
    type_tag, data = typed
    if not (isinstance(type_tag, str) and type_tag.endswith(ZSTD_SUFFIX)):
        return typed
    if max_bytes is _FROM_SETTINGS:
        max_bytes = setting("CODEC_MAX_BYTES")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointCodecError(f"a {type_tag!r} value must be bytes")
    limit = sys.maxsize if max_bytes is None else max_bytes
    data = bytes(data)
    known = FRAMES.get(data) if len(data) >= FRAME_MIN_BYTES else None
    if known is not None and len(known) <= limit:
        return type_tag[: -len(ZSTD_SUFFIX)], known
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise CheckpointCodecError(
            f"a {type_tag!r} value is not a valid zstd frame: {exc}"
        ) from exc
    if declared > limit:
        raise CheckpointCodecError(
            f"a {type_tag!r} value expands past CODEC_MAX_BYTES ({max_bytes})"
        )
    if declared >= 0:
        # The frame states its size (ours always do): one call, checked against that size
        # by zstd itself, so the stated size is also the most it can produce.
        try:
            plain = zstandard.ZstdDecompressor().decompress(data)
        except zstandard.ZstdError as exc:
            raise CheckpointCodecError(
                f"a {type_tag!r} value is not a valid zstd frame: {exc}"
            ) from exc
        FRAMES.put(data, plain)
        return type_tag[: -len(ZSTD_SUFFIX)], plain
    chunks: list[bytes] = []
    size = 0
    try:
        with zstandard.ZstdDecompressor().stream_reader(data) as reader:
            while True:
                chunk = reader.read(min(_READ_CHUNK, limit - size + 1))
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise CheckpointCodecError(
                        f"a {type_tag!r} value expands past CODEC_MAX_BYTES ({max_bytes})"
                    )
                chunks.append(chunk)
    except zstandard.ZstdError as exc:
        raise CheckpointCodecError(
            f"a {type_tag!r} value is not a valid zstd frame: {exc}"
        ) from exc
    return type_tag[: -len(ZSTD_SUFFIX)], b"".join(chunks)
