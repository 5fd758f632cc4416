"""Export records, export files and a deployment's own processes, for the transfer tests."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import ormsgpack
from langgraph.checkpoint.base import empty_checkpoint

from checkpoints.transfer.records import header

ROOT = Path(__file__).resolve().parents[3]


def typed(value) -> dict[str, str]:
    return {"type": "msgpack", "data": base64.b64encode(ormsgpack.packb(value)).decode()}


def thread_records(thread_id: str, spoil=None) -> list[dict]:
    """A thread of one checkpoint and one pending write, ``spoil(thread, checkpoint)``ed."""
    body = empty_checkpoint()
    thread = {"kind": "thread", "thread_id": thread_id, "owner": "", "retention": None}
    checkpoint = {
        "kind": "checkpoint",
        "ns": "",
        "id": "1f0c0000-0000-6000-8000-000000000001",
        "parent": None,
        "metadata": {"source": "input", "step": -1, "parents": {}},
        "v": body["v"],
        "ts": body["ts"],
        "channel_versions": {"a": "00000000000000000000000000000001.5"},
        "versions_seen": {"__input__": {}},
        "updated_channels": ["a"],
        "values": {"a": typed({"n": 1})},
        "writes": [{"task_id": "t1", "task_path": "", "idx": 0, "channel": "a", "value": typed(2)}],
    }
    if spoil is not None:
        spoil(thread, checkpoint)
    end = {"kind": "end", "thread_id": thread["thread_id"], "checkpoints": 1}
    return [thread, checkpoint, end | {"writes": len(checkpoint["writes"])}]


def write_export(path: Path, threads: list[list[dict]]) -> dict[str, int]:
    """The export file of ``threads``; the line each thread's checkpoint record is on."""
    lines, at = [header()], {}
    for records in threads:
        at[records[0]["thread_id"]] = len(lines) + 2
        lines.extend(records)
    # ensure_ascii keeps a lone surrogate as its \\ud800 escape, as a crafted file would.
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return at


def deployment(db: Path, tmp_path: Path, **extra: str) -> tuple[list[str], dict[str, str]]:
    """manage.py and the environment of a service whose store is the SQLite file ``db``
    (unless ``extra`` names another), migrated: the commands run as a deployment runs
    them, in processes of their own."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{db}",
        "LLM_PROVIDER_CHECKPOINT": "sqlite",
        "CHECKPOINTS_DATA_DIR": str(tmp_path),
        **extra,
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, cwd=tmp_path)
    return manage, env


HELD = (
    "SELECT t.thread_id, COUNT(c.id) FROM checkpoints_thread t "
    "LEFT JOIN checkpoints_checkpoint c ON c.thread_id = t.id GROUP BY t.thread_id"
)


def held(db: Path) -> dict[str, int]:
    """Thread -> checkpoints of a SQLite store of ours."""
    with sqlite3.connect(db) as conn:
        return dict(conn.execute(HELD).fetchall())
