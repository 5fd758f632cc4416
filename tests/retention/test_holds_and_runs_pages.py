"""Holds and sweep runs through every entrance: the admin (test client), the API (test
client and a real server): hold and release a thread, page through the ids a run deleted,
compare a dry run with the run's stored ids."""

from __future__ import annotations

import json
import urllib.request
from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission, User
from rest_framework.authtoken.models import Token

from checkpoints.models import AuditEvent, Thread
from checkpoints.store.planning import utcnow
from retention.admin import sweeps as sweep_admin
from retention.holds import hold_thread
from retention.models import DeletedThread, Hold, SweepRun
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat, staff_user
from tests.api_fixtures import assert_error, url

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = "/admin/checkpoints/thread/"
SWEEP = "/admin/retention/sweeprun/sweep/"


@pytest.fixture
def due(saver):
    """Five finished threads past due."""
    long_ago = utcnow() - timedelta(days=30)
    for i in range(5):
        run_chat(saver, f"due-{i}", turns=1)
        Thread.objects.filter(thread_id=f"due-{i}").update(last_write_at=long_ago)
        mark_finished(saver, f"due-{i}", owner="ops", now=long_ago + timedelta(minutes=1))
    return saver


@pytest.fixture
def operator(transactional_db):
    return staff_user(
        "operator",
        "checkpoints.view_thread",
        "retention.add_hold",
        "retention.run_sweep",
        "retention.view_sweeprun",
    )


# -- the admin ---------------------------------------------------------------------------
def test_hold_and_release_from_the_thread_page(client, operator, due):
    client.force_login(operator)
    pk = Thread.objects.get(thread_id="due-1").pk
    page = client.get(f"{THREADS}{pk}/change/").content.decode()
    assert 'id="thread-hold"' in page and "Hold this thread" in page
    assert "Due for deletion" in page
    # The hold sits with the actions, after the change form (the thread's state), not
    # above everything; the page's tools link to it.
    assert page.index('id="thread-hold"') > page.index('id="thread_form"')
    assert 'href="#thread-hold" class="cs-hold-tool">Hold…' in page
    # A GET changes nothing; a hold without a reason is refused, saying why.
    assert client.get(f"{THREADS}{pk}/hold/")["Location"] == f"{THREADS}{pk}/change/"
    refused = client.post(f"{THREADS}{pk}/hold/", {"reason": " "}, follow=True)
    assert "Not held: a hold on thread &#x27;due-1&#x27; needs a reason" in refused.content.decode()
    done = client.post(
        f"{THREADS}{pk}/hold/",
        {"reason": "refund dispute", "until": "2999-01-02T03:04"},
        follow=True,
    ).content.decode()
    assert "Thread due-1 held by operator: refund dispute until 2999-01-02 03:04:00" in done
    assert "Release the hold" in done
    # The status rule says held, and that it is past its horizon.
    assert "cs-status-held" in done and "finished and due since" in done
    event = AuditEvent.objects.get(action="hold")
    assert (event.origin, event.actor, event.thread_id) == ("admin", "operator", "due-1")
    listed = client.get(THREADS, {"status": "held"}).content.decode()
    assert ">due-1</a>" in listed and ">due-2</a>" not in listed
    back = client.post(f"{THREADS}{pk}/hold/", {"release": "1"}, follow=True).content.decode()
    assert "Thread due-1 is no longer held" in back and "Hold this thread" in back
    assert Hold.objects.get().released_by == "operator"


def test_the_hold_controls_need_the_hold_permission(client, due):
    viewer = staff_user("viewer", "checkpoints.view_thread")
    client.force_login(viewer)
    pk = Thread.objects.get(thread_id="due-1").pk
    page = client.get(f"{THREADS}{pk}/change/").content.decode()
    assert "Hold this thread" not in page
    assert client.post(f"{THREADS}{pk}/hold/", {"reason": "x"}).status_code == 403
    assert not Hold.objects.exists()


def test_the_dry_run_lists_every_id_it_counts_and_the_run_page_pages_them(
    client, operator, due, monkeypatch
):
    client.force_login(operator)
    hold_thread(due, "due-4", reason="legal hold", by="lead")
    dry = client.get(SWEEP)
    page = dry.content.decode()
    would = [row["thread_id"] for row in dry.context["doomed"]["rows"]]
    assert len(would) == dry.context["result"].swept_count == 4
    # In the order the sweep deletes them (the preview's default sort), each "finished".
    assert would == dry.context["result"].deleted_ids["finished"]
    assert {row["horizon"] for row in dry.context["doomed"]["rows"]} == {"finished"}
    assert "held by lead: legal hold until released" in page
    dry_ids = dry.context["result"].deleted_ids
    ran = client.post(SWEEP, {"post": "yes"})
    run_id = ran.context["result"].sweep_run_id
    stored = list(
        DeletedThread.objects.filter(sweep_run_id=run_id).order_by("id").values_list("thread_id")
    )
    assert [t for (t,) in stored] == dry_ids["finished"]
    monkeypatch.setattr(sweep_admin, "DELETED_PAGE", 3)
    first = client.get(f"/admin/retention/sweeprun/{run_id}/change/")
    body = first.content.decode()
    assert "Deleted threads (4)" in body and "<strong>4</strong> past the finished horizon" in body
    shown = [r["thread_id"] for r in first.context["deleted"]["rows"]]
    after = first.context["deleted"]["next_after"]
    assert after and f"?deleted_after={after}" in body
    second = client.get(f"/admin/retention/sweeprun/{run_id}/change/", {"deleted_after": after})
    shown += [r["thread_id"] for r in second.context["deleted"]["rows"]]
    assert shown == dry_ids["finished"] and second.context["deleted"]["next_after"] is None
    spared = SweepRun.objects.get(pk=run_id).spared.get()
    assert spared.reason == "held by lead: legal hold until released"


