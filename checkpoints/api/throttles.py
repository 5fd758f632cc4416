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
    """Per user (else per address) and scope; reads pass."""

    def allow_request(self, request, view):
        self.scope = getattr(view, self.scope_attr, None)
        if not self.scope or request.method in SAFE_METHODS:
            return True
        # Read now, not at import: tests and hosts change the rates with override_settings.
        self.rate = api_settings.DEFAULT_THROTTLE_RATES.get(self.scope)
        if self.rate is None:
            return True
        self.num_requests, self.duration = self.parse_rate(self.rate)
        return SimpleRateThrottle.allow_request(self, request, view)
