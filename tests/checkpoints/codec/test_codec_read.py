"""The faithful JSON codec, reading: hostile input fails as CheckpointCodecError and imports
nothing; limits and compression hold both ways."""

from __future__ import annotations

import importlib
import json
import sys
from datetime import date
from typing import Any

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from checkpoints.codec import FaithfulJSONCodec, compress_typed, decompress_typed
from checkpoints.errors import CheckpointCodecError

from . import codec_samples as samples
from .codec_helpers import (
    ALLOWED,
    assert_same,
    codec,
    fast,
    read_refusal,
    refusal,
    round_trip,
    store_settings,
)

pytestmark = pytest.mark.usefixtures("allow_samples")

# --- refusals at read ----------------------------------------------------------------------------


@pytest.fixture
def no_imports(monkeypatch):
    """Fail the test if the codec imports anything."""

    def forbidden(name, *args, **kwargs):
        raise AssertionError(f"the codec tried to import {name}")

    monkeypatch.setattr(importlib, "import_module", forbidden)


@pytest.mark.parametrize("tag", ["enum", "model", "dataclass", "namedtuple"])
@pytest.mark.parametrize(
    "class_path", ["os:system", "subprocess:Popen", "evil_module_xyz:Thing", "checkpointsx:Y"]
)
def test_envelopes_naming_other_modules_are_refused_without_import(no_imports, tag, class_path):
    had_subprocess = "subprocess" in sys.modules
    error = read_refusal({"$type": tag, "class": class_path, "fields": {}, "value": 1})
    assert "not on CHECKPOINTS['CODEC_ALLOWED_MODULES']" in str(error)
    assert "it was not imported" in str(error)
    assert ("subprocess" in sys.modules) == had_subprocess


@pytest.mark.parametrize(
    "ident",
    [["os", "system"], ["subprocess", "Popen"], ["langchain_core", "messages", "Evil"], []],
)
def test_langchain_envelopes_outside_the_loaders_allowlist_are_refused(no_imports, ident):
    error = read_refusal({"$type": "lc", "id": ident, "kwargs": {}})
    assert "LangChain's loader does not revive" in str(error)


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        ({"$type": "nope"}, "unknown envelope type 'nope'"),
        ({"$type": 7}, "unknown envelope type 7"),
        ({"$type": "bytes", "b64": "***"}, "bad 'bytes' envelope"),
        ({"$type": "tuple"}, "needs 'items' as list"),
        ({"$type": "dict", "items": [[1]]}, "not a [key, value] pair"),
        ({"$type": "set", "items": [[1]]}, "unhashable"),
        ({"$type": "datetime", "v": "2024-01-01T00:00:00+01:00"}, "offset in its wall-clock"),
        ({"$type": "datetime", "v": "2024-01-01", "fold": 2}, "not 0 or 1"),
        ({"$type": "timedelta", "days": 10**12, "seconds": 0, "microseconds": 0}, "timedelta"),
        ({"$type": "timezone", "seconds": 90000}, "bad 'timezone' envelope"),
        ({"$type": "zoneinfo", "key": "../../etc/passwd"}, "zoneinfo"),
        ({"$type": "enum", "class": "tests:nothing here"}, "not a class path"),
        ({"$type": "enum", "class": "langgraph.types:Send", "value": 1}, "is not an enum"),
        ({"$type": "model", "class": "langgraph.types:Send", "fields": {}}, "not a pydantic"),
        (
            {"$type": "model", "class": "langchain_core.messages.human:HumanMessage", "fields": {}},
            "not a pydantic model this codec revives",
        ),
        (
            {"$type": "enum", "class": "checkpoints.codec.reader:Enum", "value": 1},
            "not a class defined",
        ),
        (
            {"$type": "dataclass", "class": "checkpoints.codec:FaithfulJSONCodec", "fields": {}},
            "not a class defined there",
        ),
        (
            {"$type": "dataclass", "class": "checkpoints.codec.reader:Send", "fields": {}},
            "names langgraph",
        ),
        (
            {"$type": "dataclass", "class": "checkpoints.codec.envelope:importlib", "fields": {}},
            "does not name a class",
        ),
        ({"x": [{"$type": "uuid", "v": "nope"}]}, "cannot read value.x[0]"),
        ({"$type": "exception", "id": ["a"], "message": 1}, "needs 'message' as str"),
    ],
)
def test_malformed_envelopes_fail_the_read(payload, reason):
    assert reason in str(read_refusal(payload))


def test_unknown_type_tags_and_non_json_constants_fail_the_read():
    with pytest.raises(CheckpointCodecError, match="type tag 'pickle'"):
        codec.loads_typed(("pickle", b"\x80\x04N."))
    for raw in (b"NaN", b"[Infinity]", b"\xff\xfe", b"", b"{", b'{"a": 1} x'):
        read_refusal(raw)


