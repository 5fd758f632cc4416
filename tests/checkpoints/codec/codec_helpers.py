"""The codec tests' shared pieces: one codec, strict settings allowing the samples module,
round trips and refusals, and the exact comparison of types and values."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import tracemalloc
import zoneinfo
from datetime import datetime, time, tzinfo
from decimal import Decimal
from enum import Enum
from typing import Any

import pytest
import zstandard
from django.test import override_settings
from hypothesis import HealthCheck, settings
from langgraph.types import Send
from pydantic import BaseModel

from checkpoints.codec import CheckpointedException, FaithfulJSONCodec
from checkpoints.codec.compression import FRAMES
from checkpoints.conf import DEFAULTS
from checkpoints.errors import CheckpointCodecError
from checkpoints.models import ChannelBlob, Checkpoint, PendingWrite
from checkpoints.store.memory import MemorySaver
from checkpoints.store.redis.keys import ns_hex, thread_prefix
from tests.checkpoints.codec import codec_samples as samples
from tests.store_helpers import backing_saver

ALLOWED = [*DEFAULTS["CODEC_ALLOWED_MODULES"], samples.__name__]
codec = FaithfulJSONCodec()
fast = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def store_settings(**overrides: Any) -> override_settings:
    """CHECKPOINTS in strict mode with the samples module allowed, plus ``overrides``.

    Strict (an ALLOWED_MSGPACK_MODULES list) so these tests pin the allowlist; the default,
    permissive mode has its own tests below.
    """
    checkpoints = {"CODEC_ALLOWED_MODULES": ALLOWED, "ALLOWED_MSGPACK_MODULES": [], **overrides}
    return override_settings(CHECKPOINTS=checkpoints)


@pytest.fixture(scope="module")
def allow_samples():
    """The samples module allowed, in strict mode, for a whole test module (a module using
    it says ``pytestmark = pytest.mark.usefixtures("allow_samples")``)."""
    with store_settings():
        yield


def round_trip(value: Any, **kwargs: Any) -> Any:
    return codec.loads_typed(codec.dumps_typed(value, **kwargs))


def refusal(value: Any, **kwargs: Any) -> CheckpointCodecError:
    with pytest.raises(CheckpointCodecError) as caught:
        codec.dumps_typed(value, **kwargs)
    return caught.value


def read_refusal(payload: Any) -> CheckpointCodecError:
    raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    with pytest.raises(CheckpointCodecError) as caught:
        codec.loads_typed(("json", raw))
    return caught.value


# --- comparing type and value exactly ------------------------------------------------------------


def _same_tz(a: tzinfo | None, b: tzinfo | None, path: str) -> None:
    assert type(a) is type(b), f"{path}: tzinfo {a!r} came back as {b!r}"
    if isinstance(a, zoneinfo.ZoneInfo):
        assert a is b, f"{path}: zone {a.key} came back as {b.key}"  # type: ignore[union-attr]
    elif a is not None:
        assert a.utcoffset(None) == b.utcoffset(None), path  # type: ignore[union-attr]
        assert a.tzname(None) == b.tzname(None), path  # type: ignore[union-attr]


def assert_same(a: Any, b: Any, path: str = "value") -> None:
    """Equal values of exactly the same types, all the way down (1, True, 1.0 differ)."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} came back as {type(b).__name__}"
    if isinstance(a, float):
        assert a == b and math.copysign(1, a) == math.copysign(1, b), f"{path}: {a} vs {b}"
    elif isinstance(a, Decimal):
        assert str(a) == str(b), f"{path}: {a} vs {b}"
    elif isinstance(a, (datetime, time)):
        assert a.replace(tzinfo=None) == b.replace(tzinfo=None), f"{path}: {a} vs {b}"
        assert a.fold == b.fold, f"{path}: fold {a.fold} vs {b.fold}"
        _same_tz(a.tzinfo, b.tzinfo, path)
    elif isinstance(a, tzinfo):
        _same_tz(a, b, path)
    elif isinstance(a, Enum):
        assert a is b, f"{path}: {a!r} vs {b!r}"
    elif isinstance(a, (list, tuple)):  # named tuples too
        assert len(a) == len(b), f"{path}: {len(a)} items vs {len(b)}"
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{index}]")
    elif isinstance(a, dict):
        assert len(a) == len(b), f"{path}: {len(a)} keys vs {len(b)}"
        keys_b = {key: key for key in b}
        for key, item in a.items():
            assert key in keys_b, f"{path}: key {key!r} missing"
            assert_same(key, keys_b[key], f"{path} key {key!r}")
            assert_same(item, b[key], f"{path}[{key!r}]")
    elif isinstance(a, (set, frozenset)):
        assert len(a) == len(b), f"{path}: {len(a)} members vs {len(b)}"
        members_b = {member: member for member in b}
        for member in a:
            assert member in members_b, f"{path}: member {member!r} missing"
            assert_same(member, members_b[member], f"{path}{{{member!r}}}")
    elif isinstance(a, BaseModel):
        assert_same(a.__dict__, b.__dict__, path)
        assert a.__pydantic_fields_set__ == b.__pydantic_fields_set__, f"{path}: fields set"
        assert_same(a.__pydantic_extra__, b.__pydantic_extra__, f"{path} extra")
        assert_same(a.__pydantic_private__, b.__pydantic_private__, f"{path} private")
        assert a == b, path
    elif dataclasses.is_dataclass(a):
        for spec in dataclasses.fields(a):
            assert_same(getattr(a, spec.name), getattr(b, spec.name), f"{path}.{spec.name}")
    elif isinstance(a, Send):
        assert_same((a.node, a.arg, a.timeout), (b.node, b.arg, b.timeout), path)
    elif isinstance(a, CheckpointedException):
        assert_same(a.record, b.record, path)
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


