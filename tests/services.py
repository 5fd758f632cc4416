"""The servers the tests need: a test skips when one is missing, or fails under CI's flag.

CI sets ``CHECKPOINTS_REQUIRE_SERVICES=1`` so that a missing server fails the run instead of
quietly skipping what needs it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.conf import settings

REQUIRE_SERVICES = os.environ.get("CHECKPOINTS_REQUIRE_SERVICES") == "1"


def need_service(reason: str | None) -> None:
    """Skip with the reason when a server is missing; fail instead under CI's flag."""
    if reason is None:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"CHECKPOINTS_REQUIRE_SERVICES=1 but {reason}")
    pytest.skip(reason)


def redis_unavailable() -> str | None:
    try:
        import redis

        redis.Redis.from_url(settings.REDIS_TEST_URL, socket_connect_timeout=2).ping()
        return None
    except Exception as exc:  # noqa: BLE001
        return f"Redis at {settings.REDIS_TEST_URL} is not reachable: {exc}"


def celery_test_broker() -> str:
    """The Redis database the Celery worker tests use as broker: the run's own (each CI
    stream has one). A fixed database shared by every run on the machine was also one
    LangGraph's suite claims and empties, side by side with them in CI."""
    return os.environ.get("CHECKPOINTS_TEST_CELERY_BROKER") or settings.REDIS_TEST_URL


def redis_tools_unavailable() -> str | None:
    """What the private Redis setups (cluster, sentinels, a lone server) lack, if anything."""
    missing = [tool for tool in ("redis-server", "redis-cli") if shutil.which(tool) is None]
    return f"{' and '.join(missing)} not installed" if missing else None


@contextmanager
def throwaway_postgres_database(name: str) -> Iterator[str]:
    """A database ``name`` made afresh on the shared PostgreSQL server, dropped after: its URL."""
    need_service(settings.POSTGRES_UNAVAILABLE)
    import psycopg

    admin = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
