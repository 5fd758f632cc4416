"""The object budget: what decoding one value may build, estimated from its msgpack headers
(or its JSON text) and refused before any object is built (`checkpoints.codec.budget`).

A value of n empty maps is n + 5 bytes and builds ~72 n bytes of dicts; byte limits let
it through, the budget does not. Realistic LangGraph values (a 10,000-message list, a
256 KB document, a list of a million ints) are read back under the default limits."""

from __future__ import annotations

import tracemalloc

import ormsgpack
import pytest
from django.test import override_settings

from checkpoints.codec import FaithfulJSONCodec
from checkpoints.codec.budget import (
    MAX_COST_PER_BYTE,
    OBJECT_BUDGET_FACTOR,
    ObjectBudgetExceeded,
    json_cost,
    msgpack_cost,
    value_limit,
)
from checkpoints.codec.serde import store_serializer
from checkpoints.conf import DEFAULTS
from checkpoints.errors import CheckpointCodecError, UnreadableValue
from tests.checkpoints.codec.codec_helpers import empty_maps, legit_values
from tests.reliability_fixtures import put_value
from tests.store_helpers import corrupt_values

MiB = 1 << 20
# Lowered so a bomb of a few hundred KiB trips the budget (4 x 1 MiB for a value).
SMALL_LIMITS = {**DEFAULTS, "CODEC_MAX_BYTES": MiB, "MAX_CHECKPOINT_BYTES": 2 * MiB}
BOMB_ITEMS = 300_000  # builds ~21 MB of dicts from 300 KB


def built_bytes(data: bytes) -> int:
    """What unpacking ``data`` really holds once done (Python's allocations)."""
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        value = ormsgpack.unpackb(data, option=ormsgpack.OPT_NON_STR_KEYS)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    del value
    return held


def test_the_estimate_follows_what_unpacking_builds_and_never_passes_its_per_byte_bound():
    serde = store_serializer()
    samples = {
        "empty maps": empty_maps(50_000),
        "empty lists": b"\xdd" + (50_000).to_bytes(4, "big") + b"\x90" * 50_000,
        "negative ints": b"\xdd" + (50_000).to_bytes(4, "big") + b"\xe0" * 50_000,
        "nested lists": b"\xdd" + (500).to_bytes(4, "big") + (b"\x91" * 100 + b"\xc0") * 500,
        "maps of maps": b"\xdd" + (30_000).to_bytes(4, "big") + b"\x81\x00\x80" * 30_000,
        "floats": serde.dumps_typed([i / 3 for i in range(50_000)])[1],
        "ints": serde.dumps_typed(list(range(100_000)))[1],
        "records": serde.dumps_typed([{"k": i, "v": str(i)} for i in range(20_000)])[1],
        "text": serde.dumps_typed("x" * 500_000)[1],
    }
    for name, data in samples.items():
        cost = msgpack_cost(data, 1 << 62)
        assert cost <= len(data) * MAX_COST_PER_BYTE, name
        real = built_bytes(data)
        # Close to the truth both ways: not so low a bomb slips by, not so high a real
        # value is refused.
        assert real / 2 <= cost <= real * 2, f"{name}: estimated {cost}, built {real}"


def test_the_walk_stops_once_past_its_limit():
    # The array's header alone (8 bytes a slot) passes 10 MiB: its maps are never looked at.
    assert 10 * MiB < msgpack_cost(empty_maps(2_000_000), 10 * MiB) < 17 * MiB
    # A map's pairs cost less up front; its run of empty maps is measured only up to the limit.
    data = b"\xdf" + (1_000_000).to_bytes(4, "big") + b"\x00\x80" * 1_000_000
    assert 50 * MiB < msgpack_cost(data, 50 * MiB) < 51 * MiB
    assert msgpack_cost(data, 1 << 62) > 95 * MiB


def test_realistic_values_fit_the_default_budget_with_room_to_spare():
    serde = store_serializer()
    for name, value in legit_values().items():
        type_, data = serde.dumps_typed(value)
        assert type_ == "msgpack"
        assert msgpack_cost(data, 1 << 62) * 4 < value_limit(), name
        assert serde.loads_typed((type_, data)) == value, name


@override_settings(CHECKPOINTS=SMALL_LIMITS)
def test_a_bomb_is_refused_naming_the_limit():
    with pytest.raises(ObjectBudgetExceeded) as refused:
        store_serializer().loads_typed(("msgpack", empty_maps(BOMB_ITEMS)))
    message = refused.value.message
    assert f"{OBJECT_BUDGET_FACTOR} x CHECKPOINTS['CODEC_MAX_BYTES'] ({MiB} bytes)" in message
    assert "the most one value may build" in message
    assert refused.value.field == "CODEC_MAX_BYTES"
    assert isinstance(refused.value, UnreadableValue) and refused.value.status == 409


