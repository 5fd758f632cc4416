"""URL routes: admin, the store's API, schema and docs (``checkpoints.urls``), metrics."""

from django.conf import settings
from django.contrib import admin
from django.urls import include, path

from checkpoints.health import HealthView, service_checks
from project.metrics import metrics

urlpatterns = [
    path("admin/", admin.site.urls),
    # For load balancers and probes: 200 when every check passes, else 503 naming the check.
    path(
        "health/",
        HealthView.as_view(checks=service_checks(celery=settings.HEALTH_CHECK_CELERY)),
        name="health",
    ),
    # Mounted at the root so the service's API stays at /api/; a host mounts it under a prefix.
    path("", include("checkpoints.urls")),
    # LangGraph Platform's threads API, for langgraph-sdk's client.
    path("langgraph/", include("checkpoints.langgraph_api.urls")),
    # The store as a service: the remote saver's calls (checkpoints.remote.RemoteSaver).
    path("store/v1/", include("checkpoints.store_service.urls")),
    # Prometheus's scrape, for the addresses and token the settings name (project.metrics).
    path("metrics", metrics, name="prometheus-django-metrics"),
]

handler404 = "checkpoints.api.errors.not_found"
