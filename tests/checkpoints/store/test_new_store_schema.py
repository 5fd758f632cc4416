"""A new store made straight from the models (`checkpoints.connect._create_new_store`) is the
store ``migrate`` makes: the same tables, columns, indexes, constraints and sequences on
SQLite and PostgreSQL, and the same migrations recorded. Also: the migrations that run code
are the ones the fast path knows, a database with a table of its own is migrated, and
scripts making one new store at once all get it, made once.

Column order is not compared: ``migrate`` puts a column added (and, on SQLite, altered) by a
later migration last, the models keep their own order; the ORM names every column.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import migrations
from django.db.migrations.loader import MigrationLoader

from checkpoints.connect import NEW_STORE_APPS, STANDALONE_APPS
from checkpoints.store.postgres.saver import PostgresStore
from checkpoints.store.sqlite.saver import SqliteStore
from tests.standalone import fresh_postgres_database, plain_env, run_python

# Opens the store at argv[1]; argv[2] "fast" (the fast path must make it) or "migrate" (the
# fast path is turned off). Prints whether this process made the store from the models.
BUILD = """
import json, sys
import checkpoints.connect as connect

made = []
real = connect._create_new_store
if sys.argv[2] == "migrate":
    connect._create_new_store = lambda alias: False
else:
    connect._create_new_store = lambda alias: made.append(real(alias)) or made[-1]
with connect.from_conn_string(sys.argv[1]) as saver:
    saver.get_tuple({"configurable": {"thread_id": "new", "checkpoint_ns": ""}})
print(json.dumps({"made": made == [True]}))
"""

# Migrations whose code runs beyond their models' state, and why a new store needs nothing
# more from them than its dialect saver's new_store_extra_sql.
RUNS_CODE = {
    # Fills the content types' legacy name: no rows in a new database.
    ("contenttypes", "0002_remove_content_type_name"),
    # Moves proxy models' permissions: no rows in a new database.
    ("auth", "0011_update_proxy_permissions"),
    # The GIN index on PostgreSQL: PostgresStore.new_store_extra_sql.
    ("checkpoints", "0002_metadata_gin"),
    # The thread's children's keys ON DELETE CASCADE, on PostgreSQL: the same.
    ("checkpoints", "0009_thread_children_cascade"),
    # The value columns' LZ4 compression, on PostgreSQL: the same.
    ("checkpoints", "0010_values_lz4"),
}


def build(url: str, how: str, cwd: Path) -> bool:
    done = run_python(["-c", BUILD, url, how], cwd=cwd)
    made = json.loads(done.stdout.splitlines()[-1])["made"]
    assert made == (how == "fast"), f"{how}: made from the models: {made}"
    return made


def top_level_items(body: str) -> list[str]:
    """A CREATE TABLE's column and constraint definitions: split at the commas outside
    parentheses and quotes."""
    items, depth, quote, start = [], 0, "", 0
    for index, char in enumerate(body):
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            items.append(body[start:index].strip())
            start = index + 1
    items.append(body[start:].strip())
    return items


def sqlite_schema(path: Path) -> dict:
    """Every table's DDL (its definitions sorted), columns, indexes and foreign keys;
    every index's and trigger's DDL; the recorded migrations."""
    with sqlite3.connect(path) as db:
        schema: dict = {
            "pragma": {
                p: db.execute(f"PRAGMA {p}").fetchone()[0]
                for p in ("auto_vacuum", "journal_mode", "user_version", "encoding")
            }
        }
        rows = db.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
        for kind, name, table, sql in rows:
            entry: dict = {"type": kind, "table": table}
            if kind == "table" and sql:
                head, body = sql.split("(", 1)
                entry["head"] = head.strip()
                entry["definitions"] = sorted(top_level_items(body.rsplit(")", 1)[0]))
                # Each without the column's position (cid) in its table.
                entry["columns"] = sorted(
                    row[1:] for row in db.execute(f'PRAGMA table_xinfo("{name}")')
                )
                entry["foreign_keys"] = sorted(
                    row[2:] for row in db.execute(f'PRAGMA foreign_key_list("{name}")')
                )
                entry["indexes"] = sorted(
                    (
                        index[1:],
                        [
                            (key[0], *key[2:])
                            for key in db.execute(f'PRAGMA index_xinfo("{index[1]}")')
                        ],
                    )
                    for index in db.execute(f'PRAGMA index_list("{name}")')
                )
            else:
                entry["sql"] = sql
            schema[f"{kind} {name}"] = entry
        schema["migrations"] = sorted(db.execute("SELECT app, name FROM django_migrations"))
    return schema


PG_QUERIES = {
    "columns": """
        SELECT table_name, column_name, data_type, character_maximum_length,
               numeric_precision, numeric_scale, is_nullable, column_default, is_identity,
               identity_generation, identity_start, identity_increment, collation_name
        FROM information_schema.columns WHERE table_schema = current_schema()""",
    "tables": """
        SELECT c.relname, c.relkind, c.relpersistence, c.reloptions::text
        FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace""",
    "indexes": """
        SELECT tablename, indexname, indexdef FROM pg_indexes
        WHERE schemaname = current_schema()""",
    "constraints": """
        SELECT conrelid::regclass::text, conname, contype, condeferrable, condeferred,
               convalidated, pg_get_constraintdef(oid)
        FROM pg_constraint WHERE connamespace = current_schema()::regnamespace""",
    "sequences": """
        SELECT sequencename, data_type::text, start_value, min_value, max_value,
               increment_by, cycle FROM pg_sequences WHERE schemaname = current_schema()""",
    "triggers": "SELECT tgrelid::regclass::text, tgname FROM pg_trigger WHERE NOT tgisinternal",
    "extensions": "SELECT extname FROM pg_extension",
    # How each column's values are compressed when stored (0010).
    "compression": """
        SELECT attrelid::regclass::text, attname, attcompression FROM pg_attribute
        WHERE attrelid IN (SELECT oid FROM pg_class
                           WHERE relnamespace = current_schema()::regnamespace)
          AND attnum > 0 AND NOT attisdropped""",
    "migrations": "SELECT app, name FROM django_migrations",
}


def postgres_schema(url: str) -> dict:
    import psycopg

    with psycopg.connect(url) as conn:
        return {
            key: sorted(tuple(map(str, row)) for row in conn.execute(query).fetchall())
            for key, query in PG_QUERIES.items()
        }


def test_a_new_sqlite_store_is_the_migrated_one(tmp_path):
    fast, migrated = tmp_path / "fast.sqlite3", tmp_path / "migrated.sqlite3"
    build(f"sqlite:///{fast}", "fast", tmp_path)
    build(f"sqlite:///{migrated}", "migrate", tmp_path)
    made, expected = sqlite_schema(fast), sqlite_schema(migrated)
    assert sorted(made) == sorted(expected)
    for key in expected:
        assert made[key] == expected[key], key
    assert len(expected) > 50 and len(expected["migrations"]) > 25


@pytest.mark.postgres
def test_a_new_postgres_store_is_the_migrated_one(tmp_path):
    with fresh_postgres_database("fast") as fast, fresh_postgres_database("migrated") as migrated:
        build(fast, "fast", tmp_path)
        build(migrated, "migrate", tmp_path)
        made, expected = postgres_schema(fast), postgres_schema(migrated)
    for key in PG_QUERIES:
        assert made[key] == expected[key], key
    assert any("checkpoint_metadata_gin" in row[1] for row in expected["indexes"])
    # A thread's children go with it by their keys (0009): a later migration re-making one
    # of these keys without the cascade would leave delete_thread failing at commit.
    to_thread = sorted(
        (row[0], row[6])
        for row in expected["constraints"]
        if row[2] == "f" and "REFERENCES checkpoints_thread(id)" in row[6]
    )
    assert to_thread == [
        (
            table,
            "FOREIGN KEY (thread_id) REFERENCES checkpoints_thread(id) ON DELETE CASCADE "
            "DEFERRABLE INITIALLY DEFERRED",
        )
        for table in (
            "checkpoints_channelblob",
            "checkpoints_checkpoint",
            "checkpoints_pendingwrite",
        )
    ], to_thread
    # Values stored with LZ4 (0010; this server has it): a later migration re-making one
    # of these columns without it would have the server compress them with pglz again.
    lz4 = sorted((row[0], row[1]) for row in expected["compression"] if row[2] == "l")
    assert lz4 == [
        ("checkpoints_channelblob", "blob"),
        ("checkpoints_checkpoint", "checkpoint"),
        ("checkpoints_pendingwrite", "blob"),
    ], lz4


def test_the_migrations_that_run_code_are_the_known_ones():
    """A migration with RunPython/RunSQL (or a state/database split) needs a look: does a
    new store need what it does? Add it to RUNS_CODE, and to the dialect saver's
    new_store_extra_sql if so."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    code = (migrations.RunPython, migrations.RunSQL, migrations.SeparateDatabaseAndState)
    found = {
        key
        for key, migration in loader.disk_migrations.items()
        if key[0] in NEW_STORE_APPS
        and any(isinstance(operation, code) for operation in migration.operations)
    }
    assert found == RUNS_CODE
    assert not any(
        migration.replaces
        for key, migration in loader.disk_migrations.items()
        if key[0] in NEW_STORE_APPS
    ), "a squashed migration: check what the fast path records"
    for dialect in (PostgresStore, SqliteStore):
        for app_label, name, _ in dialect.new_store_extra_sql:
            assert (app_label, name) in RUNS_CODE, (dialect.vendor, name)
    # The apps made from their models are exactly the standalone configuration's.
    labels = [name.split(".apps.")[0].rsplit(".", 1)[-1] for name in STANDALONE_APPS]
    assert tuple(labels) == NEW_STORE_APPS


