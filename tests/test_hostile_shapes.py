"""Hostile shapes: a stored checkpoint body that decodes to the wrong shape reads as
UnreadableValue on every provider (saver, API 409, admin panel); keys with lone surrogates
and filters with NaN, infinity or bytes are refused as InvalidCheckpointInput before the
store is touched; the admin's jump to a time out of range is a form error."""

from __future__ import annotations

import enum
import json

import pytest
from django.contrib.auth.models import User
from django.db import connections
from django.test import Client
from langgraph.checkpoint.base import empty_checkpoint
from pydantic import BaseModel, field_serializer

from checkpoints.codec import FaithfulJSONCodec, decompress_typed
from checkpoints.errors import CheckpointCodecError, InvalidCheckpointInput, UnreadableValue
from checkpoints.models import Checkpoint, Thread
from checkpoints.store.redis.keys import dec, ns_hex, pack, thread_prefix, unpack
from checkpoints.timetravel import TimeTravel
from tests.reliability_fixtures import put_value
from tests.store_helpers import backing_saver, config_for

# name -> (what the stored body becomes, words the refusal must say)
MALFORMED = {
    "a string": (lambda body: "not a checkpoint", "a str"),
    "a list": (lambda body: [1, 2], "a list"),
    "an int": (lambda body: 7, "an int"),
    "None": (lambda body: None, "None"),
    "versions_seen a string": (lambda body: {**body, "versions_seen": "oops"}, "versions_seen"),
    "versions_seen of a node a string": (
        lambda body: {**body, "versions_seen": {"node": "oops"}},
        "versions_seen",
    ),
    "channel_versions a string": (
        lambda body: {**body, "channel_versions": "oops"},
        "channel_versions",
    ),
    "channel_versions a list": (
        lambda body: {**body, "channel_versions": ["a"]},
        "channel_versions",
    ),
    "pending_sends a string": (lambda body: {**body, "pending_sends": "oops"}, "pending_sends"),
}


def reshape_bodies(saver, thread_id: str, reshape) -> None:
    """Rewrite every stored checkpoint body of the thread as ``reshape(body)``, the way a
    person with access to the storage could: raw SQL, a raw Redis key, the memory dicts."""
    saver = backing_saver(saver)
    if saver.provider in ("sqlite", "postgres"):
        _reshape_rows(saver, thread_id, reshape)
    elif saver.provider == "memory":
        for by_id in saver.store.checkpoints[thread_id].values():
            for saved in by_id.values():
                saved.body = saver.serde.dumps_typed(reshape(saver.serde.loads_typed(saved.body)))
    else:
        key = f"{thread_prefix(thread_id)}c:{ns_hex('')}"
        for field, record in saver.client.hgetall(key).items():
            parts = unpack(record)
            body = saver.serde.loads_typed(decompress_typed((dec(parts[3]), parts[4])))
            parts[3], parts[4] = saver.serde.dumps_typed(reshape(body))
            saver.client.hset(key, field, pack(*parts))


def _reshape_rows(saver, thread_id: str, reshape) -> None:
    conn = connections[saver.db_alias]
    table, threads = Checkpoint._meta.db_table, Thread._meta.db_table
    jsonb = "CAST(%s AS jsonb)" if saver.provider == "postgres" else "%s"
    with conn.cursor() as cur:
        cur.execute(
            f"SELECT c.id, c.type, c.checkpoint, c.channel_versions FROM {table} c "
            f"JOIN {threads} t ON t.id = c.thread_id WHERE t.thread_id = %s",
            [thread_id],
        )
        for pk, type_, data, versions in cur.fetchall():
            body = saver.serde.loads_typed(decompress_typed((type_, bytes(data))))
            if isinstance(versions, str):
                versions = json.loads(versions)
            # The ORM keeps channel_versions in a column of its own: reshape them together.
            new = reshape({**body, "channel_versions": versions})
            if isinstance(new, dict):
                versions = new.pop("channel_versions", versions)
            new_type, new_data = saver.serde.dumps_typed(new)
            cur.execute(
                f"UPDATE {table} SET type = %s, checkpoint = %s, channel_versions = {jsonb} "
                "WHERE id = %s",
                [new_type, new_data, json.dumps(versions), pk],
            )


