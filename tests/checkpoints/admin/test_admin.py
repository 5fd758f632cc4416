"""Admin console: thread and checkpoint pages, changes, rollback and fork, permissions."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from checkpoints.models import Checkpoint, FinishedMark, Thread
from tests.admin_fixtures import run_chat, run_paused, staff_user
from tests.checkpoints.timetravel.graphs import subgraph_interrupt

pytestmark = pytest.mark.django_db(transaction=True)

THREADS = "/admin/checkpoints/thread/"
CHECKPOINTS = "/admin/checkpoints/checkpoint/"


def checkpoints_of(thread_id):
    return list(Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("-checkpoint_id"))


def thread_pk(thread_id):
    return Thread.objects.get(thread_id=thread_id).pk


@pytest.fixture
def chat(saver):
    return run_chat(saver, "chat-1", turns=2)


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


# -- threads ----------------------------------------------------------------------------
def test_thread_list_shows_count_mark_due_and_retention(admin_client, saver, chat):
    from retention.policy import declare_retention
    from retention.runs import mark_finished

    other = run_chat(saver, "chat-2", turns=1)
    mark_finished(saver, other, owner="ops")
    declare_retention(saver, chat, waiting_minutes=60)
    page = admin_client.get(THREADS).content.decode()
    assert "chat-1" in page and "chat-2" in page
    rows = {r: page[page.index(f">{r}<") :][:2500] for r in ("chat-1", "chat-2")}
    count = len(checkpoints_of(chat))
    assert f'thread__id__exact={thread_pk(chat)}">{count}</a>' in page
    assert ">Finished<" in rows["chat-2"] and "due at" in rows["chat-2"]
    # The list keeps to one line per thread: the due date's owner and the declared
    # retention are on the thread's page (issue 54).
    one = admin_client.get(f"{THREADS}{thread_pk(chat)}/change/").content.decode()
    assert "waiting 60 min, finished default min" in one
    two = admin_client.get(f"{THREADS}{thread_pk(other)}/change/").content.decode()
    assert "marked by ops" in two and "platform default" in two


def test_thread_list_query_count_does_not_grow_with_rows(admin_client, saver, chat):
    def queries():
        with CaptureQueriesContext(connection) as ctx:
            assert admin_client.get(THREADS).status_code == 200
        return len(ctx.captured_queries)

    for n in range(2):
        saver.copy_thread(chat, f"copy-{n}")
    few = queries()
    for n in range(2, 12):
        saver.copy_thread(chat, f"copy-{n}")
    assert Thread.objects.count() == 13
    assert queries() == few


def test_thread_search_and_state_filters(admin_client, saver, chat):
    from retention.runs import mark_finished

    run_chat(saver, "other-thread", turns=1)
    mark_finished(saver, "other-thread")
    found = admin_client.get(THREADS, {"q": "chat-"}).content.decode()
    assert "chat-1" in found and "other-thread" not in found
    finished = admin_client.get(THREADS, {"state": "finished"}).content.decode()
    assert "other-thread" in finished and ">chat-1<" not in finished
    waiting = admin_client.get(THREADS, {"state": "waiting"}).content.decode()
    assert ">chat-1<" in waiting and "other-thread" not in waiting


def test_thread_owner_filter(admin_client, saver, superuser):
    run_chat(saver, "owned", turns=1)
    run_chat(saver, "unowned", turns=1)
    Thread.objects.filter(thread_id="owned").update(owner=superuser)
    page = admin_client.get(THREADS, {"owner__id__exact": superuser.pk}).content.decode()
    assert ">owned<" in page and ">unowned<" not in page


def test_thread_detail_links_history_and_shows_verdict(admin_client, saver, chat):
    paused = run_paused(saver, "paused-1")
    page = admin_client.get(f"{THREADS}{thread_pk(chat)}/change/").content.decode()
    assert "Checkpoints of this thread" in page
    assert "not live: no filter claims it" in page
    assert "an original thread (not a fork)" in page
    head = checkpoints_of(chat)[0]
    assert f"{CHECKPOINTS}{head.pk}/change/" in page
    assert "waiting 10080 min after the last write" in page
    live = admin_client.get(f"{THREADS}{thread_pk(paused)}/change/").content.decode()
    assert "claimed by the <code>interrupts</code> filter" in live


def test_threads_cannot_be_added_edited_or_deleted(admin_client, chat):
    pk = thread_pk(chat)
    assert admin_client.get(f"{THREADS}add/").status_code == 403
    assert admin_client.post(f"{THREADS}{pk}/delete/", {"post": "yes"}).status_code == 403
    page = admin_client.get(f"{THREADS}{pk}/change/").content.decode()
    assert 'name="_save"' not in page
    assert Thread.objects.filter(pk=pk).exists()


# -- checkpoints ------------------------------------------------------------------------
def test_history_is_newest_first_with_source_step_time_durability(admin_client, chat):
    page = admin_client.get(CHECKPOINTS, {"thread__id__exact": thread_pk(chat)}).content.decode()
    assert "History of thread chat-1, newest first" in page
    ids = [c.checkpoint_id for c in checkpoints_of(chat)]
    shown = [i for i in re.findall(r">([0-9a-f-]{36})</a>", page) if i in ids]
    assert shown == ids
    assert "disk" in page and "loop" in page and "input" in page


def test_checkpoint_detail_decodes_values_and_links_lineage(admin_client, chat):
    head, parent = checkpoints_of(chat)[:2]
    page = admin_client.get(f"{CHECKPOINTS}{head.pk}/change/").content.decode()
    assert page.count('<details class="cs-value"') >= 3
    assert "<strong>messages</strong>" in page and "list of 4 item(s)" in page
    assert "&quot;$type&quot;: &quot;AIMessage&quot;" in page
    assert "&quot;content&quot;: &quot;answer 2&quot;" in page
    assert "&quot;reviewed_at&quot;" in page and "&quot;datetime&quot;" in page
    assert f'href="{CHECKPOINTS}{parent.pk}/change/"' in page
    assert f"{CHECKPOINTS}{head.pk}/changes/" in page
    assert "&quot;source&quot;: &quot;loop&quot;" in page
    parent_page = admin_client.get(f"{CHECKPOINTS}{parent.pk}/change/").content.decode()
    # The parent's page lists the head among its children, and the writes pending on it.
    assert f'href="{CHECKPOINTS}{head.pk}/change/"' in parent_page
    # Each pending write names the node whose task wrote it.
    assert "notes ← review" in parent_page


def test_pending_interrupt_is_shown(admin_client, saver):
    paused = run_paused(saver, "paused-1")
    head = checkpoints_of(paused)[0]
    page = admin_client.get(f"{CHECKPOINTS}{head.pk}/change/").content.decode()
    # A transcript row naming the node that asked, with the question in words.
    assert "interrupt · approve" in page
    assert '<div class="cs-said cs-question">approve the answer?</div>' in page


def test_changes_view_lists_changed_channels_with_diffs(admin_client, chat):
    # The head's parent is the checkpoint after the second "answer" node ran: a message
    # added, a note added, the turn counter replaced.
    answered = checkpoints_of(chat)[1]
    page = admin_client.get(f"{CHECKPOINTS}{answered.pk}/changes/").content.decode()
    assert "channel(s) changed" in page
    assert 'data-channel="messages"' in page and "1 item(s) added" in page
    # The added message reads as a message, not as its JSON.
    assert '<th class="cs-role">ai</th><td><div class="cs-said">answer 2</div>' in page
    assert 'data-channel="turn"' in page and "value replaced" in page
    assert 'data-channel="notes"' in page and "1 key(s) added" in page
    first = checkpoints_of(chat)[-1]
    first_page = admin_client.get(f"{CHECKPOINTS}{first.pk}/changes/").content.decode()
    assert "first checkpoint: every value is new" in first_page


# -- rollback and fork ------------------------------------------------------------------
def test_rollback_confirmation_then_post_writes_a_new_head(admin_client, chat):
    head, target = checkpoints_of(chat)[0], checkpoints_of(chat)[3]
    url = f"{CHECKPOINTS}{target.pk}/rollback/"
    page = admin_client.get(url).content.decode()
    assert "Roll back thread chat-1?" in page
    assert "Current head (replaced)" in page and head.checkpoint_id in page
    assert "Target (the state to return to)" in page and target.checkpoint_id in page
    assert 'name="post" value="yes"' in page and "csrfmiddlewaretoken" in page
    # GET never acts, not even with post=yes in the query string.
    admin_client.get(url, {"post": "yes"})
    assert checkpoints_of(chat)[0].pk == head.pk
    form = {"post": "yes", "expected_version": "1", "expected_head": head.checkpoint_id}
    response = admin_client.post(url, form, follow=True)
    new_head = checkpoints_of(chat)[0]
    assert new_head.source == "rollback"
    assert new_head.metadata["rollback"]["target"] == target.checkpoint_id
    assert response.redirect_chain[-1][0] == f"{CHECKPOINTS}{new_head.pk}/change/"
    body = response.content.decode()
    assert f"rolled back to {target.checkpoint_id}" in body
    assert "rolled back to" in body and "replaced head" in body
    assert Thread.objects.get(thread_id=chat).version == 2


@pytest.mark.parametrize("bad", ["²", "9" * 5000, "abc"])
def test_rollback_with_a_bad_expected_version_is_refused_not_ignored(admin_client, chat, bad):
    head, target = checkpoints_of(chat)[0], checkpoints_of(chat)[3]
    url = f"{CHECKPOINTS}{target.pk}/rollback/"
    form = {"post": "yes", "expected_version": bad, "expected_head": head.checkpoint_id}
    response = admin_client.post(url, form, follow=True)
    assert response.redirect_chain[-1] == (f"{CHECKPOINTS}{target.pk}/change/", 302)
    shown = [str(m) for m in response.context["messages"]]
    assert any("expected_version must be the thread's version" in m for m in shown), shown
    assert checkpoints_of(chat)[0].pk == head.pk
    assert Thread.objects.get(thread_id=chat).version == 1


def test_changes_of_a_rollback_compare_with_the_head_it_replaced(admin_client, chat):
    head, target = checkpoints_of(chat)[0], checkpoints_of(chat)[3]
    form = {"post": "yes", "expected_head": head.checkpoint_id}
    admin_client.post(f"{CHECKPOINTS}{target.pk}/rollback/", form)
    rolled = checkpoints_of(chat)[0]
    assert rolled.source == "rollback" and rolled.parent_checkpoint_id == target.checkpoint_id
    page = admin_client.get(f"{CHECKPOINTS}{rolled.pk}/changes/").content.decode()
    # Against its parent (the target) a rollback changes nothing; against the head it
    # replaced it drops the later turn's messages.
    assert "against replaced head <a" in page and head.checkpoint_id in page
    assert "Nothing changed" not in page
    assert 'data-channel="messages"' in page and "item(s) removed" in page


def test_thread_page_lists_namespaces_and_a_subgraph_checkpoint_rolls_back_in_it(
    admin_client,
    saver,
):
    graph = subgraph_interrupt(saver, [])
    config = {"configurable": {"thread_id": "nested"}}
    graph.invoke({"log": []}, config)
    ns = (
        graph.get_state(config, subgraphs=True)
        .tasks[0]
        .state.config["configurable"]["checkpoint_ns"]
    )
    page = admin_client.get(f"{THREADS}{thread_pk('nested')}/change/").content.decode()
    # The call is listed, folded under its node; its tree is drawn when asked for.
    assert "1 call of sub" in page and f'data-ns="{ns}"' in page and "root namespace" in page
    assert f"namespace {ns}" not in page
    page = admin_client.get(
        f"{THREADS}{thread_pk('nested')}/change/", {"tree_ns": ns}
    ).content.decode()
    assert f"sub #1: namespace {ns}" in page and "root namespace" in page
    target = (
        Checkpoint.objects.filter(thread__thread_id="nested", checkpoint_ns=ns)
        .order_by("checkpoint_id")
        .first()
    )
    shown = (
        Checkpoint.objects.filter(thread__thread_id="nested", checkpoint_ns=ns)
        .order_by("-checkpoint_id")
        .first()
    )
    response = admin_client.post(
        f"{CHECKPOINTS}{target.pk}/rollback/",
        {"post": "yes", "expected_head": shown.checkpoint_id},
        follow=True,
    )
    assert "rolled back to" in response.content.decode()
    head = (
        Checkpoint.objects.filter(thread__thread_id="nested", checkpoint_ns=ns)
        .order_by("-checkpoint_id")
        .first()
    )
    assert head.source == "rollback" and head.parent_checkpoint_id == target.checkpoint_id
    assert response.redirect_chain[-1][0] == f"{CHECKPOINTS}{head.pk}/change/"


def test_rollback_with_a_stale_version_is_refused_with_a_message(admin_client, chat):
    target = checkpoints_of(chat)[2]
    before = len(checkpoints_of(chat))
    form = {
        "post": "yes",
        "expected_version": "7",
        "expected_head": checkpoints_of(chat)[0].checkpoint_id,
    }
    response = admin_client.post(f"{CHECKPOINTS}{target.pk}/rollback/", form, follow=True)
    assert "Rollback of thread chat-1 failed" in response.content.decode()
    assert len(checkpoints_of(chat)) == before


def test_fork_confirmation_prefills_a_uuid_and_post_forks(admin_client, chat):
    source = checkpoints_of(chat)[1]
    url = f"{CHECKPOINTS}{source.pk}/fork/"
    page = admin_client.get(url).content.decode()
    prefilled = re.search(r'name="new_thread_id" id="id_new_thread_id" value="([^"]+)"', page)
    assert prefilled and re.fullmatch(r"[0-9a-f-]{36}", prefilled.group(1))
    form = {
        "post": "yes",
        "new_thread_id": "forked-1",
        "expected_head": checkpoints_of(chat)[0].checkpoint_id,
    }
    response = admin_client.post(url, form, follow=True)
    [forked] = checkpoints_of("forked-1")
    assert forked.source == "fork"
    # The fork lands on the new thread's page, its message linking back to the source.
    assert response.redirect_chain[-1][0] == f"{THREADS}{forked.thread_id}/change/"
    body = response.content.decode()
    assert "Forked into new thread forked-1 from thread" in body
    assert f'class="cs-fork-source" href="{CHECKPOINTS}{source.pk}/change/"' in body
    # The fork's page links back to its origin; the origin's thread shows the lineage.
    assert f'href="{CHECKPOINTS}{source.pk}/change/"' in body
    fork_thread = admin_client.get(f"{THREADS}{thread_pk('forked-1')}/change/").content.decode()
    assert f"{CHECKPOINTS}{source.pk}/change/" in fork_thread


def test_fork_onto_an_existing_thread_is_refused(admin_client, saver, chat):
    run_chat(saver, "taken", turns=1)
    source = checkpoints_of(chat)[0]
    before = len(checkpoints_of("taken"))
    response = admin_client.post(
        f"{CHECKPOINTS}{source.pk}/fork/",
        {"post": "yes", "new_thread_id": "taken", "expected_head": source.checkpoint_id},
    )
    assert response.status_code == 200
    assert "Fork of thread chat-1 failed" in response.content.decode()
    assert len(checkpoints_of("taken")) == before


def test_list_actions_need_exactly_one_checkpoint(admin_client, chat):
    first, second = checkpoints_of(chat)[:2]
    for action in ("rollback_selected", "fork_selected"):
        response = admin_client.post(
            CHECKPOINTS,
            {"action": action, "_selected_action": [first.pk, second.pk]},
            follow=True,
        )
        assert "Select exactly one checkpoint" in response.content.decode()
    assert checkpoints_of(chat)[0].pk == first.pk
    rollback = admin_client.post(
        CHECKPOINTS, {"action": "rollback_selected", "_selected_action": [second.pk]}
    )
    assert "Roll back thread chat-1?" in rollback.content.decode()
    assert f'action="{CHECKPOINTS}{second.pk}/rollback/"' in rollback.content.decode()
    fork = admin_client.post(
        CHECKPOINTS, {"action": "fork_selected", "_selected_action": [second.pk]}
    )
    assert "Fork thread chat-1?" in fork.content.decode()
    assert checkpoints_of(chat)[0].pk == first.pk


def test_viewer_sees_no_buttons_and_gets_403(client, chat):
    viewer = staff_user("viewer", "checkpoints.view_checkpoint", "checkpoints.view_thread")
    client.force_login(viewer)
    cp = checkpoints_of(chat)[1]
    page = client.get(f"{CHECKPOINTS}{cp.pk}/change/").content.decode()
    assert "What changed" in page
    assert "Roll back to here" not in page and "Fork from here" not in page
    listing = client.get(CHECKPOINTS).content.decode()
    assert "rollback_selected" not in listing and "fork_selected" not in listing
    for op in ("rollback", "fork"):
        assert client.get(f"{CHECKPOINTS}{cp.pk}/{op}/").status_code == 403
        post = {"post": "yes", "new_thread_id": "x"}
        assert client.post(f"{CHECKPOINTS}{cp.pk}/{op}/", post).status_code == 403
    assert len(checkpoints_of(chat)) == len(checkpoints_of(chat))
    assert not Thread.objects.filter(thread_id="x").exists()
    assert checkpoints_of(chat)[0].source != "rollback"


def test_change_permission_allows_rollback_only(client, chat):
    user = staff_user("roller", "checkpoints.view_checkpoint", "checkpoints.change_checkpoint")
    client.force_login(user)
    cp = checkpoints_of(chat)[2]
    page = client.get(f"{CHECKPOINTS}{cp.pk}/change/").content.decode()
    assert "Roll back to here" in page and "Fork from here" not in page
    assert client.get(f"{CHECKPOINTS}{cp.pk}/fork/").status_code == 403
    form = {"post": "yes", "expected_head": checkpoints_of(chat)[0].checkpoint_id}
    response = client.post(f"{CHECKPOINTS}{cp.pk}/rollback/", form)
    assert response.status_code == 302
    assert checkpoints_of(chat)[0].source == "rollback"


def test_add_permission_allows_fork_only(client, chat):
    user = staff_user("forker", "checkpoints.view_checkpoint", "checkpoints.add_checkpoint")
    client.force_login(user)
    cp = checkpoints_of(chat)[0]
    page = client.get(f"{CHECKPOINTS}{cp.pk}/change/").content.decode()
    assert "Fork from here" in page and "Roll back to here" not in page
    assert client.get(f"{CHECKPOINTS}{cp.pk}/rollback/").status_code == 403
    form = {"post": "yes", "new_thread_id": "f2", "expected_head": cp.checkpoint_id}
    response = client.post(f"{CHECKPOINTS}{cp.pk}/fork/", form)
    assert response.status_code == 302
    assert checkpoints_of("f2")[0].source == "fork"


def test_csrf_is_enforced_on_rollback(superuser, chat):
    client = Client(enforce_csrf_checks=True)
    client.force_login(superuser)
    cp = checkpoints_of(chat)[2]
    url = f"{CHECKPOINTS}{cp.pk}/rollback/"
    assert client.post(url, {"post": "yes"}).status_code == 403
    assert checkpoints_of(chat)[0].source != "rollback"
    client.get(url)
    token = client.cookies["csrftoken"].value
    head = checkpoints_of(chat)[0].checkpoint_id
    response = client.post(
        url, {"post": "yes", "csrfmiddlewaretoken": token, "expected_head": head}
    )
    assert response.status_code == 302
    assert checkpoints_of(chat)[0].source == "rollback"


# -- marks from the thread list (registered by retention/admin.py) ----------------------
def test_mark_and_unmark_finished_actions(admin_client, superuser, chat):
    response = admin_client.post(
        THREADS,
        {"action": "mark_finished_selected", "_selected_action": [thread_pk(chat)]},
        follow=True,
    )
    assert "Marked 1 thread finished" in response.content.decode()
    mark = FinishedMark.objects.get(thread_id=chat)
    assert mark.owner == "root"
    assert 1439 <= (mark.due_at - mark.marked_at).total_seconds() / 60 <= 1441
    response = admin_client.post(
        THREADS,
        {"action": "unmark_finished_selected", "_selected_action": [thread_pk(chat)]},
        follow=True,
    )
    assert "Unmarked 1 thread" in response.content.decode()
    assert not FinishedMark.objects.filter(thread_id=chat).exists()


def test_mark_actions_need_thread_change_permission(client, chat):
    viewer = staff_user("viewer", "checkpoints.view_thread")
    client.force_login(viewer)
    assert "mark_finished_selected" not in client.get(THREADS).content.decode()
    client.post(
        THREADS, {"action": "mark_finished_selected", "_selected_action": [thread_pk(chat)]}
    )
    assert not FinishedMark.objects.filter(thread_id=chat).exists()
    marker = staff_user("marker", "checkpoints.view_thread", "checkpoints.change_thread")
    client.force_login(marker)
    assert "mark_finished_selected" in client.get(THREADS).content.decode()
    client.post(
        THREADS, {"action": "mark_finished_selected", "_selected_action": [thread_pk(chat)]}
    )
    assert FinishedMark.objects.get(thread_id=chat).owner == "marker"


def test_thread_list_query_reads_indexes_not_tables(chat):
    """The page query walks the last_write_at index; counts and marks are index searches."""
    from django.contrib import admin
    from django.test import RequestFactory

    model_admin = admin.site._registry[Thread]
    rows = model_admin.get_queryset(RequestFactory().get(THREADS)).order_by("-last_write_at")
    sql, params = rows[:50].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = [row[-1] for row in cursor.fetchall()]
    assert any("checkpoints_thread USING INDEX" in step for step in plan), plan
    searches = [step for step in plan if step.startswith(("SEARCH", "SCAN"))]
    assert all("INDEX" in step for step in searches), plan
    assert not any(step.startswith("SCAN") and "checkpoint_" in step for step in plan), plan
    # The index already gives the order, so nothing is sorted in a temporary table.
    assert "USE TEMP B-TREE" not in " ".join(plan)


def test_thread_list_says_when_the_store_is_not_an_orm_store(admin_client, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": "memory"}
    page = admin_client.get(THREADS).content.decode()
    assert "This deployment keeps its checkpoints in memory" in page
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PROVIDER": "sqlite"}
    assert "keeps its checkpoints in" not in admin_client.get(THREADS).content.decode()