def test_a_database_with_a_table_of_its_own_is_migrated(tmp_path):
    path = tmp_path / "theirs.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (body text)")
    done = run_python(["-c", BUILD, f"sqlite:///{path}", "fast"], cwd=tmp_path)
    assert json.loads(done.stdout.splitlines()[-1])["made"] is False
    tables = {
        name
        for (name,) in sqlite3.connect(path).execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
        )
    }
    assert {"notes", "checkpoints_checkpoint", "retention_sweeprun", "django_migrations"} <= tables


def make_at_once(url: str, tmp_path: Path, count: int = 4) -> list[bool]:
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", BUILD, url, "fast"],
            cwd=tmp_path,
            env=plain_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    made = []
    for run in runs:
        out, err = run.communicate(timeout=180)
        assert run.returncode == 0, err[-3000:]
        made.append(json.loads(out.splitlines()[-1])["made"])
    return made


def test_scripts_making_one_new_sqlite_store_at_once(tmp_path):
    path = tmp_path / "new.sqlite3"
    assert make_at_once(f"sqlite:///{path}", tmp_path).count(True) == 1
    rows = sqlite3.connect(path).execute("SELECT app, name FROM django_migrations").fetchall()
    assert len(rows) == len(set(rows))


@pytest.mark.postgres
def test_scripts_making_one_new_postgres_store_at_once(tmp_path):
    import psycopg

    with fresh_postgres_database("new_at_once") as url:
        assert make_at_once(url, tmp_path).count(True) == 1
        with psycopg.connect(url) as conn:
            rows = conn.execute("SELECT app, name FROM django_migrations").fetchall()
    assert len(rows) == len(set(rows))