@pytest.mark.parametrize("shape", list(MALFORMED))
def test_a_body_of_the_wrong_shape_is_unreadable_naming_where(store, shape):
    reshape, reason = MALFORMED[shape]
    stored = put_value(store, "shaped", None, {"a": 1})
    checkpoint_id = stored["configurable"]["checkpoint_id"]
    put_value(store, "fine", None, {"b": 2})
    reshape_bodies(store, "shaped", reshape)
    travel = TimeTravel(backing_saver(store))
    for read in (
        lambda: store.get_tuple(config_for("shaped", ns="")),
        lambda: store.get_tuple(config_for("shaped", checkpoint_id, ns="")),
        lambda: list(store.list(config_for("shaped", ns=""))),
        lambda: list(store.list(None)),
        lambda: travel.get_state("shaped"),
        lambda: travel.fork("shaped", checkpoint_id, "copy"),
    ):
        with pytest.raises(UnreadableValue) as failure:
            read()
        message = failure.value.message
        assert f"checkpoint {checkpoint_id!r} in thread 'shaped'" in message, message
        assert reason in message, message
        assert failure.value.where["thread_id"] == "shaped"
        assert failure.value.where["checkpoint_id"] == checkpoint_id
    assert store.get_tuple(config_for("fine", ns="")).checkpoint["channel_values"] == {"b": 2}


def test_a_well_shaped_body_still_reads(store):
    # The checks refuse wrong types only: a real body, pending_sends and all, reads back.
    stored = put_value(store, "ok", None, {"a": 1})
    reshape_bodies(
        store, "ok", lambda body: {**body, "pending_sends": [], "versions_seen": {"n": {"a": 1}}}
    )
    tup = store.get_tuple(stored)
    assert tup.checkpoint["channel_values"] == {"a": 1}
    assert tup.checkpoint["versions_seen"] == {"n": {"a": 1}}


API_PROVIDERS = ["memory", "sqlite", "redis"]


@pytest.fixture
def staff(transactional_db):
    return User.objects.create_superuser("root", "root@example.com", "pw-root")


@pytest.mark.parametrize("provider", API_PROVIDERS)
@pytest.mark.parametrize("shape", ["a string", "None", "versions_seen a string"])
def test_the_api_answers_409_for_a_body_of_the_wrong_shape(store, provider, shape, settings, staff):
    url = getattr(store, "conn_string", None) if provider == "redis" else None
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": provider, "CONN_STRING": url}
    put_value(store, "shaped", None, {"a": 1})
    reshape_bodies(store, "shaped", MALFORMED[shape][0])
    client = Client()
    client.force_login(staff)
    for path in ("state", "history"):
        response = client.get(f"/api/threads/shaped/{path}/")
        assert response.status_code == 409, (path, response.content[:300])
        error = response.json()["error"]
        assert error["code"] == "codec_error"
        assert "in thread 'shaped'" in error["message"], error


@pytest.mark.parametrize("provider", ["sqlite", "postgres"])
@pytest.mark.parametrize("shape", ["an int", "versions_seen a string", "channel_versions a string"])
def test_the_admin_shows_the_cannot_decode_panel_for_a_wrong_shape(
    store, provider, shape, client, superuser
):
    client.force_login(superuser)
    put_value(store, "shaped", None, {"a": 1})
    reshape_bodies(store, "shaped", MALFORMED[shape][0])
    alias = backing_saver(store).db_alias
    query = {} if alias == "default" else {"provider": alias}
    row = Checkpoint.objects.using(alias).get(thread__thread_id="shaped")
    page = client.get(f"/admin/checkpoints/checkpoint/{row.pk}/change/", query)
    assert page.status_code == 200, page.content[:300]
    body = page.content.decode()
    assert "Cannot decode this checkpoint" in body and "codec_error" in body
    assert "in thread &#x27;shaped&#x27;" in body
    thread = client.get(f"/admin/checkpoints/thread/{row.thread_id}/change/", query)
    assert thread.status_code == 200, thread.content[:300]
    history = client.get("/admin/checkpoints/checkpoint/", {"thread__id__exact": row.thread_id})
    assert history.status_code == 200


