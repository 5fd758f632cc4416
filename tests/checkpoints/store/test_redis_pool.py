"""The Redis saver's pool on one server: callers beyond its size wait for a connection
instead of failing (redis-py's own pool raised at once: 128 concurrent graph runs failed
with "Too many connections" in bench.concurrency)."""

from __future__ import annotations

import asyncio
import threading

import pytest
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from checkpoints.errors import CheckpointConfigError
from checkpoints.store.registry import get_saver
from tests.store_helpers import config_for

pytestmark = pytest.mark.redis


def _saver(redis_url: str, query: str):
    return get_saver("redis", conn_string=f"{redis_url}?{query}")


def test_threads_beyond_the_pool_wait_for_a_connection(redis_url):
    saver = _saver(redis_url, "max_connections=2")
    failures: list[BaseException] = []

    def turn(i: int) -> None:
        try:
            head = saver.put(config_for(f"t-{i}", ns=""), empty_checkpoint(), {}, {})
            head = saver.put(head, create_checkpoint(empty_checkpoint(), None, 1), {}, {})
            saver.put_writes(head, [("ch", i)], "task")
            assert saver.get_tuple(head).pending_writes[0][2] == i
        except BaseException as exc:  # collected: the assertion below names them
            failures.append(exc)

    workers = [threading.Thread(target=turn, args=(i,)) for i in range(12)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert failures == []
    assert saver.client.connection_pool.max_connections == 2
    assert len(list(saver.list(None))) == 24


def test_async_calls_beyond_the_pool_wait_for_a_connection(redis_url):
    saver = _saver(redis_url, "max_connections=2&pool_timeout=30")

    async def turns() -> list:
        async def one(i: int):
            head = await saver.aput(config_for(f"a-{i}", ns=""), empty_checkpoint(), {}, {})
            await saver.aput_writes(head, [("ch", i)], "task")
            return await saver.aget_tuple(head)

        return await asyncio.gather(*(one(i) for i in range(20)))

    found = asyncio.run(turns())
    assert sorted(t.pending_writes[0][2] for t in found) == list(range(20))


@pytest.mark.parametrize("bad", ["0", "-1", "soon"])
def test_a_bad_pool_timeout_is_refused_naming_it(redis_url, bad):
    with pytest.raises(CheckpointConfigError, match="pool_timeout"):
        _saver(redis_url, f"pool_timeout={bad}")
