"""A thread's status has one home, `checkpoints.status`: its Python form (the admin's list
and thread page) and its SQL form (the admin's status filter) give every thread one kind,
the same one."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints import status
from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from retention.policy import declare_retention
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat, run_failing, run_paused

pytestmark = pytest.mark.django_db(transaction=True)

KINDS = {
    "asks": "waiting_on_human",
    "broke": "failed",
    "fresh": "recent",
    "quiet": "idle",
    "declared": "idle",
    "done": "finished",
    "redone": "finished",
}


@pytest.fixture
def threads(saver):
    run_paused(saver, "asks")
    run_failing(saver, "broke")
    for thread_id in ("fresh", "quiet", "declared", "done", "redone"):
        run_chat(saver, thread_id, turns=1)
    Thread.objects.filter(thread_id__in=["quiet", "declared"]).update(
        last_write_at=utcnow() - timedelta(days=2)
    )
    declare_retention(saver, "declared", waiting_minutes=60)
    mark_finished(saver, "done")
    mark_finished(saver, "redone")
    # Written since its mark: still finished (the sweep spares it).
    run_chat(saver, "redone", turns=1)


def test_the_sql_form_lists_each_thread_under_the_kind_the_python_form_gives(threads):
    now = utcnow()
    rows = status.with_status_facts(Thread.objects.all())
    python = {row.thread_id: status.row_status(row, now=now).kind for row in rows}
    assert python == KINDS
    for kind in status.CONDITION_KINDS:
        listed = set(
            rows.filter(status.status_condition(kind, now)).values_list("thread_id", flat=True)
        )
        assert listed == {t for t, k in python.items() if k == kind}, kind


def test_the_python_form_reads_the_horizon_in_force(threads):
    rows = {row.thread_id: row for row in status.with_status_facts(Thread.objects.all())}
    now = utcnow()
    # Declared 60 minutes, written two days ago: past its own horizon, not the platform's.
    assert "past its waiting horizon" in status.row_status(rows["declared"], now=now).detail
    assert "due in" in status.row_status(rows["quiet"], now=now).detail
    written_since = status.row_status(rows["redone"], now=now).detail
    assert written_since.startswith("finished, written since")


def test_a_kind_the_sql_form_does_not_know_is_refused():
    with pytest.raises(ValueError, match="'parked' is not one of finished"):
        status.status_condition("parked", utcnow())
