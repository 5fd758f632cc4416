"""Turn every error an API view raises into one JSON shape.

``{"error": {"code": ..., "message": ..., "field": ...}}`` with the status the error class
carries: store errors bring their own ``code``/``status``/``field``; DRF's errors keep
their status and code; an oversized body is a 413. Anything unexpected is logged and
answered with a JSON 500 that names no internals.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from django.core import exceptions as django_exceptions
from django.http import Http404
from rest_framework import exceptions as drf_exceptions
from rest_framework import status
from rest_framework.response import Response

from checkpoints.errors import CheckpointStoreError

logger = logging.getLogger(__name__)


def printable(text: str) -> str:
    """``text`` with what UTF-8 cannot carry (a lone surrogate) escaped: an error quoting
    the input that failed must still render."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def error_body(code: str, message: str, field: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": printable(str(message))}
    if field:
        error["field"] = printable(str(field))
    return {"error": error}


def error_response(
    status_code: int, code: str, message: str, field: str | None = None, headers=None
) -> Response:
    return Response(error_body(code, message, field), status=status_code, headers=headers)


def _first_detail(detail: Any, path: str = "") -> tuple[str | None, str, str | None]:
    """(field path, message, code) of the first leaf in a DRF error detail."""
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            key = str(key)
            child = key if not path else f"{path}.{key}"
            if key == "non_field_errors":
                child = path
            return _first_detail(value, child)
        return path or None, "invalid input", None
    if isinstance(detail, Sequence) and not isinstance(detail, str):
        if len(detail) == 1 or not any(isinstance(d, (Mapping, list)) for d in detail):
            return _first_detail(detail[0], path) if detail else (path or None, "invalid", None)
        for index, value in enumerate(detail):
            if value:
                return _first_detail(value, f"{path}.{index}" if path else str(index))
        return path or None, "invalid input", None
    code = getattr(detail, "code", None)
    return path or None, str(detail), code


def exception_handler(exc, context):
    """DRF's EXCEPTION_HANDLER: every failure becomes the API's error shape."""
    if isinstance(exc, CheckpointStoreError):
        if exc.status >= 500:
            logger.error("API request failed: %s (%s)", exc.message, exc.code, exc_info=exc)
        return error_response(exc.status, exc.code, exc.message, exc.field)
    if isinstance(exc, django_exceptions.RequestDataTooBig):
        return error_response(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            "request_too_large",
            f"the request body is larger than this server accepts ({exc})",
        )
    if isinstance(exc, Http404):
        return error_response(status.HTTP_404_NOT_FOUND, "not_found", str(exc) or "not found")
    if isinstance(exc, django_exceptions.PermissionDenied):
        return error_response(
            status.HTTP_403_FORBIDDEN, "permission_denied", str(exc) or "permission denied"
        )
    if isinstance(exc, django_exceptions.SuspiciousOperation):
        return error_response(status.HTTP_400_BAD_REQUEST, "bad_request", str(exc))
    if isinstance(exc, drf_exceptions.ValidationError):
        field, message, code = _first_detail(exc.detail)
        text = f"{field}: {message}" if field else message
        return error_response(
            400, code if code and code != "invalid" else "invalid_input", text, field
        )
    if isinstance(exc, drf_exceptions.APIException):
        headers = {}
        if getattr(exc, "auth_header", None):
            headers["WWW-Authenticate"] = exc.auth_header
        if getattr(exc, "wait", None) is not None:
            headers["Retry-After"] = str(int(exc.wait))
        _, message, code = _first_detail(exc.detail)
        return error_response(
            exc.status_code, code or exc.default_code, message, headers=headers or None
        )
    logger.exception("unexpected error in %s", context.get("view").__class__.__name__)
    return error_response(
        status.HTTP_500_INTERNAL_SERVER_ERROR,
        "internal_error",
        "the server failed to handle this request; the error was logged",
    )


def not_found(request, exception=None):
    """The project's 404 page: JSON under /api/, Django's own page everywhere else."""
    if request.path.startswith("/api/"):
        from django.http import JsonResponse

        body = error_body("not_found", f"no API route matches {request.path!r}")
        return JsonResponse(body, status=404)
    from django.views.defaults import page_not_found

    return page_not_found(request, exception)
