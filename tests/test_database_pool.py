"""DATABASE_POOL_SIZE: Django's own connection pool on a PostgreSQL default database, in the
server processes (project.asgi, project.wsgi); management commands connect directly."""

from __future__ import annotations

import subprocess
import sys

from tests.standalone import ROOT, service_env, service_setting

PG_URL = "postgres://store@127.0.0.1:5432/store"
POOL = 'DATABASES["default"].get("OPTIONS", {}).get("pool")'


def server_pool(tmp_path, entry: str, **env: str) -> subprocess.CompletedProcess:
    """The pool option as a server process started on ``entry`` has it (nothing connects)."""
    code = f"import {entry}; from django.conf import settings; print(settings.{POOL})"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=service_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_postgresql_server_pools_its_connections_by_default(tmp_path):
    for entry in ("project.asgi", "project.wsgi"):
        done = server_pool(tmp_path, entry, DATABASE_URL=PG_URL)
        assert done.stdout.splitlines()[-1] == "{'min_size': 0, 'max_size': 2, 'timeout': 10}", (
            done.stderr[-2000:]
        )


def test_management_commands_connect_directly(tmp_path):
    """So a wrong DATABASE_URL is the driver's own error at once (tests/test_first_hour.py)."""
    done = service_setting(tmp_path, POOL, DATABASE_URL=PG_URL)
    assert done.stdout.splitlines()[-1] == "None", done.stderr[-2000:]


def test_the_environment_sizes_the_pool_and_0_turns_it_off(tmp_path):
    sized = server_pool(tmp_path, "project.asgi", DATABASE_URL=PG_URL, DATABASE_POOL_SIZE="6")
    assert "'max_size': 6" in sized.stdout.splitlines()[-1], sized.stderr[-2000:]
    off = server_pool(tmp_path, "project.asgi", DATABASE_URL=PG_URL, DATABASE_POOL_SIZE="0")
    assert off.stdout.splitlines()[-1] == "None", off.stderr[-2000:]


def test_sqlite_gets_no_pool(tmp_path):
    url = f"sqlite:///{tmp_path}/db.sqlite3"
    done = server_pool(tmp_path, "project.asgi", DATABASE_URL=url)
    assert done.stdout.splitlines()[-1] == "None", done.stderr[-2000:]


def test_a_bad_size_is_refused_naming_the_variable(tmp_path):
    for bad in ("-1", "four", "2.5"):
        refused = service_setting(tmp_path, POOL, DATABASE_URL=PG_URL, DATABASE_POOL_SIZE=bad)
        assert refused.returncode != 0
        assert (
            f"DATABASE_POOL_SIZE must be a whole number of connections (0 turns the pool off), "
            f"not {bad!r}" in refused.stderr
        ), refused.stderr[-2000:]
