"""The sweep preview in Chromium at 1400x900 (issue 54 item 4): the failed threads it would
delete are counted in a warning, the table sorts by a click on its header, and Hold on a row
takes the thread out of the preview. Its screenshot is kept as a CI artifact."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from retention.models import Hold
from tests.admin_fixtures import run_chat, run_failing
from tests.browser_fixtures import csp_violations, watch_csp

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SWEEP = "/admin/retention/sweeprun/sweep/"


def test_decide_from_the_sweep_preview(page, saver, shot):
    page.set_viewport_size({"width": 1400, "height": 900})
    watch_csp(page)
    for n in range(3):
        run_failing(saver, f"broke-{n}")
    for n in range(4):
        run_chat(saver, f"idle-{n}", turns=1)
    Thread.objects.update(last_write_at=utcnow() - timedelta(days=30))
    page.goto(f"{page.base}{SWEEP}")
    assert "3 of them failed" in page.locator("#sweep-failed-warning").inner_text()
    page.click("#would-delete thead a:text('status')")
    page.wait_for_url("**sort=status**")
    first = page.locator("#would-delete tbody tr").first
    assert "Failed" in first.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    shot(page, "sweep-preview")
    held = first.get_attribute("data-thread")
    first.get_by_role("button", name="Hold").click()
    page.wait_for_url("**sort=status**")
    assert "2 of them failed" in page.locator("#sweep-failed-warning").inner_text()
    assert page.locator(f"#would-delete tr[data-thread='{held}']").count() == 0
    assert Hold.objects.get(thread_id=held).created_by == "root"
    assert csp_violations(page) == []
