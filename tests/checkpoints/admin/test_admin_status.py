"""The thread's status at a glance in the admin: list column, filter and thread page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from checkpoints.models import Thread
from checkpoints.status import thread_status
from checkpoints.store.planning import utcnow
from retention.models import Park
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat, run_failing, run_paused

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = "/admin/checkpoints/thread/"


@pytest.fixture
def threads(saver):
    run_paused(saver, "asks")
    run_failing(saver, "broke")
    run_chat(saver, "fresh", turns=1)
    run_chat(saver, "quiet", turns=1)
    run_chat(saver, "done", turns=1)
    run_chat(saver, "held", turns=1)
    Thread.objects.filter(thread_id__in=["quiet", "held"]).update(
        last_write_at=utcnow() - timedelta(days=2)
    )
    mark_finished(saver, "done")
    now = utcnow()
    Park.objects.create(
        thread_id="held", deadline=now + timedelta(hours=3), created_at=now, provider="sqlite"
    )


def row_of(page: str, thread_id: str) -> str:
    start = page.index(f">{thread_id}</a>")
    return page[start : page.index("</tr>", start)]


def test_each_status_shows_in_the_list(admin_client, threads):
    page = admin_client.get(THREADS).content.decode()
    assert "Waiting on a human" in row_of(page, "asks")
    # The question and the node it waits at, read for the page's waiting rows at once.
    assert "“approve the answer?” at approve" in row_of(page, "asks")
    # The error in words, with its node (issue 33): not "the last task failed".
    said = "ValueError: the tool timed out (in node explode)"
    assert "Failed" in row_of(page, "broke") and said in row_of(page, "broke")
    assert "Recently written" in row_of(page, "fresh")
    assert "Idle" in row_of(page, "quiet")
    assert re.search(r"due in 4\W+days", row_of(page, "quiet")), row_of(page, "quiet")
    assert "Finished" in row_of(page, "done") and "due at" in row_of(page, "done")
    assert "Parked" in row_of(page, "held") and "parked until" in row_of(page, "held")


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("waiting_on_human", {"asks"}),
        ("failed", {"broke"}),
        ("recent", {"fresh"}),
        ("idle", {"quiet"}),
        ("parked", {"held"}),
        ("finished", {"done"}),
    ],
)
def test_the_status_filter_follows_the_same_rule(admin_client, threads, kind, expected):
    page = admin_client.get(THREADS, {"status": kind}).content.decode()
    listed = {t for t in ["asks", "broke", "fresh", "quiet", "done", "held"] if f">{t}</a>" in page}
    assert listed == expected


def test_the_thread_page_shows_the_question_and_node_or_the_error(admin_client, threads):
    asks = Thread.objects.get(thread_id="asks").pk
    page = admin_client.get(f"{THREADS}{asks}/change/").content.decode()
    assert "Waiting on a human" in page and "“approve the answer?” at approve" in page
    broke = Thread.objects.get(thread_id="broke").pk
    page = admin_client.get(f"{THREADS}{broke}/change/").content.decode()
    assert "ValueError: the tool timed out (in node explode)" in page


def test_a_resumed_interrupt_no_longer_waits(admin_client, saver, threads):
    from langgraph.types import Command

    from tests.admin_fixtures import paused_graph

    paused_graph(saver).invoke(Command(resume="yes"), {"configurable": {"thread_id": "asks"}})
    page = admin_client.get(THREADS).content.decode()
    assert "Recently written" in row_of(page, "asks")


def test_status_rule_order_and_details():
    now = utcnow()
    old = now - timedelta(days=8)
    idle = thread_status(now=now, last_write_at=old, waiting_minutes=60)
    assert (idle.kind, idle.detail.startswith("the next sweep deletes it: past its waiting")) == (
        "due",
        True,
    )
    # Past due but waiting on a human: the interrupt claims it, and the page says both.
    marked = thread_status(
        now=now,
        last_write_at=now - timedelta(days=3),
        waiting_minutes=60 * 24 * 7,
        mark_due=now - timedelta(1),
        marked_at=now - timedelta(days=2),
        interrupted=True,
        question="ok?",
    )
    assert marked.kind == "waiting_on_human"
    assert marked.detail.startswith("“ok?”, waiting 3")
    assert "finished and due since" in marked.detail


def test_mark_and_unmark_finished_from_the_thread_page(admin_client, saver):
    from checkpoints.models import AuditEvent, FinishedMark

    run_chat(saver, "to-mark", turns=1)
    pk = Thread.objects.get(thread_id="to-mark").pk
    page = admin_client.get(f"{THREADS}{pk}/change/").content.decode()
    assert ">Mark finished</button>" in page and "Unmark finished" not in page
    # A GET changes nothing: it leads back to the thread page.
    assert admin_client.get(f"{THREADS}{pk}/mark/")["Location"] == f"{THREADS}{pk}/change/"
    assert not FinishedMark.objects.filter(thread_id="to-mark").exists()
    done = admin_client.post(f"{THREADS}{pk}/mark/", follow=True).content.decode()
    assert "Thread to-mark marked finished; due at" in done
    assert ">Unmark finished</button>" in done and "Finished" in done
    assert FinishedMark.objects.get(thread_id="to-mark").owner == "admin"
    back = admin_client.post(f"{THREADS}{pk}/mark/", {"unmark": "1"}, follow=True)
    assert "Thread to-mark waits again" in back.content.decode()
    assert not FinishedMark.objects.filter(thread_id="to-mark").exists()
    assert [(e.action, e.origin) for e in AuditEvent.objects.order_by("id")] == [
        ("mark_finished", "admin"),
        ("unmark_finished", "admin"),
    ]


def test_the_mark_button_needs_the_change_permission(client, saver):
    from django.contrib.auth.models import Permission, User

    from checkpoints.models import FinishedMark

    run_chat(saver, "not-yours", turns=1)
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_thread"))
    client.force_login(viewer)
    pk = Thread.objects.get(thread_id="not-yours").pk
    page = client.get(f"{THREADS}{pk}/change/").content.decode()
    assert "Mark finished" not in page
    assert client.post(f"{THREADS}{pk}/mark/").status_code == 403
    assert not FinishedMark.objects.exists()


def test_the_parks_page_explains_why_it_is_empty_on_sqlite(admin_client, saver):
    page = admin_client.get("/admin/retention/park/").content.decode()
    assert "This deployment&#x27;s store is sqlite, which cannot hold a parked run" in page
    assert "Only postgres and redis stores park" in page
