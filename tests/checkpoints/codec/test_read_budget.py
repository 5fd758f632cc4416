"""Bounds on what reading stored zstd frames may expand to: per checkpoint and per response
(`MAX_CHECKPOINT_BYTES`, `MAX_RESPONSE_BYTES`), and one frame per value, nothing after it.

A hostile row (small frames, each under the per-value cap, that together expand to hundreds
of MB) is refused before the memory is spent, naming the limit and the checkpoint, on every
saver, in the API (409) and in the admin (the "cannot decode" panel)."""

from __future__ import annotations

import random

import pytest
import zstandard
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from checkpoints.codec import decompress_typed
from checkpoints.codec.compression import FRAMES, reading_checkpoint, reading_response
from checkpoints.conf import DEFAULTS
from checkpoints.errors import UnreadableValue
from checkpoints.models import Checkpoint, PendingWrite
from tests.checkpoints.codec.codec_helpers import (
    bomb,
    bomb_for,
    budget_saver,
    peak_of,
    stored_rows,
)
from tests.reliability_fixtures import put_value
from tests.store_helpers import corrupt_values

MiB = 1 << 20
CHANNELS = ("a", "b", "c", "d")
# Far above what a refused read may cost, far below what reading the bomb costs.
PEAK_BOUND = 200 * MiB


def put_steps(saver, thread_id: str, steps: list[dict]) -> dict:
    """One checkpoint per step on the thread, each value a new version of its channel."""
    from langgraph.checkpoint.base import empty_checkpoint

    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    versions: dict = {}
    for values in steps:
        checkpoint = empty_checkpoint()
        for channel in values:
            versions[channel] = saver.get_next_version(versions.get(channel), None)
        checkpoint["channel_values"] = dict(values)
        checkpoint["channel_versions"] = dict(versions)
        config = saver.put(config, checkpoint, {"source": "loop", "step": 1}, dict(versions))
    return config


def _limit_text(key: str) -> str:
    return f"CHECKPOINTS['{key}'] ({DEFAULTS[key]} bytes)"


# -- the saver -----------------------------------------------------------------------------
def test_a_bomb_row_is_refused_before_it_expands_on_every_saver(store):
    saver = budget_saver(store)
    config = put_value(saver, "bomb", None, {c: f"small {c}" for c in CHANNELS})
    checkpoint_id = config["configurable"]["checkpoint_id"]
    corrupt_values(saver, "bomb", bomb_for(saver))
    before = stored_rows(saver, "bomb")

    outcome, peak = peak_of(lambda: saver.get_tuple({"configurable": {"thread_id": "bomb"}}))
    assert isinstance(outcome, UnreadableValue), outcome
    message = outcome.message
    assert _limit_text("MAX_CHECKPOINT_BYTES") in message
    assert f"checkpoint {checkpoint_id!r} in thread 'bomb'" in message
    assert outcome.where["thread_id"] == "bomb"
    assert outcome.where["checkpoint_id"] == checkpoint_id
    assert peak < PEAK_BOUND, f"{peak / MiB:.0f} MiB allocated to refuse the row"

    outcome, peak = peak_of(lambda: list(saver.list({"configurable": {"thread_id": "bomb"}})))
    assert isinstance(outcome, UnreadableValue), outcome
    assert _limit_text("MAX_CHECKPOINT_BYTES") in outcome.message
    assert peak < PEAK_BOUND, f"{peak / MiB:.0f} MiB allocated to refuse the list"
    assert stored_rows(saver, "bomb") == before


def test_a_bomb_of_frames_stating_no_size_stops_at_the_limit(store):
    # Nothing to count up front: the read charges what each frame expands to as it goes,
    # so it stops once MAX_CHECKPOINT_BYTES is spent, before the third frame is read.
    saver = budget_saver(store)
    put_value(saver, "unsized", None, {c: f"small {c}" for c in CHANNELS})
    corrupt_values(saver, "unsized", bomb_for(saver, sized=False))
    outcome, peak = peak_of(lambda: saver.get_tuple({"configurable": {"thread_id": "unsized"}}))
    assert isinstance(outcome, UnreadableValue), outcome
    assert _limit_text("MAX_CHECKPOINT_BYTES") in outcome.message
    assert "channel '" in outcome.message and "in thread 'unsized'" in outcome.message
    # What was read (two values, as bytes and as strings) and no more.
    assert peak < 2 * DEFAULTS["MAX_CHECKPOINT_BYTES"] + 64 * MiB, f"{peak / MiB:.0f} MiB"


