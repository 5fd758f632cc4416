"""Zstd compression of stored ``(type, bytes)`` pairs, shared by every saver and the codec."""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Iterable
from contextvars import ContextVar
from typing import Any

import zstandard

from checkpoints.codec.failures import (
    limit_text,
    place,
    refuse_checkpoint_over,
    refuse_value_over,
)
from checkpoints.conf import setting
from checkpoints.errors import UnreadableValue

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

_MAGIC = zstandard.MAGIC_NUMBER.to_bytes(4, "little")
_ZSTD_SUFFIX_BYTES = ZSTD_SUFFIX.encode()


# -- read budgets ---------------------------------------------------------------------------
# Each value is capped (CODEC_MAX_BYTES), but a row of a few KiB can hold several capped
# frames and a page can read many rows: the read of one checkpoint and one response each
# get a budget of decompressed bytes, charged before a frame is expanded.
class ReadBudget:
    """Decompressed bytes a read may still produce; ``parent`` is the enclosing response's."""

    __slots__ = ("key", "left", "limit", "parent", "at", "_token")

    def __init__(self, key: str, parent: ReadBudget | None, at: tuple | None = None) -> None:
        limit = setting(key)
        self.key = key
        self.limit = limit
        self.left = sys.maxsize if limit is None else limit
        self.parent = parent
        self.at = at

    def __enter__(self) -> ReadBudget:
        self._token = _BUDGET.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _BUDGET.reset(self._token)

    def charge(self, size: int) -> None:
        """Spend ``size`` bytes here and in every enclosing budget, or refuse and spend none."""
        self.check(size)
        budget: ReadBudget | None = self
        while budget is not None:
            budget.left -= size
            budget = budget.parent

    def check(self, size: int, where: str | None = None) -> None:
        budget: ReadBudget | None = self
        while budget is not None:
            if size > budget.left:
                raise budget._refusal(size, where, self.at)
            budget = budget.parent

    def mark(self) -> tuple[int, int]:
        return self.left, (self.parent.left if self.parent is not None else 0)

    def rewind(self, mark: tuple[int, int]) -> None:
        """Give back what was charged since ``mark`` (values that are read again)."""
        self.left = mark[0]
        if self.parent is not None:
            self.parent.left = mark[1]

    def _refusal(self, size: int, where: str | None, at: tuple | None) -> UnreadableValue:
        scope = "checkpoint" if self.key == "MAX_CHECKPOINT_BYTES" else "response"
        reason = (
            f"its compressed values expand past {limit_text(self.key, self.limit)}, "
            f"the most one {scope} read may decompress ({self.limit - self.left} spent, "
            f"{size} more asked)"
        )
        if where is None or at is None:
            return UnreadableValue(reason)  # decode_at adds the part and the checkpoint
        thread_id, ns, checkpoint_id = at
        return UnreadableValue(
            f"cannot decode {place(thread_id, ns, checkpoint_id, where)}: {reason}",
            field=where,
            where={
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
                "part": where,
            },
        )


_BUDGET: ContextVar[ReadBudget | None] = ContextVar("checkpoint_read_budget", default=None)


def reading_response() -> ReadBudget:
    """A budget of ``MAX_RESPONSE_BYTES`` for everything read inside ``with`` (one page)."""
    return ReadBudget("MAX_RESPONSE_BYTES", _BUDGET.get())


def reading_checkpoint(thread_id: str, ns: str, checkpoint_id: str) -> ReadBudget:
    """A budget of ``MAX_CHECKPOINT_BYTES`` for one checkpoint's values, within the response's."""
    outer = _BUDGET.get()
    while outer is not None and outer.key != "MAX_RESPONSE_BYTES":
        outer = outer.parent  # a checkpoint read inside another's counts for the response
    return ReadBudget("MAX_CHECKPOINT_BYTES", outer, (thread_id, ns, checkpoint_id))


def current_budget() -> ReadBudget | None:
    return _BUDGET.get()


def reserve(typed: Iterable[tuple[str, Any]]) -> None:
    """Refuse now, before any is expanded, values whose frames state more than is left.

    ``typed`` are one checkpoint's ``(type, bytes)`` values (a type may be bytes); sealed ones
    are skipped (their frames are inside the seal), and frames that state no size
    (or are not frames) are left to their read, which charges as it goes.
    """
    budget = _BUDGET.get()
    if budget is None:
        return
    total = 0
    for type_tag, data in typed:
        if type(type_tag) is str:
            suffix: Any = ZSTD_SUFFIX
        elif type(type_tag) is bytes:
            suffix = _ZSTD_SUFFIX_BYTES
        else:
            continue  # not a value this store wrote; its read refuses it
        if type_tag.endswith(suffix) and isinstance(data, bytes | memoryview) and len(data) >= 6:
            try:
                declared = zstandard.frame_content_size(data)
            except zstandard.ZstdError:
                continue
            if declared > 0:
                total += declared
    if total:
        budget.check(total, "the compressed values")


