"""Hostile input: fuzzed codec bytes and envelopes, nesting and size bombs, oversized API
bodies, and thread ids with odd characters on every saver, in Redis keys, the API and the
admin."""

from __future__ import annotations

import json
import sys
import time
from urllib.parse import quote

import pytest
import zstandard
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.utils.html import escape
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from checkpoints.codec import ENVELOPE_KEY, JSON_TYPE, ZSTD_SUFFIX, FaithfulJSONCodec
from checkpoints.codec.reader import _READERS
from checkpoints.conf import setting
from checkpoints.errors import CheckpointCodecError, InvalidCheckpointInput
from checkpoints.models import Thread
from tests.reliability_fixtures import put_value
from tests.store_helpers import backing_saver, config_for

CODEC = FaithfulJSONCodec(compress_bytes=None)
ENVELOPE_TYPES = sorted(_READERS)
FUZZ = hsettings(
    max_examples=300,
    deadline=5000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
# Real modules no test imports and the allowlist does not hold: reviving data must never
# import them, whatever an envelope names. (smtplib was one until the service's own
# dependencies began to import it at setup.)
BAIT_MODULES = ["antigravity", "this", "turtle", "imaplib", "ftplib", "xmlrpc.server", "poplib"]


def _decode(data) -> None:
    """Decode hostile data: a value or CheckpointCodecError, nothing else."""
    try:
        CODEC.loads_typed(data)
    except CheckpointCodecError:
        pass


# -- the codec under fuzzing ----------------------------------------------------------------
@FUZZ
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_raise_only_codec_errors(raw):
    _decode((JSON_TYPE, raw))
    _decode((JSON_TYPE + ZSTD_SUFFIX, raw))


@FUZZ
@given(st.one_of(st.text(max_size=20), st.none(), st.integers()), st.binary(max_size=64))
def test_arbitrary_type_tags_raise_only_codec_errors(tag, raw):
    _decode((tag, raw))
    _decode(tag)


module_names = st.from_regex(r"zzfuzz_[a-z]{1,8}(\.[a-z]{1,6}){0,2}", fullmatch=True)
module_like = st.one_of(module_names, st.sampled_from(BAIT_MODULES), st.text(max_size=30))
class_paths = st.builds(
    lambda module, name: f"{module}:{name}",
    module_like,
    st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,10}", fullmatch=True),
)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    class_paths,
)
field_names = st.sampled_from(
    ["class", "id", "items", "v", "key", "fields", "kwargs", "value", "name", "members", "node"]
    + ["arg", "message", "cause", "repr_kwargs", "offset", "tz", "fold", "days", "seconds"]
)


def _envelopes(children):
    plain = st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=8), children, max_size=4)
    )
    typed = st.builds(
        lambda tag, fields: {ENVELOPE_KEY: tag, **fields},
        st.one_of(st.sampled_from(ENVELOPE_TYPES), st.text(max_size=10)),
        st.dictionaries(
            field_names,
            st.one_of(children, st.lists(module_like, max_size=4), class_paths),
            max_size=5,
        ),
    )
    return st.one_of(plain, typed)


envelopes = st.recursive(json_leaves, _envelopes, max_leaves=25)


@FUZZ
@given(envelopes)
def test_random_envelopes_raise_only_codec_errors_and_import_nothing(document):
    before = set(sys.modules)
    _decode((JSON_TYPE, json.dumps(document).encode()))
    imported = set(sys.modules) - before
    allowed = tuple(setting("CODEC_ALLOWED_MODULES"))
    strays = {
        name
        for name in imported
        if name.startswith("zzfuzz")
        or name.split(".")[0] in {m.split(".")[0] for m in BAIT_MODULES}
    }
    assert not strays, f"decoding imported {sorted(strays)}"
    outside = {n for n in imported if not n.split(".")[0].startswith(allowed)}
    # Only the standard library's own lazy imports may appear; never a module the data named.
    named = json.dumps(document)
    assert not {n for n in outside if n in named}, outside


def test_bait_modules_are_absent_before_fuzzing():
    # The import check above means something only while none of them is loaded already.
    assert not [m for m in BAIT_MODULES if m in sys.modules]


@pytest.mark.parametrize("module", BAIT_MODULES)
def test_an_envelope_naming_an_unlisted_module_is_refused_without_importing(module):
    for tag, body in [
        ("dataclass", {"class": f"{module}:Thing", "fields": {}}),
        ("model", {"class": f"{module}:Thing", "fields": {}}),
        ("enum", {"class": f"{module}:Thing", "value": 1}),
        ("namedtuple", {"class": f"{module}:Thing", "items": []}),
        ("lc", {"id": [*module.split("."), "Thing"], "kwargs": {}}),
    ]:
        data = json.dumps({ENVELOPE_KEY: tag, **body}).encode()
        with pytest.raises(CheckpointCodecError):
            CODEC.loads(data)
        assert module not in sys.modules, (tag, module)


