"""The admin, the console's pages and Swagger UI run under the service's CSP in Chromium:
every page renders and the console reports no violation."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint, Thread
from tests.admin_fixtures import run_chat, run_paused
from tests.browser_fixtures import csp_violations, watch_csp

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_console_and_swagger_ui_pass_under_the_csp(page, saver, shot):
    run_chat(saver, "csp-chat", turns=2)
    run_paused(saver, "csp-paused")
    console: list[str] = []
    page.on("console", lambda m: console.append(f"{m.type}: {m.text}"))
    watch_csp(page)
    thread = Thread.objects.get(thread_id="csp-chat")
    checkpoint = Checkpoint.objects.filter(thread=thread).order_by("-checkpoint_id").first()
    pages = {
        "/admin/": "#site-name",
        "/admin/checkpoints/thread/": "#result_list",
        f"/admin/checkpoints/thread/{thread.pk}/change/": ".field-status_detail",
        "/admin/checkpoints/checkpoint/": "#result_list",
        f"/admin/checkpoints/checkpoint/{checkpoint.pk}/change/": "#content",
        "/admin/retention/sweeprun/sweep/": "#content",
        # Swagger UI draws the operations from the schema only when its scripts ran.
        "/api/docs/": ".swagger-ui .opblock",
    }
    for path, ready in pages.items():
        response = page.goto(f"{page.base}{path}")
        assert response.status == 200, path
        assert "script-src 'self'" in response.headers["content-security-policy"], path
        page.wait_for_selector(ready)
        page.wait_for_load_state("networkidle")
        assert csp_violations(page) == [], (path, csp_violations(page))
    # Swagger UI's "Try it out" still works: expanding an operation runs its scripts.
    page.locator(".swagger-ui .opblock-summary").first.click()
    page.wait_for_selector(".swagger-ui .opblock-body")
    assert csp_violations(page) == []
    shot(page, "csp_swagger_ui")
    violations = [line for line in console if "Content Security Policy" in line]
    assert violations == [], violations
