"""Whose a finish mark is: `retention.runs.mark_owner` decides it once, for the admin and
the API alike: the thread's owner, else (a store or thread with no owner) the user marking."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from checkpoints.models import FinishedMark, Thread
from retention.runs import mark_finished_by, mark_owner
from tests.admin_fixtures import run_chat

pytestmark = pytest.mark.django_db(transaction=True)
THREADS = "/admin/checkpoints/thread/"


@pytest.fixture
def threads(saver):
    """ "owned" (bob's) and "unowned"."""
    run_chat(saver, "owned", turns=1)
    run_chat(saver, "unowned", turns=1)
    Thread.objects.filter(thread_id="owned").update(owner=User.objects.create_user("bob"))


def test_the_threads_owner_else_the_user_marking(saver, admin_user, threads):
    assert mark_owner(saver, "owned", admin_user) == "bob"
    assert mark_owner(saver, "unowned", admin_user) == "admin"
    assert mark_finished_by(saver, "owned", admin_user).owner == "bob"


def test_a_store_recording_no_owners_names_the_user_marking(admin_user):
    from checkpoints.store.memory import MemorySaver

    assert mark_owner(MemorySaver(), "anything", admin_user) == "admin"


def test_the_admin_and_the_api_mark_alike(admin_client, admin_user, threads):
    for thread_id in ("owned", "unowned"):
        pk = Thread.objects.get(thread_id=thread_id).pk
        admin_client.post(f"{THREADS}{pk}/mark/")
    from_admin = dict(FinishedMark.objects.values_list("thread_id", "owner"))
    FinishedMark.objects.all().delete()
    api = APIClient()
    api.force_authenticate(admin_user)
    for thread_id in ("owned", "unowned"):
        assert api.post(f"/api/threads/{thread_id}/finish/").status_code == 200
    from_api = dict(FinishedMark.objects.values_list("thread_id", "owner"))
    assert from_admin == from_api == {"owned": "bob", "unowned": "admin"}
