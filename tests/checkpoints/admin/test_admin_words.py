"""Issue 33, item 5: the console says things in plain words. Interrupts as the question they
ask, at the node inside the subgraph that asked; errors with type, message and node;
history with namespaces and branches; "written by" right on rollback rows; any two
checkpoints compared, messages as messages; Markdown rendered safely; one date format; the
thread page opening with its current state. Threads come from real LangGraph graphs."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from langchain_core.messages import HumanMessage
from langgraph.types import Interrupt

from checkpoints.admin.prose import markdown_html
from checkpoints.codec.exception import CheckpointedException
from checkpoints.codec.render import error_words, words
from checkpoints.models import Checkpoint, Thread
from tests.admin_fixtures import run_chat, run_failing
from tests.words_fixtures import (
    run_markdown_chat,
    run_rolled_back,
    run_subgraph_interrupt,
)

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = "/admin/checkpoints/thread/"
CHECKPOINTS = "/admin/checkpoints/checkpoint/"
COMPARE = "/admin/checkpoints/checkpoint/compare/"
MOMENT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC"


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def thread_pk(thread_id: str) -> int:
    return Thread.objects.get(thread_id=thread_id).pk


def rows_of(thread_id: str, ns: str | None = "") -> list[Checkpoint]:
    """The thread's checkpoints, oldest first (one namespace, or all when ``ns`` is None)."""
    rows = Checkpoint.objects.filter(thread__thread_id=thread_id)
    if ns is not None:
        rows = rows.filter(checkpoint_ns=ns)
    return list(rows.order_by("checkpoint_id", "pk"))


def get(client, url: str, **params) -> str:
    response = client.get(url, params)
    assert response.status_code == 200, (url, response.status_code)
    return response.content.decode()


def list_row(page: str, thread_id: str) -> str:
    """The thread list's row of ``thread_id``."""
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    return next(r for r in body.split("</tr>") if f">{thread_id}</a>" in r)


def history_rows(page: str) -> list[str]:
    body = page[page.index("<tbody>") : page.index("</tbody>")]
    return body.split("</tr>")[:-1]


def field(page: str, name: str) -> str:
    start = page.index(f"field-{name}")
    return page[start : page.index('<div class="form-row', start + 1)]


