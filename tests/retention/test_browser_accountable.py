"""In a browser: an operator holds a thread from its page, the dry run lists every id it
would delete and spares the held thread saying why, and the run's page lists the very ids
the dry run did."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from retention.models import DeletedThread, Hold
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = "/admin/checkpoints/thread/"
SWEEP = "/admin/retention/sweeprun/sweep/"


def test_hold_a_thread_then_compare_the_dry_run_with_the_runs_stored_ids(page, saver, shot):
    long_ago = utcnow() - timedelta(days=30)
    for i in range(6):
        run_chat(saver, f"old-{i}", turns=1)
        Thread.objects.filter(thread_id=f"old-{i}").update(last_write_at=long_ago)
        mark_finished(saver, f"old-{i}", owner="ops", now=long_ago + timedelta(minutes=1))
    run_chat(saver, "fresh", turns=1)

    # Hold one from its page: reason and end time.
    pk = Thread.objects.get(thread_id="old-3").pk
    page.goto(f"{page.base}{THREADS}{pk}/change/")
    assert "Due for deletion" in page.locator(".field-status_detail").inner_text()
    page.fill("#hold-reason", "customer disputes a refund")
    page.fill("#hold-until", "2999-06-01T12:00")
    page.get_by_role("button", name="Hold this thread").click()
    page.locator(".cs-hold-words").wait_for()
    words = page.locator(".cs-hold-words").inner_text()
    assert "held by root: customer disputes a refund until 2999-06-01 12:00:00" in words
    status = page.locator(".field-status_detail").inner_text()
    assert "Held" in status and "finished and due since" in status
    assert "the sweep spares it" in status
    assert Hold.objects.get().created_by == "root"
    shot(page, "thread-hold")

    # The dry run: every id it counts, listed; the held thread spared with its reason.
    page.goto(f"{page.base}{SWEEP}")
    counts = page.locator("#sweep-counts").inner_text()
    assert "would delete 5 thread(s)" in counts
    would = page.locator("#would-delete td.cs-doomed-id").all_inner_texts()
    assert len(would) == 5 and "old-3" not in would
    spared = page.locator("#spared-threads tbody tr").all_inner_texts()
    assert len(spared) == 1 and "old-3" in spared[0] and "hold" in spared[0]
    assert "held by root: customer disputes a refund" in spared[0]
    shot(page, "sweep-dry-run")

    # The run, then its page: the ids it stored are the dry run's, in the same order.
    page.get_by_role("button", name="Run the sweep now").click()
    page.locator("#sweep-run-link").click()
    page.locator("#deleted-threads").wait_for()
    stored = page.locator("#deleted-threads td.cs-deleted-id").all_inner_texts()
    assert stored == would
    assert stored == list(DeletedThread.objects.order_by("id").values_list("thread_id", flat=True))
    assert "Deleted threads (5)" in page.locator("#deleted-threads h2").inner_text()
    page.locator("#deleted-threads").scroll_into_view_if_needed()
    shot(page, "sweep-deleted-ids")
