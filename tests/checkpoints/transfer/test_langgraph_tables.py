"""LangGraph's PostgresSaver and SqliteSaver imported from their tables, never their savers.

A crafted row (a msgpack ext payload naming ``os.system``) is first shown to run when
LangGraph's own saver reads it; the import then reads the same database and nothing
runs: the value is stored as its data, exactly as an export file holding the same bytes
is imported, or the thread is refused by both under ``BLOCKED_TYPES = "raise"``. For
benign stores written by real graphs, the tables read the same records as the savers.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import ormsgpack
import pytest
from django.core.management import CommandError, call_command
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.constants import TASKS
from langgraph.types import Send

from checkpoints.transfer import SaverSource, TableSource, source_of
from checkpoints.transfer.records import header
from tests.checkpoints.transfer.graphs import THREADS, seed
from tests.checkpoints.transfer.records_helpers import deployment, held

EVIL = "evil"
EVIL_ID = "1f0a0000-0000-6000-8000-000000000001"


def ext(code: int, *parts) -> ormsgpack.Ext:
    return ormsgpack.Ext(code, ormsgpack.packb(parts))


def payloads(folder: Path) -> dict[str, ormsgpack.Ext]:
    """Payloads LangGraph's default serializer obeys: each touches its own marker."""
    return {
        "single": ext(0, "os", "system", f"touch {folder / 'single'}"),
        "args": ext(1, "os", "system", [f"touch {folder / 'args'}"]),
    }


@pytest.fixture
def markers(tmp_path):
    folder = tmp_path / "markers"
    folder.mkdir()
    return folder


def plant(peer, found: dict[str, ormsgpack.Ext]) -> None:
    """Thread EVIL: one checkpoint whose channels hold the payloads, and pending writes of
    them, written into the peer's tables as its saver lays them out."""
    body = empty_checkpoint()
    body["id"] = EVIL_ID
    body["channel_versions"] = dict.fromkeys(found, "00000000000000000000000000000001.5")
    writes = [
        (name, i, ormsgpack.packb({"value": payload}))
        for i, (name, payload) in enumerate(found.items())
    ]
    if type(peer).__name__ == "SqliteSaver":
        body["channel_values"] = {name: {"value": p} for name, p in found.items()}
        with peer.cursor() as cur:
            cur.execute(
                "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, type, "
                "checkpoint, metadata) VALUES (?, '', ?, 'msgpack', ?, ?)",
                (EVIL, EVIL_ID, ormsgpack.packb(body), b'{"source": "input", "step": 0}'),
            )
            for channel, idx, blob in writes:
                cur.execute(
                    "INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, "
                    "task_path, idx, channel, type, value) VALUES (?, '', ?, 'task', '', ?, ?, "
                    "'msgpack', ?)",
                    (EVIL, EVIL_ID, idx, channel, blob),
                )
        return
    from psycopg.types.json import Jsonb

    body["channel_values"] = {}
    with peer._cursor() as cur:
        cur.execute(
            "INSERT INTO checkpoints (thread_id, checkpoint_ns, checkpoint_id, checkpoint, "
            "metadata) VALUES (%s, '', %s, %s, %s)",
            (EVIL, EVIL_ID, Jsonb(body), Jsonb({"source": "input", "step": 0})),
        )
        for name, payload in found.items():
            cur.execute(
                "INSERT INTO checkpoint_blobs (thread_id, checkpoint_ns, channel, version, "
                "type, blob) VALUES (%s, '', %s, %s, 'msgpack', %s)",
                (EVIL, name, body["channel_versions"][name], ormsgpack.packb({"value": payload})),
            )
        for channel, idx, blob in writes:
            cur.execute(
                "INSERT INTO checkpoint_writes (thread_id, checkpoint_ns, checkpoint_id, "
                "task_id, task_path, idx, channel, type, blob) VALUES (%s, '', %s, 'task', '', "
                "%s, %s, 'msgpack', %s)",
                (EVIL, EVIL_ID, idx, channel, blob),
            )


