"""`/store/v1/` on a live port: owners, token kinds, bad bodies, limits, audit, throttle.

Every refusal is a typed 4xx JSON naming what was wrong, with nothing stored.
"""

from __future__ import annotations

import threading

import httpx
import ormsgpack
import pytest
from django.contrib.auth.models import Permission, User
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.audit import ACTIONS
from checkpoints.errors import (
    InvalidCheckpointInput,
    MissingPermission,
    ThreadNotFound,
    ValueTooLarge,
)
from checkpoints.models import AuditEvent, Checkpoint, PendingWrite, Thread
from checkpoints.remote import RemoteSaver, RemoteStoreError
from checkpoints.remote.wire import CONTENT_TYPE, pack
from tests.store_helpers import config_for, put_chain, remote_saver, service_token

pytestmark = pytest.mark.django_db(transaction=True)


def user(name: str, *perms: str, staff: bool = False) -> User:
    made = User.objects.create_user(name, password="pw", is_staff=staff)
    for perm in perms:
        made.user_permissions.add(Permission.objects.get(codename=perm.split(".")[1]))
    return User.objects.get(pk=made.pk)  # a fresh permission cache


def as_user(request, who: User) -> RemoteSaver:
    return remote_saver(request, user=who)


def owner_of(thread_id: str) -> str | None:
    row = Thread.objects.filter(thread_id=thread_id).select_related("owner").first()
    return row.owner.username if row and row.owner else None


def stored(thread_id: str) -> tuple[int, int]:
    return (
        Checkpoint.objects.filter(thread__thread_id=thread_id).count(),
        PendingWrite.objects.filter(thread__thread_id=thread_id).count(),
    )


