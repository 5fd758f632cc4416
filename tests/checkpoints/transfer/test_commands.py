"""The management commands, and an import killed with SIGKILL part-way then run again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from checkpoints.codec.serde import store_serializer
from checkpoints.transfer import SaverSource
from checkpoints.transfer.records import header, thread_lines
from tests.checkpoints.transfer.graphs import THREADS, seed

ROOT = Path(__file__).resolve().parents[3]
# The commands write the deployment's store (the default database) from this process.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sqlite_store(request):
    from tests.conftest import make_saver

    return make_saver(request, "sqlite")


def test_import_command_from_sqlite_saver(lg_sqlite, sqlite_store, capsys):
    seed(lg_sqlite)
    call_command("import_checkpoints", f"langgraph+sqlite:///{lg_sqlite.path}", "--verify")
    out = capsys.readouterr().out
    assert f"Imported {len(THREADS)} thread(s)" in out and "0 refused" in out
    call_command("import_checkpoints", f"langgraph+sqlite:///{lg_sqlite.path}")
    assert f"{len(THREADS)} skipped" in capsys.readouterr().out
    with pytest.raises(CommandError, match="cannot import thread 't-"):
        call_command(
            "import_checkpoints", f"langgraph+sqlite:///{lg_sqlite.path}", "--on-conflict", "fail"
        )


def test_export_command_then_import_file(lg_sqlite, sqlite_store, tmp_path, capsys):
    seed(lg_sqlite)
    call_command(
        "import_checkpoints", f"langgraph+sqlite:///{lg_sqlite.path}", "--thread", "t-done"
    )
    out = tmp_path / "one.jsonl.zst"
    call_command("export_checkpoints", "--output", str(out))
    assert "Exported 1 thread(s)" in capsys.readouterr().out
    sqlite_store.delete_thread("t-done")
    call_command("import_checkpoints", str(out), "--verify", "--dry-run")
    assert "Would import 1 thread(s)" in capsys.readouterr().out
    assert sqlite_store.thread_presence("t-done") is None
    call_command("import_checkpoints", str(out), "--verify")
    assert sqlite_store.get_tuple({"configurable": {"thread_id": "t-done"}}) is not None


def test_import_command_from_postgres_saver(lg_postgres, lg_postgres_url, sqlite_store, capsys):
    seed(lg_postgres)
    call_command("import_checkpoints", f"langgraph+{lg_postgres_url}", "--verify")
    out = capsys.readouterr().out
    assert f"Imported {len(THREADS)} thread(s)" in out and "0 refused" in out
    assert sqlite_store.get_tuple({"configurable": {"thread_id": "t-done"}}) is not None


def test_import_command_from_a_saver_factory(lg_sqlite, sqlite_store, capsys, monkeypatch):
    seed(lg_sqlite)
    # Any saver a factory returns (here a context manager yielding SqliteSaver).
    monkeypatch.setenv("TRANSFER_TEST_SQLITE", lg_sqlite.path)
    factory = "tests.checkpoints.transfer.factories:sqlite_saver"
    call_command("import_checkpoints", "--saver", factory, "--thread", "t-done", "--verify")
    assert "Imported 1 thread(s)" in capsys.readouterr().out
    call_command("import_checkpoints", "--saver", factory, "--verify")
    out = capsys.readouterr().out
    assert f"Imported {len(THREADS) - 1} thread(s)" in out and "1 skipped" in out


def deployment(db: Path, tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """manage.py and the environment of a service whose store is the SQLite file ``db``,
    migrated: the commands run as a deployment runs them, in processes of their own."""
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DATABASE_URL": f"sqlite:///{db}",
        "LLM_PROVIDER_CHECKPOINT": "sqlite",
        "CHECKPOINTS_DATA_DIR": str(tmp_path),
    }
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v", "0"], env=env, check=True, cwd=tmp_path)
    return manage, env


DEVELOPMENT_STORE = """
import sqlite3, sys
from langgraph.checkpoint.sqlite import SqliteSaver
from checkpoints import from_conn_string
from checkpoints.transfer import copy_threads

with from_conn_string("sqlite:///" + sys.argv[2]) as ours:
    copy_threads(SqliteSaver(sqlite3.connect(sys.argv[1])), ours, thread_ids=["t-done", "t-big"])