def export_file(path: Path, thread_id: str, found: dict[str, ormsgpack.Ext]) -> Path:
    """An export holding the same payload bytes as `plant` for ``thread_id``."""

    def typed(value) -> dict[str, str]:
        return {"type": "msgpack", "data": base64.b64encode(ormsgpack.packb(value)).decode()}

    body = empty_checkpoint()
    lines = [
        header(),
        {"kind": "thread", "thread_id": thread_id, "owner": "", "retention": None},
        {
            "kind": "checkpoint",
            "ns": "",
            "id": EVIL_ID,
            "parent": None,
            "metadata": {"source": "input", "step": 0},
            "v": body["v"],
            "ts": body["ts"],
            "channel_versions": dict.fromkeys(found, "00000000000000000000000000000001.5"),
            "versions_seen": {},
            "values": {name: typed({"value": p}) for name, p in found.items()},
            "writes": [
                {"task_id": "task", "task_path": "", "idx": i, "channel": name, "value": typed(v)}
                for i, (name, v) in enumerate({n: {"value": p} for n, p in found.items()}.items())
            ],
        },
        {"kind": "end", "thread_id": thread_id, "checkpoints": 1, "writes": len(found)},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def assert_payloads_are_live(peer, markers: Path) -> None:
    """LangGraph's own saver runs what the planted row names: the test's payloads bite."""
    list(peer.list({"configurable": {"thread_id": EVIL}}))
    assert sorted(p.name for p in markers.iterdir()) == ["args", "single"]
    for marker in markers.iterdir():
        marker.unlink()


def test_a_crafted_row_is_stored_as_data_like_an_export_file(
    peer, peer_url, target, markers, tmp_path, capsys
):
    seed(peer)
    found = payloads(markers)
    plant(peer, found)
    assert_payloads_are_live(peer, markers)
    call_command("import_checkpoints", peer_url)
    assert list(markers.iterdir()) == []
    assert f"Imported {len(THREADS) + 1} thread(s)" in capsys.readouterr().out
    call_command("import_checkpoints", str(export_file(tmp_path / "e.jsonl", "from-file", found)))
    assert list(markers.iterdir()) == []
    from_tables = target.get_tuple({"configurable": {"thread_id": EVIL}})
    from_file = target.get_tuple({"configurable": {"thread_id": "from-file"}})
    values = from_tables.checkpoint["channel_values"]
    assert values == from_file.checkpoint["channel_values"]
    # What the reader hands back for a call it does not make: the call's data.
    assert values["single"]["value"] == f"touch {markers / 'single'}"
    assert from_tables.pending_writes == from_file.pending_writes
    assert len(from_tables.pending_writes) == 2


def test_a_crafted_row_refuses_its_thread_when_blocked_types_raise(
    peer, peer_url, target, markers, tmp_path, capsys, settings
):
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "BLOCKED_TYPES": "raise"}
    seed(peer)
    found = payloads(markers)
    plant(peer, found)
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", peer_url)
    captured = capsys.readouterr()
    assert f"refused: thread {EVIL!r}, checkpoint {EVIL_ID!r} (ns '')" in captured.err
    assert "os.system" in captured.err
    assert f"Imported {len(THREADS)} thread(s)" in captured.out
    assert target.get_tuple({"configurable": {"thread_id": EVIL}}) is None
    path = export_file(tmp_path / "evil.jsonl", "from-file", found)
    with pytest.raises(CommandError, match="1 thread"):
        call_command("import_checkpoints", str(path))
    assert f"{path}:3: bad record of thread 'from-file'" in capsys.readouterr().err
    assert target.get_tuple({"configurable": {"thread_id": "from-file"}}) is None
    assert list(markers.iterdir()) == []


def seed_pre_v4(peer) -> None:
    """Thread "old": a v3 parent whose pending sends its v3 child holds (LangGraph < 0.2)."""
    config = {"configurable": {"thread_id": "old", "checkpoint_ns": ""}}
    parent = empty_checkpoint()
    parent["v"] = 3
    stored = peer.put(config, parent, {"step": 0}, {})
    peer.put_writes(stored, [(TASKS, Send("worker", {"n": n})) for n in (1, 2)], "task-1")
    child = empty_checkpoint()
    child["v"] = 3
    child["channel_versions"] = {"a": "00000000000000000000000000000002.0"}
    child["channel_values"] = {"a": 1}
    peer.put(stored, child, {"step": 1}, {"a": "00000000000000000000000000000002.0"})


def test_the_tables_read_what_the_savers_read(peer):
    seed(peer)
    seed_pre_v4(peer)
    direct, through = source_of(peer), SaverSource(peer)
    assert isinstance(direct, TableSource)
    assert list(direct.thread_ids()) == sorted([*THREADS, "old"])
    for thread_id in [*THREADS, "old"]:
        mine, theirs = direct.thread(thread_id), through.thread(thread_id)
        assert len(mine.checkpoints) == len(theirs.checkpoints) > 0
        for a, b in zip(mine.checkpoints, theirs.checkpoints, strict=True):
            assert (a.ns, a.checkpoint_id, a.parent_id) == (b.ns, b.checkpoint_id, b.parent_id)
            assert a.metadata == b.metadata
            assert a.checkpoint == b.checkpoint, (thread_id, a.checkpoint_id)
            assert a.writes == b.writes, (thread_id, a.checkpoint_id)
    namespaces = {cp.ns for t in THREADS for cp in direct.thread(t).checkpoints}
    assert any(ns.startswith("child:") for ns in namespaces)
    interrupts = [w for cp in direct.thread("t-waiting").checkpoints for w in cp.writes]
    assert any(w.channel == "__interrupt__" for w in interrupts)
    old = direct.thread("old").checkpoints[-1].checkpoint
    assert old["channel_values"][TASKS] == [Send("worker", {"n": 1}), Send("worker", {"n": 2})]


def test_a_missing_or_foreign_langgraph_file_is_refused(target, tmp_path):
    missing = tmp_path / "missing.sqlite3"
    with pytest.raises(CommandError, match="does not exist"):
        call_command("import_checkpoints", f"langgraph+sqlite:///{missing}")
    assert not missing.exists()
    other = tmp_path / "other.sqlite3"
    sqlite3.connect(other).execute("CREATE TABLE notes (x)").connection.commit()
    with pytest.raises(CommandError, match="not a SqliteSaver file"):
        call_command("import_checkpoints", f"langgraph+sqlite:///{other}")


WITHOUT_SAVER_PACKAGES = """
import sys
# As if langgraph-checkpoint-sqlite and -postgres were not installed: importing them fails.
sys.modules["langgraph.checkpoint.sqlite"] = None
sys.modules["langgraph.checkpoint.postgres"] = None
from django.core.management import execute_from_command_line
execute_from_command_line(["manage.py", "import_checkpoints", *sys.argv[1:]])
"""


def test_the_tables_are_read_without_langgraphs_saver_packages(peer, peer_url, tmp_path):

    seed(peer)
    db = tmp_path / "deployment.sqlite3"
    _, env = deployment(db, tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_SAVER_PACKAGES, peer_url, "--verify"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert f"Imported {len(THREADS)} thread(s)" in done.stdout
    assert set(held(db)) == set(THREADS)
