"""Disk space back after a sweep; compact_checkpoint_store (issue 35).

Each SQLite store here is a file of its own, written through the saver by a plain script
(tests/scripts/sqlite_space.py) that configures Django itself.
"""

from __future__ import annotations

import io
import json
import sqlite3
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connections
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

from checkpoints.store.orm.ledger import forget_format_checks
from checkpoints.store.registry import get_saver
from tests.standalone import plain_env, run_python

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "sqlite_space.py"


def space(tmp_path, path: Path, *args: str) -> dict:
    done = run_python([str(SCRIPT), str(path), *args], cwd=tmp_path, env=plain_env())
    return json.loads(done.stdout.splitlines()[-1])


def test_a_sweep_of_most_of_a_store_gives_the_file_back(tmp_path):
    swept = space(tmp_path, tmp_path / "swept.sqlite3", "write", "300", "30")
    fresh = space(tmp_path, tmp_path / "fresh.sqlite3", "write", "30", "30")
    assert swept["swept"] == 270 and swept["kept"] == fresh["kept"]
    assert swept["auto_vacuum"] == 2  # a new store is made incremental
    # Within 20 % of what the 30 survivors need on their own.
    assert swept["after"] <= 1.2 * fresh["after"], (swept, fresh)
    assert swept["before"] > 5 * fresh["after"]
    assert swept["bytes_freed"] == swept["recorded_bytes_freed"]
    assert swept["bytes_freed"] >= 0.8 * (swept["before"] - fresh["after"])


def test_compact_converts_an_existing_store(tmp_path):
    path = tmp_path / "old.sqlite3"
    # A file that had a table before the store's: made the way every store was before
    # auto_vacuum=INCREMENTAL (freed pages stay in the file).
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE made_before (x)")
    swept = space(tmp_path, path, "write", "100", "10")
    assert swept["swept"] == 90 and swept["auto_vacuum"] == 0
    assert swept["bytes_freed"] == 0 and swept["after"] >= 0.9 * swept["before"]
    fresh = space(tmp_path, tmp_path / "fresh.sqlite3", "write", "10", "10")
    compacted = space(tmp_path, path, "compact")
    report = compacted["report"]
    assert report["auto_vacuum_before"] == "none" and report["auto_vacuum"] == "incremental"
    assert compacted["auto_vacuum"] == 2
    assert report["bytes_before"] >= 0.9 * swept["before"]  # the freed pages were still there
    assert report["bytes_after"] <= 1.2 * fresh["after"], (report, fresh)
    assert compacted["threads"] == 8  # t0's checkpoints, intact


def _pg_url() -> str:
    entry = connections["pg"].settings_dict
    return (
        f"postgresql://{entry['USER']}@{entry['HOST'] or '127.0.0.1'}:{entry['PORT'] or 5432}/"
        f"{entry['NAME']}"
    )


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True, databases=["default", "pg"])
def test_on_postgres_the_command_reports_and_vacuums_nothing(settings):
    forget_format_checks()
    # Unpooled, so the deletes and the statistics flush below share this thread's session.
    settings.CHECKPOINTS = {**settings.CHECKPOINTS, "PG_POOL": False}
    saver = get_saver("postgres", using="pg")
    for index in range(40):
        config = {"configurable": {"thread_id": f"pg-{index}", "checkpoint_ns": ""}}
        checkpoint = empty_checkpoint()
        for step in range(3):
            checkpoint = create_checkpoint(checkpoint, None, step)
            config = saver.put(config, checkpoint, {"step": step}, {})
    for index in range(30):
        saver.delete_thread(f"pg-{index}")
    with connections["pg"].cursor() as cur:
        cur.execute("SELECT pg_stat_force_next_flush()")
    with connections["pg"].cursor() as cur:
        cur.execute("SELECT 1")  # the flush happens as the session goes idle
    out = io.StringIO()
    call_command("compact_checkpoint_store", "--conn-string", _pg_url(), "--json", stdout=out)
    report = json.loads(out.getvalue())
    tables = {t["table"]: t for t in report["tables"]}
    checkpoint = tables["checkpoints_checkpoint"]
    assert checkpoint["dead_rows"] >= 90 and checkpoint["live_rows"] >= 30, checkpoint
    assert checkpoint["table_bytes"] > 0 and checkpoint["index_bytes"] > 0
    assert 0 < checkpoint["vacuum_reclaims_bytes"] <= checkpoint["table_bytes"]
    assert report["vacuum_reclaims_bytes"] >= checkpoint["vacuum_reclaims_bytes"]
    # Nothing was vacuumed: the dead rows are still there.
    with connections["pg"].cursor() as cur:
        cur.execute(
            "SELECT n_dead_tup, vacuum_count, autovacuum_count FROM pg_stat_user_tables "
            "WHERE relname = 'checkpoints_checkpoint'"
        )
        dead, vacuums, _ = cur.fetchone()
    assert dead == checkpoint["dead_rows"] and vacuums == 0
    text = io.StringIO()
    call_command("compact_checkpoint_store", "--conn-string", _pg_url(), stdout=text)
    assert "VACUUM FULL not run" in text.getvalue()
    assert "checkpoints_checkpoint" in text.getvalue()