# -- nesting and size limits ----------------------------------------------------------------
def _quick(call, seconds: float = 5.0):
    started = time.monotonic()
    with pytest.raises(CheckpointCodecError) as caught:
        call()
    assert time.monotonic() - started < seconds, f"refusal took {time.monotonic() - started:.1f}s"
    return str(caught.value)


def test_deep_json_nesting_is_refused_quickly():
    for opener, closer in (("[", "]"), ('{"a":', "}")):
        data = (opener * 200_000 + "1" + closer * 200_000).encode()
        message = _quick(lambda data=data: CODEC.loads(data))
        assert "CODEC_MAX_DEPTH" in message or "nested too deeply" in message, message


def test_deep_envelope_nesting_names_the_depth_limit():
    document: object = 1
    for _ in range(400):
        document = {ENVELOPE_KEY: "tuple", "items": [document]}
    message = _quick(lambda: CODEC.loads(json.dumps(document).encode()))
    assert "CODEC_MAX_DEPTH (200)" in message, message


def test_deep_values_are_refused_on_write():
    value: object = []
    for _ in range(5000):
        value = [value]
    message = _quick(lambda: CODEC.dumps(value))
    assert "CODEC_MAX_DEPTH" in message or "nested too deeply" in message, message


def test_oversized_payloads_are_refused_both_ways():
    limits = {**settings.CHECKPOINTS, "CODEC_MAX_BYTES": 100_000}
    with override_settings(CHECKPOINTS=limits):
        limit = "CHECKPOINTS['CODEC_MAX_BYTES'] (100000 bytes)"
        assert limit in _quick(lambda: CODEC.loads(b'"' + b"x" * 200_000 + b'"'))
        assert limit in _quick(lambda: CODEC.dumps("x" * 200_000))
        # A small zstd frame that expands far past the limit stops at the limit.
        bomb = zstandard.ZstdCompressor().compress(b"[" + b"0," * 50_000_000 + b"0]")
        assert len(bomb) < 100_000
        message = _quick(lambda: CODEC.loads_typed((JSON_TYPE + ZSTD_SUFFIX, bomb)))
        assert limit in message, message


# -- odd thread ids on every saver ----------------------------------------------------------
ODD_IDS = [
    "a/b/c",
    "../../etc/passwd",
    "ü漢字🙂",
    "{tag}",
    "}{",
    "cp:threads",
    "with\nnewline\tand tab",
    "%2F%00",
    "'; DROP TABLE checkpoints_thread; --",
    "*?[]\\",
    "x" * 1024,
]
REFUSED_IDS = ["a\x00b", "x" * 10_240, "ü" * 600]


def test_odd_thread_ids_on_every_saver(store):
    stored = {}
    for i, thread_id in enumerate(ODD_IDS):
        stored[thread_id] = put_value(store, thread_id, None, {"i": i})
        store.put_writes(stored[thread_id], [("i", i * 10)], f"task-{i}")
    assert set(backing_saver(store).threads()) == set(ODD_IDS)
    for i, thread_id in enumerate(ODD_IDS):
        tup = store.get_tuple(config_for(thread_id, ns=""))
        assert tup.config["configurable"]["thread_id"] == thread_id
        assert tup.checkpoint["channel_values"] == {"i": i}
        assert [w[2] for w in tup.pending_writes] == [i * 10]
        assert len(list(store.list(config_for(thread_id, ns="")))) == 1
    for thread_id in ODD_IDS[::2]:
        store.delete_thread(thread_id)
    assert set(backing_saver(store).threads()) == set(ODD_IDS[1::2])
    for thread_id in ODD_IDS[1::2]:
        assert store.get_tuple(config_for(thread_id, ns="")) is not None


def test_refused_thread_ids_change_nothing(store):
    put_value(store, "keep", None, {"n": 1})
    for thread_id in REFUSED_IDS:
        for call in (
            lambda t=thread_id: put_value(store, t, None, {"n": 2}),
            lambda t=thread_id: store.get_tuple(config_for(t, ns="")),
            lambda t=thread_id: list(store.list(config_for(t, ns=""))),
            lambda t=thread_id: store.delete_thread(t),
        ):
            with pytest.raises(InvalidCheckpointInput) as caught:
                call()
            assert caught.value.field == "thread_id"
    assert backing_saver(store).threads() == ["keep"]
    assert store.get_tuple(config_for("keep", ns="")).checkpoint["channel_values"] == {"n": 1}


@hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(thread_id=st.text(min_size=0, max_size=40) | st.text(min_size=1030, max_size=1100))
def test_any_thread_id_round_trips_or_is_refused(store, thread_id):
    encoded = len(thread_id.encode("utf-8", "surrogatepass"))
    if not thread_id or "\x00" in thread_id or encoded > 1024:
        with pytest.raises(InvalidCheckpointInput):
            put_value(store, thread_id, None, {"n": 1})
        assert thread_id not in backing_saver(store).threads()
        return
    stored = put_value(store, thread_id, None, {"n": 1})
    tup = store.get_tuple(config_for(thread_id, ns=""))
    assert tup.config == stored and tup.checkpoint["channel_values"] == {"n": 1}
    assert thread_id in backing_saver(store).threads()
    store.delete_thread(thread_id)
    assert store.get_tuple(config_for(thread_id, ns="")) is None


@pytest.mark.parametrize("provider", ["redis"])
def test_odd_thread_ids_make_safe_distinct_redis_keys(store, provider):
    import re

    for i, thread_id in enumerate(ODD_IDS):
        put_value(store, thread_id, None, {"i": i})
    keys = [k.decode() for k in backing_saver(store).client.keys("*")]
    from checkpoints.store.redis.keys import STORE_TAG

    # Store-wide keys share the {cp} tag (one cluster slot); every other key is a thread's.
    store_wide = {k for k in keys if k.startswith(STORE_TAG)}
    assert store_wide == {STORE_TAG + "format", STORE_TAG + "threads"}
    per_thread = [k for k in keys if k.startswith("cp:{") and k not in store_wide]
    assert per_thread
    assert all(re.fullmatch(r"cp:\{[0-9a-f]{32}\}:.+", k, re.S) for k in per_thread), per_thread
    tags = {k.split("}", 1)[0] for k in per_thread}
    assert len(tags) == len(ODD_IDS)
    # No key holds a raw thread id: slashes, braces and newlines never reach key names.
    assert not [k for k in keys if "\n" in k or "etc/passwd" in k or "DROP" in k]


# -- the API and the admin ------------------------------------------------------------------
@pytest.fixture
def staff(transactional_db):
    return User.objects.create_superuser("root", "root@example.com", "pw-root")


def _seed_api(ids):
    from checkpoints.store.registry import get_saver

    saver = get_saver()
    for i, thread_id in enumerate(ids):
        put_value(saver, thread_id, None, {"i": i})


def test_odd_thread_ids_through_the_api(staff):
    _seed_api(ODD_IDS)
    client = Client()
    client.force_login(staff)
    for thread_id in ODD_IDS:
        base = f"/api/threads/{quote(thread_id, safe='')}/"
        for suffix in ("", "history/", "state/"):
            response = client.get(base + suffix)
            assert response.status_code == 200, (thread_id, suffix, response.content[:200])
        assert response.json()["config"]["configurable"]["thread_id"] == thread_id
    for thread_id in REFUSED_IDS:
        response = client.get(f"/api/threads/{quote(thread_id, safe='')}/state/")
        assert response.status_code == 400, (thread_id[:20], response.status_code)
        assert response.json()["error"]["field"] == "thread_id"


def test_oversized_api_bodies_are_413_and_change_nothing(staff):
    _seed_api(["big"])
    client = Client()
    client.force_login(staff)
    body = json.dumps({"checkpoint_id": "x" * 5000, "supersteps": [[{"values": {"a": 1}}]]})
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024):
        for suffix in ("rollback/", "fork/", "bulk-update/", "retention/"):
            response = client.post(
                f"/api/threads/big/{suffix}", body, content_type="application/json"
            )
            assert response.status_code == 413, (suffix, response.status_code, response.content)
            assert response.json()["error"]["code"] == "request_too_large"
        response = client.post("/api/checkpoints/sweep/", body, content_type="application/json")
        assert response.status_code == 413
    from checkpoints.store.registry import get_saver

    assert len(list(get_saver().list(config_for("big", ns="")))) == 1
    assert get_saver().threads() == ["big"]


def test_odd_thread_ids_in_the_admin(staff):
    _seed_api(ODD_IDS)
    client = Client()
    client.force_login(staff)
    for thread_id in ODD_IDS + REFUSED_IDS:
        response = client.get("/admin/checkpoints/thread/", {"q": thread_id}, follow=True)
        assert response.status_code == 200, (thread_id[:20], response.status_code)
        if "\x00" in thread_id:
            # No stored text holds a NUL: the list is shown again without the search, saying so.
            assert response.redirect_chain == [("/admin/checkpoints/thread/?", 302)]
            assert "held a NUL character" in response.content.decode()
        else:
            assert not response.redirect_chain, thread_id[:20]
    for thread in Thread.objects.all():
        response = client.get(f"/admin/checkpoints/thread/{thread.pk}/change/")
        assert response.status_code == 200, (thread.thread_id[:20], response.status_code)
        # Shown escaped: the id is data, never markup.
        assert escape(thread.thread_id[:40]) in response.content.decode(), thread.thread_id[:40]
