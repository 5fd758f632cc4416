"""Shared fixtures: the `store` fixture runs a test on every provider.

The helpers live in their own modules (tests/services.py, tests/store_helpers.py, ...); the
fixture modules of one concern each are plugins, listed in ``pytest_plugins`` in the
repository's root conftest.py.
"""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import override_settings

from tests.ci_legs import mark_first_leg_only
from tests.private_servers import RedisServer
from tests.services import need_service, redis_tools_unavailable, redis_unavailable
from tests.store_helpers import PROVIDERS, make_saver


@pytest.fixture
def redis_url():
    need_service(redis_unavailable())
    import redis

    client = redis.Redis.from_url(settings.REDIS_TEST_URL)
    client.flushdb()
    yield settings.REDIS_TEST_URL
    client.flushdb()


@pytest.fixture(scope="session")
def redis_cluster():
    """A private 3-master + 3-replica Redis Cluster for this session, stopped after."""
    need_service(redis_tools_unavailable())
    from tests.redis_cluster import LocalRedisCluster

    with LocalRedisCluster() as cluster:
        yield cluster


@pytest.fixture
def redis_cluster_url(redis_cluster):
    """The private cluster's URL, every master flushed before and after the test."""
    import redis.cluster

    from checkpoints.store.redis.clients import cluster_client

    redis_cluster.wait_ok()
    client = cluster_client(redis_cluster.url)
    client.flushall(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
    yield redis_cluster.url
    redis_cluster.wait_ok()
    client = cluster_client(redis_cluster.url)
    client.flushall(target_nodes=redis.cluster.RedisCluster.PRIMARIES)
    client.close()


@pytest.fixture(scope="session")
def redis_sentinel():
    """A private master + replica watched by three sentinels, stopped after."""
    need_service(redis_tools_unavailable())
    from tests.redis_sentinel import LocalRedisSentinel

    with LocalRedisSentinel() as setup:
        yield setup


@pytest.fixture
def redis_sentinel_url(redis_sentinel):
    """The sentinel setup's URL, its current master flushed before and after the test."""
    from checkpoints.store.redis.clients import sentinel_client

    client = sentinel_client(redis_sentinel.url)
    client.flushall()
    yield redis_sentinel.url
    sentinel_client(redis_sentinel.url).flushall()


@pytest.fixture
def private_cache():
    """The default cache on a private Redis the test may stop, retried every 60 s."""
    need_service(redis_tools_unavailable())
    server = RedisServer()
    server.start()
    caches = {
        "default": {
            "BACKEND": "project.cache.RedisWithLocalFallback",
            "LOCATION": server.url,
            "OPTIONS": {
                "CLIENT_CLASS": "django_redis.client.DefaultClient",
                "FALLBACK_RETRY_SECONDS": 60,
            },
        }
    }
    try:
        with override_settings(CACHES=caches):
            yield server
    finally:
        server.stop()


@pytest.fixture(params=PROVIDERS)
def provider(request):
    return request.param


@pytest.fixture
def store(request, provider):
    """A saver on each provider in turn, on an empty store."""
    return make_saver(request, provider)


@pytest.fixture
def saver_factory(request, provider):
    """Build more savers (with options) on the same provider as `store`."""

    def build(**options):
        return make_saver(request, provider, **options)

    return build


def pytest_collection_modifyitems(config, items):
    mark_first_leg_only(items)
    # Store tests flush every database between tests, so ORM savers in other threads
    # (async twins, concurrent writers) see committed rows.
    # Only a postgres case pays for flushing the PostgreSQL database.
    for item in items:
        names = getattr(item, "fixturenames", ())
        if "store" in names or "saver_factory" in names:
            callspec = getattr(item, "callspec", None)
            provider = callspec.params.get("provider") if callspec else None
            databases = ["default", "pg"] if provider in (None, "postgres") else ["default"]
            if "pg" not in settings.DATABASES:
                databases = ["default"]
            item.add_marker(pytest.mark.django_db(transaction=True, databases=databases))


@pytest.fixture(scope="session", autouse=True)
def _drop_stray_postgres_sessions(request, django_db_blocker):
    """Close connections left by worker threads so the test database can be dropped."""
    if settings.POSTGRES_UNAVAILABLE is not None:
        yield
        return
    request.getfixturevalue("django_db_setup")
    yield
    from django.db import connections

    if connections["pg"].settings_dict["NAME"] != settings.DATABASES["pg"]["TEST"]["NAME"]:
        return  # no test used "pg", so its test database was never created
    with django_db_blocker.unblock(), connections["pg"].cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def pytest_terminal_summary(terminalreporter):
    from tests.browser_fixtures import SHOTS

    for folder in SHOTS:
        terminalreporter.write_line(f"screenshots: {folder}")
