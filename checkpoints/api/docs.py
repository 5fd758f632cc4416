"""Swagger UI for the API, served from drf-spectacular-sidecar's files: no CDN, works offline.

The files are read from the installed sidecar package, not through ``staticfiles``, so a host
project needs neither ``drf_spectacular_sidecar`` in INSTALLED_APPS nor ``collectstatic``.
"""

from __future__ import annotations

import mimetypes
from pathlib import Path

from django.http import FileResponse, Http404
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import cache_control

from checkpoints.api.openapi import SCHEMA_SETTINGS

# Only these files are served: nothing else in the package is reachable by name.
ASSETS = (
    "swagger-ui.css",
    "swagger-ui-bundle.js",
    "swagger-ui-standalone-preset.js",
    "favicon-32x32.png",
)
# Ours: the page's start-up script (a file, so a CSP of script-src 'self' lets it run).
OWN_ASSETS = {
    "api-docs.js": Path(__file__).resolve().parent.parent / "static/checkpoints/api-docs.js"
}


def _asset_dir() -> Path:
    import drf_spectacular_sidecar

    return (
        Path(drf_spectacular_sidecar.__file__).parent
        / "static"
        / "drf_spectacular_sidecar"
        / "swagger-ui-dist"
    )


def _namespaced(request, name: str) -> str:
    namespace = request.resolver_match.namespace if request.resolver_match else ""
    return reverse(f"{namespace}:{name}" if namespace else name)


def api_docs(request):
    """The Swagger UI page, pointed at this API's schema."""
    return render(
        request,
        "checkpoints/api_docs.html",
        {
            "title": SCHEMA_SETTINGS["TITLE"],
            "schema_url": _namespaced(request, "schema"),
            "assets": _namespaced(request, "api-docs") + "assets/",
        },
    )


@cache_control(max_age=86400, public=True)
def api_docs_asset(request, name: str):
    """One of Swagger UI's files from the sidecar package."""
    if name not in ASSETS and name not in OWN_ASSETS:
        raise Http404(f"no API docs asset named {name!r}")
    path = OWN_ASSETS.get(name) or _asset_dir() / name
    content_type = mimetypes.guess_type(name)[0] or "application/octet-stream"
    return FileResponse(path.open("rb"), content_type=content_type)
