"""Imports refuse a value whose decoding would build more objects than the budget allows
(`checkpoints.codec.budget`), from an export file and from LangGraph's tables alike: the
thread holding it is refused by name, the others are imported, and the bomb is never built.

The bomb: msgpack for a list of n empty maps, n + 5 bytes that build ~72 n bytes of dicts;
zstd shrinks it to almost nothing, so a file of a few KiB could grow the import by GiBs.
The limits are lowered here so a bomb of a few hundred KiB trips them."""

from __future__ import annotations

import base64
import json

import pytest
import zstandard
from django.core.management import CommandError, call_command
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.conf import DEFAULTS
from checkpoints.transfer.records import header
from tests.checkpoints.codec.codec_helpers import empty_maps, legit_values, peak_of
from tests.checkpoints.transfer.graphs import THREADS, seed

MiB = 1 << 20
# 4 x 1 MiB for one value, 4 x 2 MiB for one checkpoint's values together.
SMALL_LIMITS = {**DEFAULTS, "CODEC_MAX_BYTES": MiB, "MAX_CHECKPOINT_BYTES": 2 * MiB}
BOMB_ITEMS = 300_000  # ~21 MB of dicts
# What a refused import may allocate: the file's lines and the good threads; building the
# bomb alone takes ~21 MB.
PEAK_BOUND = 12 * MiB


BOMB_THREAD = "bomb"
BOMB_ID = "1f0c0000-0000-6000-8000-000000000001"


def typed(data: bytes) -> dict[str, str]:
    return {"type": "msgpack", "data": base64.b64encode(data).decode()}


def thread_lines(thread_id: str, values: dict[str, bytes]) -> list[dict]:
    """The records of a thread of one checkpoint whose channels hold ``values`` (msgpack)."""
    body = empty_checkpoint()
    return [
        {"kind": "thread", "thread_id": thread_id, "owner": "", "retention": None},
        {
            "kind": "checkpoint",
            "ns": "",
            "id": BOMB_ID,
            "parent": None,
            "metadata": {"source": "input", "step": -1, "parents": {}},
            "v": body["v"],
            "ts": body["ts"],
            "channel_versions": dict.fromkeys(values, "00000000000000000000000000000001.5"),
            "versions_seen": {},
            "updated_channels": list(values),
            "values": {channel: typed(data) for channel, data in values.items()},
            "writes": [],
        },
        {"kind": "end", "thread_id": thread_id, "checkpoints": 1, "writes": 0},
    ]


def export(path, threads: dict[str, dict[str, bytes]]):
    """A ``.jsonl.zst`` export of ``threads`` (thread id -> channel -> msgpack)."""
    lines = [header()]
    for thread_id, values in threads.items():
        lines += thread_lines(thread_id, values)
    text = "".join(json.dumps(line) + "\n" for line in lines).encode()
    path.write_bytes(zstandard.ZstdCompressor(level=19).compress(text))
    return path


def test_a_bomb_in_an_export_file_refuses_its_thread_and_imports_the_others(
    target, tmp_path, capsys, settings
):
    settings.CHECKPOINTS = SMALL_LIMITS
    path = export(
        tmp_path / "bomb.jsonl.zst",
        {
            "before": {"a": b"\xa6before"},
            "bomb": {"a": empty_maps(BOMB_ITEMS)},
            "after": {"a": b"\xa5after"},
        },
    )
    assert path.stat().st_size < 4096
    outcome, peak = peak_of(lambda: call_command("import_checkpoints", str(path)))
    assert isinstance(outcome, CommandError) and "1 thread" in str(outcome), outcome
    err = capsys.readouterr().err
    assert f"{path}:6: bad record of thread 'bomb': value of channel 'a'" in err, err
    assert "4 x CHECKPOINTS['CODEC_MAX_BYTES'] (1048576 bytes)" in err, err
    assert target.get_tuple({"configurable": {"thread_id": "bomb"}}) is None
    for thread_id in ("before", "after"):
        found = target.get_tuple({"configurable": {"thread_id": thread_id}})
        assert found.checkpoint["channel_values"] == {"a": thread_id}
    assert peak < PEAK_BOUND, f"{peak / MiB:.1f} MiB allocated to import the file"


