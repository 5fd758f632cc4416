"""The thread list in Chromium at 1400x900 (issue 54 item 3): one line per thread (a
waiting thread's question takes at most two more), no sideways scroll, however long its
id, error or last message. Its screenshot is kept as a CI artifact."""

from __future__ import annotations

import uuid

import pytest

from retention.holds import hold_thread
from tests.admin_fixtures import run_chat, run_failing, run_paused, run_tools
from tests.browser_fixtures import csp_violations, watch_csp

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
THREADS = "/admin/checkpoints/thread/"
ROW_HEIGHTS = """() => Object.fromEntries(
  [...document.querySelectorAll('#result_list tbody tr')].map(r => [
    r.querySelector('th.field-thread_id a').textContent, r.getBoundingClientRect().height]))"""


def test_each_thread_is_one_line_at_1400_px(page, saver, shot):
    page.set_viewport_size({"width": 1400, "height": 900})
    watch_csp(page)
    long_id = f"support-conversation-{uuid.uuid4()}-{uuid.uuid4()}"
    run_chat(saver, long_id, turns=2)
    run_chat(saver, "short", turns=1)
    run_tools(saver, "tools")
    run_failing(saver, "broke")
    run_failing(saver, "broke-held")
    hold_thread(saver, "broke-held", reason="refund dispute " * 20, by="ops")
    run_paused(saver, "asks")
    page.goto(f"{page.base}{THREADS}")
    page.wait_for_selector("#result_list")
    shot(page, "thread-list")
    heights = page.evaluate(ROW_HEIGHTS)
    assert len(heights) == 6, heights
    one_line = heights["short"]
    for thread_id, height in heights.items():
        if thread_id == "asks":
            # The question's own line: at most three lines in all.
            assert height <= one_line * 3, heights
        else:
            assert height <= one_line + 1, heights
    assert one_line <= 40, heights
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    assert page.evaluate("document.querySelector('#changelist .results').scrollWidth") <= (
        page.evaluate("document.querySelector('#changelist .results').clientWidth")
    )
    # Cut words are whole on hover.
    held = page.locator("#result_list tr", has_text="broke-held")
    assert "Failed" in held.inner_text() and "Held" in held.inner_text()
    assert csp_violations(page) == []
