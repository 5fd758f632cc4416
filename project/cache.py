"""The service's cache: Redis, and a per-process cache while Redis does not answer.

Throttles (checkpoints.api.throttles), the token-failure cap (checkpoints.lockout) and the
sessions' neighbours count in the cache. With Redis down, django-redis raises and every
throttled call answered 500; ignoring the errors instead (django-redis's IGNORE_EXCEPTIONS)
would read every count as zero and let every call through. Here each call falls back to a
per-process LocMemCache: limits still hold, counted per process, until Redis answers again
(tried again every FALLBACK_RETRY_SECONDS, so a down server costs one connect timeout per
interval, not one per request). ``manage.py check`` (checkpoints.W040) and ``/health/`` say
when Redis is down; `probe()` asks Redis itself, past the fallback.
"""

from __future__ import annotations

import logging
import threading
import time

from django.core.cache.backends.base import DEFAULT_TIMEOUT, BaseCache
from django.core.cache.backends.locmem import LocMemCache
from django_redis.cache import RedisCache
from django_redis.exceptions import ConnectionInterrupted
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

# What a Redis that does not answer (or answers wrongly) raises through django-redis.
DOWN = (ConnectionInterrupted, RedisError, OSError)
# Bounded so a request waits at most this long on a server that does not answer.
SOCKET_SECONDS = 1.0


class RedisWithLocalFallback(BaseCache):
    """django-redis's cache, falling back to a LocMemCache of this process while Redis is down.

    OPTIONS as django-redis's, plus FALLBACK_RETRY_SECONDS (5): how long after a failure the
    next call goes to the local cache without trying Redis.
    """

    def __init__(self, server, params):
        options = dict(params.get("OPTIONS") or {})
        self.retry_seconds = float(options.pop("FALLBACK_RETRY_SECONDS", 5))
        options.setdefault("SOCKET_CONNECT_TIMEOUT", SOCKET_SECONDS)
        options.setdefault("SOCKET_TIMEOUT", SOCKET_SECONDS)
        super().__init__(params)
        self.primary = RedisCache(server, {**params, "OPTIONS": options})
        self.local = LocMemCache(f"fallback-{id(self)}", {**params, "OPTIONS": {}})
        self._down_until = 0.0
        self._lock = threading.Lock()

    @property
    def client(self):
        """django-redis's client, for `django_redis.get_redis_connection` (the Redis saver
        on the cache's server reaches Redis itself, and refuses while it is down)."""
        return self.primary.client

    @property
    def down(self) -> bool:
        return time.monotonic() < self._down_until

    def probe(self) -> None:
        """Ping Redis itself; raises what it raises. Clears the down state when it answers."""
        self.primary.client.get_client(write=True).ping()
        self._down_until = 0.0

    def _fell(self, exc: BaseException) -> None:
        with self._lock:
            first = not self.down
            self._down_until = time.monotonic() + self.retry_seconds
        if first:
            log.warning(
                "the cache's Redis did not answer (%s); counting in this process for %gs",
                exc,
                self.retry_seconds,
            )

    def _call(self, name: str, *args, **kwargs):
        if not self.down:
            try:
                return getattr(self.primary, name)(*args, **kwargs)
            except DOWN as exc:
                self._fell(exc)
        return getattr(self.local, name)(*args, **kwargs)

    def add(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("add", key, value, timeout, version=version)

    def get(self, key, default=None, version=None):
        return self._call("get", key, default, version=version)

    def set(self, key, value, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("set", key, value, timeout, version=version)

    def touch(self, key, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("touch", key, timeout, version=version)

    def delete(self, key, version=None):
        return self._call("delete", key, version=version)

    def get_many(self, keys, version=None):
        return self._call("get_many", keys, version=version)

    def has_key(self, key, version=None):
        return self._call("has_key", key, version=version)

    def incr(self, key, delta=1, version=None):
        return self._call("incr", key, delta, version=version)

    def decr(self, key, delta=1, version=None):
        return self._call("decr", key, delta, version=version)

    def set_many(self, data, timeout=DEFAULT_TIMEOUT, version=None):
        return self._call("set_many", data, timeout, version=version)

    def delete_many(self, keys, version=None):
        return self._call("delete_many", keys, version=version)

    def clear(self):
        self.local.clear()
        return self._call("clear")

    def close(self, **kwargs):
        self.primary.close(**kwargs)