def test_values_under_the_value_bound_are_refused_past_the_checkpoints_bound(
    target, tmp_path, capsys, settings
):
    # Each value builds ~3.6 MB, under 4 x 1 MiB; three of them pass 4 x 2 MiB together.
    settings.CHECKPOINTS = SMALL_LIMITS
    third = empty_maps(50_000)
    # The fine thread's values stay under the bound by either estimate: the Redis store keeps
    # them as faithful JSON, whose estimate from the text counts more per item.
    small = empty_maps(30_000)
    path = export(
        tmp_path / "spread.jsonl.zst",
        {"spread": {"a": third, "b": third, "c": third}, "fine": {"a": small, "b": small}},
    )
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", str(path))
    err = capsys.readouterr().err
    assert f"{path}:3: bad record of thread 'spread': value of channel 'c'" in err, err
    assert "4 x CHECKPOINTS['MAX_CHECKPOINT_BYTES'] (2097152 bytes)" in err, err
    assert "one checkpoint's values together" in err, err
    assert target.get_tuple({"configurable": {"thread_id": "spread"}}) is None
    fine = target.get_tuple({"configurable": {"thread_id": "fine"}}).checkpoint
    assert fine["channel_values"] == {"a": [{}] * 30_000, "b": [{}] * 30_000}


def test_a_bomb_in_langgraphs_tables_refuses_its_thread_and_imports_the_others(
    peer, peer_url, target, capsys, settings
):
    seed(peer)
    # LangGraph's own saver writes the bomb: its serializer packs the list as those bytes.
    body = empty_checkpoint()
    body["id"] = BOMB_ID
    body["channel_values"] = {"a": [{}] * BOMB_ITEMS}
    body["channel_versions"] = {"a": "00000000000000000000000000000001.5"}
    peer.put(
        {"configurable": {"thread_id": BOMB_THREAD, "checkpoint_ns": ""}},
        body,
        {"source": "input", "step": -1},
        body["channel_versions"],
    )
    settings.CHECKPOINTS = SMALL_LIMITS
    outcome, peak = peak_of(lambda: call_command("import_checkpoints", peer_url))
    assert isinstance(outcome, CommandError) and "1 thread" in str(outcome), outcome
    captured = capsys.readouterr()
    assert f"refused: thread {BOMB_THREAD!r}, checkpoint {BOMB_ID!r} (ns '')" in captured.err
    assert "4 x CHECKPOINTS['CODEC_MAX_BYTES'] (1048576 bytes)" in captured.err
    assert f"Imported {len(THREADS)} thread(s)" in captured.out
    assert target.get_tuple({"configurable": {"thread_id": BOMB_THREAD}}) is None
    for thread_id in THREADS:
        assert target.get_tuple({"configurable": {"thread_id": thread_id}}) is not None
    # The rows are read (the bomb's bytes) and the graphs' threads imported; building the
    # bomb would take ~21 MB more.
    assert peak < 2 * PEAK_BOUND, f"{peak / MiB:.1f} MiB allocated to import the tables"


def test_realistic_large_values_are_imported_under_the_default_limits(target, tmp_path):
    # Together they are large enough that every value is measured, not let through by size.
    from checkpoints.codec.serde import store_serializer

    values = legit_values()
    serde = store_serializer()
    path = export(
        tmp_path / "large.jsonl.zst",
        {"large": {k: serde.dumps_typed(v)[1] for k, v in values.items()}},
    )
    call_command("import_checkpoints", str(path))
    found = target.get_tuple({"configurable": {"thread_id": "large"}})
    assert found.checkpoint["channel_values"] == values
