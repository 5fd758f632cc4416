"""The finished mark has one annotation and one condition (`checkpoints.marks`): the
API's thread status, the admin's columns and both of its finished filters read them."""

from __future__ import annotations

import pytest

from checkpoints.marks import is_marked, with_finished_mark
from checkpoints.models import Thread
from checkpoints.selectors import ThreadInfo, thread_rows
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_annotation_and_the_condition_name_the_same_threads(saver):
    for thread_id in ("open", "done"):
        run_chat(saver, thread_id, turns=1)
    entry = mark_finished(saver, "done", owner="ops")
    rows = {row.thread_id: row for row in with_finished_mark(Thread.objects.all())}
    assert rows["done"].finished_due_at == entry.due_at
    assert rows["done"].finished_marked_at == entry.marked_at
    assert rows["done"].finished_owner == "ops"
    assert rows["open"].finished_due_at is None and rows["open"].finished_owner is None
    assert list(Thread.objects.filter(is_marked()).values_list("thread_id", flat=True)) == ["done"]
    assert list(Thread.objects.exclude(is_marked()).values_list("thread_id", flat=True)) == ["open"]
    # ``state`` is the mark's side of it; ``status`` is the one status rule's verdict.
    infos = {row.thread_id: ThreadInfo.from_row(row) for row in thread_rows(saver)}
    assert {t: info.state for t, info in infos.items()} == {"done": "finished", "open": "waiting"}
    assert {t: info.status.kind for t, info in infos.items()} == {
        "done": "finished",
        "open": "recent",
    }
