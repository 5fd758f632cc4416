"""Sealed values bound to their place (issue 19): relocation, swap and replay are refused.

The matrix copies the sealed bytes of one stored value over another's slot, the two
differing in one coordinate only (thread, namespace, channel, version, checkpoint, task,
index), on every provider that seals, and expects ``UndecryptableValue`` naming the slot
read. The upgrade path covers rows sealed in the unbound format (1).
"""

from __future__ import annotations

import asyncio
import base64
import os

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from django.core.management import call_command
from django.test import override_settings

from checkpoints.codec.encryption import SUFFIX, _key_id, sealed_format
from checkpoints.conf import store_settings
from checkpoints.errors import UndecryptableValue
from checkpoints.models import ChannelBlob, PendingWrite
from tests.store_helpers import put_chain

KEY = base64.urlsafe_b64encode(os.urandom(32)).decode()
VALUES = {"a": "secret of a", "b": "secret of b"}


def keys(**extra):
    return override_settings(CHECKPOINTS={**store_settings(), "ENCRYPTION_KEYS": [KEY], **extra})


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def provider(request):
    return request.param


# -- raw slots ----------------------------------------------------------------------------
# A slot is (kind, thread, ns, ...): ("channel", t, ns, channel, version),
# ("write", t, ns, checkpoint id, task id, idx) or ("body", t, ns, checkpoint id).


def _orm_rows(saver, slot):
    kind, thread_id, ns, *rest = slot
    if kind == "channel":
        channel, version = rest
        return ChannelBlob.objects.using(saver.using).filter(
            thread__thread_id=thread_id, checkpoint_ns=ns, channel=channel, version=version
        )
    checkpoint_id, task_id, idx = rest
    return PendingWrite.objects.using(saver.using).filter(
        thread__thread_id=thread_id,
        checkpoint_ns=ns,
        checkpoint_id=checkpoint_id,
        task_id=task_id,
        idx=idx,
    )


def _redis_field(slot):
    from checkpoints.store.redis.keys import ns_hex, pack, thread_prefix

    kind, thread_id, ns, *rest = slot
    letter = {"channel": "b:", "write": "w:", "body": "c:"}[kind]
    key = f"{thread_prefix(thread_id)}{letter}{ns_hex(ns)}"
    if kind == "channel":
        field = pack(*rest)
    elif kind == "write":
        field = pack(rest[0], rest[1], str(rest[2]))
    else:
        field = rest[0].encode()
    # Where the (type, bytes) pair sits among the value's length-prefixed parts.
    return key, field, (0, 1) if kind == "channel" else (3, 4)


def read_slot(saver, slot) -> tuple[str, bytes]:
    if saver.provider == "redis":
        from checkpoints.store.redis.keys import unpack

        key, field, (t, d) = _redis_field(slot)
        raw = saver.client.hget(key, field)
        assert raw is not None, f"no stored value at {slot}"
        parts = unpack(raw)
        return parts[t].decode(), parts[d]
    type_, blob = _orm_rows(saver, slot).values_list("type", "blob").get()
    return type_, bytes(blob)


def write_slot(saver, slot, typed: tuple[str, bytes]) -> None:
    if saver.provider == "redis":
        from checkpoints.store.redis.keys import pack, unpack

        key, field, (t, d) = _redis_field(slot)
        parts = unpack(saver.client.hget(key, field))
        parts[t], parts[d] = typed[0].encode(), typed[1]
        saver.client.hset(key, field, pack(*parts))
        return
    assert _orm_rows(saver, slot).update(type=typed[0], blob=typed[1]) == 1


# -- the world the matrix moves values around in -----------------------------------------


def build_world(saver) -> dict:
    """Two checkpoints per (thread, namespace), each with writes of two tasks."""
    world = {}
    for thread_id, ns in (("t-victim", ""), ("t-other", ""), ("t-victim", "sub")):
        last = put_chain(saver, thread_id, VALUES, steps=2, ns=ns)
        tuples = list(saver.list({"configurable": {"thread_id": thread_id, "checkpoint_ns": ns}}))
        assert (
            tuples[0].config["configurable"]["checkpoint_id"]
            == last["configurable"]["checkpoint_id"]
        )
        newest, older = tuples[0], tuples[1]
        for tup in (newest, older):
            saver.put_writes(tup.config, [("a", "w-a"), ("b", "w-b")], "task-1")
            saver.put_writes(tup.config, [("a", "w-a2")], "task-2")
        world[(thread_id, ns)] = {
            "config": newest.config,
            "cid": newest.config["configurable"]["checkpoint_id"],
            "older_cid": older.config["configurable"]["checkpoint_id"],
            "versions": newest.checkpoint["channel_versions"],
            "older_versions": older.checkpoint["channel_versions"],
        }
    return world


