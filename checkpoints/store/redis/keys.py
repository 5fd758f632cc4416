"""Key layout, byte encoding and record decoding of the Redis store (see its saver)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime

from checkpoints.store.planning import utcnow
from checkpoints.store.planning.prune import PruneRow, delta_channels, root_of

# Store-wide keys share one hash tag, ``{cp}``: on a Redis Cluster they live in one slot,
# so a transaction over them (a finished mark is a ZADD and an HSET) never spans slots.
STORE_TAG = "cp:{cp}:"
FORMAT_KEY = STORE_TAG + "format"
REGISTRY_KEY = STORE_TAG + "threads"
DUE_KEY = STORE_TAG + "finished:due"
MARKS_KEY = STORE_TAG + "finished:at"
# A thread's keys are its prefix (`thread_prefix`: one hash tag, so one slot on a cluster)
# plus one of these suffixes; the per-namespace ones are followed by the namespace's hex.
META = "m"  # hash: id, ca/lw (created, last write ms), v (version), o (owner), wm/fm
NAMESPACES = "n"  # set: the hex of every namespace the thread holds
INDEX = "i:"  # sorted set (by id): the namespace's checkpoint ids
RECORDS = "c:"  # hash: checkpoint id -> record (see the saver's `_record`)
BLOBS = "b:"  # hash: packed (channel, version) -> value
WRITES = "w:"  # hash: packed (checkpoint id, task id, idx) -> write
WRITE_INDEX = "x:"  # sorted set (by field): the write fields, for reading a checkpoint's
STORED_KINDS = (RECORDS, BLOBS, WRITES)  # the ones holding stored (sealable) values
# A lease (the sweep's lock) is a store-wide key too, inside the store's namespace.
LEASE_PREFIX = STORE_TAG + "lease:"
PAGE = 100


def enc(value: str | bytes) -> bytes:
    if isinstance(value, bytes):
        return value
    return value.encode("utf-8", "surrogatepass")


def dec(value: bytes) -> str:
    return value.decode("utf-8", "surrogatepass")


def pack(*parts: str | bytes) -> bytes:
    """Length-prefixed parts: no value can be read as a separator."""
    out = []
    for part in parts:
        data = enc(part)
        out.append(b"%d:" % len(data))
        out.append(data)
    return b"".join(out)


def unpack(data: bytes) -> list[bytes]:
    out = []
    i, end = 0, len(data)
    while i < end:
        colon = data.index(b":", i)
        n = int(data[i:colon])
        out.append(data[colon + 1 : colon + 1 + n])
        i = colon + 1 + n
    return out


def thread_tag(thread_id: str) -> str:
    """The hash tag of a thread's keys: a digest, so any thread id makes a safe tag."""
    return hashlib.sha256(enc(thread_id)).hexdigest()[:32]


def thread_prefix(thread_id: str) -> str:
    return f"cp:{{{thread_tag(thread_id)}}}:"


def meta_key(thread_id: str) -> str:
    return thread_prefix(thread_id) + META


def namespaces_key(thread_id: str) -> str:
    return thread_prefix(thread_id) + NAMESPACES


def ns_key(prefix: str, kind: str, ns_hex: str) -> str:
    """The thread's ``kind`` key (INDEX, RECORDS, ...) of the namespace ``ns_hex``."""
    return prefix + kind + ns_hex


def lease_key(name: str) -> str:
    return LEASE_PREFIX + name


# SCAN's pattern for every thread's keys holding stored values (RECORDS, BLOBS, WRITES).
STORED_KEYS_PATTERN = "cp:{*}:[" + "".join(kind[0] for kind in STORED_KINDS) + "]:*"


def split_ns_key(key: str) -> tuple[str, str, str]:
    """(thread prefix, kind, namespace hex) of a per-namespace key (`ns_key`'s inverse)."""
    prefix_end = key.index("}:") + 2
    kind_end = key.index(":", prefix_end) + 1
    return key[:prefix_end], key[prefix_end:kind_end], key[kind_end:]


def ns_hex(ns: str) -> str:
    return enc(ns).hex()


def now_ms() -> int:
    return int(utcnow().timestamp() * 1000)


def lw_time(ms: bytes | str | int) -> datetime:
    """A thread's last write ('lw', milliseconds) as a time."""
    return datetime.fromtimestamp(int(ms) / 1000, tz=UTC)


def lw_ms(at: datetime) -> str:
    """The 'lw' field a time read by `lw_time` came from (the round trip is exact)."""
    return str(round(at.timestamp() * 1000))


def durability_level(appendonly, appendfsync) -> str:
    """ "disk" only when every write is fsynced to the AOF before it is acknowledged."""

    def value(reply, name):
        if isinstance(reply, dict):
            got = reply.get(enc(name), reply.get(name))
        elif isinstance(reply, (list, tuple)) and len(reply) == 2:
            got = reply[1]
        else:
            return ""
        return dec(got) if isinstance(got, bytes) else str(got or "")

    if isinstance(appendonly, Exception) or isinstance(appendfsync, Exception):
        return "memory"
    aof = value(appendonly, "appendonly")
    fsync = value(appendfsync, "appendfsync")
    return "disk" if aof == "yes" and fsync == "always" else "memory"


def prune_row(checkpoint_id: str, record: list[bytes]) -> PruneRow:
    """What a prune needs of a stored record: parent, delta channels, channel versions."""
    blob_fields, parent, md = record[0], record[1], record[2]
    versions = {}
    for blob_field in unpack(blob_fields):
        channel, version = unpack(blob_field)
        versions[dec(channel)] = dec(version)
    metadata = json.loads(md)
    return PruneRow(
        checkpoint_id,
        dec(parent) if parent else None,
        delta_channels(metadata),
        versions,
        root_of(metadata),
    )
