"""Issue 33, item 5 in a real browser (Debian's Chromium via Playwright): each "plain words"
feature clicked through as an operator would, what the page shows asserted, a screenshot of
it saved, and the service's CSP reporting nothing. Threads come from real LangGraph graphs."""

from __future__ import annotations

import re

import pytest

from checkpoints.models import Checkpoint, Thread
from tests.admin_fixtures import run_failing
from tests.browser_fixtures import csp_violations, watch_csp
from tests.words_fixtures import run_markdown_chat, run_rolled_back, run_subgraph_interrupt

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
THREADS = "/admin/checkpoints/thread/"
CHECKPOINTS = "/admin/checkpoints/checkpoint/"
MOMENT = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$")


@pytest.fixture
def watched(page):
    """The logged-in tab, recording CSP violations and any dialog a script would open."""
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    watch_csp(page)
    return page


def calm(page) -> None:
    """Nothing ran that should not have: no CSP violation, no alert from a message."""
    assert csp_violations(page) == []
    assert page.dialogs == []


def pk_of(thread_id: str) -> int:
    return Thread.objects.get(thread_id=thread_id).pk


def head_of(thread_id: str) -> Checkpoint:
    return (
        Checkpoint.objects.filter(thread__thread_id=thread_id, checkpoint_ns="")
        .order_by("-checkpoint_id")
        .first()
    )


def test_an_interrupt_inside_a_subgraph_reads_as_its_question(watched, saver, shot):
    page = watched
    run_subgraph_interrupt(saver, "asks")
    page.goto(f"{page.base}{THREADS}")
    status = page.locator("#result_list tbody tr", has_text="asks").locator(".field-status")
    assert "“Ship order 42? (options: yes, no)” at review › ask" in status.inner_text()
    page.goto(f"{page.base}{CHECKPOINTS}{head_of('asks').pk}/change/")
    asked = page.locator(".field-pending_writes table.cs-interrupt")
    assert asked.locator("th.cs-role").inner_text().strip() == "INTERRUPT · REVIEW › ASK"
    assert asked.locator(".cs-question").inner_text().startswith("Ship order 42?")
    assert "options: yes, no" in asked.inner_text()
    assert "$type" not in page.locator(".field-pending_writes").inner_text()
    calm(page)
    shot(page, "interrupt-words")


def test_a_failed_run_names_its_error_and_node(watched, saver, shot):
    page = watched
    run_failing(saver, "broke")
    page.goto(f"{page.base}{THREADS}")
    row = page.locator("#result_list tbody tr", has_text="broke")
    # The one-line list shows the marker; its words are whole on hover (issue 54).
    assert "Failed" in row.inner_text()
    said = row.locator(".cs-status-failed").get_attribute("title")
    assert said == "ValueError: the tool timed out (in node explode)"
    row.locator("th a").click()
    detail = page.locator(".field-status_detail")
    detail.wait_for()
    assert "ValueError: the tool timed out (in node explode)" in detail.inner_text()
    page.goto(f"{page.base}{CHECKPOINTS}{head_of('broke').pk}/change/")
    error = page.locator(".field-pending_writes .cs-error")
    assert error.locator(".cs-error-type").inner_text() == "ValueError"
    assert error.locator(".cs-error-message").inner_text() == "the tool timed out"
    assert "in node explode" in error.inner_text()
    calm(page)
    shot(page, "failed-run")