VICTIM = ("t-victim", "")


def cases(provider: str) -> list[tuple[str, str]]:
    """(kind, coordinate changed) for every sealed kind the provider stores."""
    out = [
        ("channel", c)
        for c in ("other thread", "other namespace", "other channel", "other version")
    ]
    out += [
        ("write", c)
        for c in (
            "other thread",
            "other namespace",
            "other checkpoint",
            "other task",
            "other index",
        )
    ]
    if provider == "redis":
        # The ORM keeps the checkpoint body (ids, versions seen; no channel values) unsealed.
        out += [("body", c) for c in ("other thread", "other namespace", "other checkpoint")]
    return out


def slots(world: dict, kind: str, change: str):
    """The victim's slot and the slot whose sealed bytes are moved over it."""
    v = world[VICTIM]
    thread_id, ns = VICTIM
    place = {"other thread": ("t-other", ""), "other namespace": ("t-victim", "sub")}
    src_thread, src_ns = place.get(change, VICTIM)
    src = world[(src_thread, src_ns)]
    if kind == "channel":
        victim = ("channel", thread_id, ns, "a", str(v["versions"]["a"]))
        channel = "b" if change == "other channel" else "a"
        versions = src["older_versions"] if change == "other version" else src["versions"]
        return victim, ("channel", src_thread, src_ns, channel, str(versions[channel]))
    if kind == "write":
        victim = ("write", thread_id, ns, v["cid"], "task-1", 0)
        cid = src["older_cid"] if change == "other checkpoint" else src["cid"]
        task = "task-2" if change == "other task" else "task-1"
        idx = 1 if change == "other index" else 0
        return victim, ("write", src_thread, src_ns, cid, task, idx)
    victim = ("body", thread_id, ns, v["cid"])
    cid = src["older_cid"] if change == "other checkpoint" else src["cid"]
    return victim, ("body", src_thread, src_ns, cid)


MATRIX_SIZE = {p: len(cases(p)) for p in ("sqlite", "postgres", "redis")}


def test_relocation_matrix(store, provider):
    """Every sealed kind x every coordinate: the moved value is refused, naming the place."""
    checked = 0
    with keys():
        world = build_world(store)
        victim_config = world[VICTIM]["config"]
        for kind, change in cases(provider):
            victim, source = slots(world, kind, change)
            original = read_slot(store, victim)
            moved = read_slot(store, source)
            assert sealed_format(moved) == 2
            write_slot(store, victim, moved)
            with pytest.raises(UndecryptableValue) as caught:
                store.get_tuple(victim_config)
            err = caught.value
            label = f"{kind} / {change}"
            assert err.where["thread_id"] == "t-victim", label
            assert err.where["checkpoint_ns"] == "", label
            assert err.where["checkpoint_id"] == world[VICTIM]["cid"], label
            part = {"channel": "channel 'a'", "write": "task 'task-1'", "body": "the body"}[kind]
            assert part in err.where["part"] and "t-victim" in err.message, label
            assert "another place" in err.message, label
            # Every other row still reads, and putting the bytes back heals the victim.
            assert (
                store.get_tuple(world[("t-other", "")]["config"]).checkpoint["channel_values"]
                == VALUES
            )
            write_slot(store, victim, original)
            tup = store.get_tuple(victim_config)
            assert tup.checkpoint["channel_values"] == VALUES, label
            checked += 1
    assert checked == MATRIX_SIZE[provider] == (12 if provider == "redis" else 9)


