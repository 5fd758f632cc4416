"""Key layout and byte encoding of the Redis store (see `checkpoints.store.redis.saver`)."""

from __future__ import annotations

import hashlib

from checkpoints.store.planning import utcnow

FORMAT_KEY = "cp:format"
REGISTRY_KEY = "cp:threads"
DUE_KEY = "cp:finished:due"
MARKS_KEY = "cp:finished:at"
PAGE = 100
CHUNK = 1000


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


def ns_hex(ns: str) -> str:
    return enc(ns).hex()


def now_ms() -> int:
    return int(utcnow().timestamp() * 1000)
