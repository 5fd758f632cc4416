"""Every true marker on a thread (issue 54): failed, waiting on a human, due, past its
horizon, held, parked and finished hold independently, show together in the list and on
the thread page, and each status filter finds every thread its marker names."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints import status
from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from retention.holds import hold_thread
from retention.models import Park
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat, run_failing, run_paused

pytestmark = pytest.mark.django_db(databases=["default", "pg"], transaction=True)
THREADS = "/admin/checkpoints/thread/"

# thread id -> the markers it carries.
MARKED = {
    "broke": {"failed"},
    "broke-due": {"failed", "due", "past_horizon"},
    "broke-held": {"failed", "held"},
    "broke-held-old": {"failed", "held", "past_horizon"},
    "asks": {"waiting_on_human"},
    "asks-held-old": {"waiting_on_human", "held", "past_horizon"},
    "done": {"finished"},
    "done-old": {"finished", "due", "past_horizon"},
    "parked-old": {"parked", "past_horizon"},
    "quiet-old": {"due", "past_horizon"},
    "fresh": set(),
}


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, saver, settings):
    """The deployment's SQLite store, or a PostgreSQL one (its holds then live in another
    database than its threads)."""
    from checkpoints.store.registry import get_saver

    if request.param == "sqlite":
        return saver
    if "pg" not in settings.DATABASES:
        pytest.fail("the postgres case needs the pg test database")
    return get_saver("postgres", using="pg")


def seed(store):
    now = utcnow()
    long_ago = now - timedelta(days=30)
    for thread_id in MARKED:
        if thread_id.startswith("broke"):
            run_failing(store, thread_id)
        elif thread_id.startswith("asks"):
            run_paused(store, thread_id)
        else:
            run_chat(store, thread_id, turns=1)
    old = [t for t in MARKED if t.endswith(("-old", "-due"))]
    Thread.objects.using(store.db_alias).filter(thread_id__in=old).update(last_write_at=long_ago)
    mark_finished(store, "done")
    mark_finished(store, "done-old", now=long_ago)
    for thread_id in ("broke-held", "broke-held-old", "asks-held-old"):
        hold_thread(store, thread_id, reason="refund dispute", by="ops")
    Park.objects.create(
        thread_id="parked-old",
        deadline=now + timedelta(hours=3),
        created_at=now,
        owner="ops",
        provider=store.provider,
    )
    return store


def test_each_marker_s_filter_finds_every_thread_the_python_form_marks(store):
    seed(store)
    now = utcnow()
    rows = status.with_status_facts(Thread.objects.using(store.db_alias).all())
    claims = status.claims_of(
        provider=store.provider, thread_ids=[r.thread_id for r in rows], now=now
    )
    python = {
        row.thread_id: {
            m.kind for m in status.row_markers(row, now=now, claims=claims.get(row.thread_id))
        }
        for row in rows
    }
    assert python == MARKED
    for kind in status.MARKERS:
        listed = set(
            rows.filter(status.marker_condition(kind, now, saver=store)).values_list(
                "thread_id", flat=True
            )
        )
        assert listed == {t for t, kinds in python.items() if kind in kinds}, kind


def test_an_unknown_marker_is_refused_by_name():
    with pytest.raises(ValueError, match="marker 'asleep' is not one of failed, "):
        status.marker_condition("asleep", utcnow())


def listed(page: str) -> set[str]:
    return {t for t in MARKED if f">{t}</a>" in page}


def row_of(page: str, thread_id: str) -> str:
    start = page.index(f">{thread_id}</a>")
    return page[start : page.index("</tr>", start)]


def test_three_failed_threads_one_due_one_held_are_all_failed(admin_client, saver):
    seed(saver)
    page = admin_client.get(THREADS, {"status": "failed"}).content.decode()
    assert listed(page) == {"broke", "broke-due", "broke-held", "broke-held-old"}
    # Each of the other filters still finds the failed threads it names too.
    due = admin_client.get(THREADS, {"status": "due"}).content.decode()
    assert listed(due) == {"broke-due", "done-old", "quiet-old"}
    held = admin_client.get(THREADS, {"status": "held"}).content.decode()
    assert listed(held) == {"broke-held", "broke-held-old", "asks-held-old"}
    past = admin_client.get(THREADS, {"status": "past_horizon"}).content.decode()
    assert listed(past) == {t for t, kinds in MARKED.items() if "past_horizon" in kinds}
    # The list shows the markers together on one row, in one order.
    whole = admin_client.get(THREADS).content.decode()
    row = row_of(whole, "broke-due")
    assert row.index(">Failed<") < row.index(">Due for deletion<") < row.index(">Past its horizon<")
    row = row_of(whole, "broke-held")
    assert ">Failed<" in row and ">Held<" in row and ">Due for deletion<" not in row
    # No marker: the rule's activity says what the thread is.
    assert ">Recently written<" in row_of(whole, "fresh")


def test_an_unknown_status_filter_is_refused_as_django_refuses_a_filter(admin_client, saver):
    seed(saver)
    page = admin_client.get(THREADS, {"status": "asleep"}, follow=True)
    assert page.redirect_chain == [(f"{THREADS}?e=1", 302)]
    assert page.status_code == 200


def test_the_thread_page_shows_every_marker_with_its_detail(admin_client, saver):
    seed(saver)
    pk = Thread.objects.get(thread_id="broke-held-old").pk
    page = admin_client.get(f"{THREADS}{pk}/change/").content.decode()
    assert "ValueError: the tool timed out (in node explode)" in page
    assert ">Held<" in page and "refund dispute" in page
    assert ">Past its horizon<" in page
    assert "past its waiting horizon since" in page and "the sweep spares it: held" in page
