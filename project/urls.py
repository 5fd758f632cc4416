"""URL routes: admin, the store's API, schema and docs (``checkpoints.urls``), metrics."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    # Mounted at the root so the service's API stays at /api/; a host mounts it under a prefix.
    path("", include("checkpoints.urls")),
    path("", include("django_prometheus.urls")),
]

handler404 = "checkpoints.api.errors.not_found"