@override_settings(CHECKPOINTS=SMALL_LIMITS)
def test_a_bomb_inside_an_ext_payload_is_counted():
    # The reader unpacks LangGraph's ext payloads itself (a constructor's arguments, a
    # delta snapshot), so their insides are walked, not skipped as opaque bytes.
    serde = store_serializer()
    inside = ormsgpack.packb(("builtins", "frozenset", [{}] * BOMB_ITEMS))
    for code, payload in ((1, inside), (7, empty_maps(BOMB_ITEMS))):
        data = ormsgpack.packb({"v": ormsgpack.Ext(code, payload)})
        with pytest.raises(ObjectBudgetExceeded, match="CODEC_MAX_BYTES"):
            serde.loads_typed(("msgpack", data))
    # An ext code the reader never unpacks costs its bytes: a large opaque payload passes.
    opaque = ormsgpack.packb(ormsgpack.Ext(42, b"\x80" * BOMB_ITEMS))
    assert msgpack_cost(opaque, 1 << 62) < BOMB_ITEMS + 1024


@override_settings(CHECKPOINTS=SMALL_LIMITS)
def test_a_json_bomb_is_refused_and_a_json_document_is_read():
    serde = store_serializer()
    bomb = b"[" + b"{}," * BOMB_ITEMS + b"{}]"
    with pytest.raises(ObjectBudgetExceeded, match="CODEC_MAX_BYTES"):
        serde.loads_typed(("json", bomb))
    document = b'{"body": "' + b"prose, with commas: " * 25_000 + b'"}'
    assert json_cost(document) < value_limit()
    assert serde.loads_typed(("json", document))["body"].startswith("prose")


def test_a_stored_bomb_is_refused_on_read_without_building_it(store, settings):
    settings.CHECKPOINTS = SMALL_LIMITS
    config = put_value(store, "bomb", None, {"a": "small"})
    checkpoint_id = config["configurable"]["checkpoint_id"]
    if store.provider == "redis":  # its values are the faithful JSON codec's text
        corrupt_values(store, "bomb", ("json", b"[" + b"{}," * BOMB_ITEMS + b"{}]"))
    else:
        corrupt_values(store, "bomb", ("msgpack", empty_maps(BOMB_ITEMS)))
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        with pytest.raises(UnreadableValue) as refused:
            store.get_tuple({"configurable": {"thread_id": "bomb"}})
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    message = refused.value.message
    assert "CHECKPOINTS['CODEC_MAX_BYTES']" in message, message
    assert f"checkpoint {checkpoint_id!r} in thread 'bomb'" in message, message
    assert "channel 'a'" in message, message
    # Building the value takes ~21 MB; refusing it, the row and a little more.
    assert peak < 8 * MiB, f"{peak / MiB:.1f} MiB allocated to refuse the value"


def test_realistic_values_are_stored_and_read_back_on_every_saver(store):
    values = legit_values()
    config = put_value(store, "large", None, values)
    read = store.get_tuple(config)
    assert read.checkpoint["channel_values"] == values


@pytest.mark.parametrize("provider", ["memory", "sqlite", "postgres"])
def test_a_value_its_read_would_refuse_is_refused_when_stored(store, settings):
    settings.CHECKPOINTS = SMALL_LIMITS
    with pytest.raises(CheckpointCodecError) as refused:
        put_value(store, "many", None, {"a": [{}] * BOMB_ITEMS})
    message = refused.value.message
    assert message.startswith("channel 'a' holds a list the serializer cannot store"), message
    assert f"4 x CHECKPOINTS['CODEC_MAX_BYTES'] ({MiB} bytes)" in message, message
    assert store.get_tuple({"configurable": {"thread_id": "many"}}) is None


@pytest.mark.django_db(transaction=True)
def test_the_api_refuses_a_stored_bomb_with_409_naming_the_limit(clients, threads, settings):
    from checkpoints.store.registry import get_saver

    saver = get_saver()
    corrupt_values(saver, "alice-1", ("msgpack", empty_maps(BOMB_ITEMS)))
    settings.CHECKPOINTS = SMALL_LIMITS
    for path in ("state", "history"):
        response = clients["alice"].get(f"/api/threads/alice-1/{path}/?select=values")
        assert response.status_code == 409, response.content
        error = response.json()["error"]
        assert error["code"] == "object_budget", error
        assert f"4 x CHECKPOINTS['CODEC_MAX_BYTES'] ({MiB} bytes)" in error["message"], error
        assert "in thread 'alice-1'" in error["message"], error


@override_settings(CHECKPOINTS=SMALL_LIMITS)
def test_the_json_codec_refuses_to_store_what_its_read_would_refuse():
    codec = FaithfulJSONCodec(compress_bytes=None)
    with pytest.raises(CheckpointCodecError, match="CODEC_MAX_BYTES") as refused:
        codec.dumps([{} for _ in range(BOMB_ITEMS)])
    assert not isinstance(refused.value, UnreadableValue)  # a write's refusal, not a read's
    document = {"body": "prose, with commas: " * 25_000}
    assert codec.loads(codec.dumps(document)) == document