# -- the object budget (codec.budget) --------------------------------------------------------
def empty_maps(n: int) -> bytes:
    """msgpack for a list of ``n`` empty maps: n + 5 bytes that build ~72 n bytes of dicts."""
    return b"\xdd" + n.to_bytes(4, "big") + b"\x80" * n


def legit_values() -> dict[str, Any]:
    """Large values a LangGraph graph keeps, which the object budget must let through."""
    from langchain_core.messages import AIMessage, HumanMessage

    return {
        "messages": [
            AIMessage(content=f"answer {i}: " + "text " * 20, id=f"a{i}")
            if i % 2
            else HumanMessage(content=f"question {i}", id=f"h{i}")
            for i in range(10_000)
        ],
        "document": {"title": "report", "body": "lorem ipsum dolor sit amet " * 9_500},
        "numbers": list(range(1_000_000)),
    }


# -- read budgets: small frames of large values -----------------------------------------------
# Each frame expands to 60 MiB, under the 64 MiB per-value cap (CODEC_MAX_BYTES); four of
# them are 240 MiB from one row of a few KiB.
BOMB_VALUE_BYTES = 60 * (1 << 20)


@functools.cache
def bomb(tag: str, sized: bool = True) -> tuple[str, bytes]:
    """One small frame of a valid value (a 60 MiB string) in ``tag``'s format; ``sized``:
    the frame states its size (as ours do), else it is read chunk by chunk."""
    if tag == "json":
        plain = b'"' + b"a" * (BOMB_VALUE_BYTES - 2) + b'"'
    else:  # msgpack str32
        body = BOMB_VALUE_BYTES - 5
        plain = b"\xdb" + body.to_bytes(4, "big") + b"a" * body
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=sized)
    if sized:
        frame = compressor.compress(plain)
    else:
        stream = compressor.compressobj()
        frame = stream.compress(plain) + stream.flush()
    assert len(frame) < 8 * 1024
    return f"{tag}+zstd", frame


def budget_saver(store):
    if store.provider == "memory":
        # The memory saver stores nothing compressed with LangGraph's serializer; with the
        # JSON codec its values are json+zstd frames, read through the same decompression.
        return MemorySaver(serde=FaithfulJSONCodec(), store=store.store)
    return store


def bomb_for(saver, sized: bool = True) -> tuple[str, bytes]:
    return bomb("json" if isinstance(saver.serde, FaithfulJSONCodec) else "msgpack", sized)


def stored_rows(saver, thread_id: str):
    """Everything stored for the thread, to show a refused read changed nothing."""
    saver = backing_saver(saver)
    if saver.provider in ("sqlite", "postgres"):
        using = saver.db_alias
        return (
            sorted(
                (c, v, t, bytes(b))
                for c, v, t, b in ChannelBlob.objects.using(using)
                .filter(thread__thread_id=thread_id)
                .values_list("channel", "version", "type", "blob")
            ),
            sorted(
                (c, bytes(b))
                for c, b in Checkpoint.objects.using(using)
                .filter(thread__thread_id=thread_id)
                .values_list("checkpoint_id", "checkpoint")
            ),
            PendingWrite.objects.using(using).filter(thread__thread_id=thread_id).count(),
        )
    if saver.provider == "memory":
        return sorted((k, v) for k, v in saver.store.blobs.items() if k[0] == thread_id)
    client = saver.client
    return sorted(client.hgetall(f"{thread_prefix(thread_id)}b:{ns_hex('')}").items())


def peak_of(call) -> tuple[object, int]:
    """(what ``call`` raised or returned, the peak of Python's allocations above the start),
    with no decompressed frame cached beforehand."""
    FRAMES.clear()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    try:
        try:
            outcome = call()
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            outcome = exc
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    return outcome, peak
