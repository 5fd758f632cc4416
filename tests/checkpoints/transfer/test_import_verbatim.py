"""An import from LangGraph's tables moves each msgpack value's stored bytes as they are
(`codec.serde.Verbatim`), after the strict reader's check and under the store's limits.

The bytes planted here are valid msgpack that our encoder would never write (an int in
five bytes where one does): a decode and re-encode would change them, so finding them
unchanged in our tables shows they were moved, not remade. A model in a value is checked
without being built (its validator counts the builds). A crafted value is still refused:
an ext code LangGraph never writes, a pickle, a value past CODEC_MAX_BYTES.
"""

from __future__ import annotations

import base64
import os
import pickle

import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from pydantic import BaseModel, model_validator

from checkpoints.codec import decompress_typed
from checkpoints.models import ChannelBlob, PendingWrite
from checkpoints.transfer import copy_threads, open_source
from checkpoints.transfer.langgraph_tables import channel_entries

# [5, "x"] with 5 as a uint32: our encoder (and LangGraph's) writes 0x92 0x05 0xa1 "x".
ODD = b"\x92\xce\x00\x00\x00\x05\xa1x"
VERSION = "00000000000000000000000000000001.5"

ORM_STORES = pytest.mark.parametrize("provider", ["postgres", "sqlite"], indirect=True)


class Counted(BaseModel):
    """A model whose builds are counted: the import must build none."""

    text: str

    @model_validator(mode="after")
    def _count(self):
        BUILDS.append(self.text)
        return self


BUILDS: list[str] = []


def put(peer, thread_id: str, values: dict, writes: list) -> dict:
    """One checkpoint of ``thread_id`` holding ``values`` (a blob each on PostgresSaver),
    and ``writes`` pending on it, through the peer's own saver."""
    body = empty_checkpoint()
    body["channel_values"] = values
    body["channel_versions"] = dict.fromkeys(values, VERSION)
    config = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    stored = peer.put(config, body, {"source": "input", "step": 0}, dict(body["channel_versions"]))
    if writes:
        peer.put_writes(stored, writes, "task-1")
    return stored


def overwrite(peer, thread_id: str, channel: str, type_: str, data: bytes, *, write: bool):
    """Replace the stored bytes of a write (or, on PostgresSaver, a blob) in the peer's
    tables, as a crafted or foreign row would hold them."""
    if type(peer).__name__ == "SqliteSaver" and not write:
        # SqliteSaver keeps the channel values inside the body: the body made again with
        # the crafted bytes as that channel's value.
        body = peer.get_tuple({"configurable": {"thread_id": thread_id}}).checkpoint
        body["channel_values"][channel] = RAW
        packed = ormsgpack.packb(body).replace(ormsgpack.packb(RAW), data)
        with peer.cursor() as cur:
            cur.execute(
                "UPDATE checkpoints SET checkpoint = ? WHERE thread_id = ?", (packed, thread_id)
            )
        return
    if type(peer).__name__ == "SqliteSaver":
        with peer.cursor() as cur:
            cur.execute(
                "UPDATE writes SET type = ?, value = ? WHERE thread_id = ? AND channel = ?",
                (type_, data, thread_id, channel),
            )
        return
    table, column = ("checkpoint_writes", "blob") if write else ("checkpoint_blobs", "blob")
    with peer._cursor() as cur:
        cur.execute(
            f"UPDATE {table} SET type = %s, {column} = %s WHERE thread_id = %s AND channel = %s",
            (type_, data, thread_id, channel),
        )


RAW = "a placeholder for the crafted bytes"


def stored_write(target, thread_id: str, channel: str) -> tuple[str, bytes]:
    row = PendingWrite.objects.using(target.db_alias).get(
        thread__thread_id=thread_id, channel=channel
    )
    return decompress_typed((row.type, bytes(row.blob)))


def stored_blob(target, thread_id: str, channel: str) -> tuple[str, bytes]:
    row = ChannelBlob.objects.using(target.db_alias).get(
        thread__thread_id=thread_id, channel=channel
    )
    return decompress_typed((row.type, bytes(row.blob)))


@ORM_STORES
def test_stored_bytes_are_moved_unchanged_and_models_are_not_built(peer, peer_url, target):
    model = [Counted(text="kept")]
    put(peer, "t", {"odd": [0], "model": model}, [("odd", 0), ("model", model)])
    overwrite(peer, "t", "odd", "msgpack", ODD, write=True)
    on_postgres = type(peer).__name__ == "PostgresSaver"
    if on_postgres:
        overwrite(peer, "t", "odd", "msgpack", ODD, write=False)
    BUILDS.clear()

    with open_source(peer_url) as source:
        summary = copy_threads(source, target)

    assert (summary.threads, summary.refused) == (1, 0), summary.refusals
    assert BUILDS == []  # checked, never built
    assert stored_write(target, "t", "odd") == ("msgpack", ODD)
    if on_postgres:
        assert stored_blob(target, "t", "odd") == ("msgpack", ODD)
    # Read back through our reader: the values the bytes hold, the model rebuilt.
    got = target.get_tuple({"configurable": {"thread_id": "t"}})
    assert sorted(got.pending_writes) == [
        ("task-1", "model", [Counted(text="kept")]),
        ("task-1", "odd", [5, "x"]),
    ]
    if on_postgres:
        assert got.checkpoint["channel_values"]["odd"] == [5, "x"]
    assert got.checkpoint["channel_values"]["model"] == model


