"""LangGraph's own conformance suite, on every provider, through the async and sync paths."""

from __future__ import annotations

import pytest

from tests.conformance import run_suite
from tests.store_helpers import make_saver


@pytest.mark.parametrize("path", ["async", "sync"])
def test_conformance_suite(store, provider, path):
    run_suite(store, provider, path)


@pytest.mark.redis
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("path", ["async", "sync"])
@pytest.mark.parametrize("setup", ["redis-cluster", "redis-sentinel"])
def test_conformance_suite_on_redis_cluster_and_sentinel(request, setup, path):
    """The Redis saver on a private 3-master + 3-replica cluster (redis+cluster://) and on a
    master + replica behind three sentinels (redis+sentinel://)."""
    store = make_saver(request, setup)
    assert store.url.startswith(setup.replace("-", "+"))
    run_suite(store, setup, path)
