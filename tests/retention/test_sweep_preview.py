"""The sweep preview made for deciding (issue 54 item 4): a sortable table of the threads
the sweep would delete (owner, last write, markers with the failure one, why it is due)
with Hold per row, a warning naming how many failed threads would go, retention in days and
hours; the run's page leads with its result and the deleted ids."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from retention.holds import hold_thread
from retention.models import SweepRun
from tests.admin_fixtures import run_chat, run_failing

pytestmark = pytest.mark.django_db(transaction=True)
SWEEP = "/admin/retention/sweeprun/sweep/"


@pytest.fixture
def doomed(saver):
    """Five threads past the waiting horizon: three failed (one of them held), two idle."""
    long_ago = utcnow() - timedelta(days=30)
    for thread_id in ("broke-a", "broke-b", "broke-held"):
        run_failing(saver, thread_id)
    for thread_id in ("idle-a", "idle-b"):
        run_chat(saver, thread_id, turns=1)
    run_chat(saver, "fresh", turns=1)
    users = get_user_model().objects
    alice, bob = users.create_user("alice"), users.create_user("bob")
    old = Thread.objects.exclude(thread_id="fresh")
    old.update(last_write_at=long_ago)
    Thread.objects.filter(thread_id="broke-a").update(
        owner=bob, last_write_at=long_ago - timedelta(days=2)
    )
    Thread.objects.filter(thread_id__in=["broke-b", "idle-a"]).update(owner=alice)
    hold_thread(saver, "broke-held", reason="refund dispute", by="ops")
    return saver


def rows(page: str) -> list[str]:
    return re.findall(r'<tr class="cs-doomed[^"]*" data-thread="([^"]+)"', page)


def test_the_preview_is_a_table_with_the_failed_ones_named(admin_client, doomed):
    page = admin_client.get(SWEEP).content.decode()
    assert sorted(rows(page)) == ["broke-a", "broke-b", "idle-a", "idle-b"]
    warning = re.search(r'id="sweep-failed-warning"><strong>(\d+)</strong> of them failed', page)
    assert warning and warning.group(1) == "2", page[:2000]
    row = page[page.index('data-thread="broke-a"') :]
    row = row[: row.index("</tr>")]
    assert ">Failed<" in row and ">bob<" in row and "past its waiting horizon since" in row
    assert "<strong>waiting</strong>" in row
    # Retention in days, not "10080 min".
    assert "kept <strong>7 days</strong> after its last write" in page
    assert " min " not in page[page.index('id="sweep-retention"') :][:300]


@pytest.mark.parametrize(
    ("sort", "first"),
    [
        ("owner", ["idle-b"]),
        ("-owner", ["broke-a"]),
        ("status", ["broke-a", "broke-b"]),
        ("last_write", ["broke-a"]),
    ],
)
def test_each_column_sorts(admin_client, doomed, sort, first):
    page = admin_client.get(SWEEP, {"sort": sort}).content.decode()
    listed = rows(page)
    assert len(listed) == 4
    # The unowned thread sorts first by owner ("" before "alice"), bob last.
    if sort == "owner":
        assert listed[-1] == "broke-a" and listed[0] in {"broke-held", "idle-b"}
    else:
        assert sorted(listed[: len(first)]) == sorted(first), listed


def test_hold_from_a_row_keeps_the_thread_and_returns_to_the_preview(admin_client, doomed):
    page = admin_client.get(SWEEP, {"sort": "status"}).content.decode()
    pk = Thread.objects.get(thread_id="broke-b").pk
    action = f"/admin/checkpoints/thread/{pk}/hold/"
    assert f'action="{action}"' in page
    back = "/admin/retention/sweeprun/sweep/?sort=status&page=1"
    answer = admin_client.post(action, {"reason": "look first", "next": back})
    assert answer.status_code == 302 and answer["Location"] == back
    after = admin_client.get(back).content.decode()
    assert "broke-b" not in rows(after) and len(rows(after)) == 3
    assert "<strong>1</strong> of them failed" in after
    # A next that leaves the site is ignored: the thread's page instead.
    other = Thread.objects.get(thread_id="idle-a").pk
    away = admin_client.post(
        f"/admin/checkpoints/thread/{other}/hold/",
        {"reason": "x", "next": "https://evil.example/"},
    )
    assert away["Location"] == f"/admin/checkpoints/thread/{other}/change/"


def test_the_run_page_leads_with_its_result_and_deleted_ids(admin_client, doomed):
    admin_client.post(SWEEP, {"post": "yes"})
    run = SweepRun.objects.get()
    page = admin_client.get(f"/admin/retention/sweeprun/{run.pk}/change/").content.decode()
    result = page.index('id="sweep-run-result"')
    assert "The run deleted <strong>4</strong> thread(s)" in page[result : result + 300]
    deleted = page.index('id="deleted-threads"')
    # Before the run's fields and its spared and batch tables.
    assert result < deleted < page.index("field-started_at")
    assert deleted < page.index("Spared threads")
