"""Who calls `/store/v1/`, and how often: the token, the token-guessing lockout and the
per-token throttle in as few round trips as the rules allow.

A saver call is small and frequent (a graph step makes several), so what the REST API pays
once per request (an ORM query for the token and its user, a Redis read for the lockout, a
read and a write for the throttle's history) was most of a call's cost. Here:

* **The token and its user are kept per process for ``TOKEN_SECONDS`` (5 s).** The user
  object is shared by the requests of those seconds, so its permissions (``has_perm``'s
  caches) are asked once too. In this process a token's or user's save or delete, or a
  change to a user's groups or permissions, empties the cache at once (signals); another
  service process may go on accepting a deleted token, a deactivated user or a withdrawn
  permission for at most ``TOKEN_SECONDS`` after the change.
* **The lockout and the throttle are one Redis round trip**: the address's failure count is
  read and the token's call counted in one pipeline. The lockout is still asked on every
  call, a right key's too: while an address is locked out even the right key is refused,
  so a guesser never learns which guess was right (`checkpoints.lockout`). Only a failure
  costs more round trips (its count is written).
* **The throttle counts calls in a window that starts at the token's first call** (one
  Redis counter that expires with the window) instead of DRF's list of timestamps read and
  written whole on every call: a token makes at most the rate's count of calls in any of
  its windows; the next window starts with the first call after one ends.

Without Redis (a host's other cache, or the service's cache while Redis is down) the same
counts go through Django's cache API, in more round trips.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group, Permission
from django.core.cache import cache, caches
from django.db.models.signals import m2m_changed, post_delete, post_save
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication
from rest_framework.authtoken.models import Token
from rest_framework.throttling import BaseThrottle, SimpleRateThrottle

from checkpoints.api.limits import StrictTokenAuthentication
from checkpoints.conf import setting
from checkpoints.lockout import TokenFailureLimit

# How long another process may honour a token after it is deleted or its user deactivated.
TOKEN_SECONDS = 5.0

_tokens: dict[str, tuple[float, Any, Any]] = {}
_tokens_lock = threading.Lock()


def forget_tokens(**kwargs: Any) -> None:
    """Empty this process's token cache (a token, user, group or permission changed)."""
    with _tokens_lock:
        _tokens.clear()


# Any change to who a token is, or to what its user may do: rare, so the whole cache goes.
post_save.connect(forget_tokens, sender=Token, dispatch_uid="store-service-tokens-save")
post_delete.connect(forget_tokens, sender=Token, dispatch_uid="store-service-tokens-delete")
for _model in (get_user_model(), Group, Permission):
    post_save.connect(forget_tokens, sender=_model, dispatch_uid=f"store-service-{_model}-save")
    post_delete.connect(forget_tokens, sender=_model, dispatch_uid=f"store-service-{_model}-del")
m2m_changed.connect(forget_tokens, dispatch_uid="store-service-tokens-m2m")


def _token(key: str) -> tuple[Any, Any]:
    now = time.monotonic()
    found = _tokens.get(key)
    if found is not None and found[0] > now:
        return found[1], found[2]
    try:
        token = Token.objects.select_related("user").get(key=key)
    except Token.DoesNotExist:
        raise exceptions.AuthenticationFailed("Invalid token.") from None
    if not token.user.is_active:
        raise exceptions.AuthenticationFailed("User inactive or deleted.")
    with _tokens_lock:
        _tokens[key] = (now + TOKEN_SECONDS, token.user, token)
    return token.user, token


class StoreServiceAuthentication(StrictTokenAuthentication):
    """The SDK's ``x-api-key``, or ``Authorization: Token``: the same tokens, refusals and
    lockout as the API's (`ApiKeyAuthentication`, `StrictTokenAuthentication`), with the
    token cached and the lockout read in the throttle's round trip."""

    def authenticate(self, request):
        limit = TokenFailureLimit.for_request(request)
        try:
            found = self._credentials(request)
        except exceptions.AuthenticationFailed:
            if limit is not None:
                if limit.exhausted():
                    raise limit.refusal() from None
                limit.record_failure()
            raise
        if found is None:
            return None
        calls = count_call(request, limit, found[0])
        if calls.locked_out:
            raise limit.refusal()
        request.store_service_calls = calls
        return found

    def _credentials(self, request):
        key = request.META.get("HTTP_X_API_KEY")
        if key is None:
            # DRF's header parsing and its refusals, with the key checked below.
            return TokenAuthentication.authenticate(self, request)
        key = key.strip()
        if not key:
            raise exceptions.AuthenticationFailed("x-api-key is empty")
        return self.authenticate_credentials(key)

    def authenticate_credentials(self, key):
        if not key.isprintable() or not key.isascii():
            raise exceptions.AuthenticationFailed(
                "Invalid token: the key must be printable ASCII characters."
            )
        return _token(key)


