"""Turn every error into the API's JSON shape (filled in by the API work)."""

from rest_framework.views import exception_handler as drf_exception_handler


def exception_handler(exc, context):
    return drf_exception_handler(exc, context)
