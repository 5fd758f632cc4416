"""The compare page in Chromium at 1400x900 (issue 54 item 5): the messages added are one
block, LangGraph's internals folded shut, no sideways scroll. Its screenshot is kept as a
CI artifact."""

from __future__ import annotations

import pytest

from checkpoints.models import Checkpoint
from tests.admin_fixtures import run_chat
from tests.browser_fixtures import csp_violations, watch_csp

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_compare_reads_quietly(page, saver, shot):
    page.set_viewport_size({"width": 1400, "height": 900})
    watch_csp(page)
    run_chat(saver, "talk", turns=4)
    rows = list(Checkpoint.objects.filter(thread__thread_id="talk").order_by("checkpoint_id"))
    page.goto(f"{page.base}/admin/checkpoints/checkpoint/{rows[3].pk}/change/")
    page.click("a.cs-compare-head")
    page.wait_for_selector(".cs-compare-sides")
    block = page.locator('[data-channel="messages"] details.cs-appended')
    assert block.count() == 1
    assert "items added" in block.locator("summary").inner_text()
    internals = page.locator("#compare-internals")
    if internals.count():
        assert internals.get_attribute("open") is None
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    shot(page, "compare")
    assert csp_violations(page) == []