# -- saver-level input --------------------------------------------------------------------
SURROGATE = "a\ud800"


@pytest.mark.parametrize(("bad", "said"), [(SURROGATE, "surrogate"), ("a\x00b", "NUL")])
@pytest.mark.parametrize("field", ["thread_id", "checkpoint_ns", "checkpoint_id"])
def test_a_lone_surrogate_in_a_key_is_refused_naming_the_field(store, field, bad, said):
    put_value(store, "keep", None, {"n": 1})
    keys = {"thread_id": "t", "checkpoint_ns": "", field: bad}
    config = {"configurable": keys}
    calls = [
        lambda: put_value(store, keys["thread_id"], config, {"n": 2}),
        lambda: store.get_tuple(config),
        lambda: list(store.list(config)),
    ]
    if field == "thread_id":
        calls.append(lambda: store.delete_thread(bad))
    else:
        written = {"configurable": {"checkpoint_id": "x", **keys}}
        calls.append(lambda: store.put_writes(written, [("n", 3)], "task"))
    for call in calls:
        with pytest.raises(InvalidCheckpointInput) as caught:
            call()
        assert caught.value.field == field, caught.value.message
        assert said in caught.value.message
    assert backing_saver(store).threads() == ["keep"]
    assert store.get_tuple(config_for("keep", ns="")).checkpoint["channel_values"] == {"n": 1}


def test_a_lone_surrogate_in_before_or_a_filter_is_refused(store):
    put_value(store, "keep", None, {"n": 1})
    with pytest.raises(InvalidCheckpointInput) as caught:
        list(
            store.list(
                config_for("keep", ns=""),
                before={"configurable": {"checkpoint_id": SURROGATE}},
            )
        )
    assert caught.value.field == "before"
    with pytest.raises(InvalidCheckpointInput) as caught:
        list(store.list(None, filter={"source": SURROGATE}))
    assert caught.value.field == "filter.source", caught.value.field


@pytest.mark.parametrize(
    "value",
    [float("nan"), float("inf"), float("-inf"), b"bytes", {"deep": [float("nan")]}, [b"x"]],
    ids=["nan", "inf", "-inf", "bytes", "nested-nan", "nested-bytes"],
)
def test_a_filter_value_json_cannot_hold_is_refused(store, value):
    put_value(store, "keep", None, {"n": 1})
    for config in (None, config_for("keep", ns="")):
        with pytest.raises(InvalidCheckpointInput) as caught:
            list(store.list(config, filter={"step": value}))
        assert caught.value.field.startswith("filter.step"), caught.value.field
        assert "filter.step" in caught.value.message, caught.value.message
    # Ordinary filters still match.
    assert len(list(store.list(None, filter={"step": 1, "source": "loop"}))) == 1


def _put_meta(store, thread_id: str, metadata: dict, config: dict | None = None) -> dict:
    return store.put(config or config_for(thread_id, ns=""), empty_checkpoint(), metadata, {})


@pytest.mark.parametrize("step", [2**31, -(2**31) - 1, 2**63, -(2**70)])
def test_a_step_outside_32_bits_is_refused_on_every_provider(store, step):
    kept = _put_meta(store, "steps", {"source": "loop", "step": 2**31 - 1})
    with pytest.raises(InvalidCheckpointInput) as caught:
        _put_meta(store, "steps", {"source": "loop", "step": step}, kept)
    assert caught.value.field == "metadata.step"
    assert str(step) in caught.value.message and "32-bit" in caught.value.message
    _put_meta(store, "steps", {"source": "loop", "step": -(2**31)}, kept)
    steps = [t.metadata["step"] for t in store.list(config_for("steps"))]
    assert steps == [-(2**31), 2**31 - 1]


def test_a_step_filter_outside_32_bits_is_refused_not_overflowed(store):
    _put_meta(store, "steps", {"source": "loop", "step": 3})
    for step in (2**31, 2**70, -(2**63) - 1):
        with pytest.raises(InvalidCheckpointInput) as caught:
            list(store.list(None, filter={"step": step}))
        assert caught.value.field == "filter.step" and str(step) in caught.value.message
    assert len(list(store.list(None, filter={"step": 3}))) == 1


