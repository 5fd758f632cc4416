"""A thread's status has one home, `checkpoints.status`: its Python form (the admin's list
and thread page, the API) and its SQL form (the admin's and the API's status filter) give
every thread one kind, the same one, and say what the next sweep does with it first."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from checkpoints import status
from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from retention.holds import hold_thread
from retention.models import Park
from retention.policy import declare_retention
from retention.runs import mark_finished
from retention.sweep import sweep_checkpoints
from tests.admin_fixtures import run_chat, run_failing, run_paused

pytestmark = pytest.mark.django_db(databases=["default", "pg"], transaction=True)

KINDS = {
    "asks": "waiting_on_human",
    "asks-old": "waiting_on_human",
    "broke": "failed",
    "broke-old": "due",
    "fresh": "recent",
    "quiet": "idle",
    "declared": "due",
    "declared-fresh": "due",
    "done": "finished",
    "done-old": "due",
    "redone": "finished",
    "held": "held",
    "held-fresh": "held",
    "parked": "parked",
    "parked-fresh": "parked",
    "done-held": "held",
}
# What the next sweep deletes, and what it spares past a horizon.
DELETED = {t for t, k in KINDS.items() if k == "due"}
SPARED = {"asks-old", "held", "parked", "done-held"}


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, saver, settings):
    """The deployment's SQLite store, or a PostgreSQL one (its holds and parks then live in
    another database than its threads)."""
    from checkpoints.store.registry import get_saver

    if request.param == "sqlite":
        return saver
    if "pg" not in settings.DATABASES:
        pytest.fail("the postgres case needs the pg test database")
    return get_saver("postgres", using="pg")


@pytest.fixture
def threads(store):
    rows = Thread.objects.using(store.db_alias)
    now = utcnow()
    long_ago = now - timedelta(days=30)
    for thread_id in ("asks", "asks-old"):
        run_paused(store, thread_id)
    for thread_id in ("broke", "broke-old"):
        run_failing(store, thread_id)
    chats = [t for t in KINDS if not t.startswith(("asks", "broke"))]
    for thread_id in chats:
        run_chat(store, thread_id, turns=1)
    rows.filter(thread_id="quiet").update(last_write_at=now - timedelta(days=2))
    rows.filter(thread_id="declared").update(last_write_at=now - timedelta(days=2))
    # Written ten minutes ago (recent), but its own horizon is five minutes: due first.
    rows.filter(thread_id="declared-fresh").update(last_write_at=now - timedelta(minutes=10))
    declare_retention(store, "declared", waiting_minutes=60)
    declare_retention(store, "declared-fresh", waiting_minutes=5)
    old = ["asks-old", "broke-old", "held", "parked", "done-old", "done-held"]
    rows.filter(thread_id__in=old).update(last_write_at=long_ago - timedelta(minutes=1))
    mark_finished(store, "done")
    mark_finished(store, "redone")
    # Written since its mark: still finished (the sweep spares it).
    run_chat(store, "redone", turns=1)
    for thread_id in ("done-old", "done-held"):
        mark_finished(store, thread_id, owner="ops", now=long_ago)
    for thread_id in ("held", "held-fresh", "done-held"):
        hold_thread(store, thread_id, reason="refund dispute", by="ops")
    for thread_id in ("parked", "parked-fresh"):
        Park.objects.create(
            thread_id=thread_id,
            deadline=now + timedelta(hours=3),
            created_at=now,
            owner="ops",
            provider=store.provider,
        )
    return store


def python_form(store, now):
    rows = status.with_status_facts(Thread.objects.using(store.db_alias).all())
    claims = status.claims_of(
        provider=store.provider, thread_ids=[r.thread_id for r in rows], now=now
    )
    return {
        row.thread_id: status.row_status(row, now=now, claims=claims.get(row.thread_id))
        for row in rows
    }


def test_the_sql_form_lists_each_thread_under_the_kind_the_python_form_gives(threads):
    now = utcnow()
    python = {t: found.kind for t, found in python_form(threads, now).items()}
    assert python == KINDS
    rows = status.with_status_facts(Thread.objects.using(threads.db_alias).all())
    for kind in status.KINDS:
        condition = status.status_condition(kind, now, saver=threads)
        listed = set(rows.filter(condition).values_list("thread_id", flat=True))
        assert listed == {t for t, k in python.items() if k == kind}, kind


def test_the_status_says_what_the_next_sweep_does(threads):
    now = utcnow()
    found = python_form(threads, now)
    dry = sweep_checkpoints(dry_run=True, saver=threads, now=now)
    deleted = {t for ids in dry.deleted_ids.values() for t in ids}
    assert deleted == DELETED == {t for t, s in found.items() if s.kind == "due"}
    assert {s["thread_id"] for s in dry.spared} == SPARED
    # Past a horizon but claimed: the claim is the status, and the horizon is said too.
    for thread_id in SPARED:
        assert "the sweep spares it" in found[thread_id].detail, found[thread_id]
        assert "since" in found[thread_id].detail


def test_the_details_say_why(threads):
    found = python_form(threads, utcnow())
    assert found["declared"].detail.startswith("the next sweep deletes it: past its waiting")
    assert found["done-old"].detail.startswith("the next sweep deletes it: finished and due")
    assert found["held"].detail.startswith("held by ops: refund dispute until released")
    assert "past its waiting horizon since" in found["held"].detail
    assert found["done-held"].detail.startswith("held by ops")
    assert "finished and due since" in found["done-held"].detail
    asks_old = found["asks-old"].detail
    assert re.match(r"an interrupt, waiting 1\W+month", asks_old), asks_old
    assert "past its waiting horizon since" in asks_old
    assert found["parked"].detail.startswith("parked by ops until")
    assert found["done"].detail.startswith("due at")
    assert found["redone"].detail.startswith("finished, written since")
    assert "due in" in found["quiet"].detail


def test_a_released_or_ended_hold_no_longer_claims(threads):
    from retention.holds import release_hold

    release_hold(threads, "held", by="ops")
    later = utcnow() + timedelta(minutes=1)
    found = python_form(threads, later)
    assert found["held"].kind == "due"
    rows = status.with_status_facts(Thread.objects.using(threads.db_alias).all())
    due = rows.filter(status.status_condition("due", later, saver=threads))
    assert "held" in set(due.values_list("thread_id", flat=True))


def test_a_kind_the_rule_does_not_know_is_refused():
    with pytest.raises(ValueError, match="'asleep' is not one of due, held, waiting_on_human"):
        status.status_condition("asleep", utcnow())


def test_a_thread_on_a_store_that_does_not_sweep_idle_threads_is_never_due_idle():
    now = utcnow()
    found = status.thread_status(
        now=now, last_write_at=now - timedelta(days=30), waiting_minutes=60, idle_swept=False
    )
    assert found.kind == "idle" and found.detail.startswith("its keys expire in")
    marked = status.thread_status(
        now=now,
        last_write_at=now - timedelta(days=30),
        waiting_minutes=60,
        mark_due=now - timedelta(days=1),
        marked_at=now - timedelta(days=2),
        idle_swept=False,
    )
    assert marked.kind == "due" and "finished and due since" in marked.detail