# The Redis saver packs a task's writes in one record; its channel values carry the bomb.
@pytest.mark.parametrize("provider", ["memory", "sqlite", "postgres"])
def test_a_bomb_in_pending_writes_is_refused(store):
    saver = budget_saver(store)
    config = put_value(saver, "bomb-w", None, {"x": 1})
    saver.put_writes(config, [(c, f"w {c}") for c in CHANNELS], "task-1")
    typed = bomb_for(saver)
    if saver.provider in ("sqlite", "postgres"):
        PendingWrite.objects.using(saver.db_alias).update(type=typed[0], blob=typed[1])
    else:
        for bucket in saver.store.writes.values():
            for key, (task, channel, _, path) in list(bucket.items()):
                bucket[key] = (task, channel, typed, path)
    outcome, peak = peak_of(lambda: saver.get_tuple(config))
    assert isinstance(outcome, UnreadableValue), outcome
    assert _limit_text("MAX_CHECKPOINT_BYTES") in outcome.message
    assert "in thread 'bomb-w'" in outcome.message
    assert peak < PEAK_BOUND


def test_a_second_frame_or_trailing_bytes_are_refused(store):
    saver = budget_saver(store)
    tag = bomb_for(saver)[0]
    one = saver.serde.dumps_typed("first")
    plain = one[1] if not one[0].endswith("+zstd") else decompress_typed(one)[1]
    first = zstandard.ZstdCompressor().compress(plain)
    second = zstandard.ZstdCompressor().compress(plain)
    put_value(saver, "two", None, {"v": "value"})
    for data in (first + second, first + b"\x00"):
        corrupt_values(saver, "two", (tag, data))
        with pytest.raises(UnreadableValue) as failure:
            saver.get_tuple({"configurable": {"thread_id": "two"}})
        assert "channel 'v'" in failure.value.message
        assert "after its zstd frame" in failure.value.message
    corrupt_values(saver, "two", (tag, first))
    assert saver.get_tuple({"configurable": {"thread_id": "two"}}).checkpoint["channel_values"] == {
        "v": "first"
    }


def _document(size: int) -> str:
    rng = random.Random(size)
    words = ["state", "graph", "node", "checkpoint", "value", "thread", "writes", "step"]
    out, total = [], 0
    while total < size:
        word = rng.choice(words) + str(rng.randint(0, 9999))
        out.append(word)
        total += len(word) + 1
    return " ".join(out)


def test_legitimate_large_values_still_read(store):
    saver = budget_saver(store)
    document = _document(1024 * 1024)
    messages = [f"message {i}: " + _document(300 + i % 200) for i in range(3000)]
    put_steps(
        saver,
        "big",
        [{"document": document + str(step), "messages": messages} for step in range(3)],
    )
    FRAMES.clear()
    head = saver.get_tuple({"configurable": {"thread_id": "big"}})
    assert head.checkpoint["channel_values"]["document"] == document + "2"
    assert head.checkpoint["channel_values"]["messages"] == messages
    with reading_response():
        listed = list(saver.list({"configurable": {"thread_id": "big"}}))
    assert [t.checkpoint["channel_values"]["document"][-1] for t in listed] == ["2", "1", "0"]


# -- the budgets ---------------------------------------------------------------------------
def _frame(size: int) -> tuple[str, bytes]:
    return "msgpack+zstd", zstandard.ZstdCompressor().compress(b"\x00" * size)


def _unsized_frame(size: int) -> tuple[str, bytes]:
    """A frame that does not state its size (written by a stream), read chunk by chunk."""
    out = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    frame = out.compress(b"\x00" * size) + out.flush()
    assert zstandard.frame_content_size(frame) == -1
    return "msgpack+zstd", frame


