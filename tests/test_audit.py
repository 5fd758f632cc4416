"""The audit trail: each change from the API, the admin, a command, a task or plain Python
leaves one record naming who, when, what and from where."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission
from django.core.management import call_command

from checkpoints import audit
from checkpoints.models import AuditEvent, Checkpoint, Thread
from checkpoints.store.registry import get_saver
from checkpoints.timetravel import TimeTravel
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat

pytestmark = pytest.mark.django_db(transaction=True)


def events(**where) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(**where).order_by("id"))


def checkpoint_ids(thread_id: str) -> list[str]:
    saver = get_saver()
    return [
        t.config["configurable"]["checkpoint_id"]
        for t in saver.list({"configurable": {"thread_id": thread_id}})
    ]


def test_api_changes_are_recorded_with_user_and_address(clients, users, threads):
    alice, staff = clients["alice"], clients["sweeper"]
    target = checkpoint_ids("alice-1")[2]
    assert (
        alice.post(
            "/api/threads/alice-1/rollback/", {"checkpoint_id": target}, format="json"
        ).status_code
        == 200
    )
    assert (
        alice.post(
            "/api/threads/alice-1/fork/",
            {"checkpoint_id": target, "new_thread_id": "alice-fork"},
            format="json",
        ).status_code
        == 201
    )
    body = {"supersteps": [[{"channel": "topic", "value": "audited"}]]}
    assert alice.post("/api/threads/alice-1/bulk-update/", body, format="json").status_code == 200
    assert alice.post("/api/threads/alice-1/finish/").status_code == 200
    assert alice.delete("/api/threads/alice-1/finish/").status_code in (200, 204)
    assert (
        alice.post(
            "/api/threads/alice-1/retention/", {"waiting_minutes": 60}, format="json"
        ).status_code
        == 200
    )
    # An operator's hold and its release (staff with retention.add_hold).
    users["sweeper"].user_permissions.add(Permission.objects.get(codename="add_hold"))
    hold = {"reason": "audited hold"}
    assert staff.post("/api/threads/alice-1/hold/", hold, format="json").status_code == 200
    assert staff.delete("/api/threads/alice-1/hold/").status_code == 200
    assert alice.delete("/api/threads/alice-fork/").status_code == 204
    assert staff.post("/api/checkpoints/sweep/", {}, format="json").status_code == 200

    recorded = [(e.action, e.thread_id) for e in events(origin="api")]
    assert recorded == [
        ("rollback", "alice-1"),
        ("fork", "alice-fork"),
        ("bulk_update", "alice-1"),
        ("mark_finished", "alice-1"),
        ("unmark_finished", "alice-1"),
        ("declare_retention", "alice-1"),
        ("hold", "alice-1"),
        ("release_hold", "alice-1"),
        ("delete_thread", "alice-fork"),
        ("sweep", ""),
    ]
    # The admin's action filter offers exactly these, the two only the LangGraph-compatible
    # API performs (tests/checkpoints/langgraph_api/test_sdk.py audits them) and the store
    # service's delete_for_runs (tests/remote/test_service.py audits it).
    assert {action for action, _ in recorded} | {
        "prune",
        "copy_thread",
        "delete_runs",
    } == set(audit.ACTIONS)
    for event in events(origin="api"):
        operator = event.action in ("sweep", "hold", "release_hold")
        expected = users["sweeper"] if operator else users["alice"]
        assert event.user == expected and event.actor == expected.username
        assert event.remote_addr == "127.0.0.1"
        assert event.provider == "sqlite"
    rollback, fork, bulk = events(origin="api")[:3]
    assert rollback.detail["target"] == target
    assert rollback.detail["new_head"] in checkpoint_ids("alice-1")
    assert fork.detail["source_thread_id"] == "alice-1"
    assert fork.detail["source_checkpoint_id"] == target
    assert bulk.detail == {
        "supersteps": 1,
        "channels": ["topic"],
        "new_head": bulk.detail["new_head"],
    }
    assert events(action="sweep")[0].detail["sweep_run_id"] > 0


def test_a_refused_change_records_nothing(clients, threads):
    response = clients["bob"].post(
        "/api/threads/alice-1/rollback/", {"checkpoint_id": "nope"}, format="json"
    )
    assert response.status_code == 404
    assert events() == []


def test_admin_rollback_and_mark_write_the_trail_and_django_admin_log(saver, superuser, client):
    thread_id = run_chat(saver, "chat-audit", turns=2)
    client.force_login(superuser)
    target = Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("checkpoint_id")[1]
    head = Checkpoint.objects.filter(thread__thread_id=thread_id).order_by("-checkpoint_id")[0]
    response = client.post(
        f"/admin/checkpoints/checkpoint/{target.pk}/rollback/",
        {"post": "yes", "expected_head": head.checkpoint_id},
        follow=True,
    )
    assert response.status_code == 200
    thread = Thread.objects.get(thread_id=thread_id)
    response = client.post(
        "/admin/checkpoints/thread/",
        {"action": "mark_finished_selected", "_selected_action": [thread.pk]},
        follow=True,
    )
    assert response.status_code == 200
    recorded = [(e.action, e.origin, e.actor) for e in events()]
    assert recorded == [
        ("rollback", "admin", "root"),
        ("mark_finished", "admin", "root"),
    ]
    logged = list(LogEntry.objects.order_by("id"))
    assert [entry.object_id for entry in logged] == [str(thread.pk)] * 2
    assert logged[0].change_message.startswith("rollback: new_head=")
    assert f"target={target.checkpoint_id}" in logged[0].change_message
    # The admin's own "Recent actions" and the audit list both show them.
    assert "rollback chat-audit" in client.get("/admin/").content.decode()
    page = client.get("/admin/checkpoints/auditevent/").content.decode()
    assert "chat-audit" in page and "mark_finished" in page


def test_command_sweep_and_plain_python_calls_are_recorded(saver):
    thread_id = run_chat(saver, "py-audit", turns=1)
    head, *_rest, first = saver.list({"configurable": {"thread_id": thread_id}})
    TimeTravel(saver).rollback(thread_id, first.config["configurable"]["checkpoint_id"])
    mark_finished(saver, thread_id)
    call_command("sweep_checkpoints", "--json")
    call_command("sweep_checkpoints", "--dry-run")
    recorded = [(e.action, e.origin, e.actor) for e in events()]
    assert recorded == [
        ("rollback", "python", ""),
        ("mark_finished", "python", ""),
        ("sweep", "command", "manage.py sweep_checkpoints"),
    ]


async def test_async_time_travel_is_recorded(saver):
    from asgiref.sync import sync_to_async

    thread_id = await sync_to_async(run_chat)(saver, "async-audit", 1)
    first = [t async for t in saver.alist({"configurable": {"thread_id": thread_id}})][-1]
    snapshot = await TimeTravel(saver).afork(
        thread_id, first.config["configurable"]["checkpoint_id"], new_thread_id="async-fork"
    )
    assert snapshot.config["configurable"]["thread_id"] == "async-fork"
    recorded = await sync_to_async(lambda: [(e.action, e.thread_id) for e in events()])()
    assert recorded == [("fork", "async-fork")]


def test_an_unknown_action_is_refused_by_name():
    with pytest.raises(ValueError, match="audit action 'rolback' is not one of rollback, fork"):
        audit.record("rolback", thread_id="t")
    assert events() == []


def test_the_audit_list_filters_without_reading_distinct_values(saver, superuser, client):
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext
    from django.utils import timezone

    thread_id = run_chat(saver, "chat-filters", turns=2)
    first = list(saver.list({"configurable": {"thread_id": thread_id}}))[-1]
    TimeTravel(saver).rollback(thread_id, first.config["configurable"]["checkpoint_id"])
    with audit.acting(origin="command", name="ops"):
        mark_finished(saver, thread_id)
    AuditEvent.objects.filter(action="rollback").update(at=timezone.now() - timedelta(days=40))
    client.force_login(superuser)
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/admin/checkpoints/auditevent/").content.decode()
    assert not [q["sql"] for q in queries if "DISTINCT" in q["sql"].upper()]
    for choice in ("?action=declare_retention", "?origin=task", "?provider=redis", "Past 7 days"):
        assert choice in page, choice

    def listed(**query) -> str:
        response = client.get("/admin/checkpoints/auditevent/", query)
        assert response.status_code == 200
        return response.content.decode()

    assert "mark_finished" in listed(action="mark_finished")
    assert "0 audit events" in listed(action="fork")
    assert "1 audit event" in listed(origin="command")
    assert "0 audit events" in listed(provider="redis")
    # The date filter's own link, as an operator clicks it.
    week = re.search(r'<a href="\?([^"]+)">Past 7 days</a>', page)
    assert week, page
    response = client.get("/admin/checkpoints/auditevent/?" + html.unescape(week.group(1)))
    recent = response.content.decode()
    assert "1 audit event" in recent and ">mark_finished<" in recent
