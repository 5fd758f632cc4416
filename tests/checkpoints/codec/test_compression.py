"""Zstd compression of stored values and the cache of frames read lately."""

from __future__ import annotations

import os
import random

import pytest

from checkpoints.codec.compression import FRAMES, _FrameCache, compress_typed, decompress_typed
from checkpoints.errors import CheckpointCodecError


def _prose(size: int) -> bytes:
    """Word text: compresses about 5x, like the documents agents keep."""
    rng = random.Random(size)
    words = [b"agent", b"tool", b"document", b"thread", b"store", b"memory", b"plan", b"step"]
    return b" ".join(rng.choice(words) for _ in range(size // 5))[:size]


def test_a_value_over_the_threshold_round_trips_and_is_served_from_the_cache():
    value = _prose(100_000)
    type_, frame = compress_typed(("msgpack", value), 65536)
    assert type_ == "msgpack+zstd" and len(frame) < len(value)
    assert FRAMES.get(frame) == value  # what was just written is read back without zstd
    FRAMES.clear()
    assert decompress_typed((type_, frame)) == ("msgpack", value)
    assert FRAMES.get(frame) == value
    assert decompress_typed((type_, frame)) == ("msgpack", value)


def test_a_cached_frame_still_may_not_expand_past_the_limit():
    value = _prose(100_000)
    type_, frame = compress_typed(("msgpack", value), 1000)
    assert FRAMES.get(frame) == value
    with pytest.raises(
        CheckpointCodecError, match=r"expands past CHECKPOINTS\['CODEC_MAX_BYTES'\]"
    ):
        decompress_typed((type_, frame), max_bytes=50_000)


def test_values_at_or_under_the_threshold_stay_as_they_are():
    value = _prose(65536)
    assert compress_typed(("msgpack", value), 65536) == ("msgpack", value)
    assert compress_typed(("msgpack", value), None) == ("msgpack", value)


def test_the_cache_keeps_to_its_budget_dropping_the_least_recently_used():
    cache = _FrameCache(budget=80_000)
    frames = [(os.urandom(2000), os.urandom(6000)) for _ in range(20)]
    for frame, plain in frames:
        cache.put(frame, plain)
        assert cache.held <= 80_000
    assert cache.get(frames[0][0]) is None
    assert cache.get(frames[-1][0]) == frames[-1][1]
    cache.put(b"tiny", b"x" * 10_000)  # frames under the minimum are not worth caching
    assert cache.get(b"tiny") is None


def test_frames_alike_at_both_ends_never_stand_for_each_other():
    # Same length, same first and last bytes: only the middle tells them apart.
    ends = os.urandom(64), os.urandom(64)
    first = ends[0] + b"a" * 2000 + ends[1]
    second = ends[0] + b"b" * 2000 + ends[1]
    cache = _FrameCache(budget=1_000_000)
    cache.put(first, b"first")
    assert cache.get(first) == b"first"
    assert cache.get(bytes(bytearray(first))) == b"first"  # an equal frame read anew
    assert cache.get(second) is None
    cache.put(second, b"second")
    assert cache.get(second) == b"second"
    assert cache.get(first) is None
    assert cache.held == len(second) + len(b"second")
