"""The API mounted by ``checkpoints.urls``: offline Swagger UI, and no global DRF settings."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.test.utils import override_settings

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


def test_docs_page_loads_swagger_ui_from_this_server():
    response = Client().get("/api/docs/")
    assert response.status_code == 200
    html = response.content.decode()
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources, html
    # Every script, style and icon comes from this server: the page works offline.
    assert all(source.startswith("/api/docs/assets/") for source in sources), sources
    assert '"/api/schema/"' in html
    for source in sources:
        asset = Client().get(source)
        assert asset.status_code == 200, source
        body = b"".join(asset.streaming_content)
        assert len(body) > 500, source
    bundle = Client().get("/api/docs/assets/swagger-ui-bundle.js")
    assert bundle["Content-Type"] in ("text/javascript", "application/javascript")


def test_docs_serve_no_other_file():
    for name in ("swagger-ui.css.map", "..%2F__init__.py", "LICENSE"):
        assert Client().get(f"/api/docs/assets/{name}").status_code == 404, name


# A host project's settings: DRF's defaults everywhere (no pagination class, DRF's own
# exception handler and schema class), as a fresh `django-admin startproject` has.
@override_settings(REST_FRAMEWORK={})
def test_api_needs_no_global_drf_settings(clients, threads):
    from rest_framework.settings import api_settings

    api_settings.reload()
    try:
        page = clients["staff"].get("/api/threads/", {"limit": 2})
        assert page.status_code == 200, page.content
        assert len(page.json()["results"]) == 2
        # Without a limit the page is still cut at our own default.
        assert "results" in clients["staff"].get("/api/threads/").json()
        missing = clients["alice"].get("/api/threads/nobody-has-this/")
        assert missing.status_code == 404
        assert missing.json()["error"]["code"] == "thread_not_found"
        anonymous = clients["anonymous"].get("/api/threads/")
        assert anonymous.status_code == 401 and anonymous["WWW-Authenticate"] == "Token"
        assert anonymous.json()["error"]["code"] == "not_authenticated"
        bad = clients["staff"].get("/api/threads/", {"limit": "x"})
        assert bad.status_code == 400 and bad.json()["error"]["field"] == "limit"
        schema = Client().get("/api/schema/", HTTP_ACCEPT="application/json")
        assert schema.status_code == 200
        assert "/api/threads/{thread_id}/rollback/" in schema.json()["paths"]
    finally:
        api_settings.reload()


WITHOUT_RETENTION = """
from django.conf import settings
settings.configure(
    SECRET_KEY="x",
    INSTALLED_APPS=["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                    "django.contrib.sessions", "django.contrib.messages", "rest_framework",
                    "checkpoints"],
    ROOT_URLCONF=__name__,
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "db.sqlite3"}},
    MIDDLEWARE=["django.contrib.sessions.middleware.SessionMiddleware",
                "django.contrib.auth.middleware.AuthenticationMiddleware",
                "django.contrib.messages.middleware.MessageMiddleware"],
    TEMPLATES=[{"BACKEND": "django.template.backends.django.DjangoTemplates", "APP_DIRS": True,
                "OPTIONS": {"context_processors": [
                    "django.template.context_processors.request",
                    "django.contrib.auth.context_processors.auth",
                    "django.contrib.messages.context_processors.messages"]}}],
    USE_TZ=True,
)
import django
django.setup()
from django.contrib import admin
from django.urls import include, path
urlpatterns = [path("admin/", admin.site.urls), path("checkpoints/", include("checkpoints.urls"))]
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.test.utils import setup_test_environment
setup_test_environment()
call_command("migrate", verbosity=0)
client = Client()
client.force_login(get_user_model().objects.create_superuser("root", "", "pw"))
for page in ("/checkpoints/api/threads/", "/checkpoints/api/schema/",
             "/checkpoints/api/checkpoints/sweeps/", "/admin/checkpoints/thread/"):
    print(page, client.get(page).status_code)
"""


def test_checkpoints_urls_without_the_retention_app(tmp_path):
    from tests.standalone import run_python

    done = run_python(["-c", WITHOUT_RETENTION], cwd=tmp_path)
    statuses = dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())
    assert statuses == {
        "/checkpoints/api/threads/": "200",
        "/checkpoints/api/schema/": "200",
        # retention's routes are mounted only with the app
        "/checkpoints/api/checkpoints/sweeps/": "404",
        "/admin/checkpoints/thread/": "200",
    }


def test_schema_links_each_answer_to_the_calls_that_take_its_ids():
    schema = Client().get("/api/schema/", HTTP_ACCEPT="application/json").json()
    operations = {
        op["operationId"]: op for item in schema["paths"].values() for op in item.values()
    }
    listed = operations["threads_list"]["responses"]["200"]["links"]["threads_history"]
    assert listed == {
        "operationId": "threads_history",
        "parameters": {"path.thread_id": "$response.body#/results/0/thread_id"},
    }
    history = operations["threads_history"]["responses"]["200"]["links"]
    assert history["threads_rollback_newest"] == {
        "operationId": "threads_rollback",
        "parameters": {"path.thread_id": "$request.path.thread_id"},
        "requestBody": {
            "checkpoint_id": "$response.body#/results/0/config/configurable/checkpoint_id"
        },
    }
    forked = operations["threads_fork"]["responses"]["201"]["links"]
    assert forked["threads_retrieve"]["parameters"] == {
        "path.thread_id": "$response.body#/config/configurable/thread_id"
    }
    # Every link names an operation of this schema.
    targets = {
        link["operationId"]
        for op in operations.values()
        for answer in op["responses"].values()
        for link in answer.get("links", {}).values()
    }
    assert targets <= set(operations) and len(targets) == len(operations)
