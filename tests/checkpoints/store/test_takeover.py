"""No thread takeover: a fork or copy never lands on an id that exists in any form.

Matrix: every way an id can exist (checkpoints in the root namespace or only in a
subgraph's, pending writes only, a finished mark, a declared retention, a thread record,
a park) × every API role, and the same forms × every provider through the saver's
`copy_thread` and TimeTravel's fork. A refusal is 409 `thread_exists` and changes nothing.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.errors import ThreadExists
from checkpoints.models import Thread
from checkpoints.store.planning import utcnow
from checkpoints.store.planning.retention import ThreadRetention
from checkpoints.store.registry import get_saver
from checkpoints.timetravel import TimeTravel
from retention.models import Park
from tests.reliability_fixtures import put_value
from tests.store_helpers import backing_saver

pytestmark = pytest.mark.django_db(transaction=True)


def _sub_namespace(saver, thread_id):
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": "child:1"}}
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"secret": "in a subgraph"}
    version = saver.get_next_version(None, None)
    checkpoint["channel_versions"] = {"secret": version}
    saver.put(config, checkpoint, {"source": "loop", "step": 0}, {"secret": version})


def _writes_only(saver, thread_id):
    config = {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": "",
            "checkpoint_id": str(uuid.uuid4()),
        }
    }
    saver.put_writes(config, [("secret", "pending")], "task-1")


def _root(saver, thread_id):
    put_value(saver, thread_id, None, {"secret": "root"})


def _mark(saver, thread_id):
    saver = backing_saver(saver)
    saver.mark_finished(thread_id, utcnow() + timedelta(days=1), "victim")


def _retention(saver, thread_id):
    saver = backing_saver(saver)
    saver.set_thread_retention(thread_id, ThreadRetention(waiting_minutes=60))


def _park(saver, thread_id):
    now = utcnow()
    Park.objects.create(
        thread_id=thread_id,
        deadline=now + timedelta(hours=1),
        created_at=now,
        provider=saver.provider,
    )


def _thread_record(saver, thread_id):
    saver = backing_saver(saver)
    Thread.objects.using(saver.db_alias).create(
        thread_id=thread_id, created_at=utcnow(), last_write_at=utcnow()
    )


FORMS = {
    "root checkpoints": _root,
    "a subgraph namespace only": _sub_namespace,
    "pending writes only": _writes_only,
    "a finished mark": _mark,
    "a declared retention": _retention,
}
ORM_FORMS = {"a thread record": _thread_record}
# Parks exist only on stores that can park (postgres, redis).
PARK_FORMS = {"a park": _park}


def holdings(saver, thread_id):
    saver = backing_saver(saver)
    return (
        saver.thread_holdings(thread_id),
        saver.finished_mark(thread_id),
        saver.thread_retention(thread_id),
        Park.objects.filter(thread_id=thread_id).count(),
    )


def forms_for(saver):
    saver = backing_saver(saver)
    return {
        **FORMS,
        **(ORM_FORMS if saver.records_owners else {}),
        **(PARK_FORMS if saver.can_park else {}),
    }


def test_copy_and_fork_refuse_every_existing_form_on_every_provider(store):
    put_value(store, "source", None, {"mine": 1})
    source_id = store.get_tuple({"configurable": {"thread_id": "source"}}).config["configurable"][
        "checkpoint_id"
    ]
    for form, make in forms_for(store).items():
        victim = f"victim-{form}"
        make(store, victim)
        before = holdings(store, victim)
        with pytest.raises(ThreadExists, match="already exists"):
            store.copy_thread("source", victim)
        with pytest.raises(ThreadExists, match="already exists"):
            TimeTravel(backing_saver(store)).fork("source", source_id, new_thread_id=victim)
        assert holdings(store, victim) == before, form


async def test_async_copy_refuses_too(store):
    from asgiref.sync import sync_to_async

    await sync_to_async(put_value, thread_sensitive=False)(store, "src", None, {"a": 1})
    await sync_to_async(_mark, thread_sensitive=False)(store, "marked")
    with pytest.raises(ThreadExists):
        await store.acopy_thread("src", "marked")
    assert await sync_to_async(backing_saver(store).finished_mark, thread_sensitive=False)("marked")


def test_a_new_id_still_forks(store):
    put_value(store, "source", None, {"mine": 1})
    head = store.get_tuple({"configurable": {"thread_id": "source"}})
    snapshot = TimeTravel(backing_saver(store)).fork(
        "source", head.config["configurable"]["checkpoint_id"], new_thread_id="brand-new"
    )
    assert snapshot.config["configurable"]["thread_id"] == "brand-new"
    store.copy_thread("source", "another-new")
    assert store.get_tuple({"configurable": {"thread_id": "another-new"}}) is not None


API_FORMS = {**FORMS, **ORM_FORMS}


@pytest.mark.parametrize("role", ["alice", "bob", "staff"])
@pytest.mark.parametrize("form", sorted(API_FORMS))
def test_api_fork_onto_an_existing_id_is_409_and_changes_nothing(
    clients, users, threads, role, form
):
    saver = get_saver()
    victim = "victims-thread"
    API_FORMS[form](saver, victim)
    Thread.objects.filter(thread_id=victim).update(owner=users["alice"])
    source = {"alice": "alice-1", "bob": "bob-1", "staff": "bob-1"}[role]
    head = saver.get_tuple({"configurable": {"thread_id": source}})
    before = holdings(saver, victim)
    owner_before = list(Thread.objects.filter(thread_id=victim).values_list("owner", flat=True))
    response = clients[role].post(
        f"/api/threads/{source}/fork/",
        {"checkpoint_id": head.config["configurable"]["checkpoint_id"], "new_thread_id": victim},
        format="json",
    )
    assert response.status_code == 409, response.content
    error = response.json()["error"]
    assert error["code"] == "thread_exists" and error["field"] == "new_thread_id"
    assert victim in error["message"]
    assert holdings(saver, victim) == before
    assert list(Thread.objects.filter(thread_id=victim).values_list("owner", flat=True)) == (
        owner_before
    )
