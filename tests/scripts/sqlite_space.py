"""A SQLite store of its own, written through the saver; prints what happened as JSON.

``python sqlite_space.py PATH write N SURVIVORS``: N threads (8 checkpoints each), all but
the first SURVIVORS marked finished and due, then swept.
``python sqlite_space.py PATH write N N``: a store of N threads, no sweep.
``python sqlite_space.py PATH compact``: manage.py compact_checkpoint_store on it.
"""

from __future__ import annotations

import io
import json
import os
import sys
from datetime import timedelta

from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from checkpoints import from_conn_string


def write(saver, count: int) -> None:
    for index in range(count):
        config = {"configurable": {"thread_id": f"t{index}", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        for step in range(8):
            checkpoint = create_checkpoint(checkpoint, None, step)
            # Incompressible, below the compression threshold: every byte is stored.
            checkpoint["channel_values"] = {"doc": os.urandom(2000).hex()}
            checkpoint["channel_versions"] = {"doc": step + 1}
            config = saver.put(
                config, checkpoint, {"source": "loop", "step": step}, {"doc": step + 1}
            )


def file_bytes(path: str) -> int:
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def main() -> None:
    path, action = sys.argv[1], sys.argv[2]
    with from_conn_string(f"sqlite:///{path}") as saver:
        from django.db import connections

        out: dict = {}
        if action == "write":
            count, survivors = int(sys.argv[3]), int(sys.argv[4])
            write(saver, count)
            from checkpoints.store.planning import utcnow

            past = utcnow() - timedelta(minutes=1)
            for index in range(survivors, count):
                saver.mark_finished(f"t{index}", past)
            with connections[saver.using].cursor() as cur:
                cur.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            out["before"] = file_bytes(path)
            if survivors < count:
                from retention.models import SweepRun
                from retention.sweep import sweep_checkpoints

                result = sweep_checkpoints(saver=saver)
                out["swept"] = result.swept_count
                out["bytes_freed"] = result.bytes_freed
                run = SweepRun.objects.using(saver.using).get(pk=result.sweep_run_id)
                out["recorded_bytes_freed"] = run.bytes_freed
            out["kept"] = sorted(
                t
                for t in (f"t{i}" for i in range(count))
                if saver.get_tuple({"configurable": {"thread_id": t, "checkpoint_ns": ""}})
            )
        elif action == "compact":
            from django.core.management import call_command

            buffer = io.StringIO()
            call_command("compact_checkpoint_store", "--json", stdout=buffer)
            out["report"] = json.loads(buffer.getvalue())
            out["threads"] = sum(
                1 for _ in saver.list({"configurable": {"thread_id": "t0", "checkpoint_ns": ""}})
            )
        with connections[saver.using].cursor() as cur:
            cur.execute("PRAGMA auto_vacuum")
            out["auto_vacuum"] = cur.fetchone()[0]
            cur.execute("PRAGMA synchronous")
            out["synchronous"] = cur.fetchone()[0]
        out["durability"] = saver.durability
        out["after"] = file_bytes(path)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