# -- words of values ------------------------------------------------------------------------
def test_words_say_values_as_text_never_as_a_repr():
    asked = [Interrupt(value={"question": "Ship order 42?", "options": ["yes", "no"]}, id="i1")]
    assert words(asked) == "Ship order 42? (options: yes, no)"
    assert words({"amount": 12, "approved": False}) == "amount: 12; approved: no"
    assert words(HumanMessage(content="hello")) == "hello"
    assert words(datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "2026-01-02 03:04:05 UTC"


def test_error_words_read_type_and_message_from_every_stored_form():
    assert str(error_words("ValueError('the tool timed out')")) == "ValueError: the tool timed out"
    assert error_words(KeyError("order")).type == "KeyError"
    record = CheckpointedException(["builtins", "TimeoutError"], "no answer in 30 s")
    assert str(error_words(record)) == "TimeoutError: no answer in 30 s"
    # A repr that is not literals stays text, under its class name.
    assert str(error_words("HTTPError(status=503)")) == "HTTPError: status=503"
    assert error_words("it broke").type == "" and str(error_words("it broke")) == "it broke"


def test_markdown_is_rendered_and_no_html_of_the_message_passes_through():
    html = str(
        markdown_html(
            "**bold** <script>alert(1)</script> <img src=x onerror=alert(1)> "
            "[x](javascript:alert(1)) [y](https://example.com) ![p](https://example.com/p.png)"
        )
    )
    assert "<strong>bold</strong>" in html
    assert "<script" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
    assert 'href="javascript' not in html and "[x](javascript:alert(1))" in html
    assert '<a href="https://example.com" rel="nofollow noopener noreferrer">y</a>' in html
    # One plain paragraph reads as its text, without a <p> around it.
    assert str(markdown_html("said #7.")) == "said #7."


# -- interrupts ---------------------------------------------------------------------------------
def test_the_list_says_a_subgraph_interrupt_in_words_at_the_node_that_asked(admin_client, saver):
    run_subgraph_interrupt(saver, "asks")
    row = list_row(get(admin_client, THREADS), "asks")
    assert "Waiting on a human" in row
    assert "“Ship order 42? (options: yes, no)” at review › ask" in row
    assert "{" not in row.split("cs-muted")[1].split("</span>")[0]  # no dict repr


def test_the_thread_page_says_the_interrupt_in_words_at_the_subgraph_node(admin_client, saver):
    run_subgraph_interrupt(saver, "asks")
    status = field(get(admin_client, f"{THREADS}{thread_pk('asks')}/change/"), "status_detail")
    assert "“Ship order 42? (options: yes, no)” at review › ask" in status
    assert "{&#x27;question" not in status and "{'question" not in status


def test_the_checkpoint_page_shows_an_interrupt_as_the_transcript_shows_a_message(
    admin_client, saver
):
    run_subgraph_interrupt(saver, "asks")
    head = rows_of("asks")[-1]
    writes = field(get(admin_client, f"{CHECKPOINTS}{head.pk}/change/"), "pending_writes")
    assert '<th class="cs-role">interrupt · review › ask</th>' in writes
    assert "Ship order 42?" in writes and "options: yes, no" in writes
    assert "$type" not in writes and "dataclass" not in writes
    # Inside the subgraph's own namespace the same interrupt names the same node.
    (inner,) = [r for r in rows_of("asks", ns=None) if r.checkpoint_ns][-1:]
    writes = field(get(admin_client, f"{CHECKPOINTS}{inner.pk}/change/"), "pending_writes")
    assert "interrupt · review › ask" in writes and "$type" not in writes


# -- errors ------------------------------------------------------------------------------------
def test_a_failed_run_names_the_error_type_message_and_node_everywhere(admin_client, saver):
    run_failing(saver, "broke")
    said = "ValueError: the tool timed out (in node explode)"
    row = list_row(get(admin_client, THREADS), "broke")
    assert "Failed" in row and said in row and "the last task failed" not in row
    page = get(admin_client, f"{THREADS}{thread_pk('broke')}/change/")
    assert said in field(page, "status_detail")
    head = rows_of("broke")[-1]
    writes = field(get(admin_client, f"{CHECKPOINTS}{head.pk}/change/"), "pending_writes")
    assert '<strong class="cs-error-type">ValueError</strong>' in writes
    assert '<span class="cs-error-message">the tool timed out</span>' in writes
    assert "in node <code>explode</code>" in writes


# -- history: namespaces, branches, written by ---------------------------------------------------
def test_history_shows_each_rows_namespace_and_filters_on_it(admin_client, saver):
    run_subgraph_interrupt(saver, "asks")
    pk = thread_pk("asks")
    every = get(admin_client, CHECKPOINTS, thread__id__exact=pk)
    listed = history_rows(every)
    inner_ns = next(r.checkpoint_ns for r in rows_of("asks", ns=None) if r.checkpoint_ns)
    assert len(listed) == len(rows_of("asks", ns=None))
    assert sum('field-namespace"><span class="cs-ns cs-ns-root">root<' in r for r in listed) == 3
    # A subgraph row names its call (node and call number, issue 54): steps restart per call.
    assert sum(f'title="{inner_ns}">review #1<' in r for r in listed) == 2
    # The filter offers root, any subgraph, and each node with its calls (issue 54).
    assert "?namespace=root" in every and "?namespace=subgraphs" in every
    assert "namespace=review%3A%2A" in every and "review: 1 call<" in every
    node = history_rows(get(admin_client, CHECKPOINTS, thread__id__exact=pk, namespace="review:*"))
    assert len(node) == 2 and not any("cs-ns-root" in r for r in node)
    root = history_rows(get(admin_client, CHECKPOINTS, thread__id__exact=pk, namespace="root"))
    assert len(root) == 3 and all("cs-ns-root" in r for r in root)
    inner = history_rows(get(admin_client, CHECKPOINTS, thread__id__exact=pk, namespace=inner_ns))
    assert len(inner) == 2 and not any("cs-ns-root" in r for r in inner)
    subs = history_rows(get(admin_client, CHECKPOINTS, thread__id__exact=pk, namespace="subgraphs"))
    assert len(subs) == 2


def test_history_marks_the_branch_each_row_is_on(admin_client, saver):
    target, replaced = run_rolled_back(saver, "story")
    listed = history_rows(get(admin_client, CHECKPOINTS, thread__id__exact=thread_pk("story")))
    by_id = {
        r.checkpoint_id: next(x for x in listed if r.checkpoint_id in x) for r in rows_of("story")
    }
    rows = rows_of("story")
    rollback = next(r for r in rows if r.source == "rollback")
    replaced_line = [r for r in rows if target < r.checkpoint_id <= replaced]
    current = [r for r in rows if r.checkpoint_id not in {x.checkpoint_id for x in replaced_line}]
    assert len(replaced_line) == 4
    for row in replaced_line:
        assert "branch 2 · replaced by a rollback" in by_id[row.checkpoint_id]
    for row in current:
        assert "current branch" in by_id[row.checkpoint_id], row.checkpoint_id
    assert "current branch · branches here" in by_id[target]
    assert "current branch" in by_id[rollback.checkpoint_id]


def test_written_by_on_a_rollback_row_is_the_rollback_not_the_replaced_nodes(admin_client, saver):
    target, _replaced = run_rolled_back(saver, "story")
    listed = history_rows(get(admin_client, CHECKPOINTS, thread__id__exact=thread_pk("story")))
    rollback = next(r for r in rows_of("story") if r.source == "rollback")
    row = next(x for x in listed if rollback.checkpoint_id in x)
    written = row.split("field-written_by")[1].split("</td>")[0]
    assert f"rollback to {target[-12:]}" in written
    # The target's own writes were review's (its child in the first run): not this row's.
    assert "review" not in written and "answer" not in written
    # A run's input row was written by the caller's input.
    first = next(x for x in listed if rows_of("story")[0].checkpoint_id in x)
    assert first.split("field-written_by")[1].split("</td>")[0] == '">input'


# -- compare any two ---------------------------------------------------------------------------
def test_ticking_two_rows_opens_their_comparison_older_first(admin_client, saver):
    run_markdown_chat(saver, "md")
    rows = rows_of("md")
    response = admin_client.post(
        f"{CHECKPOINTS}?thread__id__exact={thread_pk('md')}",
        {"action": "compare_selected", "_selected_action": [rows[-1].pk, rows[1].pk], "index": 0},
    )
    assert response.status_code == 302
    assert response["Location"] == f"{COMPARE}?a={rows[1].pk}&b={rows[-1].pk}"


def test_comparing_needs_exactly_two_rows(admin_client, saver):
    run_markdown_chat(saver, "md")
    rows = rows_of("md")
    response = admin_client.post(
        CHECKPOINTS,
        {"action": "compare_selected", "_selected_action": [rows[1].pk], "index": 0},
        follow=True,
    )
    assert (
        "Select exactly two checkpoints to compare; 1 were selected." in response.content.decode()
    )


def test_the_compare_page_shows_messages_as_messages(admin_client, saver):
    run_markdown_chat(saver, "md")
    rows = rows_of("md")
    page = get(admin_client, COMPARE, a=rows[1].pk, b=rows[-1].pk)
    assert "channel(s) differ" in page
    change = page[page.index('data-channel="messages"') :]
    change = change[
        : change.index('<div class="cs-card cs-change"', 1)
        if 'cs-card cs-change"' in change[1:]
        else None
    ]
    # Appended items are one block ("+7 items added"), the messages one transcript.
    assert change.count("+7 items added") == 1 and change.count("cs-appended") == 1
    assert '<th class="cs-role">ai</th>' in change and "<strong>Order 42</strong>" in change
    assert "&quot;$type&quot;" not in change and '"content":' not in change
    assert "<script>alert" not in page and "&lt;script&gt;alert" in page
    # B may be named by its checkpoint id; the swap link turns the comparison round.
    by_id = get(admin_client, COMPARE, a=rows[1].pk, b=rows[-1].checkpoint_id)
    assert by_id.count("+7 items added") == page.count("+7 items added") == 1
    assert f"?a={rows[-1].pk}&amp;b={rows[1].pk}" in page


def test_the_compare_page_across_a_fork_and_its_source(admin_client, saver):
    from checkpoints.timetravel import TimeTravel

    run_chat(saver, "origin", turns=1)
    source = rows_of("origin")[-1]
    TimeTravel(saver).fork("origin", source.checkpoint_id, new_thread_id="copy")
    run_chat(saver, "copy", turns=1)
    page = get(admin_client, COMPARE, a=source.pk, b=rows_of("copy")[-1].pk)
    assert "(two threads)" in page and "thread copy" in page
    assert "question 1" not in page.split("channel(s) differ")[1].split(" added</summary>")[0]


def test_the_compare_page_refuses_what_it_cannot_compare(admin_client, saver):
    run_markdown_chat(saver, "md", turns=1)
    # The bare page leads to the list, saying how to choose two; an empty a is refused.
    bare = admin_client.get(COMPARE, follow=True)
    assert bare.status_code == 200 and bare.redirect_chain[-1][0].startswith(
        "/admin/checkpoints/checkpoint/"
    )
    assert "Compare the two selected checkpoints" in bare.content.decode()
    response = admin_client.get(COMPARE, {"a": ""})
    assert response.status_code == 400 and b"a is required" in response.content
    assert admin_client.get(COMPARE, {"a": "999999"}).status_code == 404
    assert admin_client.get(COMPARE, {"a": rows_of("md")[0].pk, "b": "nope"}).status_code == 404
    picker = get(admin_client, COMPARE, a=rows_of("md")[0].pk)
    assert "Compare with" in picker and f"b={rows_of('md')[-1].pk}" in picker


def test_the_diff_against_the_parent_shows_messages_as_messages(admin_client, saver):
    run_markdown_chat(saver, "md", turns=1)
    head = rows_of("md")[-1]
    page = get(admin_client, f"{CHECKPOINTS}{head.pk}/changes/")
    assert (
        re.search(r"\+\d+ items? added</summary>", page) and '<th class="cs-role">ai</th>' in page
    )
    assert "&quot;$type&quot;: &quot;AIMessage&quot;" not in page
    assert f"{COMPARE}?a={head.pk}" in page


# -- Markdown in the transcript -------------------------------------------------------------------
def test_the_transcript_renders_markdown_and_lets_no_html_through(admin_client, saver):
    run_markdown_chat(saver, "md", turns=1)
    head = rows_of("md")[-1]
    page = get(admin_client, f"{CHECKPOINTS}{head.pk}/change/")
    said = field(page, "channel_values")
    assert "<strong>Order 42</strong>" in said and "<li>packed</li>" in said
    assert "<script>alert" not in page and "<img src=x" not in page
    assert "&lt;b&gt;now&lt;/b&gt;" in said  # the human's HTML, as text
    assert 'href="javascript:' not in page


# -- one date format ---------------------------------------------------------------------------
def test_every_page_writes_dates_one_way(admin_client, saver):
    run_rolled_back(saver, "story")
    pk = thread_pk("story")
    rows = rows_of("story")
    pages = {
        "thread list": get(admin_client, THREADS),
        "thread": get(admin_client, f"{THREADS}{pk}/change/"),
        "history": get(admin_client, CHECKPOINTS, thread__id__exact=pk),
        "checkpoint": get(admin_client, f"{CHECKPOINTS}{rows[-1].pk}/change/"),
        "compare": get(admin_client, COMPARE, a=rows[0].pk, b=rows[-1].pk),
        "rollback": get(admin_client, f"{CHECKPOINTS}{rows[2].pk}/rollback/"),
    }
    for name, page in pages.items():
        assert re.search(MOMENT, page), name
        # Django's own format ("Dec. 4, 2026, 3:04 p.m.") and raw ISO times are gone.
        assert not re.search(r"\d{1,2}:\d\d [ap]\.m\.", page), name
        assert not re.search(r"\d\d:\d\d:\d\d\.\d{6}\+00:00", page), name
    thread = pages["thread"]
    assert re.search(MOMENT, field(thread, "created"))
    assert re.search(MOMENT, field(thread, "last_write"))
    assert re.search(MOMENT, field(pages["checkpoint"], "written_at"))


# -- the thread page opens with its current state ------------------------------------------------
def test_the_thread_page_opens_with_the_current_state_and_last_messages(admin_client, saver):
    run_markdown_chat(saver, "md", turns=4)
    page = get(admin_client, f"{THREADS}{thread_pk('md')}/change/")
    current = page[page.index('<div class="cs-card cs-current">') :]
    current = current[: current.index("<fieldset")]
    # Before every field of the form.
    assert page.index("cs-current") < page.index("field-thread_id")
    head = rows_of("md")[-1]
    assert head.checkpoint_id in current and f"step {head.step}" in current
    assert "messages · the last 5 of 8" in current
    assert current.count('<th class="cs-role">') == 5
    assert "where is order 4?" in current and "where is order 2?" not in current
    assert "<strong>Order 42</strong>" in current


def test_the_current_state_says_the_other_channels_in_words(admin_client, saver):
    run_subgraph_interrupt(saver, "asks")
    page = get(admin_client, f"{THREADS}{thread_pk('asks')}/change/")
    current = page[page.index('<div class="cs-card cs-current">') :]
    assert "<th>verdict</th><td>pending</td>" in current
    assert "ship it" in current  # the last message
