"""Round-4 review: attacks on the round-3 fixes that the fix tests did not cover."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.errors import InvalidCheckpointInput
from tests.store_helpers import config_for


def _put(store, thread_id, ns="", cid=None, values=None):
    body = empty_checkpoint()
    if cid is not None:
        body["id"] = cid
    body["channel_values"] = values or {"a": 1}
    body["channel_versions"] = {k: 1 for k in body["channel_values"]}
    return store.put(
        {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}},
        body,
        {"source": "input", "step": -1},
        body["channel_versions"],
    )


@pytest.mark.parametrize("part", ["ns", "cid", "task", "channel"])
def test_a_long_key_is_refused_not_a_driver_error(store, part):
    long = "k" * 20_000
    try:
        if part == "ns":
            _put(store, "t-long", ns=long)
        elif part == "cid":
            _put(store, "t-long", cid=long)
        else:
            config = _put(store, "t-long")
            task, channel = (long, "c") if part == "task" else ("t", long)
            store.put_writes(config, [(channel, 1)], task)
    except InvalidCheckpointInput:
        return
    # Stored: it must read back.
    assert list(store.list(config_for("t-long"))) is not None


# -- admin sign-in lockout: user name spellings the form folds into one -----------------------
@pytest.mark.django_db(databases=["default"])
@pytest.mark.parametrize("spelling", [" admin", "admin ", "\uff41dmin", "admin\u200b"])
def test_the_lockout_holds_for_every_spelling_of_the_name(spelling):
    from django.contrib.auth.models import User
    from django.test import Client

    User.objects.create_superuser("admin", "a@example.com", "the-right-password")
    attacker = Client(REMOTE_ADDR="203.0.113.67")
    for i in range(6):
        attacker.post("/admin/login/?next=/admin/", {"username": "admin", "password": f"g{i}"})
    answer = attacker.post(
        "/admin/login/?next=/admin/", {"username": spelling, "password": "the-right-password"}
    )
    assert attacker.get("/admin/").status_code != 200, (spelling, answer.status_code)


# -- acknowledged, then unreadable: parts of a put the value caps may not see ---------------
MiB = 1 << 20


@pytest.mark.parametrize("part", ["metadata", "async-value", "async-writes", "versions"])
def test_what_a_put_acknowledges_reads_back(store, part):
    import asyncio

    from checkpoints.errors import ValueTooLarge

    big = "m" * (70 * MiB)
    body = empty_checkpoint()
    body["channel_values"] = {"a": 1}
    body["channel_versions"] = {"a": 1}
    config = {"configurable": {"thread_id": "ack", "checkpoint_ns": ""}}
    meta = {"source": "input", "step": -1}
    try:
        if part == "metadata":
            store.put(config, body, {**meta, "note": big}, {"a": 1})
        elif part == "async-value":
            body["channel_values"] = {"a": big}
            asyncio.run(store.aput(config, body, meta, {"a": 1}))
        elif part == "async-writes":
            saved = store.put(config, body, meta, {"a": 1})
            asyncio.run(store.aput_writes(saved, [("w", big)], "task"))
        else:
            body["versions_seen"] = {"node": {big: 1}}
            store.put(config, body, meta, {"a": 1})
    except (ValueTooLarge, InvalidCheckpointInput):
        return
    # Acknowledged: every read must give it back (or refuse it naming why, never raw).
    assert store.get_tuple(config_for("ack", ns="")) is not None
    assert len(list(store.list(None))) >= 1


# -- lone surrogates in shapes the round-3 tests did not list ------------------------------
import dataclasses  # noqa: E402
from collections import namedtuple  # noqa: E402

BAD = "x\ud800"


@dataclasses.dataclass
class _Holder:
    text: str


_Pair = namedtuple("_Pair", "left right")


SURROGATE_SHAPES = {
    "set": lambda: {BAD},
    "frozenset": lambda: frozenset({BAD}),
    "tuple-key": lambda: {(BAD, 1): 1},
    "dataclass": lambda: _Holder(BAD),
    "namedtuple": lambda: _Pair(BAD, 1),
    "int-key-then-str": lambda: {1: {2: [BAD]}},
    "bytes-key-dict": lambda: {b"k": BAD},
}


@pytest.mark.parametrize("shape", sorted(SURROGATE_SHAPES))
@pytest.mark.parametrize("via", ["put", "put_writes"])
def test_a_lone_surrogate_is_refused_or_kept_never_a_question_mark(store, shape, via):
    value = SURROGATE_SHAPES[shape]()
    body = empty_checkpoint()
    body["channel_values"] = {"a": value} if via == "put" else {"a": 1}
    body["channel_versions"] = {"a": 1}
    config = {"configurable": {"thread_id": "sur", "checkpoint_ns": ""}}
    try:
        saved = store.put(config, body, {"source": "input", "step": -1}, {"a": 1})
        if via == "put_writes":
            store.put_writes(saved, [("w", value)], "task")
    except (ValueError, TypeError):
        return
    got = store.get_tuple(config_for("sur", ns=""))
    back = got.checkpoint["channel_values"]["a"] if via == "put" else got.pending_writes[0][2]
    assert "?" not in repr(back), (shape, back)


# -- metadata numbers the JSON columns cannot keep ----------------------------------------
@pytest.mark.parametrize(
    "metadata",
    [
        {"n": 10**400},
        {"n": float("nan")},
        {"n": float("inf")},
        {"step": 1.5},
        {"step": True},
        {"n": -(2**63) - 1},
        {"n": [2**64]},
    ],
    ids=["huge-int", "nan", "inf", "step-float", "step-bool", "below-int64", "nested-2**64"],
)
def test_metadata_numbers_are_refused_or_read_back(store, metadata):
    body = empty_checkpoint()
    config = {"configurable": {"thread_id": "num", "checkpoint_ns": ""}}
    try:
        store.put(config, body, {"source": "input", "step": -1, **metadata}, {})
    except (InvalidCheckpointInput, ValueError):
        return
    got = store.get_tuple(config_for("num", ns=""))
    assert got is not None
    list(store.list(None, filter={"source": "input"}))


# -- "reading never imports": a module's own __getattr__ is an import hook too ------------
@pytest.fixture
def lazy_module(monkeypatch):
    """A loaded module whose PEP 562 __getattr__ records each name asked of it (as lazy
    packages do when they import a submodule for the name)."""
    import sys
    import types

    asked: list[str] = []
    module = types.ModuleType("round4_lazy")

    def __getattr__(name):  # noqa: N807
        asked.append(name)
        raise AttributeError(name)

    module.__getattr__ = __getattr__
    monkeypatch.setitem(sys.modules, "round4_lazy", module)
    return asked


@pytest.mark.parametrize("tag", ["dataclass", "model", "enum", "namedtuple"])
def test_an_envelope_never_calls_a_modules_getattr(lazy_module, tag):
    import json

    from checkpoints.codec import ENVELOPE_KEY, FaithfulJSONCodec
    from checkpoints.errors import CheckpointCodecError

    body = {"fields": {}, "value": 1, "items": []}
    data = json.dumps({ENVELOPE_KEY: tag, "class": "round4_lazy:Thing", **body}).encode()
    with pytest.raises(CheckpointCodecError):
        FaithfulJSONCodec(compress_bytes=None).loads(data)
    assert lazy_module == []


def test_msgpack_and_langgraph_json_never_call_a_modules_getattr(lazy_module):
    import json

    import ormsgpack

    from checkpoints.codec.serde import store_serializer

    serde = store_serializer()
    for code in (0, 1, 2, 5):
        ext = ormsgpack.Ext(code, ormsgpack.packb(["round4_lazy", "Thing", {}]))
        serde.loads_typed(("msgpack", ormsgpack.packb(ext)))
    envelope = {"lc": 2, "type": "constructor", "id": ["round4_lazy", "Thing"], "kwargs": {}}
    serde.loads_typed(("json", json.dumps(envelope).encode()))
    assert lazy_module == []


# -- deep metadata: what a put keeps, every read reads ------------------------------------
def test_deep_metadata_is_refused_or_read_back(store):
    deep: object = 1
    for _ in range(3000):
        deep = [deep]
    config = {"configurable": {"thread_id": "deepmeta", "checkpoint_ns": ""}}
    try:
        store.put(config, empty_checkpoint(), {"source": "input", "step": -1, "d": deep}, {})
    except (InvalidCheckpointInput, ValueError):
        return
    assert store.get_tuple(config_for("deepmeta", ns="")) is not None
    assert list(store.list(None))


# -- odd ids and parameters in URLs: never a 500 -------------------------------------------
ODD = ["a%00b", "%ED%A0%80", "%C0%80", "x%FF", "%25", "a%0Ab"]
ROUTES = [
    "/api/threads/{id}/",
    "/api/threads/{id}/state/",
    "/api/threads/{id}/history/",
    "/api/threads/{id}/checkpoints/{id}/",
    "/langgraph/threads/{id}",
    "/langgraph/threads/{id}/state",
    "/langgraph/threads/{id}/state/{id}",
    "/langgraph/threads/{id}/history",
    "/admin/checkpoints/checkpoint/{id}/change/",
    "/admin/checkpoints/checkpoint/{id}/value/?part=a",
    "/admin/checkpoints/checkpoint/{id}/changes/",
    "/admin/checkpoints/checkpoint/compare/?a={id}&b={id}",
    "/admin/checkpoints/thread/{id}/change/",
    "/admin/checkpoints/checkpoint/?q={id}",
    "/admin/checkpoints/checkpoint/?thread_id={id}",
    "/api/threads/?q={id}",
    "/api/threads/alice-1/history/?before={id}",
    "/api/threads/alice-1/history/?metadata.step={id}",
]


@pytest.mark.django_db(transaction=True)
def test_odd_ids_in_urls_are_never_a_500(threads):
    from django.contrib.auth.models import User
    from django.test import Client

    admin = User.objects.create_superuser("round4", "r@example.com", "pw")
    client = Client(raise_request_exception=False)
    client.force_login(admin)
    failures = []
    for route in ROUTES:
        for odd in ODD:
            path = route.replace("{id}", odd)
            for method in ("get", "delete") if "threads/{id}" in route else ("get",):
                response = getattr(client, method)(path)
                if response.status_code >= 500:
                    failures.append((method, path, response.status_code))
    assert failures == [], "\n".join(map(str, failures))


# -- text fields of the retention routes: a lone surrogate is a 400, not a driver error ------
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("reason", ["why\ud800", "why\x00"])
def test_a_hold_reason_no_store_can_keep_is_refused(clients, threads, users, reason):
    import json

    from django.contrib.auth.models import Permission

    users["alice"].user_permissions.add(*Permission.objects.filter(codename__contains="hold"))
    users["alice"].is_staff = True
    users["alice"].save()
    response = clients["alice"].generic(
        "POST",
        "/api/threads/alice-1/hold/",
        json.dumps({"reason": reason}),
        content_type="application/json",
    )
    assert response.status_code < 500, response.content[:500]


# -- the async doors check names as the sync ones do ---------------------------------------
@pytest.mark.parametrize("bad", ["c\x00", "c\ud800"])
@pytest.mark.parametrize("part", ["channel", "task_id", "task_path", "thread_id", "ns"])
def test_async_put_writes_and_aput_refuse_bad_names(store, bad, part):
    import asyncio

    config = _put(store, "async-names")
    conf = dict(config["configurable"])
    if part in ("thread_id", "ns"):
        body = empty_checkpoint()
        target = {"thread_id": bad if part == "thread_id" else "async-names"}
        target["checkpoint_ns"] = bad if part == "ns" else ""
        with pytest.raises(InvalidCheckpointInput):
            asyncio.run(store.aput({"configurable": target}, body, {}, {}))
        with pytest.raises(InvalidCheckpointInput):
            asyncio.run(store.aget_tuple({"configurable": target}))
        return
    channel = bad if part == "channel" else "c"
    task_id = bad if part == "task_id" else "t"
    task_path = bad if part == "task_path" else ""
    with pytest.raises(InvalidCheckpointInput):
        asyncio.run(store.aput_writes({"configurable": conf}, [(channel, 1)], task_id, task_path))
