"""What every LangGraph-shaped view shares: the SDK's auth header and ``{"detail"}`` errors."""

from __future__ import annotations

from rest_framework import exceptions
from rest_framework.authentication import SessionAuthentication

from checkpoints.api.base import StoreAPIView
from checkpoints.api.errors import exception_handler as store_exception_handler
from checkpoints.api.limits import BoundedJSONParser, StrictTokenAuthentication
from checkpoints.lockout import limit_token_guessing

# The Platform answers a malformed body with 422; the store's own 400s mean the same here.
INPUT_STATUS = {400: 422}


class TextJSONParser(BoundedJSONParser):
    """JSON sent as ``text/plain``, as LangGraph Studio sends its bodies (a browser sends a
    text/plain POST without asking first); read with the same bounds as JSON."""

    media_type = "text/plain"


class ApiKeyAuthentication(StrictTokenAuthentication):
    """The SDK sends its key as ``x-api-key``: here it is a DRF token."""

    @limit_token_guessing
    def authenticate(self, request):
        key = request.META.get("HTTP_X_API_KEY")
        if key is None:
            return None
        key = key.strip()
        if not key:
            raise exceptions.AuthenticationFailed("x-api-key is empty")
        return self.authenticate_credentials(key)


def exception_handler(exc, context):
    """The store's error answer, reshaped as the Platform's ``{"detail": ...}``."""
    response = store_exception_handler(exc, context)
    if response is None:
        return None
    error = (response.data or {}).get("error") or {}
    body = {"detail": error.get("message", ""), "code": error.get("code")}
    if error.get("field"):
        body["field"] = error["field"]
    response.data = body
    response.status_code = INPUT_STATUS.get(response.status_code, response.status_code)
    return response


class LangGraphView(StoreAPIView):
    authentication_classes = [
        ApiKeyAuthentication,
        StrictTokenAuthentication,
        SessionAuthentication,
    ]
    parser_classes = [BoundedJSONParser, TextJSONParser]
    pagination_class = None
    # Not in the REST API's schema: these routes have their own document (openapi.py).
    schema = None

    def get_exception_handler(self):
        return exception_handler
