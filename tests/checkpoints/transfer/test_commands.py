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
from django.conf import settings
from django.core.management import CommandError, call_command

from checkpoints.codec.serde import store_serializer
from checkpoints.store.capabilities import STAGING_PREFIX
from checkpoints.transfer import SaverSource
from checkpoints.transfer.records import header, thread_lines
from tests.checkpoints.transfer.graphs import THREADS, seed
from tests.checkpoints.transfer.records_helpers import HELD, deployment, held
from tests.services import need_service, redis_tools_unavailable
from tests.store_helpers import make_saver

ROOT = Path(__file__).resolve().parents[3]
# The commands write the deployment's store (the default database) from this process.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sqlite_store(request):
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
    assert set(held(db)) == {"t-done", "t-big"}


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
    # Only the package's own serializer reads that store, and it revives what rows name:
    # refused unless the operator vouches for the store, before anything connects.
    with pytest.raises(CommandError, match="--trust-source"):
        call_command("import_checkpoints", "langgraph+redis://127.0.0.1:1/0")
    # The package is installed (dev extra); the shared Redis has no RediSearch module, so
    # the store's setup fails, and the error names the modules it needs.
    with pytest.raises(CommandError, match="RedisJSON and RediSearch modules") as missing:
        call_command("import_checkpoints", "langgraph+redis://127.0.0.1:6379/0", "--trust-source")
    assert "FT." in str(missing.value)  # Redis's own refusal, kept in the message
    with pytest.raises(CommandError, match="module:callable"):
        call_command("import_checkpoints", "--saver", "nonsense")
    (tmp_path / "e.jsonl").write_text(json.dumps(header()) + "\n")
    with pytest.raises(CommandError, match="'nobody' names no user"):
        call_command("import_checkpoints", str(tmp_path / "e.jsonl"), "--owner", "nobody")


def test_owner_option_owns_threads_naming_none(lg_sqlite, sqlite_store, django_user_model):
    from checkpoints.models import Thread

    user = django_user_model.objects.create(username="importer")
    django_user_model.objects.create(username="alice")
    seed(lg_sqlite)
    call_command(
        "import_checkpoints", f"langgraph+sqlite:///{lg_sqlite.path}", "--owner", "importer"
    )
    # LangGraph records no owners: the metadata's user_id "alice" is only a claim.
    assert set(Thread.objects.values_list("owner_id", flat=True)) == {user.pk}


def test_owner_from_metadata_is_an_explicit_choice(lg_sqlite, sqlite_store, django_user_model):
    from checkpoints.models import Thread

    importer = django_user_model.objects.create(username="importer")
    alice = django_user_model.objects.create(username="alice")
    seed(lg_sqlite)
    call_command(
        "import_checkpoints",
        f"langgraph+sqlite:///{lg_sqlite.path}",
        "--owner-from-metadata",
        "user_id",
        "--owner",
        "importer",
    )
    owners = dict(Thread.objects.values_list("thread_id", "owner_id"))
    # t-big was run without a user_id; the others name alice in their metadata.
    assert owners == {t: importer.pk if t == "t-big" else alice.pk for t in THREADS}


def _many_threads_file(lg_sqlite, path: Path, copies: int) -> tuple[dict[str, int], set[str]]:
    """An export of ``copies`` renamed copies of the seeded threads, every other one with a
    finished mark: (thread -> checkpoints, the marked threads)."""
    serde = store_serializer()
    source = SaverSource(lg_sqlite)
    records = [source.thread(t) for t in THREADS if t != "t-big"]
    counts, marked = {}, set()
    with open(path, "w") as fh:
        fh.write(json.dumps(header()) + "\n")
        for i in range(copies):
            for record in records:
                record.thread_id = f"k{i:04}-{record.thread_id.split('-', 1)[-1]}"
                counts[record.thread_id] = len(record.checkpoints)
                record.finished = None
                if i % 2:
                    record.finished = {"due_at": "2030-01-01T00:00:00+00:00", "owner": ""}
                    marked.add(record.thread_id)
                for line in thread_lines(serde, record):
                    fh.write(json.dumps(line) + "\n")
    return counts, marked


