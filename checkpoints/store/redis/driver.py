"""Running the Redis saver's flows: one body of logic, a sync and an asyncio driver.

A flow is a generator that yields `Batch`es of commands (sent as one pipeline) and gets
their replies back, or yields `checkpoints.flows.Emit` to hand an item to an iterating
caller. `RedisDriver._drive` runs a flow over redis-py, `_adrive` over redis.asyncio (with
the generic drivers of `checkpoints.flows`), so the sync and async twins of every
operation run the same code.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.exceptions import (
    ClusterDownError,
    NoScriptError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)

from checkpoints.errors import CheckpointConfigError, CheckpointStoreError, StoreUnavailable
from checkpoints.flows import arun, astream, run, stream
from checkpoints.store.redis.keys import thread_prefix
from checkpoints.store.redis.scripts import Script


@dataclass
class Cmd:
    args: tuple

    def queue(self, pipe) -> None:
        pipe.execute_command(*self.args)


@dataclass
class Eval:
    script: Script
    thread_id: str
    args: tuple

    def queue(self, pipe) -> None:
        prefix = thread_prefix(self.thread_id)
        pipe.execute_command("EVALSHA", self.script.sha, 1, prefix + "m", prefix, *self.args)


@dataclass
class Batch:
    requests: list
    transaction: bool = False
    # Replies that are errors come back as exception objects instead of raising.
    errors_ok: bool = False


# Errors of a server or cluster that is down or failing over: the store is unavailable
# (for now), not refusing the command.
UNAVAILABLE = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    ClusterDownError,  # MasterDownError included
    TryAgainError,
    SlotNotCoveredError,
)
# Caught around every call; `_fail` sorts out which of these mean "unavailable".
CAUGHT = (*UNAVAILABLE, RedisClusterException)


def is_unavailable(exc: BaseException) -> bool:
    if isinstance(exc, UNAVAILABLE):
        return True
    # redis-py's word for "no startup node answers".
    return isinstance(exc, RedisClusterException) and "cannot be connected" in str(exc)


# A cluster batch that meets a failover is sent again this many times (``?retries=N`` in
# the URL), RETRY_PAUSE seconds apart and doubling (12.6 s in all), before the caller gets
# StoreUnavailable: a promotion takes about twice cluster-node-timeout. Every batch is safe
# to run twice.
CLUSTER_RETRIES = 6
RETRY_PAUSE = 0.2
CLUSTER_SCHEMES = ("redis+cluster", "rediss+cluster")


def is_cluster_url(url: str | None) -> bool:
    return bool(url) and url.split("://", 1)[0].lower() in CLUSTER_SCHEMES


def _cluster_options(url: str) -> tuple[list[tuple[str, int]], dict]:
    """``redis+cluster://[user:password@]host:port[,host:port...][/0]`` -> nodes, options."""
    parts = urlsplit(url)
    netloc = parts.netloc
    options: dict = {"socket_connect_timeout": 5, "socket_timeout": 5}
    if "@" in netloc:
        auth, netloc = netloc.rsplit("@", 1)
        user, _, password = auth.partition(":")
        if user:
            options["username"] = unquote(user)
        if password:
            options["password"] = unquote(password)
    nodes = []
    for node in netloc.split(","):
        host, _, port = node.strip().rpartition(":")
        if not host or not port.isdigit():
            raise CheckpointConfigError(
                f"Redis Cluster URL {url!r}: node {node!r} is not host:port",
                field="conn_string",
            )
        nodes.append((host.strip("[]"), int(port)))
    if parts.path.strip("/") not in ("", "0"):
        raise CheckpointConfigError(
            f"Redis Cluster URL {url!r} names database {parts.path.strip('/')!r}; a cluster "
            "has only database 0",
            field="conn_string",
        )
    if parts.scheme.lower().startswith("rediss"):
        options["ssl"] = True
    for name, values in parse_qs(parts.query).items():
        if name in ("socket_timeout", "socket_connect_timeout"):
            options[name] = float(values[-1])
    return nodes, options


def cluster_retries(url: str) -> int:
    """``?retries=N`` of a cluster URL: how often a batch meeting a failover is sent again."""
    values = parse_qs(urlsplit(url).query).get("retries")
    if not values:
        return CLUSTER_RETRIES
    if not values[-1].isdigit():
        raise CheckpointConfigError(
            f"Redis Cluster URL {url!r}: retries={values[-1]!r} is not a whole number",
            field="conn_string",
        )
    return int(values[-1])


def cluster_address(url: str) -> str:
    return "cluster " + ",".join(f"{h}:{p}" for h, p in _cluster_options(url)[0])


