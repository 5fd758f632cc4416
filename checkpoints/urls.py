"""Everything a host project mounts with ``path("checkpoints/", include("checkpoints.urls"))``.

The API under ``api/`` (retention's routes too when that app is installed), its OpenAPI schema
at ``api/schema/`` and offline Swagger UI at ``api/docs/``. The service mounts the same
patterns at the root, so its URLs are ``/api/...``.
"""

from django.apps import apps
from django.urls import include, path

from checkpoints.api.docs import api_docs, api_docs_asset
from checkpoints.api.openapi import StoreSchemaView

app_name = "checkpoints"

api_patterns = [path("", include("checkpoints.api.urls"))]
if apps.is_installed("retention"):
    api_patterns.append(path("", include("retention.urls")))

urlpatterns = [
    path("api/", include(api_patterns)),
    path("api/schema/", StoreSchemaView.as_view(), name="schema"),
    path("api/docs/", api_docs, name="api-docs"),
    path("api/docs/assets/<str:name>", api_docs_asset, name="api-docs-asset"),
]
