"""Encryption at rest: sealed rows, key rotation, and every way a read must refuse."""

from __future__ import annotations

import base64
import os

import pytest
from django.core.management import call_command
from django.test import override_settings

from checkpoints.conf import store_settings
from checkpoints.errors import CheckpointEncryptionError
from checkpoints.models import ChannelBlob, PendingWrite
from tests.store_helpers import put_chain

KEY_A = base64.urlsafe_b64encode(os.urandom(32)).decode()
KEY_B = base64.urlsafe_b64encode(os.urandom(32)).decode()
ORM = ["sqlite", "postgres"]


def keys(*values):
    return override_settings(CHECKPOINTS={**store_settings(), "ENCRYPTION_KEYS": list(values)})


@pytest.fixture(params=ORM)
def provider(request):
    return request.param


def _blobs(store):
    return list(ChannelBlob.objects.using(store.using).values_list("type", "blob"))


def test_values_and_writes_are_sealed_and_read_back(store):
    with keys(KEY_A):
        config = put_chain(store, "t-enc", {"secret": "launch code 1234"})
        store.put_writes(config, [("secret", "pending value")], "task-1")
        stored = _blobs(store)
        assert stored and all(t.endswith("+aesgcm") for t, _ in stored)
        assert all(b"launch code" not in bytes(b) for _, b in stored)
        writes = PendingWrite.objects.using(store.using).values_list("type", "blob")
        assert all(t.endswith("+aesgcm") and b"pending" not in bytes(b) for t, b in writes)
        tup = store.get_tuple(config)
        assert tup.checkpoint["channel_values"] == {"secret": "launch code 1234"}
        assert tup.pending_writes[0][2] == "pending value"
        # Metadata stays plain, so filters keep working.
        assert list(store.list(None, filter={"step": 1}))


def test_rotation_old_key_still_decrypts(store):
    with keys(KEY_A):
        config = put_chain(store, "t-rot", {"v": "old"})
    with keys(KEY_B, KEY_A):
        assert store.get_tuple(config).checkpoint["channel_values"] == {"v": "old"}


def test_plaintext_row_refused_when_keys_set(store):
    config = put_chain(store, "t-plain", {"v": "clear"})
    with keys(KEY_A), pytest.raises(CheckpointEncryptionError, match="plaintext"):
        store.get_tuple(config)


def test_tampered_row_refused(store):
    with keys(KEY_A):
        config = put_chain(store, "t-tamper", {"v": "x" * 40})
        row = ChannelBlob.objects.using(store.using).get()
        data = bytearray(bytes(row.blob))
        data[-1] ^= 0x01
        ChannelBlob.objects.using(store.using).filter(pk=row.pk).update(blob=bytes(data))
        with pytest.raises(CheckpointEncryptionError, match="tampered"):
            store.get_tuple(config)


def test_relabelled_type_refused(store):
    with keys(KEY_A):
        config = put_chain(store, "t-relabel", {"v": 1})
        row = ChannelBlob.objects.using(store.using).get()
        ChannelBlob.objects.using(store.using).filter(pk=row.pk).update(type="json+aesgcm")
        with pytest.raises(CheckpointEncryptionError):
            store.get_tuple(config)


def test_unknown_key_refused(store):
    with keys(KEY_A):
        config = put_chain(store, "t-unknown", {"v": 1})
    with keys(KEY_B), pytest.raises(CheckpointEncryptionError, match="not among"):
        store.get_tuple(config)


def test_sealed_row_without_keys_names_the_setting(store):
    with keys(KEY_A):
        config = put_chain(store, "t-nokeys", {"v": 1})
    with pytest.raises(CheckpointEncryptionError, match="CHECKPOINTS_ENCRYPTION_KEYS is not set"):
        store.get_tuple(config)


def test_reencrypt_command_rotates_and_resumes(store, capsys):
    config = put_chain(store, "t-re", {"a": "one", "b": "two"})
    store.put_writes(config, [("a", "w")], "task")
    with keys(KEY_B, KEY_A):
        call_command("reencrypt_checkpoints", "--batch-size", "1", "--database", store.using)
        assert "rewrote 3" in capsys.readouterr().out
        assert store.get_tuple(config).checkpoint["channel_values"] == {"a": "one", "b": "two"}
        # Running again finds nothing left to do: the command is resumable.
        call_command("reencrypt_checkpoints", "--database", store.using)
        assert "rewrote 0" in capsys.readouterr().out
    with keys(KEY_B):
        assert store.get_tuple(config).pending_writes[0][2] == "w"


def test_bad_key_refused_by_checks():
    from checkpoints.checks import configuration_errors

    with keys("not-a-key"):
        errors = configuration_errors()
    assert any("key #1" in e.msg for e in errors)
    assert all("not-a-key" not in e.msg for e in errors)


def test_redis_values_are_sealed_and_rotate(redis_url):
    from checkpoints.store.registry import get_saver

    with keys(KEY_A):
        saver = get_saver("redis", conn_string=redis_url)
        config = put_chain(saver, "t-redis", {"secret": "launch code 1234"})
        saver.put_writes(config, [("secret", "pending value")], "task-1")
        raw = b"".join(
            b"".join(v for v in saver.client.hgetall(key).values())
            for key in saver.client.scan_iter("cp:*")
            if saver.client.type(key) == b"hash"
        )
        assert b"launch code" not in raw and b"pending value" not in raw
        assert saver.get_tuple(config).checkpoint["channel_values"] == {
            "secret": "launch code 1234"
        }
    with keys(KEY_B, KEY_A):
        assert saver.get_tuple(config).pending_writes[0][2] == "pending value"
    with keys(KEY_B), pytest.raises(CheckpointEncryptionError, match="not among"):
        saver.get_tuple(config)
    with pytest.raises(CheckpointEncryptionError, match="not set"):
        saver.get_tuple(config)