def cluster_client(url: str) -> redis.cluster.RedisCluster:
    nodes, options = _cluster_options(url)
    return redis.cluster.RedisCluster(
        startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in nodes], **options
    )


def async_cluster_client(url: str) -> redis.asyncio.cluster.RedisCluster:
    nodes, options = _cluster_options(url)
    return redis.asyncio.cluster.RedisCluster(
        startup_nodes=[redis.asyncio.cluster.ClusterNode(h, p) for h, p in nodes], **options
    )


def cmd(*args) -> Cmd:
    return Cmd(args)


def single(batch: Batch):
    """A flow of one batch, returning its replies."""
    return (yield batch)


class RedisDriver:
    """Runs flows against ``self.client`` (sync) and one asyncio client per event loop."""

    # Batches sent again after a failover error; a cluster saver sets its own.
    retries = 0

    # -- running flows: one shared body of logic, a sync and an async driver --------------
    def _fail(self, exc: Exception) -> CheckpointStoreError:
        if is_unavailable(exc):
            # A server that comes back may have lost its data, format key included: check
            # the store again before the next write.
            self._ready = False
            return StoreUnavailable(f"Redis at {self.address} is unreachable: {exc}")
        return CheckpointStoreError(f"Redis at {self.address} refused a command: {exc}")

    def _results(self, batch: Batch, results: list, attempt: int) -> list | None:
        if attempt == 0 and any(isinstance(r, NoScriptError) for r in results):
            return None
        if batch.errors_ok:
            return results
        for r in results:
            if isinstance(r, Exception):
                raise self._fail(r) from r
        return results

    def _execute(self, batch: Batch) -> list:
        for retry in range(self.retries + 1):
            try:
                return self._execute_once(batch)
            except StoreUnavailable:
                if retry == self.retries:
                    raise
                time.sleep(RETRY_PAUSE * 2**retry)
        raise AssertionError("unreachable")

    async def _aexecute(self, batch: Batch) -> list:
        for retry in range(self.retries + 1):
            try:
                return await self._aexecute_once(batch)
            except StoreUnavailable:
                if retry == self.retries:
                    raise
                await asyncio.sleep(RETRY_PAUSE * 2**retry)
        raise AssertionError("unreachable")

    def _execute_once(self, batch: Batch) -> list:
        scripts = {r.script.sha: r.script for r in batch.requests if isinstance(r, Eval)}
        for attempt in (0, 1):
            try:
                pipe = self.client.pipeline(transaction=batch.transaction)
                for request in batch.requests:
                    request.queue(pipe)
                results = self._results(batch, pipe.execute(raise_on_error=False), attempt)
                if results is not None:
                    return results
                # The server lost its script cache (restart, SCRIPT FLUSH, a promoted
                # replica): load and rerun; every batch is safe to run twice.
                for script in scripts.values():
                    self.client.script_load(script.source)
            except CAUGHT as exc:
                raise self._fail(exc) from exc
        raise AssertionError("unreachable")

    async def _aexecute_once(self, batch: Batch) -> list:
        client = self._aclient()
        scripts = {r.script.sha: r.script for r in batch.requests if isinstance(r, Eval)}
        for attempt in (0, 1):
            try:
                pipe = client.pipeline(transaction=batch.transaction)
                for request in batch.requests:
                    request.queue(pipe)
                results = self._results(batch, await pipe.execute(raise_on_error=False), attempt)
                if results is not None:
                    return results
                for script in scripts.values():
                    await client.script_load(script.source)
            except CAUGHT as exc:
                raise self._fail(exc) from exc
        raise AssertionError("unreachable")

    def _aclient(self) -> redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster:
        # redis.asyncio connections belong to the loop that opened them: one client per loop.
        loop = asyncio.get_running_loop()
        client = self._aclients.get(loop)
        if client is None:
            if self.cluster:
                client = async_cluster_client(self.url)
            else:
                client = redis.asyncio.Redis.from_url(self.url, socket_connect_timeout=5)
            self._aclients[loop] = client
        return client

    def _drive(self, flow, *, prepare: bool = True):
        if prepare and not self._ready:
            self._drive(self._ready_flow(), prepare=False)
        return run(flow, self._execute)

    async def _adrive(self, flow, *, prepare: bool = True):
        if prepare and not self._ready:
            await self._adrive(self._ready_flow(), prepare=False)
        return await arun(flow, self._aexecute)

    def _drive_iter(self, flow) -> Iterator:
        if not self._ready:
            self._drive(self._ready_flow(), prepare=False)
        return stream(flow, self._execute)

    async def _adrive_iter(self, flow) -> AsyncIterator:
        if not self._ready:
            await self._adrive(self._ready_flow(), prepare=False)
        async for item in astream(flow, self._aexecute):
            yield item