class KillTarget:
    """The deployment store an import is killed in: its environment, what it holds."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind, self.db = kind, tmp_path / "target.sqlite3"
        self.env_extra: dict[str, str] = {}
        self.pg_name = self.redis = None
        if kind == "postgres":
            self.pg_name = f"cp_kill_{os.getpid()}"
            self._admin(
                f"DROP DATABASE IF EXISTS {self.pg_name}", f"CREATE DATABASE {self.pg_name}"
            )
            self.env_extra = {
                "DATABASE_URL": f"postgres://postgres@127.0.0.1:5432/{self.pg_name}",
                "LLM_PROVIDER_CHECKPOINT": "postgres",
            }
        elif kind == "redis":
            from tests.private_servers import RedisServer

            self.redis = RedisServer()
            self.redis.start()
            self.env_extra = {
                "LLM_PROVIDER_CHECKPOINT": "redis",
                "LLM_PROVIDER_CHECKPOINT_CONN_STRING": self.redis.url,
            }

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect("postgresql://postgres@127.0.0.1:5432/postgres", autocommit=True) as c:
            for statement in statements:
                c.execute(statement)

    def held(self) -> dict[str, int]:
        """Thread -> checkpoints of every thread the store holds (staging copies aside)."""
        if self.kind == "sqlite":
            return held(self.db)
        if self.kind == "postgres":
            import psycopg

            url = f"postgresql://postgres@127.0.0.1:5432/{self.pg_name}"
            with psycopg.connect(url) as conn:
                return dict(conn.execute(HELD).fetchall())
        saver = self.saver()
        return {
            t: saver.thread_holdings(t).checkpoints
            for t in saver.threads()
            if not t.startswith(STAGING_PREFIX)
        }

    def marked(self, threads) -> set[str]:
        if self.kind == "redis":
            saver = self.saver()
            return {t for t in threads if saver.finished_mark(t) is not None}
        if self.kind == "sqlite":
            with sqlite3.connect(self.db) as conn:
                rows = conn.execute("SELECT thread_id FROM checkpoints_finishedmark").fetchall()
        else:
            import psycopg

            url = f"postgresql://postgres@127.0.0.1:5432/{self.pg_name}"
            with psycopg.connect(url) as conn:
                rows = conn.execute("SELECT thread_id FROM checkpoints_finishedmark").fetchall()
        return {r[0] for r in rows} & set(threads)

    def saver(self):
        from checkpoints.store.registry import get_saver

        return get_saver("redis", conn_string=self.redis.url)

    def close(self) -> None:
        if self.redis is not None:
            self.redis.stop()
        if self.pg_name is not None:
            self._admin(f"DROP DATABASE IF EXISTS {self.pg_name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgres", "redis"])
def kill_target(request, tmp_path):
    if request.param == "postgres":
        need_service(settings.POSTGRES_UNAVAILABLE)
    if request.param == "redis":
        need_service(redis_tools_unavailable())
    target = KillTarget(request.param, tmp_path)
    try:
        yield target
    finally:
        target.close()


def test_kill_9_mid_import_leaves_whole_threads_then_rerun_completes(
    lg_sqlite, tmp_path, kill_target
):
    seed(lg_sqlite)
    export = tmp_path / "many.jsonl"
    counts, marked = _many_threads_file(lg_sqlite, export, copies=300)
    manage, env = deployment(kill_target.db, tmp_path, **kill_target.env_extra)
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
                if len(kill_target.held()) >= 20:
                    break
            except sqlite3.OperationalError:
                pass  # the importer holds the write lock
            time.sleep(0.05)
        assert importer.poll() is None, "the import finished before it could be killed"
        importer.send_signal(signal.SIGKILL)
    finally:
        importer.wait()
    assert importer.returncode == -signal.SIGKILL
    held = kill_target.held()
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
    assert kill_target.held() == counts
    # Every finished mark arrived, the killed thread's too (on Redis a mark is written
    # after the thread's atomic copy: the re-run completes a thread killed in between).
    assert kill_target.marked(counts) == marked
    imported = int(rerun.stdout.split("Imported ", 1)[1].split(" ", 1)[0])
    assert f"{len(counts) - imported} skipped" in rerun.stdout
    assert len(counts) - len(held) <= imported <= len(counts) - len(held) + 1


SCRIPT_STORE_EXTRAS = """
import io, json, sqlite3, sys
from langgraph.checkpoint.sqlite import SqliteSaver
from checkpoints import from_conn_string
from checkpoints.errors import InvalidCheckpointInput
from checkpoints.transfer import copy_threads, export_threads

source = SqliteSaver(sqlite3.connect(sys.argv[1]))
with from_conn_string("sqlite:///" + sys.argv[2]) as ours:
    try:
        copy_threads(source, ours, thread_ids=["t-done"], thread_metadata=["team"])
    except InvalidCheckpointInput as exc:
        refused = [exc.field, str(exc)]
    copied = copy_threads(source, ours, thread_ids=["t-done"]).threads
    out = io.BytesIO()
    export_threads(ours, out)
    kinds = [json.loads(line).get("kind") for line in out.getvalue().splitlines()]
print(json.dumps({"refused": refused, "copied": copied, "threads": kinds.count("thread")}))
"""


def test_a_plain_scripts_store_refuses_lifting_metadata_and_exports_without_it(lg_sqlite, tmp_path):
    """A plain script's store has no threads API table: lifting metadata is refused up front
    naming what to do, and export works (no thread metadata to carry)."""
    seed(lg_sqlite)
    plain = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CHECKPOINTS"))}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT_STORE_EXTRAS, lg_sqlite.path, str(tmp_path / "s.sqlite3")],
        env={**plain, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    field, words = report["refused"]
    assert field == "thread_metadata" and "manage.py import_checkpoints" in words
    assert report["copied"] == 1 and report["threads"] == 1
