"""The retention API: finish/unfinish, declared retention, the sweep and its history."""

from __future__ import annotations

from datetime import timedelta

import pytest

from checkpoints.store.planning import utcnow
from checkpoints.store.registry import get_saver
from retention.models import SweepRun
from retention.runs import mark_finished
from retention.sweep import register_live_thread_filter, unregister_live_thread_filter
from tests.api_fixtures import assert_error, listed, url

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")


# --- finish ---------------------------------------------------------------------------


def test_owner_marks_and_unmarks_finished(clients, threads):
    before = utcnow()
    response = clients["alice"].post(url("alice-1", "finish"))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["thread_id"] == "alice-1" and body["finished"] is True
    mark = get_saver().finished_mark("alice-1")
    assert mark is not None and mark.owner == "alice"
    # Platform finished retention (1440 minutes) from the mark.
    assert before + timedelta(minutes=1440) <= mark.due_at <= utcnow() + timedelta(minutes=1440)
    assert clients["alice"].get(url("alice-1")).json()["state"] == "finished"
    response = clients["alice"].delete(url("alice-1", "finish"))
    assert response.status_code == 200 and response.json()["finished"] is False
    assert get_saver().finished_mark("alice-1") is None
    assert clients["alice"].get(url("alice-1")).json()["state"] == "waiting"


def test_finish_on_another_users_thread_is_404(clients, threads):
    assert_error(clients["bob"].post(url("alice-1", "finish")), 404, "thread_not_found")
    assert_error(clients["bob"].delete(url("alice-1", "finish")), 404, "thread_not_found")
    assert get_saver().finished_mark("alice-1") is None


def test_staff_finishing_records_the_threads_owner(clients, threads):
    assert clients["staff"].post(url("bob-1", "finish")).status_code == 200
    assert get_saver().finished_mark("bob-1").owner == "bob"


# --- declared retention ---------------------------------------------------------------


def test_declare_shorter_retention(clients, threads):
    response = clients["alice"].post(
        url("alice-1", "retention"), {"waiting_minutes": 60, "finished_minutes": 30}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json() == {
        "thread_id": "alice-1",
        "declared_waiting_minutes": 60,
        "declared_finished_minutes": 30,
        "waiting_minutes": 60,
        "finished_minutes": 30,
    }
    detail = clients["alice"].get(url("alice-1")).json()
    assert (detail["waiting_minutes"], detail["finished_minutes"]) == (60, 30)
    # Leaving one out falls back to the platform's value, capped by the declared waiting.
    response = clients["alice"].post(
        url("alice-1", "retention"), {"waiting_minutes": 120}, format="json"
    )
    assert response.json()["declared_finished_minutes"] is None
    assert response.json()["finished_minutes"] == 120


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"waiting_minutes": 10**7}, "retention_too_long", "waiting_minutes"),
        ({"finished_minutes": 10**6}, "retention_too_long", "finished_minutes"),
        ({"waiting_minutes": 10, "finished_minutes": 20}, "retention_too_long", "finished_minutes"),
        ({"waiting_minutes": 0}, None, "waiting_minutes"),
        ({"finished_minutes": "soon"}, None, "finished_minutes"),
    ],
)
def test_longer_or_bad_retention_is_400_and_changes_nothing(clients, threads, body, code, field):
    response = clients["alice"].post(url("alice-1", "retention"), body, format="json")
    assert_error(response, 400, code, field)
    detail = clients["alice"].get(url("alice-1")).json()
    assert (detail["waiting_minutes"], detail["finished_minutes"]) == (None, None)


def test_retention_on_another_users_thread_is_404(clients, threads):
    response = clients["bob"].post(
        url("alice-1", "retention"), {"waiting_minutes": 5}, format="json"
    )
    assert_error(response, 404, "thread_not_found")


# --- sweep ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["alice", "staff"])
def test_sweep_needs_staff_with_permission(clients, threads, role):
    mark_finished(get_saver(), "alice-1", now=utcnow() - timedelta(days=3))
    assert_error(clients[role].post("/api/checkpoints/sweep/", {}, format="json"), 403)
    assert_error(clients[role].get("/api/checkpoints/sweeps/"), 403)
    assert "alice-1" in listed(clients["alice"])
    assert SweepRun.objects.count() == 0


def test_sweep_dry_run_then_real_run(clients, threads):
    mark_finished(get_saver(), "alice-1", now=utcnow() - timedelta(days=3))
    dry = clients["sweeper"].post("/api/checkpoints/sweep/", {"dry_run": True}, format="json")
    assert dry.status_code == 200, dry.content
    result = dry.json()
    assert result["dry_run"] is True and result["finished_swept"] == 1
    assert result["provider"] == "sqlite" and result["sweep_run_id"] is None
    assert "alice-1" in listed(clients["alice"])
    real = clients["sweeper"].post("/api/checkpoints/sweep/", {}, format="json").json()
    assert real["dry_run"] is False and real["swept_count"] == 1
    assert listed(clients["alice"]) == {"a/b c?%#ü"}
    assert get_saver().get_tuple({"configurable": {"thread_id": "alice-1"}}) is None
    run = SweepRun.objects.get(pk=real["sweep_run_id"])
    assert run.triggered_by == "api:sweeper"


def test_sweep_history_lists_spared_threads(clients, threads):
    mark_finished(get_saver(), "alice-1", now=utcnow() - timedelta(days=3))
    mark_finished(get_saver(), "bob-1", now=utcnow() - timedelta(days=3))
    register_live_thread_filter("api-test", lambda ids: {"bob-1"} & set(ids))
    try:
        result = clients["sweeper"].post("/api/checkpoints/sweep/", {}, format="json").json()
    finally:
        unregister_live_thread_filter("api-test")
    assert result["swept_count"] == 1
    assert result["spared"] == [
        {
            "thread_id": "bob-1",
            "horizon": "finished",
            "owner": "api-test",
            "reason": "live-thread filter 'api-test' claims it",
        }
    ]
    history = clients["sweeper"].get("/api/checkpoints/sweeps/")
    assert history.status_code == 200
    runs = history.json()["results"]
    assert len(runs) == 1
    assert runs[0]["id"] == result["sweep_run_id"]
    assert runs[0]["spared"] == result["spared"]
    assert runs[0]["swept_count"] == 1


def test_sweep_bad_body_is_400(clients, threads):
    response = clients["sweeper"].post(
        "/api/checkpoints/sweep/", {"dry_run": "maybe"}, format="json"
    )
    assert_error(response, 400, field="dry_run")
