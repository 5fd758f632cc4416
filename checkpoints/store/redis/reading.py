"""Reading a Redis thread's keys into LangGraph's tuples: get_tuple and list (a mixin of
`RedisSaver`, whose driver runs these flows sync or async)."""

from __future__ import annotations

import json

from langgraph.checkpoint.base import CheckpointTuple, writes_sort_key

from checkpoints.codec.compression import reading_checkpoint, reserve
from checkpoints.codec.encryption import Place
from checkpoints.codec.failures import decode_at, decode_writes
from checkpoints.flows import Emit
from checkpoints.store.planning import check_limit, config_keys, list_bounds
from checkpoints.store.planning.metadata import metadata_matches, validate_filter
from checkpoints.store.planning.reads import body_shape, metadata_shape
from checkpoints.store.projection import set_aside
from checkpoints.store.redis.driver import Batch, Eval, cmd
from checkpoints.store.redis.keys import (
    PAGE,
    REGISTRY_KEY,
    dec,
    namespaces_key,
    ns_hex,
    thread_prefix,
    unpack,
)
from checkpoints.store.redis.scripts import (
    READ,
)


class RedisReading:
    """get_tuple's and list's flows over the keys `RedisSaver` writes."""

    def _tuple(self, thread_id: str, ns: str, found: list) -> CheckpointTuple:
        checkpoint_id = dec(found[0])
        with reading_checkpoint(thread_id, ns, checkpoint_id):
            return self._read_tuple(thread_id, ns, checkpoint_id, found)

    def _read_tuple(self, thread_id: str, ns: str, checkpoint_id: str, found: list):
        blob_fields, parent, md, body_type, body, *_ = unpack(found[1])
        blobs = [
            (blob_field, unpack(value))
            for blob_field, value in zip(unpack(blob_fields), found[2], strict=False)
            if value is not None
        ]
        blobs, unread = set_aside(blobs, lambda blob: dec(unpack(blob[0])[0]))
        pending = []
        for write_field, value in zip(found[3], found[4], strict=False):
            if value is None:
                continue
            idx = int(unpack(write_field)[2])
            task, path, channel, type_, data = unpack(value)
            pending.append((dec(path), dec(task), idx, dec(channel), type_, data))
        # Frames stating more than this checkpoint may expand to: refused before any is read.
        reserve([(body_type, body), *(typed[:2] for _, typed in blobs), *(w[4:] for w in pending)])
        at = {"thread_id": thread_id, "ns": ns, "checkpoint_id": checkpoint_id}
        checkpoint = decode_at(
            lambda: body_shape(
                self._load(body_type, body, Place.body(thread_id, ns, checkpoint_id))
            ),
            part="the body",
            **at,
        )
        values = dict(unread)
        for blob_field, typed in blobs:
            channel, version = (dec(f) for f in unpack(blob_field)[:2])
            values[channel] = decode_at(
                lambda t=typed, p=Place.blob(thread_id, ns, channel, version): self._load(*t, p),
                part=("channel", channel),
                **at,
            )
        checkpoint["channel_values"] = values
        pending.sort(key=lambda w: writes_sort_key(w[0], w[1], w[2]))
        conf = {"thread_id": thread_id, "checkpoint_ns": ns}
        return CheckpointTuple(
            config={"configurable": {**conf, "checkpoint_id": checkpoint_id}},
            checkpoint=checkpoint,
            metadata=decode_at(lambda: metadata_shape(md), part="the metadata", **at),
            parent_config=(
                {"configurable": {**conf, "checkpoint_id": dec(parent)}} if parent else None
            ),
            pending_writes=decode_writes(
                (
                    (
                        w[1],
                        w[3],
                        lambda w=w: self._load(
                            w[4], w[5], Place.write(thread_id, ns, checkpoint_id, w[1], w[2], w[3])
                        ),
                    )
                    for w in pending
                ),
                **at,
            ),
        )

    def _get_tuple_flow(self, config):
        thread_id, ns, checkpoint_id = config_keys(config)
        (found,) = yield Batch([Eval(READ, thread_id, (ns_hex(ns), checkpoint_id or ""))])
        return self._tuple(thread_id, ns, found) if found else None

    def _list_flow(self, config, filter, before, limit):
        wanted = validate_filter(filter)
        check_limit(limit)
        if limit == 0:
            return
        thread_id, only_ns, only_id, before_id = list_bounds(config, before)
        if config is not None:
            threads = [thread_id]
        else:
            (members,) = yield Batch([cmd("ZRANGE", REGISTRY_KEY, 0, -1)])
            threads = [dec(m) for m in members]
        if only_ns is not None:
            sources = [(t, str(only_ns)) for t in threads]
        else:
            found = yield Batch([cmd("SMEMBERS", namespaces_key(t)) for t in threads])
            sources = [
                (t, dec(bytes.fromhex(dec(h))))
                for t, hexes in zip(threads, found, strict=True)
                for h in hexes
            ]
        upper = [f"({before_id}" if before_id else "+" for _ in sources]
        buffers: list[list[str]] = [[] for _ in sources]
        done = [False for _ in sources]
        if only_id is not None:
            buffers = [[only_id] if not before_id or only_id < before_id else [] for _ in sources]
            done = [True for _ in sources]
        remaining = limit
        while remaining is None or remaining > 0:
            picks: list[tuple[int, str]] = []
            while len(picks) < PAGE:
                refill = [k for k, buf in enumerate(buffers) if not buf and not done[k]]
                if refill:
                    pages = yield Batch(
                        [
                            cmd(
                                "ZRANGE",
                                f"{thread_prefix(sources[k][0])}i:{ns_hex(sources[k][1])}",
                                upper[k],
                                "-",
                                "BYLEX",
                                "REV",
                                "LIMIT",
                                0,
                                PAGE,
                            )
                            for k in refill
                        ]
                    )
                    for k, ids in zip(refill, pages, strict=True):
                        buffers[k] = [dec(i) for i in ids]
                        done[k] = len(ids) < PAGE
                        if ids:
                            upper[k] = b"(" + ids[-1]
                live = [k for k, buf in enumerate(buffers) if buf]
                if not live:
                    break
                k = max(live, key=lambda k: buffers[k][0])
                picks.append((k, buffers[k].pop(0)))
            if not picks:
                return
            if wanted:
                records = yield Batch(
                    [
                        cmd("HGET", f"{thread_prefix(sources[k][0])}c:{ns_hex(sources[k][1])}", c)
                        for k, c in picks
                    ]
                )
                picks = [
                    pick
                    for pick, rec in zip(picks, records, strict=True)
                    if rec is not None and metadata_matches(json.loads(unpack(rec)[2]), wanted)
                ]
            if remaining is not None:
                picks = picks[:remaining]
            if picks:
                found = yield Batch(
                    [Eval(READ, sources[k][0], (ns_hex(sources[k][1]), c)) for k, c in picks]
                )
                items = [
                    self._tuple(sources[k][0], sources[k][1], f)
                    for (k, _), f in zip(picks, found, strict=True)
                    if f
                ]
                if remaining is not None:
                    remaining -= len(items)
                for item in items:
                    yield Emit(item)