"""


def test_import_command_from_a_store_of_ours(lg_sqlite, tmp_path):
    """A development SQLite store of ours into the deployment's store (another database)."""
    seed(lg_sqlite)
    development = tmp_path / "development.sqlite3"
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CHECKPOINTS"))}
    subprocess.run(
        [sys.executable, "-c", DEVELOPMENT_STORE, lg_sqlite.path, str(development)],
        env={**plain, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        check=True,
    )
    db = tmp_path / "deployment.sqlite3"
    manage, env = deployment(db, tmp_path)
    done = subprocess.run(
        [*manage, "import_checkpoints", f"sqlite:///{development}", "--verify"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "Imported 2 thread(s)" in done.stdout and "0 refused" in done.stdout
    assert set(_held(db)) == {"t-done", "t-big"}


def test_export_to_stdout_of_chosen_threads_and_since(lg_sqlite, sqlite_store, capsys):
    from checkpoints.transfer.records import FORMAT_NAME, FORMAT_VERSION

    seed(lg_sqlite)
    call_command("import_checkpoints", f"langgraph+sqlite:///{lg_sqlite.path}")
    capsys.readouterr()

    def exported(*options: str) -> tuple[list[dict], str]:
        call_command("export_checkpoints", "--output", "-", *options)
        captured = capsys.readouterr()
        return [json.loads(line) for line in captured.out.splitlines()], captured.err

    lines, summary = exported("--thread", "t-done")
    assert lines[0]["format"] == FORMAT_NAME
    assert lines[0]["version"] == FORMAT_VERSION
    assert {line["thread_id"] for line in lines if line.get("kind") == "thread"} == {"t-done"}
    assert "Exported 1 thread(s)" in summary  # on stderr, so stdout stays the file
    lines, _ = exported("--since", "2999-01-01")
    assert len(lines) == 1  # the header alone: nothing was written since
    lines, summary = exported("--since", "2000-01-01T00:00:00+00:00")
    assert {line["thread_id"] for line in lines if line.get("kind") == "thread"} == set(THREADS)
    with pytest.raises(CommandError, match="--since 'soon' is not an ISO"):
        call_command("export_checkpoints", "--output", "-", "--since", "soon")


def test_unknown_owner_and_missing_sources_are_named(sqlite_store, tmp_path):
    with pytest.raises(CommandError, match="does not exist"):
        call_command("import_checkpoints", f"langgraph+sqlite:///{tmp_path}/none.sqlite3")
    with pytest.raises(CommandError, match="does not exist"):
        call_command("import_checkpoints", str(tmp_path / "none.jsonl"))
    with pytest.raises(CommandError, match="langgraph-checkpoint-redis"):
        call_command("import_checkpoints", "langgraph+redis://127.0.0.1:6379/0")
    with pytest.raises(CommandError, match="module:callable"):
        call_command("import_checkpoints", "--saver", "nonsense")
    (tmp_path / "e.jsonl").write_text(json.dumps(header()) + "\n")
    with pytest.raises(CommandError, match="'nobody' names no user"):
        call_command("import_checkpoints", str(tmp_path / "e.jsonl"), "--owner", "nobody")


def test_owner_option_owns_threads_naming_none(lg_sqlite, sqlite_store, django_user_model):
    from checkpoints.models import Thread

    user = django_user_model.objects.create(username="importer")
    seed(lg_sqlite)
    call_command(
        "import_checkpoints", f"langgraph+sqlite:///{lg_sqlite.path}", "--owner", "importer"
    )
    # t-big was run without a user_id; the others name alice, who is not a user here.
    assert Thread.objects.get(thread_id="t-big").owner_id == user.pk
    assert Thread.objects.get(thread_id="t-done").owner_id is None


def _many_threads_file(lg_sqlite, path: Path, copies: int) -> dict[str, int]:
    """An export of ``copies`` renamed copies of the seeded threads; thread -> checkpoints."""
    serde = store_serializer()
    source = SaverSource(lg_sqlite)
    records = [source.thread(t) for t in THREADS if t != "t-big"]
    counts = {}
    with open(path, "w") as fh:
        fh.write(json.dumps(header()) + "\n")
        for i in range(copies):
            for record in records:
                record.thread_id = f"k{i:04}-{record.thread_id.split('-', 1)[-1]}"
                counts[record.thread_id] = len(record.checkpoints)
                for line in thread_lines(serde, record):
                    fh.write(json.dumps(line) + "\n")
    return counts


def _held(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return dict(
            conn.execute(
                "SELECT t.thread_id, COUNT(c.id) FROM checkpoints_thread t "
                "LEFT JOIN checkpoints_checkpoint c ON c.thread_id = t.id GROUP BY t.thread_id"
            ).fetchall()
        )


def test_kill_9_mid_import_leaves_whole_threads_then_rerun_completes(lg_sqlite, tmp_path):
    seed(lg_sqlite)
    export = tmp_path / "many.jsonl"
    counts = _many_threads_file(lg_sqlite, export, copies=300)
    db = tmp_path / "target.sqlite3"
    manage, env = deployment(db, tmp_path)
    importer = subprocess.Popen(
        [*manage, "import_checkpoints", str(export)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and importer.poll() is None:
            try:
                if len(_held(db)) >= 20:
                    break
            except sqlite3.OperationalError:
                pass  # the importer holds the write lock
            time.sleep(0.05)
        assert importer.poll() is None, "the import finished before it could be killed"
        importer.send_signal(signal.SIGKILL)
    finally:
        importer.wait()
    assert importer.returncode == -signal.SIGKILL
    held = _held(db)
    assert 20 <= len(held) < len(counts)
    # Whole threads or none: every thread there holds all its checkpoints.
    assert {t: counts[t] for t in held} == held
    rerun = subprocess.run(
        [*manage, "import_checkpoints", str(export), "--verify"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert f"Imported {len(counts) - len(held)} thread(s)" in rerun.stdout
    assert f"{len(held)} skipped" in rerun.stdout
    assert _held(db) == counts