@pytest.mark.parametrize("provider", API_PROVIDERS)
def test_a_huge_step_in_a_filter_over_http_is_a_4xx(store, provider, settings, staff):
    url = getattr(store, "conn_string", None) if provider == "redis" else None
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": provider, "CONN_STRING": url}
    put_value(store, "stepped", None, {"a": 1})
    client = Client()
    client.force_login(staff)
    huge = 99999999999999999999999
    rest = client.get(f"/api/threads/stepped/history/?metadata.step={huge}")
    assert rest.status_code == 400, rest.content[:300]
    assert rest.json()["error"]["field"] == "filter.step"
    lg = client.post(
        "/langgraph/threads/stepped/history",
        json.dumps({"metadata": {"step": 2**70}}),
        content_type="application/json",
    )
    assert lg.status_code == 422, lg.content[:300]
    assert "filter.step" in lg.content.decode()


def test_nul_in_metadata_keys_and_values_is_dropped_alike_on_every_provider(store):
    # As PostgresSaver drops NUL from metadata's string values (jsonb cannot hold \u0000),
    # at every depth and from keys too, whichever way the metadata came.
    metadata = {
        "source": "loop",
        "step": 1,
        "no\x00te": "a\x00b",
        "deep": {"k\x00": ["x\x00", {"y\x00": "\x00z"}]},
    }
    config = {
        "configurable": {"thread_id": "nul", "checkpoint_ns": ""},
        "metadata": {"tag\x00": "v\x00w"},
    }
    stored = _put_meta(store, "nul", metadata, config)
    wanted = {"note": "ab", "deep": {"k": ["x", {"y": "z"}]}, "tag": "vw"}
    found = store.get_tuple(stored).metadata
    assert {k: found[k] for k in wanted} == wanted
    assert len(list(store.list(None, filter={"note": "a\x00b"}))) == 1


@pytest.mark.parametrize(
    "metadata",
    [{"k": "v\ud800"}, {"k\udc00": 1}, {"k": ["ok", {"d": "\ud800"}]}],
    ids=["value", "key", "nested"],
)
def test_a_lone_surrogate_in_metadata_is_refused_on_every_provider(store, metadata):
    with pytest.raises(InvalidCheckpointInput) as caught:
        _put_meta(store, "sur", {"source": "loop", "step": 1, **metadata})
    assert "lone surrogate" in caught.value.message
    assert caught.value.field.startswith("metadata"), caught.value.field
    assert backing_saver(store).threads() == []


class Surrogate(enum.Enum):
    BAD = "a\ud800"


class Rendered(BaseModel):
    text: str = "fine"

    @field_serializer("text")
    def _render(self, value: str) -> str:
        return value + "\udfff"


def _nested(levels: int) -> list:
    value: list = ["b\ud800"]
    for _ in range(levels):
        value = [value]
    return value


SURROGATE_SHAPES = {
    "an enum as a dict key": {Surrogate.BAD: 1},
    "a model with a field_serializer": Rendered(),
    "nested past CODEC_MAX_DEPTH": _nested(250),
}


@pytest.mark.parametrize("shape", list(SURROGATE_SHAPES))
def test_a_lone_surrogate_in_any_shape_is_refused_not_stored_as_a_question_mark(store, shape):
    value = SURROGATE_SHAPES[shape]
    kept = put_value(store, "shapes", None, {"v": 1})
    before = store.get_tuple(kept)
    json_codec = isinstance(store.serde, FaithfulJSONCodec)
    if json_codec and shape.startswith("a model"):
        # The JSON codec stores a model's fields, not its serializer's output: nothing there
        # holds a surrogate, and the model reads back as itself.
        stored = put_value(store, "shapes", kept, {"v": value})
        assert store.get_tuple(stored).checkpoint["channel_values"]["v"] == value
        return
    for call in (
        lambda: put_value(store, "shapes", kept, {"v": value}),
        lambda: store.put_writes(kept, [("v", value)], "task-1"),
    ):
        with pytest.raises(CheckpointCodecError) as caught:
            call()
        message = caught.value.message
        assert "surrogate" in message or ("CODEC_MAX_DEPTH" in message and json_codec), message
        assert "'?'" in message or json_codec, message
    after = store.get_tuple(config_for("shapes", ns=""))
    assert after.config == before.config and after.pending_writes == []


