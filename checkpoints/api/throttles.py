"""The API's throttle on destructive calls: DRF's scoped throttle, on writes only.

A view names its scope in ``throttle_scope`` ("checkpoints.sweep", ...); the rate comes from
the host's ``REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]``. A scope with no rate there (a host
that set none) is not limited, where DRF's own class would refuse to start.
"""

from __future__ import annotations

from rest_framework.permissions import SAFE_METHODS
from rest_framework.settings import api_settings
from rest_framework.throttling import ScopedRateThrottle, SimpleRateThrottle


class DestructiveRateThrottle(ScopedRateThrottle):
    """Per user (else per address) and scope; reads pass.

    A view with several methods names a scope per method in ``throttle_scopes``
    ({"DELETE": "checkpoints.delete"}); one that acts on many threads at once says how many
    requests of its scope a call counts as in ``throttle_cost(request)`` (at most the
    whole rate, so a call the rate allows alone is never refused forever).
    """

    def allow_request(self, request, view):
        scopes = getattr(view, "throttle_scopes", None)
        if scopes is not None:
            self.scope = scopes.get(request.method)
        else:
            self.scope = getattr(view, self.scope_attr, None)
        if not self.scope or request.method in SAFE_METHODS:
            return True
        # Read now, not at import: tests and hosts change the rates with override_settings.
        self.rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        cost_of = getattr(view, "throttle_cost", None)
        cost = 1 if cost_of is None else min(max(int(cost_of(request)), 1), self.num_requests)
        if cost == 1:
            return SimpleRateThrottle.allow_request(self, request, view)
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()
        if len(self.history) + cost > self.num_requests:
            return self.throttle_failure()
        self.history[:0] = [self.now] * cost
        self.cache.set(self.key, self.history, self.duration)
        return True
