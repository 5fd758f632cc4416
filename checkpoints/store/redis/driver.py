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

from checkpoints.errors import CheckpointStoreError, StoreUnavailable
from checkpoints.flows import arun, astream, run, stream
from checkpoints.store.redis.clients import RETRY_PAUSE, async_client
from checkpoints.store.redis.keys import META, thread_prefix
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
        pipe.execute_command("EVALSHA", self.script.sha, 1, prefix + META, prefix, *self.args)


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
            client = async_client(self.url)
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