def test_history_shows_and_filters_namespaces_and_marks_branches(watched, saver, shot):
    page = watched
    run_subgraph_interrupt(saver, "asks")
    page.goto(f"{page.base}{CHECKPOINTS}?thread__id__exact={pk_of('asks')}")
    spaces = page.locator("#result_list .field-namespace").all_inner_texts()
    # A subgraph row names its call, node and number (issue 54).
    assert sorted(spaces) == ["review #1", "review #1", "root", "root", "root"]
    shot(page, "history-namespaces")
    filters = page.locator("#changelist-filter details[data-filter-title='namespace']")
    filters.get_by_role("link", name="root (the graph itself)").click()
    page.wait_for_url(re.compile(r"namespace=root"))
    assert page.locator("#result_list .field-namespace").all_inner_texts() == ["root"] * 3
    filters = page.locator("#changelist-filter details[data-filter-title='namespace']")
    filters.get_by_role("link", name="review: 1 call").click()
    page.wait_for_url(re.compile(r"namespace=review"))
    assert page.locator("#result_list .field-namespace").all_inner_texts() == ["review #1"] * 2
    shot(page, "history-namespace-filtered")
    # A thread rolled back and run on: every row says which branch it is on.
    run_rolled_back(saver, "story")
    page.goto(f"{page.base}{CHECKPOINTS}?thread__id__exact={pk_of('story')}")
    branches = page.locator("#result_list .field-branch").all_inner_texts()
    assert branches.count("branch 2 · replaced by a rollback") == 4
    assert sum(b.startswith("current branch") for b in branches) == len(branches) - 4
    written = page.locator("#result_list tr", has_text="rollback to").locator(".field-written_by")
    assert written.inner_text().startswith("rollback to ")
    assert all(MOMENT.match(t) for t in page.locator(".field-created_seconds").all_inner_texts())
    calm(page)
    shot(page, "history-branches")


def test_ticking_two_history_rows_compares_them(watched, saver, shot):
    page = watched
    run_markdown_chat(saver, "md", turns=2)
    rows = list(Checkpoint.objects.filter(thread__thread_id="md").order_by("checkpoint_id"))
    older, newer = rows[1], rows[-1]
    page.goto(f"{page.base}{CHECKPOINTS}?thread__id__exact={pk_of('md')}")
    for row in (newer, older):
        page.locator(f"input.action-select[value='{row.pk}']").check()
    page.select_option("select[name=action]", "compare_selected")
    page.locator("button[name=index]").click()
    page.wait_for_url(re.compile(rf"/compare/\?a={older.pk}&b={newer.pk}"))
    messages = page.locator(".cs-change[data-channel='messages']")
    # The items added since are one block (issue 54), its transcript below.
    assert messages.locator("summary.cs-add").count() == 1
    assert messages.locator("summary.cs-add").inner_text() == "+3 items added"
    assert messages.locator("table.cs-transcript th.cs-role").all_inner_texts() == [
        "AI",
        "HUMAN",
        "AI",
    ]
    assert messages.locator(".cs-said strong").first.inner_text() == "Order 42"
    assert "$type" not in messages.inner_text()
    # The message's <script> is text on the page, not an element.
    assert page.locator(".cs-said script").count() == 0
    assert "<script>alert('owned')</script>" in messages.inner_text()
    calm(page)
    shot(page, "compare-two")
    page.locator("a.cs-swap").click()
    page.wait_for_url(re.compile(rf"\?a={newer.pk}&b={older.pk}"))
    dropped = page.locator(".cs-change[data-channel='messages'] summary.cs-del")
    assert dropped.count() == 1 and dropped.inner_text() == "−3 items removed"


def test_the_thread_page_opens_with_its_current_state(watched, saver, shot):
    page = watched
    run_markdown_chat(saver, "md", turns=3)
    page.goto(f"{page.base}{THREADS}{pk_of('md')}/change/")
    current = page.locator(".cs-current")
    current.wait_for()
    # The first thing in the form, above the thread's fields.
    top = current.bounding_box()["y"]
    assert top < page.locator(".field-thread_id").bounding_box()["y"]
    assert "messages · the last 5 of 6" in current.inner_text()
    said = current.locator("table.cs-transcript tr")
    assert said.count() == 5
    assert said.last.locator(".cs-said li").all_inner_texts() == ["packed", "sent"]
    link = said.last.locator("a")
    assert link.inner_text() == "the docs"
    assert link.get_attribute("href") == "https://example.com/docs"
    assert current.locator("script, img").count() == 0
    written = current.locator("p.cs-muted").inner_text()
    assert re.search(r"written \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", written)
    assert MOMENT.match(page.locator(".field-created .readonly").inner_text())
    calm(page)
    shot(page, "thread-current-state")
