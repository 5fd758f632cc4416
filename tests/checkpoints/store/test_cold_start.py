"""A plain script's first use of the store loads what a saver needs and plans no migration:
a new store is made from the models (`checkpoints.connect._create_new_store`), a current one
only checked (`checkpoints.connect._ensure_tables`); one behind is migrated, one ahead of
this code is refused, naming the migration it does not know."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from django.db.migrations.loader import MigrationLoader

from checkpoints.connect import STORE_APPS, _shipped_migrations
from tests.standalone import plain_env, run_python

# Opens the store at argv[1] (after rolling the store's app argv[2] back to migration
# argv[3], when given) and reports whether the migration planner ran, whether the store was
# made from the models, and what was loaded.
OPEN = """
import json, sys
import checkpoints.connect as connect
from checkpoints.errors import CheckpointStoreFormatError

planned, made = [], []
real_pending = connect._store_migrations_pending
connect._store_migrations_pending = lambda alias, **kw: planned.append(alias) or real_pending(
    alias, **kw
)
real_create = connect._create_new_store
connect._create_new_store = lambda alias: made.append(real_create(alias)) or made[-1]
if len(sys.argv) > 3:
    with connect.from_conn_string(sys.argv[1]):
        from django.core.management import call_command
        call_command("migrate", sys.argv[2], sys.argv[3], verbosity=0)
    connect._ready_aliases.clear()
    planned.clear()
    made.clear()
try:
    with connect.from_conn_string(sys.argv[1]) as saver:
        config = {"configurable": {"thread_id": "cold", "checkpoint_ns": ""}}
        saver.get_tuple(config)
except CheckpointStoreFormatError as exc:
    print(json.dumps({"refused": exc.message}))
    raise SystemExit(0)
from django.conf import settings
print(json.dumps({
    "planned": len(planned),
    "made": made.count(True),
    "modules": sorted(sys.modules),
    "apps": list(settings.INSTALLED_APPS),
}))
"""
# Loaded by the admin, the API, PostgreSQL or encryption: none of them by a SQLite saver.
NOT_FOR_A_SAVER = (
    "django.contrib.admin",
    "django.contrib.sessions",
    "django.contrib.messages",
    "rest_framework",
    "drf_spectacular",
    "checkpoints.api",
    "checkpoints.admin",
    "retention.api",
    "retention.admin",
    "psycopg",
    "psycopg_pool",
    "cryptography",
    "django.db.migrations.executor",
    "django.core.management.commands.migrate",
)


def open_store(url: str, tmp_path: Path, *rollback: str) -> dict:
    done = run_python(["-c", OPEN, url, *rollback], cwd=tmp_path)
    return json.loads(done.stdout.splitlines()[-1])


def recorded(path: Path, app: str) -> set[str]:
    with sqlite3.connect(path) as db:
        rows = db.execute("SELECT name FROM django_migrations WHERE app = ?", (app,))
        return {name for (name,) in rows}


def test_a_new_file_is_made_and_a_current_one_is_only_checked(tmp_path):
    path = tmp_path / "store.sqlite3"
    first = open_store(f"sqlite:///{path}", tmp_path)
    assert (first["planned"], first["made"]) == (0, 1), "a new store was migrated"
    for app in STORE_APPS:
        assert recorded(path, app) == _shipped_migrations(app)
    loaded = [m for m in first["modules"] if m.startswith(NOT_FOR_A_SAVER)]
    assert loaded == [], f"making a new SQLite store loaded {loaded}"

    second = open_store(f"sqlite:///{path}", tmp_path)
    assert (second["planned"], second["made"]) == (0, 0), "a current store was planned or made"
    loaded = [m for m in second["modules"] if m.startswith(NOT_FOR_A_SAVER)]
    assert loaded == [], f"a SQLite saver's script loaded {loaded}"
    assert second["apps"] == [
        "django.contrib.contenttypes",
        "django.contrib.auth",
        "checkpoints.apps.CheckpointsConfig",
        "retention.apps.RetentionConfig",
    ]


def test_a_store_one_migration_behind_is_migrated(tmp_path):
    path = tmp_path / "behind.sqlite3"
    shipped = sorted(_shipped_migrations("checkpoints"))
    last, before_last = shipped[-1], shipped[-2]
    # The first open makes the store; then it is rolled back one migration and reopened.
    reopened = open_store(f"sqlite:///{path}", tmp_path, "checkpoints", before_last)
    assert (reopened["planned"], reopened["made"]) == (1, 0), reopened
    assert last in recorded(path, "checkpoints")
    assert open_store(f"sqlite:///{path}", tmp_path)["planned"] == 0


def test_a_store_ahead_of_the_code_is_refused_naming_the_migration(tmp_path):
    path = tmp_path / "ahead.sqlite3"
    open_store(f"sqlite:///{path}", tmp_path)
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO django_migrations (app, name, applied) "
            "VALUES ('checkpoints', '9999_from_a_newer_version', '2030-01-01 00:00:00')"
        )
    refused = open_store(f"sqlite:///{path}", tmp_path)["refused"]
    assert "checkpoints.9999_from_a_newer_version" in refused, refused
    assert "newer version" in refused, refused


def test_a_refused_store_stops_the_script(tmp_path):
    """Uncaught, the refusal ends a user's script with the message, not a traceback deep
    inside Django's migration executor."""
    path = tmp_path / "ahead.sqlite3"
    open_store(f"sqlite:///{path}", tmp_path)
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO django_migrations (app, name, applied) "
            "VALUES ('retention', '9999_later', '2030-01-01 00:00:00')"
        )
    script = (
        "import sys\nfrom checkpoints import from_conn_string\n"
        "from_conn_string(sys.argv[1]).__enter__()"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, f"sqlite:///{path}"],
        cwd=tmp_path,
        env=plain_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode != 0
    assert "CheckpointStoreFormatError" in done.stderr and "retention.9999_later" in done.stderr


def test_the_fast_check_lists_the_migrations_djangos_loader_finds():
    """The fast path's list of an app's migrations (file names, nothing imported) is the
    one Django's migration loader builds by importing them."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    for app in STORE_APPS:
        assert _shipped_migrations(app) == {
            name for label, name in loader.disk_migrations if label == app
        }
