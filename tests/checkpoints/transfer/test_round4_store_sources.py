"""An import's PostgreSQL store source is read, never made: the twin of ``sqlite:///missing``.

Before: ``import_checkpoints postgres://.../empty_db`` ran the store's migrations on the
source (auth, contenttypes and the store's tables created in it) and reported "Imported 0
thread(s)"; an unreachable server or a missing database printed a raw OperationalError
traceback."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.conf import settings

from checkpoints.dburl import parse_database_url
from tests.services import need_service
from tests.standalone import ROOT, service_env


def _server() -> dict:
    need_service(settings.POSTGRES_UNAVAILABLE)
    entry = parse_database_url(settings.POSTGRES_URL)
    return {"host": entry["HOST"], "port": entry["PORT"] or 5432, "user": entry["USER"] or None}


def _import(tmp_path, source: str) -> subprocess.CompletedProcess:
    env = service_env(
        tmp_path, DATABASE_URL=f"sqlite:///{tmp_path / 'target.sqlite3'}", PYTHONPATH=str(ROOT)
    )
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True, timeout=300
    )
    return subprocess.run(
        [sys.executable, "manage.py", "import_checkpoints", source],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def empty_database():
    server = _server()
    name = f"round4_empty_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield server, name
    with psycopg.connect(dbname="postgres", autocommit=True, **server) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _tables(server: dict, name: str) -> list[str]:
    with psycopg.connect(dbname=name, **server) as conn:
        rows = conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = 'public'"
        ).fetchall()
    return [r[0] for r in rows]


def test_an_empty_postgres_source_is_refused_and_left_empty(tmp_path, empty_database):
    server, name = empty_database
    user = f"{server['user']}@" if server["user"] else ""
    done = _import(tmp_path, f"postgres://{user}{server['host']}:{server['port']}/{name}")
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "no checkpoint store" in done.stderr, done.stderr[-3000:]
    assert _tables(server, name) == []


@pytest.mark.parametrize("where", ["missing-database", "no-server"])
def test_an_unreachable_postgres_source_is_named_not_a_traceback(tmp_path, where):
    server = _server()
    user = f"{server['user']}@" if server["user"] else ""
    if where == "missing-database":
        source = f"postgres://{user}{server['host']}:{server['port']}/round4_no_such_database"
    else:
        source = f"postgres://{user}127.0.0.1:1/none"
    done = _import(tmp_path, source)
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert "cannot open the checkpoint store" in done.stderr, done.stderr[-3000:]
