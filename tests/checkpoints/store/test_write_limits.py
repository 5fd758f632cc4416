"""One limit both ways: what a write stores is what a read can read.

A value over ``CODEC_MAX_BYTES``, or a put (or put_writes call) whose values come to more
than ``MAX_CHECKPOINT_BYTES`` (plain bytes, whatever zstd makes of them), is refused with
ValueTooLarge (413) before anything is stored, on every provider and through the API. A
row stored before these checks holding a frame past the per-value cap, stating its size or
streamed, reads as UnreadableValue (409) naming the limit, never a raw exception."""

from __future__ import annotations

import functools

import pytest
import zstandard
from django.conf import settings
from django.test import override_settings

from checkpoints.codec.compression import plain_size
from checkpoints.errors import UnreadableValue, ValueTooLarge
from tests.api_fixtures import assert_error, url
from tests.checkpoints.codec.codec_helpers import bomb_for, budget_saver, stored_rows
from tests.reliability_fixtures import put_value
from tests.store_helpers import config_for, corrupt_values

MiB = 1 << 20
PER_VALUE = "CHECKPOINTS['CODEC_MAX_BYTES'] (67108864 bytes)"
PER_CHECKPOINT = "CHECKPOINTS['MAX_CHECKPOINT_BYTES'] (134217728 bytes)"


def _limits(**conf):
    return override_settings(CHECKPOINTS={**settings.CHECKPOINTS, **conf})


def _holdings(saver, thread_id: str):
    """The thread's checkpoints and writes as the saver reads them back."""
    return [
        (
            t.config["configurable"]["checkpoint_id"],
            t.checkpoint["channel_values"],
            t.pending_writes,
        )
        for t in saver.list(config_for(thread_id))
    ]


# -- per value: CODEC_MAX_BYTES ------------------------------------------------------------
def test_a_value_over_the_per_value_cap_is_refused_before_anything_is_stored(store):
    kept = put_value(store, "big", None, {"a": "small"})
    before = _holdings(store, "big")
    with pytest.raises(ValueTooLarge) as caught:
        put_value(store, "big", kept, {"a": "x" * (70 * MiB), "b": "fine"})
    error = caught.value
    assert (error.status, error.code, error.limit) == (413, "value_too_large", "CODEC_MAX_BYTES")
    assert PER_VALUE in error.message, error.message
    assert str(error.size) in error.message and error.size > 70 * MiB
    assert "'a'" in error.message or ".a" in error.message, error.message
    with pytest.raises(ValueTooLarge) as caught:
        store.put_writes(kept, [("ok", 1), ("w", "y" * (70 * MiB))], "task-1")
    assert PER_VALUE in caught.value.message and "w" in caught.value.field
    assert _holdings(store, "big") == before
    assert len(list(store.list(None))) == 1  # a whole-store search still reads


def test_a_value_at_the_per_value_cap_is_stored_and_read(store):
    # The boundary both ways: the largest value a write takes is one a read gives back.
    probe = "v" * (2 * MiB)
    text = "v" * (2 * MiB - (plain_size(store.serde.dumps_typed(probe)) - len(probe)))
    with _limits(CODEC_MAX_BYTES=2 * MiB):
        put_value(store, "edge", None, {"a": text})
        assert store.get_tuple(config_for("edge", ns="")).checkpoint["channel_values"] == {
            "a": text
        }
        with pytest.raises(ValueTooLarge):
            put_value(store, "edge", None, {"a": text + "v"})


# -- per checkpoint: MAX_CHECKPOINT_BYTES --------------------------------------------------
def test_values_that_compress_away_still_count_their_plain_bytes(store):
    # Three 45 MiB strings are a few KiB of zstd, each under the per-value cap; together
    # 135 MiB a read of the checkpoint may not decompress, so the write refuses them.
    kept = put_value(store, "wide", None, {"a": "small"})
    before = _holdings(store, "wide")
    values = {c: c * (45 * MiB) for c in "abc"}
    with pytest.raises(ValueTooLarge) as caught:
        put_value(store, "wide", kept, values)
    error = caught.value
    assert (error.status, error.limit) == (413, "MAX_CHECKPOINT_BYTES")
    assert PER_CHECKPOINT in error.message, error.message
    assert "in thread 'wide'" in error.message and error.size > 128 * MiB
    with pytest.raises(ValueTooLarge) as caught:
        store.put_writes(kept, list(values.items()), "task-1")
    assert PER_CHECKPOINT in caught.value.message
    assert "task 'task-1'" in caught.value.message
    assert _holdings(store, "wide") == before


