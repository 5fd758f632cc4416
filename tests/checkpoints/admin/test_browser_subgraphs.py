"""The thread page of an agent whose node calls a subgraph, in Chromium at 1400x900 (issue
54): at 175 calls and at 1,000, the page stays under 250 KB of HTML and 6,000 px tall, with
its calls folded and opened a page at a time. Its screenshot is kept as a CI artifact."""

from __future__ import annotations

import pytest

from checkpoints.models import Thread
from tests.admin_fixtures import run_subgraph_calls
from tests.browser_fixtures import csp_violations, watch_csp

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
THREADS = "/admin/checkpoints/thread/"
MAX_BYTES = 250_000
MAX_HEIGHT = 6_000


def measure(page, thread_id: str) -> tuple[int, int, int]:
    """(HTML bytes, page height folded, page height with the calls opened)."""
    pk = Thread.objects.get(thread_id=thread_id).pk
    answer = page.goto(f"{page.base}{THREADS}{pk}/change/")
    size = len(answer.body())
    page.wait_for_selector("details.cs-calls-node")
    folded = page.evaluate("document.documentElement.scrollHeight")
    page.click("details.cs-calls-node > summary")
    page.wait_for_selector("details.cs-calls-node[open] tr.cs-call")
    opened = page.evaluate("document.documentElement.scrollHeight")
    return size, folded, opened


def test_a_thread_of_175_then_1000_subgraph_calls_keeps_its_page_small(page, saver, shot):
    page.set_viewport_size({"width": 1400, "height": 900})
    watch_csp(page)
    run_subgraph_calls(saver, "agent-175", 175)
    size, folded, opened = measure(page, "agent-175")
    assert size <= MAX_BYTES and folded <= MAX_HEIGHT and opened <= MAX_HEIGHT, (
        size,
        folded,
        opened,
    )
    summary = page.locator("details.cs-calls-node > summary").inner_text()
    assert "175 calls of act" in summary
    # The calls' rows name them in order, under a step header of the root graph.
    names = page.locator("td.cs-call-name").all_inner_texts()
    assert names[:3] == ["act #1", "act #2", "act #3"]
    assert page.locator("td.cs-call-step").first.inner_text().startswith("step ")
    # No sideways scroll at 1400 px.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1400
    page.evaluate("window.scrollTo(0, 0)")
    shot(page, "thread-subgraph-175")
    assert csp_violations(page) == []

    run_subgraph_calls(saver, "agent-1000", 1000, per_turn=50)
    size, folded, opened = measure(page, "agent-1000")
    assert size <= MAX_BYTES and folded <= MAX_HEIGHT and opened <= MAX_HEIGHT, (
        size,
        folded,
        opened,
    )
    assert "1000 calls of act" in page.locator("details.cs-calls-node > summary").inner_text()
