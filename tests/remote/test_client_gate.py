"""The client's gate: at most ``max_connections`` calls of one saver in flight, so no request
waits inside httpx's pool (whose queue scan cost the client most of its CPU under load).

The bound is observed on the service side, on requests as they arrive; the transports are
given pools far larger than the bound, so only the gate can hold the calls back.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.core.signals import request_finished, request_started

from tests.store_helpers import put_chain, remote_saver

BOUND = 2
CALLS = 12


class InFlight:
    """Requests the service is serving at once, at most; each held a moment so that calls
    the client lets through together overlap on the service."""

    def __init__(self) -> None:
        self.now = self.most = self.seen = 0
        self.lock = threading.Lock()

    def started(self, **kwargs) -> None:
        with self.lock:
            self.now += 1
            self.seen += 1
            self.most = max(self.most, self.now)
        time.sleep(0.05)

    def finished(self, **kwargs) -> None:
        with self.lock:
            self.now -= 1


@pytest.fixture
def in_flight():
    counter = InFlight()
    request_started.connect(counter.started, dispatch_uid="gate-test-started")
    request_finished.connect(counter.finished, dispatch_uid="gate-test-finished")
    yield counter
    request_started.disconnect(dispatch_uid="gate-test-started")
    request_finished.disconnect(dispatch_uid="gate-test-finished")


def _wide_pool() -> httpx.Limits:
    return httpx.Limits(max_connections=50, max_keepalive_connections=50)


@pytest.mark.django_db(transaction=True)
def test_sync_calls_beyond_the_bound_all_succeed_and_never_exceed_it(request, in_flight):
    saver = remote_saver(
        request,
        max_connections=BOUND,
        transport=httpx.HTTPTransport(limits=_wide_pool()),
    )
    config = put_chain(saver, "gated", {"a": 1})
    in_flight.most = in_flight.seen = 0
    with ThreadPoolExecutor(CALLS) as pool:
        found = list(pool.map(lambda _: saver.get_tuple(config), range(CALLS)))
    assert all(t.checkpoint["channel_values"] == {"a": 1} for t in found)
    assert in_flight.seen == CALLS
    assert in_flight.most == BOUND


@pytest.mark.django_db(transaction=True)
def test_async_calls_beyond_the_bound_all_succeed_and_never_exceed_it(request, in_flight):
    saver = remote_saver(
        request,
        max_connections=BOUND,
        atransport=httpx.AsyncHTTPTransport(limits=_wide_pool()),
    )
    config = put_chain(saver, "gated", {"a": 1})
    in_flight.most = in_flight.seen = 0

    async def run():
        try:
            return await asyncio.gather(*(saver.aget_tuple(config) for _ in range(CALLS)))
        finally:
            await saver.aclose()

    found = asyncio.run(run())
    assert all(t.checkpoint["channel_values"] == {"a": 1} for t in found)
    assert in_flight.seen == CALLS
    assert in_flight.most == BOUND


def test_the_bound_is_a_whole_number_of_1_or_more():
    from checkpoints.errors import CheckpointConfigError
    from checkpoints.remote import RemoteSaver

    for bad in (0, -1, 2.5, "4", None):
        with pytest.raises(CheckpointConfigError, match="max_connections"):
            RemoteSaver("http://store", max_connections=bad)