def test_a_put_within_the_checkpoint_cap_reads_back(store):
    # 2 x 60 MiB: under MAX_CHECKPOINT_BYTES by the count the write and the read share.
    values = {"a": "a" * (60 * MiB), "b": "b" * (60 * MiB)}
    put_value(store, "two", None, values)
    head = store.get_tuple(config_for("two", ns=""))
    assert head.checkpoint["channel_values"] == values
    del head, values


def test_the_api_answers_413_for_a_value_over_the_cap(clients, threads):
    from checkpoints.store.registry import get_saver

    before = _holdings(get_saver(), "alice-1")
    with _limits(CODEC_MAX_BYTES=100_000):
        response = clients["alice"].post(
            url("alice-1", "bulk-update"),
            {"supersteps": [[{"channel": "topic", "value": "t" * 200_000}]]},
            format="json",
        )
    error = assert_error(response, 413, "value_too_large")
    assert "CHECKPOINTS['CODEC_MAX_BYTES'] (100000 bytes)" in error["message"], error
    assert "topic" in error["message"]
    assert _holdings(get_saver(), "alice-1") == before


# -- reads of rows stored before the checks ------------------------------------------------
@functools.cache
def _past_the_cap(tag: str, sized: bool) -> tuple[str, bytes]:
    """A small frame of a valid value (a 70 MiB string) past the per-value cap."""
    size = 70 * MiB
    if tag == "json":
        plain = b'"' + b"a" * size + b'"'
    else:
        plain = b"\xdb" + size.to_bytes(4, "big") + b"a" * size
    compressor = zstandard.ZstdCompressor(write_content_size=sized)
    if sized:
        return f"{tag}+zstd", compressor.compress(plain)
    stream = compressor.compressobj()
    return f"{tag}+zstd", stream.compress(plain) + stream.flush()


@pytest.mark.parametrize("sized", [True, False], ids=["declared", "streamed"])
def test_a_stored_value_past_the_cap_reads_as_unreadable_naming_the_limit(store, sized):
    saver = budget_saver(store)
    config = put_value(saver, "old", None, {"a": "small", "b": "other"})
    put_value(saver, "fine", None, {"c": 1})
    checkpoint_id = config["configurable"]["checkpoint_id"]
    tag = bomb_for(saver)[0].removesuffix("+zstd")
    corrupt_values(saver, "old", _past_the_cap(tag, sized), channel="a")
    before = stored_rows(saver, "old")
    for read in (
        lambda: saver.get_tuple(config_for("old", ns="")),
        lambda: list(saver.list(config_for("old"))),
        lambda: list(saver.list(None)),
    ):
        with pytest.raises(UnreadableValue) as caught:
            read()
        message = caught.value.message
        assert PER_VALUE in message, message
        assert "channel 'a'" in message and "in thread 'old'" in message, message
        assert caught.value.where["checkpoint_id"] == checkpoint_id
    assert stored_rows(saver, "old") == before
    assert saver.get_tuple(config_for("fine", ns="")).checkpoint["channel_values"] == {"c": 1}


@pytest.mark.django_db(transaction=True)
def test_the_api_answers_409_for_a_stored_value_past_the_cap(clients, threads):
    from checkpoints.store.registry import get_saver

    corrupt_values(get_saver(), "alice-1", _past_the_cap("msgpack", False), channel="topic")
    for path in ("state", "history"):
        response = clients["alice"].get(f"/api/threads/alice-1/{path}/?select=values")
        error = assert_error(response, 409, "codec_error")
        assert PER_VALUE in error["message"], error
        assert "channel 'topic'" in error["message"]