def checkpoint_body(thread_id: str, values: dict | None = None, **extra) -> dict:
    checkpoint = empty_checkpoint()
    values = values or {"a": 1}
    versions = {c: f"{1:032}.0" for c in values}
    checkpoint["channel_versions"] = versions
    body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    body["channel_values"] = {c: ["msgpack", ormsgpack.packb(v)] for c, v in values.items()}
    return {
        "config": {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
        "checkpoint": body,
        "metadata": ["msgpack", ormsgpack.packb({"source": "loop", "step": 1})],
        "new_versions": versions,
        **extra,
    }


@pytest.fixture
def raw(request, live_server):
    """POST one call with a superuser's token; the httpx response."""
    admin = User.objects.create_superuser("raw-admin", "", "pw")
    token = service_token(admin)

    def post(call: str, content: bytes, **headers: str) -> httpx.Response:
        headers = {"content-type": CONTENT_TYPE, "x-api-key": token, **headers}
        return httpx.post(f"{live_server.url}/store/v1/{call}", content=content, headers=headers)

    return post


def refused(response: httpx.Response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code, error
    return error


# -- owners ---------------------------------------------------------------------------------------
def test_another_owners_thread_is_404_on_read_and_write_and_nothing_is_taken_over(request):
    alice, bob = as_user(request, user("alice")), as_user(request, user("bob"))
    config = put_chain(alice, "alice-thread", {"a": "mine"}, steps=2)
    before = stored("alice-thread")
    with pytest.raises(ThreadNotFound):
        bob.get_tuple(config_for("alice-thread"))
    with pytest.raises(ThreadNotFound):
        list(bob.list(config_for("alice-thread")))
    with pytest.raises(ThreadNotFound):
        put_chain(bob, "alice-thread", {"a": "bob's"})
    with pytest.raises(ThreadNotFound):
        bob.put_writes(config, [("a", "bob's")], "task")
    with pytest.raises(ThreadNotFound):
        bob.delete_thread("alice-thread")
    assert stored("alice-thread") == before
    assert owner_of("alice-thread") == "alice"
    assert alice.get_tuple(config_for("alice-thread")).checkpoint["channel_values"] == {"a": "mine"}
    # A list across threads shows bob none of alice's.
    assert list(bob.list(None)) == []
    assert {t.config["configurable"]["thread_id"] for t in alice.list(None)} == {"alice-thread"}


def test_a_foreign_checkpoint_id_reads_nothing_of_the_other_thread(request):
    alice, bob = as_user(request, user("alice")), as_user(request, user("bob"))
    theirs = put_chain(alice, "alice-thread", {"a": "secret"})
    put_chain(bob, "bob-thread", {"a": "bob's"})
    foreign = config_for("bob-thread", theirs["configurable"]["checkpoint_id"], ns="")
    assert bob.get_tuple(foreign) is None
    with pytest.raises(ThreadNotFound):
        bob.get_tuple(config_for("alice-thread", theirs["configurable"]["checkpoint_id"]))


def test_put_writes_may_come_first_and_claims_the_thread(request):
    alice, bob = as_user(request, user("alice")), as_user(request, user("bob"))
    bob.put_writes(config_for("fresh", "1ef", ns=""), [("a", 1)], "task")
    assert owner_of("fresh") == "bob"
    with pytest.raises(ThreadNotFound):
        put_chain(alice, "fresh", {"a": 2})
    assert stored("fresh") == (0, 1)


def test_two_first_writers_of_one_new_thread_one_owner_wins(request):
    savers = {name: as_user(request, user(name)) for name in ("alice", "bob")}
    outcome: dict[str, str] = {}
    start = threading.Barrier(2)

    def write(name: str) -> None:
        start.wait()
        try:
            put_chain(savers[name], "contested", {"a": name}, steps=3)
            outcome[name] = "wrote"
        except ThreadNotFound:
            outcome[name] = "refused"

    workers = [threading.Thread(target=write, args=(n,)) for n in savers]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    winner = owner_of("contested")
    assert outcome[winner] == "wrote"
    assert sorted(outcome.values()) == ["refused", "wrote"]
    assert stored("contested") == (3, 0)
    latest = savers[winner].get_tuple(config_for("contested"))
    assert latest.checkpoint["channel_values"] == {"a": winner}


def test_user_id_names_the_owner_only_with_the_permission(request):
    alice_user = user("alice")
    alice = as_user(request, alice_user)
    config = config_for("t1", ns="", user_id="bob")
    checkpoint = empty_checkpoint()
    alice.put(config, checkpoint, {"source": "input", "step": -1}, {})
    assert owner_of("t1") == "alice"
    assert "user_id" not in alice.get_tuple(config_for("t1")).metadata

    worker = as_user(request, user("worker", "checkpoints.store_name_owner"))
    config = config_for("t2", ns="", user_id="alice")
    worker.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert owner_of("t2") == "alice"
    assert alice.get_tuple(config_for("t2")) is not None
    with pytest.raises(InvalidCheckpointInput):
        worker.put(config_for("t3", ns="", user_id="nobody"), empty_checkpoint(), {}, {})
    assert owner_of("t3") is None and not Thread.objects.filter(thread_id="t3").exists()


def test_a_worker_writes_any_thread_but_deletes_none(request):
    alice = as_user(request, user("alice"))
    worker = as_user(request, user("worker", "checkpoints.store_worker_write"))
    config = put_chain(alice, "alice-thread", {"a": 1})
    worker.put_writes(config, [("a", 2)], "task")
    assert worker.get_tuple(config_for("alice-thread")).pending_writes == [("task", "a", 2)]
    with pytest.raises(MissingPermission):
        worker.delete_thread("alice-thread")
    with pytest.raises(MissingPermission):
        worker.delete_for_runs(["run"])
    with pytest.raises(MissingPermission):
        worker.prune(["alice-thread"])
    assert stored("alice-thread") == (1, 1)
    assert owner_of("alice-thread") == "alice"
    # The owner itself deletes its own thread; the delete is audited as the API's.
    alice.delete_thread("alice-thread")
    assert stored("alice-thread") == (0, 0)
    event = AuditEvent.objects.get(action="delete_thread", thread_id="alice-thread")
    assert (event.origin, event.user.username) == ("api", "alice")


def test_destructive_calls_are_audited(request):
    saver = remote_saver(request)
    put_chain(saver, "t1", {"a": 1}, steps=3)
    assert saver.prune(["t1"]) == 2
    saver.copy_thread("t1", "t2")
    saver.delete_for_runs(["no-such-run"])
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"prune", "copy_thread", "delete_runs"} <= actions <= set(ACTIONS)


def test_the_store_extras_a_worker_uses(request):
    alice = as_user(request, user("alice"))
    put_chain(alice, "t1", {"a": 1})
    declared = alice.declare_retention("t1", waiting_minutes=60, finished_minutes=30)
    assert declared == {"waiting_minutes": 60, "finished_minutes": 30}
    due = alice.mark_finished("t1")
    marked = Thread.objects.get(thread_id="t1")
    assert marked.finished_minutes == 30
    assert due.tzinfo is not None
    assert alice.unmark_finished("t1") is True
    assert alice.unmark_finished("t1") is False
    bob = as_user(request, user("bob"))
    with pytest.raises(ThreadNotFound):
        bob.mark_finished("t1")


# -- bad input ------------------------------------------------------------------------------------
def test_malformed_truncated_and_trailing_bodies_are_400_and_store_nothing(raw):
    good = pack(checkpoint_body("t"))
    assert raw("put", good).status_code == 200
    Thread.objects.all().delete()
    refused(raw("put", b"\xc1not msgpack"), 400, "malformed_body")
    refused(raw("put", good[:-3]), 400, "malformed_body")
    refused(raw("put", good + b"\x01"), 400, "malformed_body")
    refused(raw("put", pack([1, 2])), 400, "malformed_body")
    refused(raw("put", b""), 400, "malformed_body")
    refused(raw("put", good, **{"content-type": "application/json"}), 415, "unsupported_media_type")
    refused(raw("put", good, **{"content-encoding": "gzip"}), 415, "unsupported_media_type")
    assert not Thread.objects.exists()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (["pickle", b"\x80\x04N."], "type"),
        (["msgpack+zstd", b"\x28\xb5\x2f\xfd"], "type"),
        (["msgpack", ormsgpack.packb({"a": 1}) + b"\x00"], "trailing"),
        (["msgpack", b"\xa3\xed\xa0\x80"], "surrogate"),  # a lone surrogate's UTF-8 form
        (["msgpack", b"\xd4\x63\x00"], "ext code"),  # ext 99, which LangGraph never writes
        (["msgpack", b"\x92\x01"], "truncated"),
        ("not a pair", "pair"),
    ],
)
def test_a_value_the_store_would_not_write_is_refused(raw, value, why):
    body = checkpoint_body("t")
    body["checkpoint"]["channel_values"]["a"] = value
    error = refused(raw("put", pack(body)), 400, error_code(why))
    assert "channel 'a'" in error["message"] or "channel_values" in error["message"]
    assert not Thread.objects.exists()


