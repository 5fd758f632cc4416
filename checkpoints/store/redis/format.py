"""The Redis store's format generation, durability level and import staging."""

from __future__ import annotations

import redis
import redis.cluster
from redis.exceptions import RedisClusterException

from checkpoints.store.capabilities import STAGING_PREFIX
from checkpoints.store.planning.format import FORMAT_GENERATION, format_verdict
from checkpoints.store.redis.driver import Batch, cmd
from checkpoints.store.redis.keys import (
    FORMAT_KEY,
    REGISTRY_KEY,
    dec,
    durability_level,
)

AOF_SETTINGS = ("appendonly", "appendfsync")


class RedisFormat:
    """Format check, reset and durability of `RedisSaver`, over the flows its driver runs."""

    # -- store format and durability ------------------------------------------------------
    def _ready_flow(self):
        # A cluster has no one node to ask CONFIG of: every master is asked below.
        config = [] if self.cluster else [cmd("CONFIG", "GET", n) for n in AOF_SETTINGS]
        got = yield Batch([cmd("GET", FORMAT_KEY), *config], errors_ok=True)
        recorded = got[0]
        if isinstance(recorded, Exception):
            raise self._fail(recorded) from recorded
        where = f"the redis checkpoint store at {self.address}"
        generations = [] if recorded is None else [dec(recorded)]
        holds = not generations and (yield from self._holds_checkpoint_keys())
        if format_verdict(generations, holds_checkpoints=holds, where=where):
            _, recorded = yield Batch(
                [cmd("SET", FORMAT_KEY, FORMAT_GENERATION, "NX"), cmd("GET", FORMAT_KEY)]
            )
            # Another saver may have recorded first: judge what the store holds now.
            format_verdict([dec(recorded)], holds_checkpoints=False, where=where)
        if self.cluster:
            self._durability = self._cluster_durability()
        else:
            self._durability = durability_level(*got[1:])
        self._ready = True

    def _cluster_durability(self) -> str:
        """As durable as the weakest master (asked on the sync client, once per check)."""
        primaries = redis.cluster.RedisCluster.PRIMARIES
        try:
            aof = self.client.config_get("appendonly", target_nodes=primaries)
            fsync = self.client.config_get("appendfsync", target_nodes=primaries)
        except (redis.RedisError, RedisClusterException):
            return "memory"  # not known now: claim no more than memory
        aof, fsync = _per_node(aof), _per_node(fsync)
        nodes = set(aof) | set(fsync)
        levels = {durability_level(aof.get(n, {}), fsync.get(n, {})) for n in nodes}
        return "disk" if levels == {"disk"} else "memory"

    def _holds_checkpoint_keys(self):
        if self.cluster:
            # SCAN walks one node; the cluster client walks every master. Runs once, on a
            # store that has no format key yet.
            for _ in self.client.scan_iter(match="cp:*", count=1000):
                return True
            return False
        cursor = 0
        while True:
            cursor, keys = (yield Batch([cmd("SCAN", cursor, "MATCH", "cp:*", "COUNT", 1000)]))[0]
            if keys:
                return True
            if int(cursor) == 0:
                return False

    def recorded_format(self) -> str:
        recorded = self.client.get(FORMAT_KEY)
        found = [] if recorded is None else [recorded.decode()]
        where = f"the redis checkpoint store at {self.address}"
        format_verdict(found, holds_checkpoints=False, where=where)
        return found[0] if found else "none"

    def staging_id(self, thread_id: str) -> str | None:
        # A thread's keys are written by several commands: an import writes them under
        # this id, then copies them into place (checkpoints.transfer.copy).
        return STAGING_PREFIX + thread_id

    def reset_store(self) -> int:
        """Delete every key of this store (``cp:*``) and record the current generation."""
        try:
            threads = self.client.zcard(REGISTRY_KEY)
            for keys in _chunks(self.client.scan_iter(match="cp:*", count=1000), 500):
                self.client.unlink(*keys)
            self.client.set(FORMAT_KEY, FORMAT_GENERATION)
        except redis.RedisError as exc:
            raise self._fail(exc) from exc
        self._ready = False
        return int(threads)

    @property
    def durability(self) -> str:
        if self._durability is None:
            self._drive(self._ready_flow(), prepare=False)
        return self._durability


def _per_node(reply: dict) -> dict:
    # redis-py answers {node: {name: value}} for several nodes, {name: value} for one.
    if reply and all(isinstance(v, dict) for v in reply.values()):
        return reply
    return {"node": reply}


def _chunks(items, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
