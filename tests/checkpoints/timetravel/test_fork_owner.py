"""Whose a fork is: `TimeTravel.fork(owner=...)` decides it once, for the admin and the API
alike: the user who forks it, whoever owns the source; a fork made by code is unowned."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from rest_framework.test import APIClient

from checkpoints.models import Checkpoint, Thread
from checkpoints.signals import thread_forked
from checkpoints.timetravel import TimeTravel
from tests.admin_fixtures import run_chat

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def source(saver):
    """The head checkpoint of thread "src", owned by bob."""
    run_chat(saver, "src", turns=1)
    bob = User.objects.create_user("bob")
    Thread.objects.filter(thread_id="src").update(owner=bob)
    return Checkpoint.objects.filter(thread__thread_id="src").order_by("-checkpoint_id").first()


def owner_of(thread_id: str):
    return Thread.objects.select_related("owner").get(thread_id=thread_id).owner


def test_the_fork_belongs_to_the_user_who_forks_it(saver, source):
    alice = User.objects.create_user("alice")
    seen = []

    def receiver(new_thread_id, **kwargs):
        seen.append(owner_of(new_thread_id))

    thread_forked.connect(receiver, dispatch_uid="test_fork_owner")
    try:
        TimeTravel(saver).fork("src", source.checkpoint_id, "alices", owner=alice)
    finally:
        thread_forked.disconnect(dispatch_uid="test_fork_owner")
    assert owner_of("alices") == alice
    # Recorded before the fork is announced: receivers see whose it is.
    assert seen == [alice]
    TimeTravel(saver).fork("src", source.checkpoint_id, "by-code")
    assert owner_of("by-code") is None


async def test_the_async_fork_records_the_owner_too(saver, source):
    from asgiref.sync import sync_to_async

    alice = await sync_to_async(User.objects.create_user)("alice")
    await TimeTravel(saver).afork("src", source.checkpoint_id, "alices", owner=alice)
    assert await sync_to_async(owner_of)("alices") == alice


def test_the_admin_and_the_api_fork_alike(admin_client, admin_user, saver, source):
    admin_client.post(
        f"/admin/checkpoints/checkpoint/{source.pk}/fork/",
        {"post": "yes", "new_thread_id": "from-admin", "expected_head": source.checkpoint_id},
    )
    assert owner_of("from-admin") == admin_user
    api = APIClient()
    api.force_authenticate(admin_user)
    response = api.post(
        "/api/threads/src/fork/",
        {"checkpoint_id": source.checkpoint_id, "new_thread_id": "from-api"},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert owner_of("from-api") == admin_user
