"""/metrics for Prometheus, served only to the addresses and the token the operator names."""

from __future__ import annotations

import hmac
import ipaddress

from django.conf import settings
from django.http import JsonResponse
from django_prometheus.exports import ExportToDjangoView

from checkpoints.api.errors import error_body
from checkpoints.audit import client_address


def address_allowed(address: str | None, allowed: list[str] | None) -> bool:
    """Whether ``address`` is in one of the ``allowed`` networks (None: any address)."""
    if allowed is None:
        return True
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return False
    return any(ip in ipaddress.ip_network(network, strict=False) for network in allowed)


def bearer_matches(request, token: str) -> bool:
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode(), token.encode()
    )


def metrics(request):
    """Prometheus's page, or 403 naming the address / 401 asking for the bearer token."""
    address = client_address(request)
    if not address_allowed(address, settings.METRICS_ALLOW):
        message = f"/metrics is not served to {address or 'an unknown address'}"
        return JsonResponse(
            error_body("permission_denied", f"{message} (CHECKPOINTS_METRICS_ALLOW)"), status=403
        )
    token = settings.METRICS_TOKEN
    if token and not bearer_matches(request, token):
        response = JsonResponse(
            error_body(
                "not_authenticated",
                "/metrics needs Authorization: Bearer <token> with CHECKPOINTS_METRICS_TOKEN",
            ),
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return ExportToDjangoView(request)