# -- the API (test client) ---------------------------------------------------------------
@pytest.fixture
def api(operator):
    from tests.api_fixtures import token_client

    return token_client(operator)


def test_hold_read_and_release_through_the_api(api, due, users):
    from tests.api_fixtures import token_client

    assert api.get(url("due-0", "hold")).json()["held"] is False
    body = {"reason": "investigating", "until": "2999-01-01T00:00:00Z"}
    held = api.post(url("due-0", "hold"), body, format="json")
    assert held.status_code == 200, held.content
    assert held.json()["words"] == "held by operator: investigating until 2999-01-01 00:00:00 UTC"
    detail = api.get(url("due-0")).json()
    assert detail["status"] == "held" and detail["status_detail"].startswith("held by operator")
    assert api.get("/api/threads/", {"status": "held"}).json()["count"] == 1
    assert_error(api.post(url("due-0", "hold"), {}, format="json"), 400, field="reason")
    past = {"reason": "x", "until": "2000-01-01T00:00:00Z"}
    assert_error(api.post(url("due-0", "hold"), past, format="json"), 400, "hold_refused", "until")
    # Staff without the hold permission, and a plain user, may not hold.
    assert_error(token_client(users["staff"]).post(url("due-1", "hold"), body, format="json"), 403)
    assert_error(token_client(users["alice"]).post(url("due-1", "hold"), body, format="json"), 404)
    released = api.delete(url("due-0", "hold"))
    assert released.status_code == 200 and released.json()["held"] is False
    assert api.get(url("due-0")).json()["status"] == "due"
    actions = list(
        AuditEvent.objects.filter(action__in=["hold", "release_hold"])
        .values_list("action", "origin")
        .order_by("id")
    )
    assert actions == [("hold", "api"), ("release_hold", "api")]


def test_a_sweep_run_and_its_deleted_ids_through_the_api(api, due):
    dry = api.post("/api/checkpoints/sweep/", {"dry_run": True}, format="json").json()
    done = api.post("/api/checkpoints/sweep/", {}, format="json").json()
    run = api.get(f"/api/checkpoints/sweeps/{done['sweep_run_id']}/").json()
    assert run["deleted_count"] == run["swept_count"] == 5
    ids, link = [], run["deleted_url"]
    while link:
        page = api.get(link, {"limit": 2} if "limit" not in link else None).json()
        ids += [row["thread_id"] for row in page["results"]]
        link = page["next"]
    assert ids == dry["deleted_ids"]["finished"] == done["deleted_ids"]["finished"]
    assert_error(api.get("/api/checkpoints/sweeps/999999/"), 404)
    assert_error(api.get("/api/checkpoints/sweeps/999999/deleted/"), 404)


# -- the API on a real server ------------------------------------------------------------
def call(base: str, token: str, method: str, path: str, body=None):
    request = urllib.request.Request(
        base + path,
        method=method,
        data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read() or b"null")
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"null")


def test_hold_sweep_and_deleted_ids_on_a_real_server(live_server, operator, due):
    token = Token.objects.create(user=operator).key
    base = live_server.url
    code, held = call(base, token, "POST", "/api/threads/due-2/hold/", {"reason": "audit"})
    assert code == 200 and held["held"] is True
    code, dry = call(base, token, "POST", "/api/checkpoints/sweep/", {"dry_run": True})
    assert code == 200 and "due-2" not in dry["deleted_ids"]["finished"]
    assert [s["reason"] for s in dry["spared"]] == ["held by operator: audit until released"]
    code, done = call(base, token, "POST", "/api/checkpoints/sweep/", {})
    code, page = call(
        base, token, "GET", f"/api/checkpoints/sweeps/{done['sweep_run_id']}/deleted/?limit=500"
    )
    assert code == 200
    assert [r["thread_id"] for r in page["results"]] == dry["deleted_ids"]["finished"]
    code, refused = call(base, token, "GET", "/api/threads/?status=sleeping")
    assert code == 400 and "due, held, waiting_on_human" in refused["error"]["message"]


@pytest.fixture
def users(transactional_db):
    alice = User.objects.create_user("alice", password="pw-alice")
    staff = User.objects.create_user("staff", password="pw-staff", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="change_thread"))
    return {"alice": alice, "staff": staff}
