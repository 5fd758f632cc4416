"""Stored bytes that cannot be read fail with one specific error naming where they are,
in the saver, the API (409, never 500) and the admin (a panel, never a crash)."""

from __future__ import annotations

import pytest

from checkpoints.errors import UndecryptableValue, UnreadableValue
from checkpoints.models import Checkpoint, PendingWrite
from checkpoints.store.redis.keys import pack, unpack
from tests.reliability_fixtures import put_value
from tests.store_helpers import (
    IN_PROCESS,
    backing_saver,
    corrupt_values,
)

PICKLED = ("pickle", b"\x80\x04K\x01.")


@pytest.mark.parametrize(
    ("typed", "error", "reason"),
    [
        (PICKLED, UnreadableValue, "pickle"),
        (("msgpack", b"\xc1\xc1"), UnreadableValue, "cannot decode"),
        (("msgpack+aesgcm", b"\x01" * 40), UndecryptableValue, "CHECKPOINTS_ENCRYPTION_KEYS"),
    ],
)
def test_a_corrupt_value_names_thread_checkpoint_and_channel(store, typed, error, reason):
    config = put_value(store, "hurt", None, {"secret": "value"})
    checkpoint_id = config["configurable"]["checkpoint_id"]
    corrupt_values(store, "hurt", typed)
    if store.provider == "memory" and error is UndecryptableValue:
        # The memory store seals nothing: a sealed tag there is simply an unknown type.
        error, reason = UnreadableValue, "msgpack+aesgcm"
    with pytest.raises(error) as failure:
        store.get_tuple({"configurable": {"thread_id": "hurt"}})
    message = failure.value.message
    assert f"checkpoint {checkpoint_id!r} in thread 'hurt'" in message
    assert "channel 'secret'" in message and reason in message
    assert failure.value.where == {
        "thread_id": "hurt",
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "part": "channel 'secret'",
    }
    with pytest.raises(error):
        list(store.list({"configurable": {"thread_id": "hurt"}}))


@pytest.mark.parametrize("provider", ["sqlite", "postgres"])
def test_a_corrupt_body_or_write_names_its_part(store):
    config = put_value(store, "hurt", None, {"secret": "value"})
    store.put_writes(config, [("secret", "next")], "task-9")
    PendingWrite.objects.using(backing_saver(store).db_alias).update(type="msgpack", blob=b"\xc1")
    with pytest.raises(UnreadableValue, match="pending write 'secret' of task 'task-9'"):
        store.get_tuple(config)
    Checkpoint.objects.using(backing_saver(store).db_alias).update(checkpoint=b"\xc1 not a body")
    with pytest.raises(UnreadableValue, match="cannot decode the body of checkpoint"):
        store.get_tuple(config)


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("typed", [PICKLED, ("msgpack+aesgcm", b"\x01" * 40)])
def test_the_api_answers_409_naming_the_place(clients, threads, typed):
    from checkpoints.store.registry import get_saver

    corrupt_values(get_saver(), "alice-1", typed)
    for path in ("state/", "history/?select=values"):
        response = clients["alice"].get(f"/api/threads/alice-1/{path}")
        assert response.status_code == 409, response.content
        error = response.json()["error"]
        assert error["code"] in ("codec_error", "encryption_error")
        assert "in thread 'alice-1'" in error["message"] and "channel '" in error["message"]


@pytest.mark.django_db(transaction=True)
def test_history_without_values_decodes_none_of_them(clients, threads):
    """A value history does not show is not decoded either: a corrupt one does not fail it."""
    from checkpoints.store.registry import get_saver

    corrupt_values(get_saver(), "alice-1", PICKLED, channel="messages")
    without = clients["alice"].get("/api/threads/alice-1/history/")
    assert without.status_code == 200, without.content
    assert without.json()["results"] and "values" not in without.json()["results"][0]
    assert clients["alice"].get("/api/threads/alice-1/history/?select=values").status_code == 409


# values_unread() is a context of the process that reads the rows: a worker's client
# decodes what the service sends, outside it.
@pytest.mark.parametrize("provider", IN_PROCESS)
def test_reads_inside_values_unread_leave_the_graphs_values_undecoded(store):
    from checkpoints.store.projection import NOT_READ, values_unread

    config = put_value(store, "skim", None, {"secret": "value", "branch:to:x": "go"})
    corrupt_values(store, "skim", PICKLED, channel="secret")
    latest = {"configurable": {"thread_id": "skim"}}
    with values_unread():
        for tup in (store.get_tuple(latest), store.get_tuple(config), *store.list(latest)):
            values = tup.checkpoint["channel_values"]
            assert values["secret"] is NOT_READ
            assert values["branch:to:x"] == "go"  # LangGraph's own channels are still read
    with pytest.raises(UnreadableValue):
        store.get_tuple(latest)


@pytest.mark.django_db(transaction=True)
def test_the_admin_shows_a_panel_not_a_crash(admin_client, threads):
    from checkpoints.store.registry import get_saver

    corrupt_values(get_saver(), "alice-1", PICKLED)
    row = Checkpoint.objects.filter(thread__thread_id="alice-1").order_by("-checkpoint_id")[0]
    page = admin_client.get(f"/admin/checkpoints/checkpoint/{row.pk}/change/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Cannot decode this checkpoint" in body and "codec_error" in body
    assert "in thread &#x27;alice-1&#x27;" in body
    changes = admin_client.get(f"/admin/checkpoints/checkpoint/{row.pk}/changes/", follow=True)
    assert changes.status_code == 200
    assert f"Cannot show what checkpoint {row.checkpoint_id} changed" in changes.content.decode()
    thread = admin_client.get(f"/admin/checkpoints/thread/{row.thread_id}/change/")
    assert thread.status_code == 200
    assert admin_client.get("/admin/checkpoints/thread/").status_code == 200


def test_unpack_round_trip_helper():
    assert unpack(pack(*PICKLED)) == [b"pickle", PICKLED[1]]
