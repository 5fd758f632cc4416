"""A service whose store keeps values in a form of its own (Redis's faithful JSON codec): each
sent value is rebuilt by the strict reader and stored in that form. What it cannot rebuild,
or the store cannot hold, is a typed 4xx naming the value, with nothing stored."""

from __future__ import annotations

import httpx
import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.remote.wire import CONTENT_TYPE, pack
from tests.remote.backing import service_on
from tests.store_helpers import config_for, put_chain

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.redis]

# A dataclass of a module the service never imported: the strict reader does not rebuild it.
UNKNOWN_TYPE = ormsgpack.packb(
    ormsgpack.Ext(2, ormsgpack.packb(["worker_only.models", "Ticket", {"n": 1}]))
)
BAD_VALUES = {
    "nan": (ormsgpack.packb(float("nan")), "NaN"),
    "unknown type": (UNKNOWN_TYPE, "worker_only.models"),
}


@pytest.fixture
def redis_service(request):
    """(post one call, the in-process saver on the service's Redis)."""
    remote, local = service_on(request, "redis")
    url, key = remote.url, remote._headers["x-api-key"]

    def post(call: str, body: dict) -> httpx.Response:
        headers = {"content-type": CONTENT_TYPE, "x-api-key": key}
        return httpx.post(url + call, content=pack(body), headers=headers)

    return post, local


def put_body(thread_id: str, values: dict[str, bytes], metadata: bytes | None = None) -> dict:
    checkpoint = empty_checkpoint()
    versions = {c: f"{1:032}.0" for c in values}
    checkpoint["channel_versions"] = versions
    body = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    body["channel_values"] = {c: ["msgpack", data] for c, data in values.items()}
    metadata = metadata or ormsgpack.packb({"source": "loop", "step": 1})
    return {
        "config": {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}},
        "checkpoint": body,
        "metadata": ["msgpack", metadata],
        "new_versions": versions,
    }


def refused(response: httpx.Response, named: str, why: str) -> None:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["code"] == "codec_error", error
    assert named in error["message"] and why in error["message"], error


@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
def test_a_channel_value_it_cannot_store_is_refused_and_nothing_is_stored(redis_service, bad):
    post, local = redis_service
    data, why = BAD_VALUES[bad]
    body = put_body("t", {"good": ormsgpack.packb("fine"), "bad": data})
    refused(post("put", body), "channel 'bad'", why)
    assert local.get_tuple(config_for("t")) is None


def test_metadata_it_cannot_rebuild_is_refused(redis_service):
    post, local = redis_service
    body = put_body("t", {"a": ormsgpack.packb(1)}, metadata=UNKNOWN_TYPE)
    refused(post("put", body), "metadata", "worker_only.models")
    assert local.get_tuple(config_for("t")) is None


@pytest.mark.parametrize("bad", sorted(BAD_VALUES))
def test_writes_holding_one_value_it_cannot_store_are_refused_whole(redis_service, bad):
    post, local = redis_service
    config = put_chain(local, "t", {"a": 1})
    data, why = BAD_VALUES[bad]
    body = {
        "config": config,
        "task_id": "task-1",
        "writes": [["a", ["msgpack", ormsgpack.packb(2)]], ["b", ["msgpack", data]]],
    }
    refused(post("put_writes", body), "channel 'b'", why)
    assert local.get_tuple(config).pending_writes == []


def test_the_client_reads_what_it_wrote_and_the_store_holds_its_own_form(request):
    remote, local = service_on(request, "redis")
    values = {"when": {"at": (1, 2)}, "text": "é" * 3000, "raw": b"\x00", "none": None}
    config = put_chain(remote, "t", values)
    remote.put_writes(config, [("text", "w"), ("raw", b"\x01")], "task-1")
    through_service = remote.get_tuple(config_for("t"))
    in_process = local.get_tuple(config_for("t"))
    # A tuple comes back a list from LangGraph's msgpack, in process too.
    expected = {**values, "when": {"at": [1, 2]}}
    assert through_service.checkpoint["channel_values"] == expected
    assert in_process.checkpoint["channel_values"] == expected
    assert through_service.pending_writes == in_process.pending_writes
    assert in_process.pending_writes == [("task-1", "text", "w"), ("task-1", "raw", b"\x01")]


def test_a_model_no_process_can_import_is_kept_as_its_fields_as_in_process(request):
    from pydantic import BaseModel

    class Local(BaseModel):  # defined in a function: no module holds it
        x: int

    remote, local = service_on(request, "redis")
    put_chain(remote, "remote", {"state": Local(x=1)})
    put_chain(local, "local", {"state": Local(x=1)})
    through_service = remote.get_tuple(config_for("remote")).checkpoint["channel_values"]
    in_process = local.get_tuple(config_for("local")).checkpoint["channel_values"]
    assert through_service == in_process == {"state": {"x": 1}}
