"""A cap on failed token authentications per client address, so API keys cannot be guessed.

Every failed ``Authorization: Token`` or ``x-api-key`` authentication counts against the
caller's address (``audit.client_address``) in Django's cache, in fixed windows. Past the rate
of the ``checkpoints.token_failures`` scope in ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``
("30/min" in the service), every token authentication from that address is answered 429 with
Retry-After until the window ends, the right key's too: a guesser must not learn which guess
was right. Requests without a token (session, anonymous) pass untouched. A host with no rate
for the scope gets no limit, as with the API's other throttles.
"""

from __future__ import annotations

import functools
import time

from django.core.cache import cache
from rest_framework import exceptions
from rest_framework.settings import api_settings
from rest_framework.throttling import SimpleRateThrottle

from checkpoints.audit import client_address
from checkpoints.errors import CheckpointConfigError

SCOPE = "checkpoints.token_failures"


def parse_rate(rate: str) -> tuple[int, int]:
    """("30/min") -> (30 failures, 60 seconds), read as DRF reads its throttles' rates;
    CheckpointConfigError names a malformed rate."""
    try:
        limit, seconds = SimpleRateThrottle.parse_rate(None, str(rate).replace(" ", ""))
    except (ValueError, KeyError, IndexError):
        raise CheckpointConfigError(
            f'REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["{SCOPE}"] is {rate!r}; expected '
            "a count per s, min, hour or day such as '30/min'"
        ) from None
    if limit < 1:
        raise CheckpointConfigError(
            f'REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["{SCOPE}"] is {rate!r}; the count '
            'must be 1 or more ("off" in the service\'s variable lifts the limit)'
        )
    return limit, seconds


class TokenFailureLimit:
    """The failures one address has left in the current window."""

    def __init__(self, address: str | None, limit: int, window: int):
        self.limit = limit
        self.window = window
        now = time.time()
        start = int(now // window) * window
        self.retry_after = max(1, int(start + window - now + 0.999))
        self.key = f"checkpoints:token-failures:{window}:{start}:{address or 'unknown'}"

    @classmethod
    def for_request(cls, request) -> TokenFailureLimit | None:
        """The limit on this caller, or None when the host set no rate for the scope."""
        # Read now, not at import: tests and hosts change the rates with override_settings.
        rate = api_settings.DEFAULT_THROTTLE_RATES.get(SCOPE)
        if rate is None:
            return None
        return cls(client_address(request), *parse_rate(rate))

    def exhausted(self) -> bool:
        return (cache.get(self.key) or 0) >= self.limit

    def record_failure(self) -> None:
        # add then incr: atomic in Redis, so parallel guesses cannot overwrite each other's count.
        cache.add(self.key, 0, timeout=self.window + 1)
        try:
            cache.incr(self.key)
        except ValueError:  # the window's key expired in between
            cache.add(self.key, 1, timeout=self.window + 1)

    def refusal(self) -> exceptions.Throttled:
        return exceptions.Throttled(
            wait=self.retry_after,
            detail=(
                f"too many failed token authentications from this address ({self.limit} per "
                f"{self.window} seconds); token authentication from it is refused until the "
                "window ends."
            ),
        )


def limit_token_guessing(authenticate):
    """Wrap a DRF authentication class's ``authenticate(request)`` with ``TokenFailureLimit``."""

    @functools.wraps(authenticate)
    def guarded(self, request):
        limit = TokenFailureLimit.for_request(request)
        if limit is None:
            return authenticate(self, request)
        if limit.exhausted():
            # The key is still looked up, to tell a request that carries one from one that
            # does not (None), but whether it was right is never told.
            try:
                presented = authenticate(self, request) is not None
            except exceptions.AuthenticationFailed:
                presented = True
            if presented:
                raise limit.refusal()
            return None
        try:
            return authenticate(self, request)
        except exceptions.AuthenticationFailed:
            limit.record_failure()
            raise

    return guarded