@pytest.mark.parametrize("make", [_frame, _unsized_frame])
def test_a_checkpoint_read_stops_at_its_budget(make):
    conf = {**settings.CHECKPOINTS, "MAX_CHECKPOINT_BYTES": 3 * MiB}
    with override_settings(CHECKPOINTS=conf):
        FRAMES.clear()
        with reading_checkpoint("t", "", "c1"):
            decompress_typed(make(MiB))
            decompress_typed(make(MiB))
            with pytest.raises(UnreadableValue, match=r"MAX_CHECKPOINT_BYTES'\] \(3145728 bytes\)"):
                decompress_typed(make(2 * MiB))
            decompress_typed(make(MiB // 2))  # what was refused was not spent
        with reading_checkpoint("t", "", "c2"):  # each checkpoint has its own
            decompress_typed(make(2 * MiB))
        decompress_typed(make(5 * MiB))  # outside a read, only the per-value cap holds


def test_a_response_reading_several_checkpoints_stops_at_its_budget():
    conf = {**settings.CHECKPOINTS, "MAX_CHECKPOINT_BYTES": 3 * MiB, "MAX_RESPONSE_BYTES": 5 * MiB}
    with override_settings(CHECKPOINTS=conf):
        FRAMES.clear()
        with reading_response():
            for checkpoint_id in ("c1", "c2"):
                with reading_checkpoint("t", "", checkpoint_id):
                    decompress_typed(_frame(2 * MiB))
            with (
                reading_checkpoint("t", "", "c3"),
                pytest.raises(UnreadableValue, match=r"MAX_RESPONSE_BYTES'\] \(5242880 bytes\)"),
            ):
                decompress_typed(_frame(2 * MiB))


def test_none_turns_a_bound_off():
    conf = {**settings.CHECKPOINTS, "MAX_CHECKPOINT_BYTES": None, "MAX_RESPONSE_BYTES": None}
    with override_settings(CHECKPOINTS=conf), reading_response():
        with reading_checkpoint("t", "", "c1"):
            for _ in range(3):
                decompress_typed(_frame(60 * MiB))


@pytest.mark.parametrize("make", [_frame, _unsized_frame])
def test_decompression_refuses_anything_after_the_frame(make):
    typed = make(5000)
    _, frame = typed
    for data in (frame + frame, frame + b"junk", frame + make(0)[1]):
        FRAMES.clear()
        with pytest.raises(UnreadableValue, match="after its zstd frame"):
            decompress_typed((typed[0], data))
    assert decompress_typed(typed) == ("msgpack", b"\x00" * 5000)


def test_an_empty_frame_followed_by_another_is_refused():
    empty = zstandard.ZstdCompressor().compress(b"")
    with pytest.raises(UnreadableValue, match="after its zstd frame"):
        decompress_typed(("msgpack+zstd", empty + _frame(100)[1]))


def test_the_bounds_are_checked_settings():
    keys = ("CODEC_MAX_BYTES", "MAX_CHECKPOINT_BYTES", "MAX_RESPONSE_BYTES")
    for key in (*keys, "ADMIN_VALUE_PREVIEW_BYTES"):
        for bad in ("big", -1, 0, True):
            conf = {**settings.CHECKPOINTS, key: bad}
            with override_settings(CHECKPOINTS=conf), pytest.raises(SystemCheckError) as caught:
                call_command("check")
            assert f"CHECKPOINTS['{key}']" in str(caught.value)
    # Below the per-value cap, one value written within its cap could never be read back.
    conf = {**settings.CHECKPOINTS, "MAX_CHECKPOINT_BYTES": 32 * MiB}
    with override_settings(CHECKPOINTS=conf), pytest.raises(SystemCheckError) as caught:
        call_command("check", fail_level="WARNING")
    assert "CODEC_MAX_BYTES" in str(caught.value)
    conf = {**settings.CHECKPOINTS, "MAX_RESPONSE_BYTES": 100 * MiB}
    with override_settings(CHECKPOINTS=conf), pytest.raises(SystemCheckError) as caught:
        call_command("check", fail_level="WARNING")
    assert "MAX_CHECKPOINT_BYTES" in str(caught.value)


# -- the API and the admin -----------------------------------------------------------------
@pytest.mark.django_db(transaction=True)
def test_the_api_refuses_a_bomb_with_409_naming_the_limit(clients, threads):
    from checkpoints.store.registry import get_saver

    saver = get_saver()
    corrupt_values(saver, "alice-1", bomb("msgpack"))
    before = stored_rows(saver, "alice-1")
    for path in ("state", "history"):
        response, peak = peak_of(
            lambda path=path: clients["alice"].get(f"/api/threads/alice-1/{path}/")
        )
        assert response.status_code == 409, response.content
        error = response.json()["error"]
        assert error["code"] == "codec_error"
        assert _limit_text("MAX_CHECKPOINT_BYTES") in error["message"]
        assert "in thread 'alice-1'" in error["message"]
        assert peak < PEAK_BOUND, f"{path}: {peak / MiB:.0f} MiB"
    assert stored_rows(saver, "alice-1") == before


@pytest.mark.django_db(transaction=True)
def test_the_api_history_stops_at_the_response_budget(clients, users):
    from checkpoints.store.registry import get_saver

    saver = get_saver()
    # Each checkpoint's value decompresses to 1 MiB: within MAX_CHECKPOINT_BYTES. A history
    # page reads the head, then limit + 2 rows: all eight here, three for ?limit=1.
    put_steps(saver, "wide", [{"big": _document(MiB) + str(step)} for step in range(8)])
    from checkpoints.models import Thread

    Thread.objects.filter(thread_id="wide").update(owner=users["alice"])
    conf = {**settings.CHECKPOINTS, "MAX_CHECKPOINT_BYTES": 3 * MiB, "MAX_RESPONSE_BYTES": 5 * MiB}
    with override_settings(CHECKPOINTS=conf):
        FRAMES.clear()
        assert clients["alice"].get("/api/threads/wide/state/").status_code == 200
        # Without values asked for, none is decoded (checkpoints.store.projection).
        assert clients["alice"].get("/api/threads/wide/history/").status_code == 200
        FRAMES.clear()
        response = clients["alice"].get("/api/threads/wide/history/?select=values")
        assert response.status_code == 409, response.content
        message = response.json()["error"]["message"]
        assert "CHECKPOINTS['MAX_RESPONSE_BYTES'] (5242880 bytes)" in message
        assert "in thread 'wide'" in message
        # The budget is the response's: the next request has its own.
        FRAMES.clear()
        limited = "/api/threads/wide/history/?limit=1&select=values"
        assert clients["alice"].get(limited).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_the_admin_shows_the_panel_for_a_bomb(admin_client, threads):
    from checkpoints.store.registry import get_saver

    saver = get_saver()
    corrupt_values(saver, "alice-1", bomb("msgpack"))
    before = stored_rows(saver, "alice-1")
    row = Checkpoint.objects.filter(thread__thread_id="alice-1").order_by("-checkpoint_id")[0]
    limit = _limit_text("MAX_CHECKPOINT_BYTES").replace("'", "&#x27;")
    for url in (
        f"/admin/checkpoints/checkpoint/{row.pk}/change/",
        f"/admin/checkpoints/thread/{row.thread_id}/change/",
        f"/admin/checkpoints/checkpoint/{row.pk}/changes/",
        "/admin/checkpoints/thread/",
        f"/admin/checkpoints/checkpoint/?thread__id__exact={row.thread_id}",
    ):
        page, peak = peak_of(lambda url=url: admin_client.get(url, follow=True))
        assert page.status_code == 200, url
        assert peak < PEAK_BOUND, f"{url}: {peak / MiB:.0f} MiB"
        body = page.content.decode()
        assert len(body) < 2 * MiB, url
        if url.endswith("/change/") and "checkpoint/" in url:
            assert "Cannot decode this checkpoint" in body and limit in body
    assert stored_rows(saver, "alice-1") == before