json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=10),
)
ENVELOPE_FIELDS = [
    "v", "items", "b64", "hex", "key", "seconds", "microseconds", "name", "days", "fold", "tz",
    "value", "fields", "set", "extra", "private", "node", "arg", "timeout", "id", "kwargs",
    "message", "repr_kwargs", "cause",
]  # fmt: skip
TAGS = [
    "int", "bytes", "bytearray", "tuple", "set", "frozenset", "dict", "decimal", "uuid", "date",
    "datetime", "time", "timedelta", "timezone", "zoneinfo", "enum", "model", "dataclass",
    "namedtuple", "send", "lc", "exception", "bogus",
]  # fmt: skip
CLASS_PATHS = [
    "os:system", "subprocess:Popen", "evil_module_xyz:Thing", f"{samples.__name__}:Color",
    f"{samples.__name__}:Profile", f"{samples.__name__}:Box", f"{samples.__name__}:Pair",
    "langgraph.types:Interrupt", "langgraph.types:Send",
    "checkpoints.codec.exception:CheckpointedException",
]  # fmt: skip


def _envelopes(children: st.SearchStrategy) -> st.SearchStrategy:
    optional = {name: children for name in ENVELOPE_FIELDS}
    optional["class"] = st.sampled_from(CLASS_PATHS) | children
    optional["v"] = (
        st.sampled_from(["2024-01-01", "10:00", "1.5", "x", "2024-01-01T00:00"]) | children
    )
    return st.fixed_dictionaries({"$type": st.sampled_from(TAGS)}, optional=optional)


garbage_json = st.recursive(
    json_leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.dictionaries(st.text(max_size=5), children, max_size=3),
        _envelopes(children),
    ),
    max_leaves=15,
)


@fast
@given(st.binary(), st.sampled_from(["json", "json+zstd"]))
def test_arbitrary_bytes_only_raise_codec_errors(raw, tag):
    try:
        codec.loads_typed((tag, raw))
    except CheckpointCodecError:
        pass


@fast
@given(garbage_json)
def test_garbage_envelopes_only_raise_codec_errors(payload):
    try:
        codec.loads_typed(("json", json.dumps(payload).encode()))
    except CheckpointCodecError:
        pass


# --- limits --------------------------------------------------------------------------------------


def _nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_deep_nesting_is_refused_cleanly_both_ways():
    error = refusal(_nested(10_000))
    assert "CODEC_MAX_DEPTH (200)" in str(error)
    assert "CODEC_MAX_DEPTH (200)" in str(read_refusal(b"[" * 300 + b"]" * 300))
    read_refusal(b"[" * 10_000 + b"]" * 10_000)
    read_refusal(b'{"a":' * 10_000 + b"1" + b"}" * 10_000)
    assert_same(_nested(150), round_trip(_nested(150)))


def test_depth_and_size_limits_follow_the_setting():
    with store_settings(CODEC_ALLOWED_MODULES=ALLOWED, CODEC_MAX_DEPTH=3):
        assert round_trip([[[1]]]) == [[[1]]]
        assert "CODEC_MAX_DEPTH (3)" in str(refusal({"a": [[[1]]]}))
        assert "CODEC_MAX_DEPTH (3)" in str(read_refusal([[[[1]]]]))
    with store_settings(CODEC_MAX_BYTES=100):
        assert "CHECKPOINTS['CODEC_MAX_BYTES'] (100 bytes)" in str(refusal("x" * 200))
        refused = str(read_refusal(json.dumps("x" * 200).encode()))
        assert "CHECKPOINTS['CODEC_MAX_BYTES'] (100 bytes)" in refused


# --- compression ---------------------------------------------------------------------------------


def test_large_values_are_compressed_and_tagged():
    value = {"text": "abc" * 50_000, "when": [date(2024, 1, 1)] * 100}
    with store_settings(INLINE_COMPRESS_BYTES=1024):
        tag, payload = codec.dumps_typed(value)
        assert tag == "json+zstd" and len(payload) < 10_000
        assert_same(value, codec.loads_typed((tag, payload)))
        assert codec.dumps_typed({"small": 1})[0] == "json"
    with store_settings(INLINE_COMPRESS_BYTES=None):
        assert codec.dumps_typed(value)[0] == "json"
    assert FaithfulJSONCodec(compress_bytes=10).dumps_typed("x" * 11)[0] == "json+zstd"
    assert FaithfulJSONCodec(compress_bytes=None).dumps_typed("x" * 10**6)[0] == "json"


def test_compression_helpers_serve_other_formats():
    blob = ("msgpack", b"\x92\x01\x02" * 1000)
    packed = compress_typed(blob, 100)
    assert packed[0] == "msgpack+zstd" and len(packed[1]) < 100
    assert compress_typed(packed, 100) == packed  # never twice
    assert decompress_typed(packed) == blob
    assert compress_typed(blob, None) == blob and decompress_typed(blob) == blob
    assert compress_typed(("msgpack", b"tiny"), 100) == ("msgpack", b"tiny")


def test_decompression_is_bounded():
    bomb = zstandard.ZstdCompressor().compress(b"0" * 5_000_000)
    assert len(bomb) < 1000
    with store_settings(CODEC_MAX_BYTES=1_000_000):
        with pytest.raises(
            CheckpointCodecError, match=r"expands past CHECKPOINTS\['CODEC_MAX_BYTES'\]"
        ):
            codec.loads_typed(("json+zstd", bomb))
    with pytest.raises(CheckpointCodecError, match="expands past"):
        decompress_typed(("msgpack+zstd", bomb), max_bytes=1000)
    with pytest.raises(CheckpointCodecError, match="not a valid zstd frame"):
        codec.loads_typed(("json+zstd", b"definitely not zstd"))