# -- write limits --------------------------------------------------------------------------
# What a read may decompress (above) is what a write may store: each value's plain bytes
# (what the serializer made, before compression) against CODEC_MAX_BYTES, and the values one
# put (body and channel values) or one put_writes call stores together against
# MAX_CHECKPOINT_BYTES. Both are refused before anything is stored, so a stored checkpoint
# never trips its own read's limits. Plain bytes are what a read charges for a frame, and
# more than it charges for a value stored uncompressed (that costs it nothing).
def plain_size(typed: tuple[str, bytes]) -> int:
    """The bytes ``(type, data)`` decodes from: a frame's stated size (ours always state
    it: a header read, no expansion), else the data's length."""
    type_tag, data = typed
    if type_tag.endswith(ZSTD_SUFFIX):
        size = zstandard.frame_content_size(data)
        if size >= 0:
            return size
        return len(decompress_typed(typed)[1])
    return len(data)


def refuse_large_value(size: int, where: Any) -> None:
    """ValueTooLarge when one value's plain bytes are over ``CODEC_MAX_BYTES``
    (`failures.refuse_value_over`)."""
    refuse_value_over(size, where, setting("CODEC_MAX_BYTES"))


def refuse_large_checkpoint(
    total: int, where: Any, at: tuple[str, str, str], what: str = "this put's values"
) -> None:
    """ValueTooLarge when the plain bytes one write stores for checkpoint ``at`` come to
    more than ``MAX_CHECKPOINT_BYTES`` (`failures.refuse_checkpoint_over`)."""
    refuse_checkpoint_over(total, where, at, setting("MAX_CHECKPOINT_BYTES"), what)


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
    cannot expand without bound, and charged to the read's budget (``reading_checkpoint``,
    ``reading_response``) before it is made. One frame, nothing after it. Any failure is an
    ``UnreadableValue`` (stored bytes that cannot be read).
    """
    type_tag, data = typed
    if not (isinstance(type_tag, str) and type_tag.endswith(ZSTD_SUFFIX)):
        return typed
    if max_bytes is _FROM_SETTINGS:
        max_bytes = setting("CODEC_MAX_BYTES")
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise UnreadableValue(f"a {type_tag!r} value must be bytes")
    limit = sys.maxsize if max_bytes is None else max_bytes
    data = bytes(data)
    budget = _BUDGET.get()
    known = FRAMES.get(data) if len(data) >= FRAME_MIN_BYTES else None
    if known is not None and len(known) <= limit:
        if budget is not None:
            budget.charge(len(known))
        return type_tag[: -len(ZSTD_SUFFIX)], known
    if data[:4] != _MAGIC:  # a skippable frame, say, holds no value
        raise UnreadableValue(f"a {type_tag!r} value is not a valid zstd frame")
    try:
        declared = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise UnreadableValue(f"a {type_tag!r} value is not a valid zstd frame: {exc}") from exc
    if declared > limit:
        raise _past_value_limit(type_tag, max_bytes, f"its frame states {declared} bytes")
    if declared > 0:
        if budget is not None:
            budget.charge(declared)
        # The frame states its size (ours always do): one call, checked against that size
        # by zstd itself, so the stated size is also the most it can produce.
        try:
            plain = zstandard.ZstdDecompressor().decompress(data, allow_extra_data=False)
        except zstandard.ZstdError as exc:
            if "unused data" in str(exc):
                raise _trailing(type_tag, exc) from exc
            raise UnreadableValue(f"a {type_tag!r} value is not a valid zstd frame: {exc}") from exc
        FRAMES.put(data, plain)
        return type_tag[: -len(ZSTD_SUFFIX)], plain
    return type_tag[: -len(ZSTD_SUFFIX)], _stream(type_tag, data, limit, max_bytes, budget)


def _stream(
    type_tag: str, data: bytes, limit: int, max_bytes: int | None, budget: ReadBudget | None
) -> bytes:
    """A frame that states no size (or zero), fed in slices so no call makes much more than
    the limits have left: zstd expands a byte to at most 128 KiB (an RLE block)."""
    chunks: list[bytes] = []
    size = 0
    at = 0
    try:
        reader = zstandard.ZstdDecompressor().decompressobj(read_across_frames=False)
        while at < len(data) and not reader.eof:
            left = min(limit - size, budget.left if budget is not None else limit)
            step = max(64, min(_READ_CHUNK, left >> 18))
            chunk = reader.decompress(data[at : at + step])
            at += step
            if not chunk:
                continue
            size += len(chunk)
            if size > limit:
                raise _past_value_limit(type_tag, max_bytes, f"more than {limit} bytes")
            if budget is not None:
                budget.charge(len(chunk))
            chunks.append(chunk)
    except zstandard.ZstdError as exc:
        raise UnreadableValue(f"a {type_tag!r} value is not a valid zstd frame: {exc}") from exc
    if not reader.eof:
        raise UnreadableValue(f"a {type_tag!r} value is a truncated zstd frame")
    extra = len(reader.unused_data) + len(data) - min(at, len(data))
    if extra:
        raise _trailing(type_tag, f"{extra} bytes")
    return b"".join(chunks)


def _past_value_limit(type_tag: str, max_bytes: int | None, found: str) -> UnreadableValue:
    return UnreadableValue(
        f"a {type_tag!r} value expands past {limit_text('CODEC_MAX_BYTES', max_bytes)}, the "
        f"most one value may decompress to ({found})"
    )


def _trailing(type_tag: str, detail: object) -> UnreadableValue:
    return UnreadableValue(
        f"a {type_tag!r} value holds more after its zstd frame ({detail}): a second frame or "
        "trailing bytes, which are refused rather than dropped"
    )
