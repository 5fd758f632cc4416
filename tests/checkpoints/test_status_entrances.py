"""The status rule is the same in every entrance: the admin's list and filter, the thread
API (its serializer and its `status` filter, which takes every kind and refuses another by
naming them), on a real server too; and its new filters stay index walks on PostgreSQL."""

from __future__ import annotations

import json
import urllib.request
from datetime import timedelta

import pytest
from django.db import connections

from checkpoints import status
from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from retention.holds import hold_thread
from retention.models import Park
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat, run_paused
from tests.api_fixtures import assert_error, listed, url

pytestmark = pytest.mark.django_db(transaction=True)

EXPECTED = {
    "old": "due",
    "kept": "held",
    "asks": "waiting_on_human",
    "parked": "parked",
    "done": "finished",
    "fresh": "recent",
    "quiet": "idle",
}


@pytest.fixture
def seeded(saver, users):
    now = utcnow()
    run_paused(saver, "asks")
    for thread_id in ("old", "kept", "parked", "done", "fresh", "quiet"):
        run_chat(saver, thread_id, turns=1)
    Thread.objects.filter(thread_id__in=["old", "kept"]).update(
        last_write_at=now - timedelta(days=30)
    )
    Thread.objects.filter(thread_id__in=["quiet", "parked"]).update(
        last_write_at=now - timedelta(days=2)
    )
    hold_thread(saver, "kept", reason="ticket 7", by="ops")
    Park.objects.create(
        thread_id="parked", deadline=now + timedelta(hours=1), created_at=now, provider="sqlite"
    )
    mark_finished(saver, "done")
    return saver


def test_the_api_shows_and_filters_by_the_rule(clients, seeded):
    staff = clients["staff"]
    for thread_id, kind in EXPECTED.items():
        body = staff.get(url(thread_id)).json()
        assert (body["status"], body["status_label"]) == (kind, status.KINDS[kind]), body
        assert body["status_detail"]
    assert (
        staff.get(url("kept"))
        .json()["status_detail"]
        .startswith("held by ops: ticket 7 until released; past its waiting horizon since")
    )
    assert staff.get(url("asks")).json()["status_detail"].startswith("“approve the answer?”")
    for kind in status.KINDS:
        assert listed(staff, status=kind) == {t for t, k in EXPECTED.items() if k == kind}, kind
    # The list's status is the same rule as its filter.
    rows = staff.get("/api/threads/", {"limit": 50}).json()["results"]
    assert {r["thread_id"]: r["status"] for r in rows} == EXPECTED


def test_an_unknown_status_is_refused_naming_every_kind(clients, seeded):
    answer = clients["staff"].get("/api/threads/", {"status": "waiting"})
    assert_error(answer, 400, field="status")
    message = answer.json()["error"]["message"]
    assert ", ".join(status.KINDS) in message and "'waiting'" in message


def test_the_admin_filter_offers_every_kind_and_lists_what_the_api_does(
    admin_client, clients, seeded
):
    page = admin_client.get("/admin/checkpoints/thread/").content.decode()
    for kind in status.KINDS:
        assert f"?status={kind}" in page, kind
        shown = admin_client.get("/admin/checkpoints/thread/", {"status": kind}).content.decode()
        assert {t for t in EXPECTED if f">{t}</a>" in shown} == listed(
            clients["staff"], status=kind
        )
    unknown = admin_client.get("/admin/checkpoints/thread/", {"status": "sleeping"})
    assert unknown.status_code == 302 and "e=1" in unknown["Location"]


def test_the_rule_on_a_real_server(live_server, users, seeded):
    from rest_framework.authtoken.models import Token

    token = Token.objects.create(user=users["staff"]).key

    def get(path):
        request = urllib.request.Request(
            live_server.url + path, headers={"Authorization": f"Token {token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as refused:
            return refused.code, json.loads(refused.read())

    code, due = get("/api/threads/?status=due")
    assert code == 200 and [r["thread_id"] for r in due["results"]] == ["old"]
    assert due["results"][0]["status_detail"].startswith("the next sweep deletes it")
    code, refused = get("/api/threads/?status=nope")
    assert code == 400 and refused["error"]["field"] == "status"


# -- plans ---------------------------------------------------------------------------------
@pytest.mark.django_db(databases=["default", "pg"], transaction=True)
@pytest.mark.parametrize("kind", ["due", "held", "parked", "idle"])
def test_the_new_filters_do_not_scan_every_thread(settings, kind):
    from checkpoints.models import Checkpoint, FinishedMark
    from checkpoints.store.registry import get_saver

    if "pg" not in settings.DATABASES:
        pytest.fail("these plans are PostgreSQL's: the pg test database is required")
    saver = get_saver("postgres", using="pg")
    saver.get_tuple({"configurable": {"thread_id": "none"}})
    now = utcnow()
    rows = Thread.objects.using("pg").bulk_create(
        Thread(thread_id=f"t{i:05d}", created_at=now, last_write_at=now - timedelta(seconds=i))
        for i in range(20000)
    )
    Checkpoint.objects.using("pg").bulk_create(
        Checkpoint(
            thread=row,
            checkpoint_id=f"{row.pk:06d}-000",
            type="msgpack",
            checkpoint=b"",
            source="loop",
            step=0,
            durability="disk",
            created_at=now,
        )
        for row in rows
    )
    # A few threads past each horizon, a few declared ones, a few held and parked.
    old = now - timedelta(days=30)
    Thread.objects.using("pg").filter(thread_id__endswith="000").update(last_write_at=old)
    Thread.objects.using("pg").filter(thread_id__endswith="50").update(waiting_minutes=60)
    FinishedMark.objects.using("pg").bulk_create(
        FinishedMark(thread_id=f"t{i:05d}", marked_at=old, due_at=old) for i in range(5, 400, 20)
    )
    for i in range(7, 300, 30):
        hold_thread(saver, f"t{i:05d}", reason="plan", by="ops")
        Park.objects.create(
            thread_id=f"t{i + 1:05d}",
            deadline=now + timedelta(hours=1),
            created_at=now,
            provider="postgres",
        )
    with connections["pg"].cursor() as cur:
        cur.execute("ANALYZE")
    chosen = (
        status.with_status_facts(Thread.objects.using("pg"))
        .filter(status.status_condition(kind, now, saver=saver))
        .values_list("pk")
    )
    if kind != "idle":
        # The few threads the kind keeps (about twenty due, ten held, ten parked).
        assert chosen.count() >= 10, kind
    sql, params = chosen.query.get_compiler(using="pg").as_sql()
    with connections["pg"].cursor() as cur:
        cur.execute("EXPLAIN " + sql, params)
        text = "\n".join(row[0] for row in cur.fetchall())
    if kind == "idle":
        # Idle must look at every thread to list them; it reads them once, not per row.
        assert "checkpoints_thread" in text
        return
    assert "Seq Scan on checkpoints_thread" not in text, (kind, text)
