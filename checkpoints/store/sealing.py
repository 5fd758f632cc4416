"""Re-sealing copied values for their new thread: sealed bytes are bound to their place.

``copy_thread`` (and a fork built on it) moves values legitimately, so each one sealed in
the bound format is opened for its source place and sealed again for the target's; the
copy fails (naming the place) rather than leave unreadable rows if a key is missing.
"""

from __future__ import annotations

from checkpoints.codec.encryption import Place, rebind
from checkpoints.models import ChannelBlob, PendingWrite
from checkpoints.store.redis.keys import dec, pack, unpack


def rebind_orm_row(model, item: dict, source: str, target: str) -> None:
    """Re-seal in place the ``type``/``blob`` of a copied ChannelBlob or PendingWrite row."""
    if model is ChannelBlob:
        old = Place.blob(source, item["checkpoint_ns"], item["channel"], item["version"])
    elif model is PendingWrite:
        old = Place.write(
            source,
            item["checkpoint_ns"],
            item["checkpoint_id"],
            item["task_id"],
            item["idx"],
            item["channel"],
        )
    else:
        return  # the ORM's checkpoint body is not sealed
    typed = (item["type"], None if item["blob"] is None else bytes(item["blob"]))
    item["type"], item["blob"] = rebind(typed, old, old.moved(thread_id=target))


def redis_hash_places(kind: str, mapping, thread_id: str, ns: str):
    """(field, parts, (type index, bytes index), place) of each value of a ``c:``, ``b:``
    or ``w:`` hash: where its sealed pair sits among the value's parts, and its place."""
    for field, value in mapping:
        parts = unpack(value)
        if kind == "c:":
            # record: blob fields, parent, metadata, body type, body, ...
            yield field, parts, (3, 4), Place.body(thread_id, ns, dec(field))
        elif kind == "b:":
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