def error_code(why: str) -> str:
    return "malformed_body" if why in ("type", "pair") else "codec_error"


def test_oversized_bodies_and_values_are_413(raw, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "MAX_CHECKPOINT_BYTES": 1000}
    body = checkpoint_body("t", {"a": "x" * 900, "b": "y" * 900})
    error = refused(raw("put", pack(body)), 413, "value_too_large")
    assert "MAX_CHECKPOINT_BYTES" in error["message"]
    huge = pack(checkpoint_body("t", {"a": "x" * 2_000_000}))
    refused(raw("put", huge), 413, "request_too_large")
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "CODEC_MAX_BYTES": 100}
    refused(raw("put", pack(checkpoint_body("t", {"a": "z" * 200}))), 413, "value_too_large")
    assert not Thread.objects.exists()


def test_a_value_whose_read_would_build_too_much_is_refused(raw, settings):
    """A bomb: a few bytes of msgpack that unpack into many objects (empty maps)."""
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "CODEC_MAX_BYTES": 4096}
    bomb = b"\xdc" + (3000).to_bytes(2, "big") + b"\x80" * 3000
    body = checkpoint_body("t")
    body["checkpoint"]["channel_values"]["a"] = ["msgpack", bomb]
    error = refused(raw("put", pack(body)), 400, "codec_error")
    assert "objects" in error["message"]
    assert not Thread.objects.exists()


