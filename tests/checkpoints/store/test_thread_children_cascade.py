"""On PostgreSQL a thread's checkpoints, blobs and writes go with its row (migration 0009):
the keys cascade, both ways of migrating, and a delete by the saver or by bare SQL leaves
no child row of the thread and every row of another."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.standalone import fresh_postgres_database, run_python

pytestmark = pytest.mark.postgres

# argv[1]: the store's URL; argv[2]: "write" (two threads, a checkpoint, blob and write
# each), "delete" (delete_thread of t-gone), or a migration of checkpoints to migrate to.
SCRIPT = """
import json, sys
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from checkpoints import from_conn_string

with from_conn_string(sys.argv[1]) as saver:
    if sys.argv[2] == "write":
        for thread in ("t-gone", "t-kept"):
            config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
            checkpoint = create_checkpoint(empty_checkpoint(), None, 1)
            checkpoint["channel_values"] = {"messages": ["hello", thread]}
            checkpoint["channel_versions"] = {"messages": 1}
            done = saver.put(config, checkpoint, {"step": 1}, {"messages": 1})
            saver.put_writes(done, [("messages", ["pending"])], "task-1")
    elif sys.argv[2] == "delete":
        saver.delete_thread("t-gone")
    else:
        from django.core.management import call_command
        call_command("migrate", "checkpoints", sys.argv[2], database=saver.using, verbosity=0)
print(json.dumps({"done": sys.argv[2]}))
"""

CHILDREN = ("checkpoints_checkpoint", "checkpoints_channelblob", "checkpoints_pendingwrite")


def _actions(url: str) -> dict[str, str]:
    """Each child table's ON DELETE action toward checkpoints_thread ('c' cascade,
    'a' no action), with " unvalidated" when the key is not (yet) validated."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            """SELECT conrelid::regclass::text,
                      confdeltype::text || CASE WHEN convalidated THEN '' ELSE ' unvalidated' END
               FROM pg_constraint
               WHERE contype = 'f' AND confrelid = 'checkpoints_thread'::regclass"""
        ).fetchall()
    return dict(rows)


def _rows(url: str) -> dict[str, list[str]]:
    with psycopg.connect(url) as conn:
        return {
            table: sorted(
                name
                for (name,) in conn.execute(
                    f"SELECT t.thread_id FROM {table} x JOIN checkpoints_thread t "
                    "ON t.id = x.thread_id"
                )
            )
            + [
                f"orphan:{n}"
                for (n,) in conn.execute(
                    f"SELECT x.thread_id FROM {table} x WHERE NOT EXISTS "
                    "(SELECT 1 FROM checkpoints_thread t WHERE t.id = x.thread_id)"
                )
            ]
            for table in CHILDREN
        }


def _run(url: str, what: str, tmp_path) -> None:
    done = run_python(["-c", SCRIPT, url, what], cwd=tmp_path)
    assert json.loads(done.stdout.splitlines()[-1]) == {"done": what}


def test_a_deleted_thread_takes_its_rows_and_the_migration_goes_both_ways(tmp_path):
    with fresh_postgres_database("cascade") as url:
        _run(url, "write", tmp_path)
        assert _actions(url) == dict.fromkeys(CHILDREN, "c")
        both = {table: ["t-gone", "t-kept"] for table in CHILDREN}
        assert _rows(url) == both

        _run(url, "delete", tmp_path)  # the saver's DELETE_THREAD: thread rows and marks only
        assert _rows(url) == {table: ["t-kept"] for table in CHILDREN}

        _run(url, "0008_thread_declared_waiting", tmp_path)
        assert _actions(url) == dict.fromkeys(CHILDREN, "a")
        with psycopg.connect(url) as conn, pytest.raises(psycopg.errors.ForeignKeyViolation):
            conn.execute("DELETE FROM checkpoints_thread WHERE thread_id = 't-kept'")
            conn.commit()  # the deferred NO ACTION check: children still there

        _run(url, "0009_thread_children_cascade", tmp_path)
        assert _actions(url) == dict.fromkeys(CHILDREN, "c")
        with psycopg.connect(url) as conn:
            conn.execute("DELETE FROM checkpoints_thread WHERE thread_id = 't-kept'")
        assert _rows(url) == {table: [] for table in CHILDREN}
