"""django-health-check checks for the store, and the list a service shows at ``/health/``.

`StoreFormat` reads the configured store's format generation afresh on every probe (a saver
caches its own verdict); `PendingMigrations` fails while a migration is unapplied;
`CeleryBroker` connects to the broker. `service_checks()` picks the checks a deployment
needs from its settings; `HealthView` answers 503, not the library's 500, when one fails.
Needs ``django-health-check`` (the ``prod`` extra); a host that mounts none never imports it.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

from django.conf import settings
from health_check.base import HealthCheck
from health_check.exceptions import ServiceUnavailable
from health_check.views import HealthCheckView
from redis.exceptions import RedisError

from checkpoints.conf import setting
from checkpoints.errors import CheckpointStoreError
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


def read_format(saver) -> str:
    """The store's recorded format generation ("none" for a new, empty store); raises the
    store's refusal when it is in another generation."""
    return saver.recorded_format()


@dataclasses.dataclass
class StoreFormat(HealthCheck):
    """The configured checkpoint store answers and is in this version's format generation."""

    provider: str = dataclasses.field(default_factory=lambda: setting("PROVIDER"))

    def run(self):
        from django.db import DatabaseError, connections

        provider = self.provider
        try:
            saver = _probe_saver(provider, setting("CONN_STRING"))
            read_format(saver)
        except CheckpointStoreError as exc:
            raise ServiceUnavailable(exc.message) from exc
        except DatabaseError as exc:
            raise ServiceUnavailable(f"the {provider} store's database: {exc}") from exc
        except (RedisError, OSError) as exc:
            raise ServiceUnavailable(f"the {provider} store did not answer: {exc}") from exc
        finally:
            using = getattr(_savers.get((provider, setting("CONN_STRING"))), "db_alias", None)
            if using is not None:
                connections[using].close()  # the probe ran on an executor thread


@dataclasses.dataclass
class PendingMigrations(HealthCheck):
    """Every migration on the database is applied."""

    alias: str = "default"

    def run(self):
        from django.db import DatabaseError, connections
        from django.db.migrations.executor import MigrationExecutor

        try:
            executor = MigrationExecutor(connections[self.alias])
            plan = executor.migration_plan(executor.loader.graph.leaf_nodes())
        except DatabaseError as exc:
            raise ServiceUnavailable(f"cannot read the migrations applied: {exc}") from exc
        if plan:
            names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in plan[:5])
            more = f" and {len(plan) - 5} more" if len(plan) > 5 else ""
            raise ServiceUnavailable(
                f"{len(plan)} migration(s) not applied: {names}{more}; run `manage.py migrate`"
            )


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
    urls = []
    cache = settings.CACHES.get("default", {})
    if "redis" in cache.get("BACKEND", "").lower():
        location = cache["LOCATION"]
        urls.append(location[0] if isinstance(location, (list, tuple)) else location)
    conn = setting("CONN_STRING")
    # The store's own Redis: a Redis URL is only ever the Redis saver's.
    if conn and conn.startswith(("redis://", "rediss://")):
        urls.append(conn)
    return list(dict.fromkeys(urls))


def service_checks(*, celery: bool = False, databases=None) -> list:
    """The checks for this deployment: each database (or those named), the store's format,
    each Redis it uses, pending migrations, and with ``celery`` the broker and a worker's
    answer."""
    from health_check.checks import Database
    from health_check.contrib.redis import Redis
    from redis.asyncio import Redis as AsyncRedis

    aliases = settings.DATABASES if databases is None else databases
    checks: list = [(Database, {"alias": alias}) for alias in aliases]
    checks += [StoreFormat, PendingMigrations]
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
            response.status_code = 503
        return response