def test_no_token_a_wrong_token_and_an_unknown_call(live_server, raw):
    url = f"{live_server.url}/store/v1/info"
    refused(
        httpx.post(url, content=pack({}), headers={"content-type": CONTENT_TYPE}),
        401,
        "not_authenticated",
    )
    wrong = {"content-type": CONTENT_TYPE, "x-api-key": "nope"}
    refused(httpx.post(url, content=pack({}), headers=wrong), 401, "authentication_failed")
    refused(raw("no_such_call", pack({})), 404, "not_found")
    assert raw("info", pack({})).status_code == 200


def test_calls_are_throttled_per_token(raw, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "STORE_SERVICE_RATE": "2/min"}
    assert raw("info", pack({})).status_code == 200
    assert raw("info", pack({})).status_code == 200
    response = refused(raw("info", pack({})), 429, "throttled")
    assert response


def test_the_client_names_a_refusal_with_the_stores_own_error(request, settings, live_server):
    saver = remote_saver(request)
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "CODEC_MAX_BYTES": 100}
    with pytest.raises(ValueTooLarge) as caught:
        put_chain(saver, "t", {"a": "x" * 500})
    assert "CODEC_MAX_BYTES" in str(caught.value)
    with pytest.raises(RemoteStoreError) as caught:
        RemoteSaver(live_server.url, api_key="wrong", retry_seconds=0).info()
    assert caught.value.status == 401


# -- checkpoint_created on the service --------------------------------------------------------
def test_checkpoint_created_receivers_on_the_service_get_the_values(request):
    """The service's saver holds a worker's values as their bytes; a receiver on the service
    gets what they hold, as an in-process put's receivers get its objects."""
    import datetime

    from checkpoints.signals import checkpoint_created
    from checkpoints.store_service.values import WireValue

    received = []

    def receiver(sender, **kwargs):
        received.append(kwargs)

    saver = remote_saver(request)
    when = datetime.datetime(2026, 1, 2, 3, 4, tzinfo=datetime.UTC)
    checkpoint_created.connect(receiver, weak=False)
    try:
        config = put_chain(saver, "signalled", {"text": "hi", "when": when, "n": [1, 2]})
    finally:
        checkpoint_created.disconnect(receiver)
    assert [r["checkpoint_id"] for r in received] == [config["configurable"]["checkpoint_id"]]
    envelope = received[0]["envelope"]
    values = envelope["checkpoint"]["channel_values"]
    assert values == {"text": "hi", "when": when, "n": [1, 2]}
    assert not any(type(v) is WireValue for v in values.values())
    assert envelope["metadata"]["step"] == 1


def test_write_slots_give_the_task_paths_to_the_threads_reader_only(request):
    # What an import's verify compares (pending_writes leaves task paths and indexes out).
    alice, bob = as_user(request, user("alice")), as_user(request, user("bob"))
    config = put_chain(alice, "alice-thread", {"a": 1})
    alice.put_writes(config, [("a", 2), ("b", 3)], "task-1", "~__pregel_pull, node")
    cid = config["configurable"]["checkpoint_id"]
    assert sorted(alice.write_slots("alice-thread")) == [
        ("", cid, "task-1", "~__pregel_pull, node", 0, "a"),
        ("", cid, "task-1", "~__pregel_pull, node", 1, "b"),
    ]
    with pytest.raises(ThreadNotFound):
        bob.write_slots("alice-thread")