class Calls:
    """One call's counts: whether its address is locked out, and its token's calls so far in
    the throttle's window (None: no rate)."""

    def __init__(self, locked_out: bool, count: int | None, limit: int, retry_after: int):
        self.locked_out = locked_out
        self.count = count
        self.limit = limit
        self.retry_after = retry_after


def _rate() -> tuple[int, int] | None:
    rate = setting("STORE_SERVICE_RATE")
    if rate is None:
        return None
    return SimpleRateThrottle.parse_rate(None, rate)


def count_call(request, lockout: TokenFailureLimit | None, user: Any) -> Calls:
    """Read the address's failures and count the token's call, in one Redis round trip
    when the cache is Redis and answers."""
    rate = _rate()
    limit, window = rate if rate is not None else (0, 0)
    key = f"checkpoints:store-service:{window}:{user.pk}"
    if lockout is None and rate is None:
        return Calls(False, None, 0, 0)
    redis = _redis_cache()
    if redis is not None:
        try:
            return _count_in_redis(redis, lockout, key if rate else None, limit, window)
        except _down_errors() as exc:
            fell = getattr(caches["default"], "_fell", None)
            if fell is None:
                raise
            fell(exc)
    failures = cache.get(lockout.key) if lockout is not None else None
    count = None
    if rate is not None:
        cache.add(key, 0, timeout=window)
        try:
            count = cache.incr(key)
        except ValueError:  # the window's key expired in between
            cache.add(key, 1, timeout=window)
            count = 1
    locked = lockout is not None and (failures or 0) >= lockout.limit
    return Calls(locked, count, limit, window)


def _redis_cache():
    """django-redis's cache behind the default cache, when it is one and is not down."""
    backend = caches["default"]
    if getattr(backend, "down", False):
        return None
    backend = getattr(backend, "primary", backend)
    try:
        from django_redis.cache import RedisCache
    except ImportError:
        return None
    return backend if isinstance(backend, RedisCache) else None


def _down_errors() -> tuple[type[BaseException], ...]:
    from django_redis.exceptions import ConnectionInterrupted
    from redis.exceptions import RedisError

    return (ConnectionInterrupted, RedisError, OSError)


def _count_in_redis(redis, lockout, key: str | None, limit: int, window: int) -> Calls:
    client = redis.client
    pipe = client.get_client(write=True).pipeline(transaction=False)
    if lockout is not None:
        pipe.get(client.make_key(lockout.key))
    if key is not None:
        stored = client.make_key(key)
        pipe.incr(stored)
        # The window starts at the first call of it: set only on a key without an expiry.
        pipe.expire(stored, window, nx=True)
        pipe.ttl(stored)
    answers = pipe.execute()
    failures = 0
    if lockout is not None:
        raw = answers.pop(0)
        failures = client.decode(raw) if raw is not None else 0
    locked = lockout is not None and failures >= lockout.limit
    if key is None:
        return Calls(locked, None, 0, 0)
    count, _, ttl = answers
    return Calls(locked, count, limit, max(1, ttl if ttl and ttl > 0 else window))


class StoreServiceThrottle(BaseThrottle):
    """Calls per token at ``CHECKPOINTS["STORE_SERVICE_RATE"]`` (None: no limit), counted
    by `StoreServiceAuthentication` in the lockout's round trip."""

    def allow_request(self, request, view):
        calls = getattr(request, "store_service_calls", None)
        if calls is None or calls.count is None:
            return True
        self.calls = calls
        return calls.count <= calls.limit

    def wait(self):
        return self.calls.retry_after
