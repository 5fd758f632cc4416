"""Retention extends the thread admin through its hook: the registered admin stays the
checkpoints app's, and the page, list, filter and actions show what retention adds."""

from __future__ import annotations

import pytest
from django.contrib import admin

from checkpoints.admin import ThreadAdmin
from checkpoints.models import FinishedMark, Thread
from tests.admin_fixtures import run_chat, staff_user

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = "/admin/checkpoints/thread/"
MARK = "mark_finished_selected"


@pytest.fixture
def viewer(transactional_db):
    return staff_user("viewer", "checkpoints.view_thread")


@pytest.fixture
def marker(transactional_db):
    return staff_user("marker", "checkpoints.view_thread", "checkpoints.change_thread")


def test_the_registered_thread_admin_is_the_checkpoints_one():
    assert type(admin.site._registry[Thread]) is ThreadAdmin


def test_the_thread_page_shows_retention_fields_after_the_declared_retention(client, viewer, saver):
    run_chat(saver, "ext-1", turns=1)
    client.force_login(viewer)
    page = client.get(f"{THREADS}{Thread.objects.get(thread_id='ext-1').pk}/change/")
    assert page.status_code == 200
    text = page.content.decode()
    order = [
        text.index(f"field-{name}")
        for name in ("declared_retention", "retention_in_force", "live_verdict", "finished_state")
    ]
    assert order == sorted(order), order
    assert "Retention in force" in text and "waiting " in text and "min after the mark" in text
    assert "Live-thread filters" in text and "no filter claims it" in text


def test_the_mark_action_is_offered_and_runs_only_with_its_permission(
    client, viewer, marker, saver
):
    run_chat(saver, "ext-2", turns=1)
    pk = Thread.objects.get(thread_id="ext-2").pk
    client.force_login(viewer)
    assert MARK not in client.get(THREADS).content.decode()
    refused = client.post(THREADS, {"action": MARK, "_selected_action": [pk]}, follow=True)
    assert refused.status_code == 200
    assert not FinishedMark.objects.filter(thread_id="ext-2").exists()

    client.force_login(marker)
    listed = client.get(THREADS).content.decode()
    assert MARK in listed and "Mark selected threads finished" in listed
    done = client.post(THREADS, {"action": MARK, "_selected_action": [pk]}, follow=True)
    assert "Marked 1 thread finished" in done.content.decode()
    assert FinishedMark.objects.filter(thread_id="ext-2").exists()


def test_the_park_filter_is_on_the_list(client, viewer, saver):
    run_chat(saver, "ext-3", turns=1)
    client.force_login(viewer)
    text = client.get(THREADS, {"park": "no"}).content.decode()
    assert "No unexpired park" in text and "ext-3" in text
    assert "ext-3" not in client.get(THREADS, {"park": "yes"}).content.decode()
