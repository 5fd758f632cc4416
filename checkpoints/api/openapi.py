"""The API's OpenAPI schema view: our endpoints only, titled without global settings."""

from __future__ import annotations

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import extend_schema as spectacular_extend_schema
from drf_spectacular.views import SpectacularAPIView

SCHEMA_SETTINGS = {
    "TITLE": "Checkpoint Store API",
    "DESCRIPTION": "LangGraph checkpoints: threads, history, time travel, retention and the sweep.",
    "VERSION": "0.1.0",
    "PREPROCESSING_HOOKS": ["checkpoints.api.openapi.only_store_endpoints"],
}


def extend_schema(**kwargs):
    """drf-spectacular's ``extend_schema``, built on its AutoSchema in any host project.

    Its decorator bases a view method's schema on DRF's DEFAULT_SCHEMA_CLASS unless the method
    names one; a host that never set that setting would get DRF's own AutoSchema, which
    cannot describe our views. Naming spectacular's here needs no global setting.
    """
    decorate = spectacular_extend_schema(**kwargs)

    def decorator(view_method):
        view_method.schema = AutoSchema
        return decorate(view_method)

    return decorator


def only_store_endpoints(endpoints):
    """Keep the store's views: a host's own DRF views are not part of this API."""
    from checkpoints.api.base import StoreAPIView

    return [
        endpoint
        for endpoint in endpoints
        if issubclass(getattr(endpoint[3], "cls", object), StoreAPIView)
    ]


class StoreSchemaView(SpectacularAPIView):
    """The whole URL tree is walked, so paths carry the prefix the host mounted us under."""

    custom_settings = SCHEMA_SETTINGS