@pytest.mark.parametrize("way", ["sync", "async"])
def test_copy_reseals_for_the_target(store, way):
    """copy_thread moves values legitimately: the copy reads, and its bytes are its own."""
    with keys():
        world = build_world(store)
        if way == "async":
            asyncio.run(store.acopy_thread("t-victim", "t-copy"))
        else:
            store.copy_thread("t-victim", "t-copy")
        source = world[VICTIM]
        copied = {**source["config"]["configurable"], "thread_id": "t-copy"}
        tup = store.get_tuple({"configurable": copied})
        assert tup.checkpoint["channel_values"] == VALUES
        assert sorted(w[2] for w in tup.pending_writes) == ["w-a", "w-a2", "w-b"]
        sub = {"configurable": {"thread_id": "t-copy", "checkpoint_ns": "sub"}}
        assert store.get_tuple(sub).checkpoint["channel_values"] == VALUES
        slot = ("channel", "t-victim", "", "a", str(source["versions"]["a"]))
        assert read_slot(store, slot) != read_slot(store, ("channel", "t-copy", *slot[2:]))


def test_store_id_is_bound(store):
    """A value sealed for one store id is refused by a store configured with another."""
    with keys(ENCRYPTION_STORE_ID="store-a"):
        config = put_chain(store, "t-store", VALUES)
    with keys(ENCRYPTION_STORE_ID="store-b"), pytest.raises(UndecryptableValue, match="t-store"):
        store.get_tuple(config)
    with keys(ENCRYPTION_STORE_ID="store-a"):
        assert store.get_tuple(config).checkpoint["channel_values"] == VALUES


# -- the upgrade path from the unbound format ---------------------------------------------


def seal_unbound(typed: tuple[str, bytes]) -> tuple[str, bytes]:
    """A value sealed the way format 1 did: only the type tag authenticated."""
    raw = base64.urlsafe_b64decode(KEY)
    nonce = os.urandom(12)
    sealed_type = typed[0] + SUFFIX
    body = AESGCM(raw).encrypt(nonce, typed[1], sealed_type.encode())
    return sealed_type, _key_id(raw) + nonce + body


def _unbind(store, slot):
    from checkpoints.codec.encryption import open_typed

    write_slot(store, slot, seal_unbound(open_typed(read_slot(store, slot), at=_place(slot))))


def _place(slot):
    from checkpoints.codec.encryption import Place

    kind, thread_id, ns, *rest = slot
    if kind == "channel":
        return Place.blob(thread_id, ns, *rest)
    if kind == "body":
        return Place.body(thread_id, ns, *rest)
    cid, task, idx = rest
    return Place.write(thread_id, ns, cid, task, idx, "a")


def test_unbound_rows_read_until_required_then_refused(store, provider):
    with keys():
        world = build_world(store)
        v = world[VICTIM]
        slot = ("channel", *VICTIM, "a", str(v["versions"]["a"]))
        _unbind(store, slot)
        assert sealed_format(read_slot(store, slot)) == 1
        # Readable while the deployment has not declared the upgrade done ...
        assert store.get_tuple(v["config"]).checkpoint["channel_values"] == VALUES
    # ... and refused, naming the place and the setting, once it has.
    with keys(ENCRYPTION_REQUIRE_BOUND=True), pytest.raises(UndecryptableValue) as caught:
        store.get_tuple(v["config"])
    assert caught.value.where["part"] == "channel 'a'"
    assert "ENCRYPTION_REQUIRE_BOUND" in caught.value.message
    assert "t-victim" in caught.value.message


