"""Sealed values in the Redis store: re-sealed for a copy's thread, or under a new key.

The rules are `checkpoints.store.sealing`'s; this module knows the records' layout.
"""

from __future__ import annotations

from checkpoints.codec.encryption import Place, rebind
from checkpoints.store.redis.keys import (
    BLOBS,
    META,
    RECORDS,
    STORED_KEYS_PATTERN,
    dec,
    pack,
    split_ns_key,
    unpack,
)
from checkpoints.store.redis.scripts import HASH_CAS
from checkpoints.store.sealing import ResealResult, current_sealer


def redis_hash_places(kind: str, mapping, thread_id: str, ns: str):
    """(field, parts, (type index, bytes index), place) of each value of a ``c:``, ``b:``
    or ``w:`` hash: where its sealed pair sits among the value's parts, and its place."""
    for field, value in mapping:
        parts = unpack(value)
        if kind == RECORDS:
            # record: blob fields, parent, metadata, body type, body, ...
            yield field, parts, (3, 4), Place.body(thread_id, ns, dec(field))
        elif kind == BLOBS:
            channel, version = (dec(p) for p in unpack(field)[:2])
            yield field, parts, (0, 1), Place.blob(thread_id, ns, channel, version)
        else:
            checkpoint_id, task_id, idx = (dec(p) for p in unpack(field)[:3])
            at = Place.write(thread_id, ns, checkpoint_id, task_id, int(idx), dec(parts[2]))
            yield field, parts, (3, 4), at


def rebind_redis_hash(
    kind: str, mapping: dict[bytes, bytes], source: str, target: str, ns: str
) -> dict[bytes, bytes]:
    """The fields of a copied ``c:``, ``b:`` or ``w:`` hash whose sealed values changed."""
    changed = {}
    for field, parts, (t, d), old in redis_hash_places(kind, mapping.items(), source, ns):
        typed = (dec(parts[t]), parts[d])
        new = rebind(typed, old, old.moved(thread_id=target))
        if new is not typed:
            parts[t], parts[d] = new[0].encode(), new[1]
            changed[field] = pack(*parts)
    return changed


class RedisReseal:
    """`StoreSaver.reseal` over a Redis store (a mixin of `RedisSaver`)."""

    def reseal(self, *, batch_size: int = 500) -> ResealResult:
        """Seal every checkpoint body, channel value and write under the first key.

        Hashes are walked with SCAN/HSCAN (every master of a cluster) and each field is
        replaced by compare-and-swap, so writers keep running.
        """
        sealer = current_sealer()
        client = self.client
        result = ResealResult()
        for raw_key in client.scan_iter(match=STORED_KEYS_PATTERN, count=batch_size):
            key = dec(raw_key)
            prefix, kind, ns_hex = split_ns_key(key)
            thread_id = client.hget(prefix + META, "id")
            if thread_id is None:
                continue  # a thread being deleted: nothing of it is read again
            ns = bytes.fromhex(ns_hex).decode("utf-8", "surrogatepass")
            fields = client.hscan_iter(key, count=batch_size)
            for field, parts, (t, d), at in redis_hash_places(kind, fields, dec(thread_id), ns):
                result.examined += 1
                new = sealer.resealed((dec(parts[t]), parts[d]), at)
                if new is None:
                    continue
                old = pack(*parts)
                parts[t], parts[d] = new[0].encode(), new[1]
                if client.eval(HASH_CAS, 1, key, field, old, pack(*parts)):
                    result.rewritten += 1
                else:
                    result.raced += 1
        return result