@pytest.mark.parametrize(("bad", "said"), [("a\x00b", "NUL"), (SURROGATE, "surrogate")])
@pytest.mark.parametrize("field", ["channel", "task_id", "task_path"])
def test_a_bad_name_in_put_writes_is_refused_naming_it(store, field, bad, said):
    kept = put_value(store, "names", None, {"v": 1})
    names = {"channel": "c", "task_id": "task-1", "task_path": "", field: bad}
    with pytest.raises(InvalidCheckpointInput) as caught:
        store.put_writes(kept, [(names["channel"], 1)], names["task_id"], names["task_path"])
    assert caught.value.field == field and said in caught.value.message
    assert store.get_tuple(kept).pending_writes == []


@pytest.mark.parametrize("bad", ["a\x00b", SURROGATE])
def test_a_bad_channel_name_in_a_put_is_refused(store, bad):
    kept = put_value(store, "names", None, {"v": 1})
    with pytest.raises(InvalidCheckpointInput) as caught:
        put_value(store, "names", kept, {bad: 1})
    assert caught.value.field == "channel"
    checkpoint = empty_checkpoint()
    checkpoint["channel_versions"] = {bad: 1}  # only in the versions the body carries
    with pytest.raises(InvalidCheckpointInput):
        store.put(kept, checkpoint, {"source": "loop", "step": 2}, {})
    assert [t.config for t in store.list(config_for("names"))] == [kept]


# -- the admin's jump to a time -----------------------------------------------------------
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "moment", ["0001-01-01 00:00:00+05:00", "9999-12-31 23:59:59-05:00", "0001-01-01"]
)
def test_a_jump_to_a_time_out_of_range_is_a_form_error(client, superuser, moment, settings):
    from checkpoints.store.registry import get_saver

    client.force_login(superuser)
    put_value(get_saver(), "story", None, {"a": 1})
    pk = Thread.objects.get(thread_id="story").pk
    page = client.get(
        "/admin/checkpoints/checkpoint/", {"thread__id__exact": pk, "created_at__lte": moment}
    )
    assert page.status_code == 200, page.content[:300]
    body = page.content.decode()
    if moment == "0001-01-01":
        # The end of a day in range is a time like any other.
        assert "Jump to time" not in body
        return
    assert "Jump to time" in body and "out of range" in body and "9999-12-31" in body


@pytest.mark.parametrize(
    ("provider", "stored"),
    [
        *((p, s) for p in ("sqlite", "postgres", "redis") for s in ('"oops"', "[1, 2]")),
        # The ORM's JSON columns refuse text that is not JSON; a Redis record holds any.
        ("redis", "not json {"),
    ],
)
def test_metadata_of_the_wrong_shape_is_unreadable_naming_where(store, stored):
    written = put_value(store, "meta", None, {"a": 1})
    checkpoint_id = written["configurable"]["checkpoint_id"]
    if store.provider == "redis":
        key = f"{thread_prefix('meta')}c:{ns_hex('')}"
        for field, record in backing_saver(store).client.hgetall(key).items():
            parts = unpack(record)
            parts[2] = stored
            backing_saver(store).client.hset(key, field, pack(*parts))
    else:
        table, threads = Checkpoint._meta.db_table, Thread._meta.db_table
        cast = "CAST(%s AS jsonb)" if store.provider == "postgres" else "%s"
        with connections[backing_saver(store).db_alias].cursor() as cur:
            cur.execute(
                f"UPDATE {table} SET metadata = {cast} WHERE thread_id IN "
                f"(SELECT id FROM {threads} WHERE thread_id = %s)",
                [stored, "meta"],
            )
    for read in (
        lambda: store.get_tuple(config_for("meta", ns="")),
        lambda: list(store.list(config_for("meta", ns=""))),
    ):
        with pytest.raises(UnreadableValue) as failure:
            read()
        assert "the metadata" in failure.value.message, failure.value.message
        assert failure.value.where["checkpoint_id"] == checkpoint_id
