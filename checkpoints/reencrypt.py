"""Rewrite stored values under the current encryption key, bound to their place, batch by batch."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction

from checkpoints.codec.encryption import (
    SUFFIX,
    Place,
    current_key_id,
    keyring,
    open_typed,
    seal_typed,
    sealed_format,
    sealed_key_id,
)
from checkpoints.errors import CheckpointConfigError, CheckpointEncryptionError
from checkpoints.models import ChannelBlob, PendingWrite

# The columns each table's place is read from, after pk, type and blob.
_PLACE_FIELDS = {
    ChannelBlob: ("thread__thread_id", "checkpoint_ns", "channel", "version"),
    PendingWrite: (
        "thread__thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "task_id",
        "idx",
        "channel",
    ),
}


@dataclass
class ReencryptResult:
    examined: int = 0
    rewritten: int = 0
    # Rows a writer changed between our read and our write: left as the writer made them.
    raced: int = 0


def reencrypt_rows(*, using: str = "default", batch_size: int = 500) -> ReencryptResult:
    """Seal every blob and pending write under the first key, in the bound format.

    Plaintext, unbound (format 1) and other-key rows are rewritten; rows already bound
    under the current key are skipped, so an interrupted run is resumed by running it
    again. No row is locked: each is replaced only if it still holds the bytes read
    (compare-and-swap), so writers keep running and a row they rewrote meanwhile is kept.
    """
    key_id = current_key_id()
    if key_id is None:
        raise CheckpointConfigError(
            "CHECKPOINTS_ENCRYPTION_KEYS is not set: nothing to encrypt under"
        )
    _, ring = keyring()
    result = ReencryptResult()
    for model, place_fields in _PLACE_FIELDS.items():
        last = 0
        while True:
            rows = list(
                model.objects.using(using)
                .filter(pk__gt=last)
                .order_by("pk")
                .values_list("pk", "type", "blob", *place_fields)[:batch_size]
            )
            if not rows:
                break
            last = rows[-1][0]
            with transaction.atomic(using=using):
                for pk, type_, data, *where in rows:
                    result.examined += 1
                    if data is None:
                        continue
                    typed = (type_, bytes(data))
                    if sealed_format(typed) == 2 and sealed_key_id(typed) == key_id:
                        continue
                    at = _place(model, where)
                    plain = _plaintext(typed, ring, at)
                    new_type, new_data = seal_typed(plain, at=at)
                    swapped = (
                        model.objects.using(using)
                        .filter(pk=pk, type=type_, blob=data)
                        .update(type=new_type, blob=new_data)
                    )
                    if swapped:
                        result.rewritten += 1
                    else:
                        result.raced += 1
    return result


# Replace a hash field only if it still holds the bytes read (one key: cluster-safe).
_REDIS_CAS = """
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
"""


def reencrypt_redis(saver, *, batch_size: int = 500) -> ReencryptResult:
    """The same rewrite over a Redis store: checkpoint bodies, channel values and writes.

    Hashes are walked with SCAN/HSCAN and each field replaced by compare-and-swap, so
    writers keep running; a re-run resumes, skipping what is already bound and current.
    """
    from checkpoints.store.redis.keys import dec
    from checkpoints.store.sealing import redis_hash_places

    key_id = current_key_id()
    if key_id is None:
        raise CheckpointConfigError(
            "CHECKPOINTS_ENCRYPTION_KEYS is not set: nothing to encrypt under"
        )
    _, ring = keyring()
    client = saver.client
    result = ReencryptResult()
    for raw_key in client.scan_iter(match="cp:{*}:[cbw]:*", count=batch_size):
        key = dec(raw_key)
        prefix_end = key.index("}:") + 2
        kind, ns_hex = key[prefix_end : prefix_end + 2], key[prefix_end + 2 :]
        thread_id = client.hget(key[:prefix_end] + "m", "id")
        if thread_id is None:
            continue  # a thread being deleted: nothing of it is read again
        ns = bytes.fromhex(ns_hex).decode("utf-8", "surrogatepass")
        fields = client.hscan_iter(key, count=batch_size)
        for field, parts, (t, d), at in redis_hash_places(kind, fields, dec(thread_id), ns):
            result.examined += 1
            typed = (dec(parts[t]), parts[d])
            if sealed_format(typed) == 2 and sealed_key_id(typed) == key_id:
                continue
            old = pack_parts(parts)
            new_type, new_data = seal_typed(_plaintext(typed, ring, at), at=at)
            parts[t], parts[d] = new_type.encode(), new_data
            if client.eval(_REDIS_CAS, 1, key, field, old, pack_parts(parts)):
                result.rewritten += 1
            else:
                result.raced += 1
    return result


def pack_parts(parts: list[bytes]) -> bytes:
    from checkpoints.store.redis.keys import pack

    return pack(*parts)


def _place(model, where: list) -> Place:
    if model is ChannelBlob:
        return Place.blob(*where)
    return Place.write(*where)


def _plaintext(typed: tuple[str, bytes], ring, at: Place) -> tuple[str, bytes]:
    type_, _ = typed
    if not type_.endswith(SUFFIX):
        return typed  # a plaintext row: this is how it gets encrypted the first time
    if sealed_key_id(typed) not in ring:
        raise CheckpointEncryptionError(f"{at} is sealed under a key that is not configured")
    # An unbound row opens whatever ENCRYPTION_REQUIRE_BOUND says: upgrading it is what
    # this command is for.
    return open_typed(typed, at=at, allow_unbound=True)
