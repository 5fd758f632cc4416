"""Admin console for retention: the sweep page, sweep history, marks and parks."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client

from checkpoints.models import FinishedMark, Thread
from checkpoints.store.planning import utcnow
from retention.models import Park, SparedThread, SweepRun
from retention.runs import mark_finished
from tests.admin_fixtures import run_chat, run_paused, staff_user
from tests.retention_fixtures import batch_size

pytestmark = pytest.mark.django_db(transaction=True)

SWEEP = "/admin/retention/sweeprun/sweep/"
RUNS = "/admin/retention/sweeprun/"
THREADS = "/admin/checkpoints/thread/"


@pytest.fixture
def aged(saver):
    """Two threads to delete, two past a horizon but live, one fresh thread."""
    long_ago = utcnow() - timedelta(days=30)
    run_chat(saver, "done", turns=1)
    mark_finished(saver, "done", owner="ops", now=long_ago)
    run_chat(saver, "idle", turns=1)
    run_paused(saver, "paused")
    mark_finished(saver, "paused", owner="ops", now=long_ago)
    run_chat(saver, "parked", turns=1)
    Park.objects.create(
        thread_id="parked",
        deadline=utcnow() + timedelta(hours=1),
        created_at=utcnow(),
        owner="ops",
        provider="postgres",
    )
    run_chat(saver, "fresh", turns=1)
    Thread.objects.filter(thread_id__in=["idle", "parked"]).update(last_write_at=long_ago)
    return saver


@pytest.fixture
def admin_client(client, superuser):
    client.force_login(superuser)
    return client


def alive():
    return set(Thread.objects.values_list("thread_id", flat=True))


def test_dry_run_shows_what_would_go_and_what_is_spared(admin_client, aged):
    page = admin_client.get(SWEEP).content.decode()
    assert "Dry run: nothing has been deleted yet" in page
    assert "would delete <strong>2</strong> thread(s)" in page
    assert "<strong>1</strong> past the finished horizon" in page
    assert "<strong>1</strong> past the waiting horizon" in page
    assert "it would spare <strong>2</strong>" in page
    for thread_id in ("done", "idle"):
        pk = Thread.objects.get(thread_id=thread_id).pk
        assert f'href="{THREADS}{pk}/change/">{thread_id}</a>' in page
    spared = page[page.index('id="spared-threads"') :]
    paused_pk = Thread.objects.get(thread_id="paused").pk
    assert (
        f'<td><a href="{THREADS}{paused_pk}/change/">paused</a></td><td>finished</td>'
        "<td>interrupts</td>" in spared
    )
    assert ">parked</a></td><td>waiting</td><td>parks</td>" in spared
    assert 'name="post" value="yes"' in page
    assert alive() == {"done", "idle", "paused", "parked", "fresh"}
    assert not SweepRun.objects.exists()


def test_confirmed_sweep_deletes_records_and_lists_spared(admin_client, aged):
    response = admin_client.post(SWEEP, {"post": "yes"})
    page = response.content.decode()
    assert "The sweep ran" in page
    assert "<strong>2</strong> thread(s) deleted" in page
    assert "The sweep deleted 2 threads and spared 2." in page
    assert alive() == {"paused", "parked", "fresh"}
    run = SweepRun.objects.get()
    assert (run.swept_count, run.finished_swept, run.waiting_swept) == (2, 1, 1)
    assert run.triggered_by == "root"
    assert f'href="{RUNS}{run.pk}/change/"' in page
    assert sorted(SparedThread.objects.values_list("thread_id", "horizon", "owner")) == [
        ("parked", "waiting", "parks"),
        ("paused", "finished", "interrupts"),
    ]
    # A spared finished thread stays marked, so the next sweep asks again.
    assert FinishedMark.objects.filter(thread_id="paused").exists()
    detail = admin_client.get(f"{RUNS}{run.pk}/change/").content.decode()
    paused_pk = Thread.objects.get(thread_id="paused").pk
    assert f'href="{THREADS}{paused_pk}/change/">paused</a>' in detail
    assert "interrupts" in detail and "parks" in detail
    listing = admin_client.get(RUNS).content.decode()
    assert "Run checkpoint sweep" in listing
    assert "root" in listing


def test_sweep_needs_the_run_sweep_permission(client, aged):
    viewer = staff_user("viewer", "retention.view_sweeprun")
    client.force_login(viewer)
    assert "Run checkpoint sweep" not in client.get(RUNS).content.decode()
    assert client.get(SWEEP).status_code == 403
    assert client.post(SWEEP, {"post": "yes"}).status_code == 403
    assert "done" in alive()
    sweeper = staff_user("sweeper", "retention.view_sweeprun", "retention.run_sweep")
    client.force_login(sweeper)
    assert "Run checkpoint sweep" in client.get(RUNS).content.decode()
    assert client.post(SWEEP, {"post": "yes"}).status_code == 200
    assert "done" not in alive()
    assert SweepRun.objects.get().triggered_by == "sweeper"


def test_sweep_post_enforces_csrf(superuser, aged):
    client = Client(enforce_csrf_checks=True)
    client.force_login(superuser)
    assert client.post(SWEEP, {"post": "yes"}).status_code == 403
    assert "done" in alive()
    client.get(SWEEP)
    token = client.cookies["csrftoken"].value
    assert client.post(SWEEP, {"post": "yes", "csrfmiddlewaretoken": token}).status_code == 200
    assert "done" not in alive()


def test_get_with_post_yes_is_still_a_dry_run(admin_client, aged):
    page = admin_client.get(SWEEP, {"post": "yes"}).content.decode()
    assert "Dry run" in page
    assert "done" in alive()


def test_sweep_history_is_read_only(admin_client, aged):
    admin_client.post(SWEEP, {"post": "yes"})
    run = SweepRun.objects.get()
    assert admin_client.get(f"{RUNS}add/").status_code == 403
    assert admin_client.post(f"{RUNS}{run.pk}/delete/", {"post": "yes"}).status_code == 403
    assert 'name="_save"' not in admin_client.get(f"{RUNS}{run.pk}/change/").content.decode()


def test_finished_marks_page_lists_and_unmarks(admin_client, aged):
    page = admin_client.get("/admin/checkpoints/finishedmark/").content.decode()
    done_pk = Thread.objects.get(thread_id="done").pk
    assert f'href="{THREADS}{done_pk}/change/">done</a>' in page
    assert "ops" in page
    mark = FinishedMark.objects.get(thread_id="done")
    response = admin_client.post(
        "/admin/checkpoints/finishedmark/",
        {"action": "unmark_selected", "_selected_action": [mark.pk]},
        follow=True,
    )
    assert "Unmarked 1 thread." in response.content.decode()
    assert not FinishedMark.objects.filter(thread_id="done").exists()
    assert admin_client.get("/admin/checkpoints/finishedmark/add/").status_code == 403


def test_parks_page_and_thread_park_filter(admin_client, aged):
    page = admin_client.get("/admin/retention/park/").content.decode()
    assert ">parked</a>" in page and "postgres" in page
    parked = admin_client.get(THREADS, {"park": "yes"}).content.decode()
    assert ">parked<" in parked and ">fresh<" not in parked
    unparked = admin_client.get(THREADS, {"park": "no"}).content.decode()
    assert ">fresh<" in unparked and ">parked<" not in unparked
    verdict = admin_client.get(
        f"{THREADS}{Thread.objects.get(thread_id='parked').pk}/change/"
    ).content.decode()
    assert "claimed by the <code>parks</code> filter" in verdict


def test_a_fanned_out_run_shows_its_batches(admin_client, aged):
    from retention.fanout import fan_out, run_batch

    now = utcnow()
    with batch_size(2):
        planned = fan_out(aged, now=now, max_batches=None, triggered_by="fan-out test")
    for index, ids in enumerate(planned.batches):
        run_batch(aged, planned.run.pk, index, ids, now=now, worker="w1@host", final=True)
    listing = admin_client.get(RUNS).content.decode()
    assert "fan-out test" in listing
    detail = admin_client.get(f"{RUNS}{planned.run.pk}/change/").content.decode()
    assert "w1@host" in detail and "sweep batches" in detail.lower()
    assert detail.count("w1@host") == len(planned.batches)


def test_every_retention_page_writes_dates_in_the_console_format(admin_client, aged):
    import re

    from retention.holds import hold_thread

    admin_client.post(SWEEP, {"post": "yes"})
    run = SweepRun.objects.latest("started_at")
    hold_thread(
        aged, "fresh", reason="refund dispute", until=utcnow() + timedelta(days=2), by="ops"
    )
    moment = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC")
    for url in (
        RUNS,
        f"{RUNS}{run.pk}/change/",
        "/admin/checkpoints/finishedmark/",
        "/admin/retention/park/",
        "/admin/retention/hold/",
        "/admin/checkpoints/auditevent/",
    ):
        page = admin_client.get(url).content.decode()
        assert moment.search(page), url
        # Django's locale format ("Dec. 4, 2026, 3:43 p.m.") appears nowhere.
        assert not re.search(r"\b[ap]\.m\.", page), url