@ORM_STORES
def test_a_crafted_value_is_still_refused(peer, peer_url, target, settings):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "CODEC_MAX_BYTES": 1024}
    put(peer, "fine", {"a": [1]}, [("a", 1)])
    crafted = {
        # An ext code LangGraph never writes: unreadable.
        "ext": ("msgpack", ormsgpack.packb([ormsgpack.Ext(42, b"\x01")])),
        # A pickle: our reader never unpickles.
        "pickle": ("pickle", pickle.dumps([1])),
        # Readable (its objects are within 4 x the limit) but more bytes than one value
        # may have: the store's own limit, as for any write.
        "large": ("msgpack", ormsgpack.packb("y" * 3000)),
    }
    for name, (type_, data) in crafted.items():
        put(peer, name, {"a": [1]}, [("a", 1)])
        overwrite(peer, name, "a", type_, data, write=True)
    # The same ext as a channel's value (a blob on PostgresSaver, inside SqliteSaver's body).
    put(peer, "in-body", {"a": [1], "b": [2]}, [])
    overwrite(peer, "in-body", "a", "msgpack", crafted["ext"][1], write=False)

    with open_source(peer_url) as source:
        summary = copy_threads(source, target)

    assert (summary.threads, summary.refused) == (1, 4), summary.refusals
    # Refusals name their thread first, so both sort alike.
    refusals = dict(zip(sorted([*crafted, "in-body"]), sorted(summary.refusals), strict=True))
    never = "stored value holds msgpack ext code 42, which LangGraph never writes"
    assert f"write of task 'task-1' to channel 'a' cannot be read: {never}" in refusals["ext"]
    assert f"the value of channel 'a' cannot be read: {never}" in refusals["in-body"]
    assert "it is 3003 bytes, over CHECKPOINTS['CODEC_MAX_BYTES']" in refusals["large"]
    assert "cannot be read: Unknown serialization type: pickle" in refusals["pickle"]
    for name in [*crafted, "in-body"]:
        assert target.get_tuple({"configurable": {"thread_id": name}}) is None
    assert stored_write(target, "fine", "a") == ("msgpack", ormsgpack.packb(1))


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"a": 1, "b": -3, "c": None, "d": True, "e": 1.5},
        {"m": ["x" * 40, "y" * 300, "z" * 70_000], "n": {"k": [1, {"deep": [2**40, -(2**40)]}]}},
        {f"c{i}": list(range(i)) for i in range(20)},  # a map16 of channels
        {"raw": b"\x00" * 300, "ext": [ormsgpack.Ext(5, b"\x01\x02\x03")]},
    ],
)
def test_a_sqlite_body_is_split_into_each_channels_own_bytes(values):
    body = {"v": 4, "id": "x", "channel_values": values, "channel_versions": {"a": "1"}}
    rest, entries = channel_entries(ormsgpack.packb(body))
    assert ormsgpack.unpackb(rest) == {k: v for k, v in body.items() if k != "channel_values"}
    assert [(ormsgpack.unpackb(k), v) for k, v in entries] == [
        (name, ormsgpack.packb(value)) for name, value in values.items()
    ]


@pytest.mark.parametrize(
    "data",
    [
        ormsgpack.packb([1, 2]),  # not a map
        ormsgpack.packb({"v": 4}),  # no channel_values
        ormsgpack.packb({"channel_values": [1]}),  # not a map of channels
        ormsgpack.packb({"channel_values": {"a": 1}}) + b"\x01",  # bytes after it
        ormsgpack.packb({"channel_values": {"a": "long text"}})[:-3],  # cut short
        b"\x81\xc1",  # a lead byte msgpack never uses
    ],
)
def test_a_body_laid_out_otherwise_is_read_whole(data):
    assert channel_entries(data) is None


@ORM_STORES
def test_moved_bytes_are_compressed_and_sealed_as_any_write(peer, peer_url, target, settings):
    key = base64.urlsafe_b64encode(os.urandom(32)).decode()
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "ENCRYPTION_KEYS": [key]}
    big = ["z" * 100_000]  # past INLINE_COMPRESS_BYTES
    put(peer, "t", {"small": [1], "big": big}, [("small", 1), ("big", big)])

    with open_source(peer_url) as source:
        summary = copy_threads(source, target)

    assert (summary.threads, summary.refused) == (1, 0), summary.refusals
    written = PendingWrite.objects.using(target.db_alias).values_list("channel", "type")
    assert dict(written) == {"small": "msgpack+aesgcm", "big": "msgpack+zstd+aesgcm"}
    got = target.get_tuple({"configurable": {"thread_id": "t"}})
    assert got.checkpoint["channel_values"] == {"small": [1], "big": big}
    assert sorted(got.pending_writes) == [("task-1", "big", big), ("task-1", "small", 1)]
