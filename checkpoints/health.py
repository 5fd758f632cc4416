"""django-health-check checks for the store, and the list a service shows at ``/health/``.

The facts are `manage.py check`'s own (checkpoints.reachability), one line each naming the
setting and the fix: `Database` connects to an alias; `StoreFormat` reads the configured
store's format generation afresh on every probe (a saver caches its own verdict);
`PendingMigrations` fails while a migration is unapplied; `CacheServer` warns while the
cache's Redis is down (the service then counts throttles per process: degraded, still
serving, so the answer stays 200); `CeleryBroker` connects to the broker.
`service_checks()` picks the checks a deployment needs from its settings; `HealthView`
answers 503, not the library's 500, when one fails. Needs ``django-health-check`` (the
``prod`` extra); a host that mounts none never imports it.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from django.conf import settings
from health_check.base import HealthCheck
from health_check.exceptions import ServiceUnavailable, ServiceWarning
from health_check.views import HealthCheckView

from checkpoints.conf import setting
from checkpoints.errors import CheckpointConfigError
from checkpoints.reachability import (
    cache_findings,
    database_findings,
    migration_findings,
    store_findings,
)
from checkpoints.store.registry import get_saver

_savers: dict[tuple[str, str | None], Any] = {}
_savers_lock = threading.Lock()


def _probe_saver(provider: str, conn_string: str | None):
    """One saver per store for the probes, built past the format check (the probe reads it)."""
    key = (provider, conn_string)
    with _savers_lock:
        if key not in _savers:
            _savers[key] = get_saver(provider, check_format=False)
        return _savers[key]


@dataclasses.dataclass
class Database(HealthCheck):
    """The database ``alias`` accepts a connection."""

    alias: str = "default"

    def run(self):
        for finding in database_findings([self.alias], close=True):
            raise ServiceUnavailable(finding.text)


@dataclasses.dataclass
class StoreFormat(HealthCheck):
    """The configured checkpoint store answers and is in this version's format generation."""

    provider: str = dataclasses.field(default_factory=lambda: setting("PROVIDER"))

    def run(self):
        try:
            saver = _probe_saver(self.provider, setting("CONN_STRING"))
        except CheckpointConfigError:
            saver = None  # store_findings builds it again and names what is wrong
        for finding in store_findings(saver=saver, close=True):
            raise ServiceUnavailable(finding.text)


@dataclasses.dataclass
class PendingMigrations(HealthCheck):
    """Every migration on the database is applied."""

    alias: str = "default"

    def run(self):
        from django.db import connections

        try:
            for finding in database_findings([self.alias]) + migration_findings([self.alias]):
                raise ServiceUnavailable(finding.text)
        finally:
            connections[self.alias].close()  # the probe ran on an executor thread


@dataclasses.dataclass
class CacheServer(HealthCheck):
    """The cache's server answers; a warning while it does not (the service degrades)."""

    def run(self):
        for finding in cache_findings():
            raise (ServiceUnavailable if finding.serious else ServiceWarning)(finding.text)


def _celery_app():
    from celery import current_app

    return current_app


@dataclasses.dataclass
class CeleryBroker(HealthCheck):
    """The Celery broker accepts a connection."""

    app: Any = dataclasses.field(default_factory=_celery_app, repr=False)

    def run(self):
        try:
            with self.app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=3)
        except Exception as exc:  # kombu raises the transport's own errors
            raise ServiceUnavailable(f"the Celery broker did not answer: {exc}") from exc


def _redis_urls() -> list[str]:
    conn = setting("CONN_STRING")
    # The store's own Redis (the cache's is CacheServer's): a Redis URL is only ever the
    # Redis saver's.
    if conn and conn.startswith(("redis://", "rediss://")):
        return [conn]
    return []


def service_checks(*, celery: bool = False, databases=None) -> list:
    """The checks for this deployment: each database (or those named), the store's format,
    each Redis it uses, pending migrations, and with ``celery`` the broker and a worker's
    answer."""
    from health_check.contrib.redis import Redis
    from redis.asyncio import Redis as AsyncRedis

    aliases = settings.DATABASES if databases is None else databases
    checks: list = [(Database, {"alias": alias}) for alias in aliases]
    checks += [StoreFormat, PendingMigrations, CacheServer]
    for url in _redis_urls():
        checks.append(
            (Redis, {"client_factory": lambda url=url: AsyncRedis.from_url(url, socket_timeout=3)})
        )
    if celery:
        from health_check.contrib.celery import Ping

        checks += [CeleryBroker, Ping]
    return checks


class HealthView(HealthCheckView):
    """django-health-check's view, answering 503 (what probes expect) when a check fails."""

    async def get(self, request, *args, **kwargs):
        response = await super().get(request, *args, **kwargs)
        if response.status_code == 500:
            failed = [result.error for result in self.results if result.error]
            # Only warnings: degraded but serving, which a load balancer must not pull.
            degraded = all(isinstance(error, ServiceWarning) for error in failed)
            response.status_code = 200 if degraded else 503
        return response
