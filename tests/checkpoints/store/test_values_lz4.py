"""On PostgreSQL the value columns are compressed with LZ4 (migration 0010): a new store's
and a migrated one's, both ways of migrating, and values stored under either method read
back the same."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.standalone import fresh_postgres_database, run_python

pytestmark = pytest.mark.postgres

# argv[1]: the store's URL; argv[2]: "write:<thread>" (a checkpoint whose message list
# compresses, and a pending write of the same), "read:<thread>" (prints both back), or
# "<migration>:<thread>": migrate checkpoints to it, then write the thread in the same
# process (opening a store that is not current migrates it forward).
SCRIPT = """
import json, sys
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from checkpoints import from_conn_string

what, _, thread = sys.argv[2].partition(":")
config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
messages = [f"message {i} of {thread}: " + "the same words again " * 8 for i in range(200)]


def write(saver):
    checkpoint = create_checkpoint(empty_checkpoint(), None, 1)
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = {"messages": 1}
    done = saver.put(config, checkpoint, {"step": 1}, {"messages": 1})
    saver.put_writes(done, [("messages", messages)], "task-1")


with from_conn_string(sys.argv[1]) as saver:
    if what == "write":
        write(saver)
        out = "written"
    elif what == "read":
        got = saver.get_tuple(config)
        out = {
            "value": got.checkpoint["channel_values"]["messages"] == messages,
            "write": got.pending_writes[0][2] == messages,
        }
    else:
        from django.core.management import call_command
        call_command("migrate", "checkpoints", what, database=saver.using, verbosity=0)
        write(saver)
        out = "migrated"
print(json.dumps(out))
"""

COLUMNS = [
    ("checkpoints_channelblob", "blob"),
    ("checkpoints_checkpoint", "checkpoint"),
    ("checkpoints_pendingwrite", "blob"),
]


def _run(url: str, what: str, tmp_path):
    done = run_python(["-c", SCRIPT, url, what], cwd=tmp_path)
    return json.loads(done.stdout.splitlines()[-1])


def _columns(url: str) -> list[tuple[str, str, str]]:
    """Each value column's method ('l' LZ4, '' the server's default)."""
    with psycopg.connect(url) as conn:
        return sorted(
            conn.execute(
                """SELECT attrelid::regclass::text, attname, attcompression::text
                   FROM pg_attribute WHERE attname IN ('blob', 'checkpoint')
                     AND attrelid IN ('checkpoints_channelblob'::regclass,
                                      'checkpoints_checkpoint'::regclass,
                                      'checkpoints_pendingwrite'::regclass)"""
            ).fetchall()
        )


def _stored(url: str, thread: str) -> dict[str, str]:
    """How the thread's message list and its pending write are stored."""
    with psycopg.connect(url) as conn:
        return dict(
            conn.execute(
                """SELECT 'blob', pg_column_compression(b.blob) FROM checkpoints_channelblob b
                   JOIN checkpoints_thread t ON t.id = b.thread_id
                   WHERE t.thread_id = %(t)s AND b.channel = 'messages'
                   UNION ALL
                   SELECT 'write', pg_column_compression(w.blob) FROM checkpoints_pendingwrite w
                   JOIN checkpoints_thread t ON t.id = w.thread_id WHERE t.thread_id = %(t)s""",
                {"t": thread},
            ).fetchall()
        )


def test_values_are_stored_with_lz4_both_ways_of_migrating(tmp_path):
    with fresh_postgres_database("lz4") as url:
        assert _run(url, "write:first", tmp_path) == "written"
        assert _columns(url) == [(table, column, "l") for table, column in COLUMNS]
        assert _stored(url, "first") == {"blob": "lz4", "write": "lz4"}

        assert _run(url, "0009_thread_children_cascade:second", tmp_path) == "migrated"
        assert _columns(url) == [(table, column, "") for table, column in COLUMNS]
        assert _stored(url, "second") == {"blob": "pglz", "write": "pglz"}

        assert _run(url, "0010_values_lz4:third", tmp_path) == "migrated"
        assert _columns(url) == [(table, column, "l") for table, column in COLUMNS]
        assert _stored(url, "third") == {"blob": "lz4", "write": "lz4"}
        # Either method reads back: values are not rewritten by the migration.
        assert _stored(url, "second") == {"blob": "pglz", "write": "pglz"}
        for thread in ("first", "second", "third"):
            assert _run(url, f"read:{thread}", tmp_path) == {"value": True, "write": True}