def test_reencrypt_upgrades_unbound_rows(store, provider, request, capsys):
    if provider == "redis":
        target = ["--redis-url", request.getfixturevalue("redis_url")]
    else:
        target = ["--database", store.using]
    with keys():
        world = build_world(store)
        v = world[VICTIM]
        unbound = [
            ("channel", *VICTIM, "a", str(v["versions"]["a"])),
            ("write", *VICTIM, v["cid"], "task-1", 0),
        ]
        if provider == "redis":
            unbound.append(("body", *VICTIM, v["cid"]))
        for slot in unbound:
            _unbind(store, slot)
    # A plaintext row from before keys were set is upgraded by the same run (its value; on
    # Redis its body too).
    with override_settings(CHECKPOINTS={**store_settings(), "ENCRYPTION_KEYS": []}):
        plain = put_chain(store, "t-plain", {"p": "was plaintext"})
    expected = len(unbound) + (2 if provider == "redis" else 1)
    with keys(ENCRYPTION_REQUIRE_BOUND=True):
        call_command("reencrypt_checkpoints", "--batch-size", "3", *target)
        out = capsys.readouterr().out
        assert f"rewrote {expected} " in out, out
        for slot in unbound:
            assert sealed_format(read_slot(store, slot)) == 2
        tup = store.get_tuple(v["config"])
        assert tup.checkpoint["channel_values"] == VALUES
        assert sorted(w[2] for w in tup.pending_writes) == ["w-a", "w-a2", "w-b"]
        assert store.get_tuple(plain).checkpoint["channel_values"] == {"p": "was plaintext"}
        # Resumable: a second run finds nothing to do.
        call_command("reencrypt_checkpoints", *target)
        assert "rewrote 0 " in capsys.readouterr().out


def test_reencrypt_leaves_a_row_a_writer_changed(store, provider, monkeypatch):
    """Compare-and-swap: a row rewritten between the read and the write is kept as is."""
    from checkpoints.codec.encryption import seal_typed
    from checkpoints.store import sealing

    with override_settings(CHECKPOINTS={**store_settings(), "ENCRYPTION_KEYS": []}):
        config = put_chain(store, "t-race", {"p": "before"})
    real = sealing._plaintext

    def writer_races(typed, ring, at):
        # A writer seals the value for its place between the command's read and write
        # (the hook is the command's own step, not the store: the store stays real).
        if at.kind == "channel":
            slot = ("channel", at.thread_id, at.ns, at.channel, at.version)
        else:
            slot = ("body", at.thread_id, at.ns, at.checkpoint_id)
        write_slot(store, slot, seal_typed(typed, at=at))
        return real(typed, ring, at)

    monkeypatch.setattr(sealing, "_plaintext", writer_races)
    with keys():
        result = store.reseal()
        if provider == "redis":
            # The body and the channel value: both changed under the command.
            assert (result.rewritten, result.raced) == (0, 2)
        else:
            assert (result.rewritten, result.raced) == (0, 1)
        assert store.get_tuple(config).checkpoint["channel_values"] == {"p": "before"}


@pytest.mark.parametrize(
    "extra, name",
    [
        ({"ENCRYPTION_STORE_ID": 7}, "CHECKPOINTS_ENCRYPTION_STORE_ID"),
        ({"ENCRYPTION_REQUIRE_BOUND": "yes"}, "CHECKPOINTS_ENCRYPTION_REQUIRE_BOUND"),
    ],
)
def test_binding_settings_checked(extra, name):
    from checkpoints.checks import configuration_errors

    with keys(**extra):
        errors = configuration_errors()
    assert any(name in e.msg for e in errors)


@pytest.mark.django_db(transaction=True)
def test_the_api_refuses_another_users_value_copied_over_yours(request):
    """Alice's sealed value lifted onto Bob's row: 409 naming Bob's place, no secret leaked."""
    from tests.api_fixtures import token_client

    with keys():
        threads = request.getfixturevalue("threads")
        users = request.getfixturevalue("users")
        blobs = ChannelBlob.objects.exclude(blob=None)
        alice = {
            c: (t, b)
            for c, t, b in blobs.filter(thread__thread_id="alice-1").values_list(
                "channel", "type", "blob"
            )
        }
        bob = blobs.filter(thread__thread_id=threads["bob"][0])
        shared = sorted(set(alice) & set(bob.values_list("channel", flat=True)))
        assert shared
        for channel in shared:
            type_, blob = alice[channel]
            bob.filter(channel=channel).update(type=type_, blob=blob)
        response = token_client(users["bob"]).get("/api/threads/bob-1/state/")
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "encryption_error"
    assert "in thread 'bob-1'" in error["message"] and "another place" in error["message"]
    assert "alice" not in response.content.decode().replace("alice-1", "")


def test_a_store_without_sealed_values_refuses_a_reseal_by_name():
    from checkpoints.errors import CheckpointConfigError
    from checkpoints.store.memory import MemorySaver

    with pytest.raises(CheckpointConfigError, match="memory store keeps no sealed values"):
        MemorySaver().reseal()
