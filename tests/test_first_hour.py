"""An operator's first hour (issue 55): `manage.py check` connects to what the settings name
and says what is wrong in one line each; settings and connection errors are a few lines, no
traceback; a missing static manifest is a check, not a 500; importing the settings writes
nothing; with the cache's Redis down the API, its throttles and the lockouts keep working."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client, override_settings

from tests.private_servers import free_port
from tests.reliability_fixtures import health
from tests.services import need_service
from tests.standalone import ROOT, service_env

SECRET = "test-only-" + "a1b2c3d4e5f6g7h8" * 4
PROD_ENV = {"DJANGO_DEBUG": "0", "DJANGO_SECRET_KEY": SECRET, "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}
PG = "postgres://postgres@127.0.0.1:5432"
# A few lines: Django's header, the findings, its count. Never a traceback's dozens.
MOST_LINES = 10


def manage(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**service_env(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def said(done: subprocess.CompletedProcess) -> str:
    """What the command printed, checked to be a few lines without a traceback."""
    text = done.stdout + done.stderr
    lines = [line for line in text.splitlines() if line.strip()]
    assert "Traceback" not in text, text
    assert len(lines) <= MOST_LINES, text
    return text


def finding(text: str, check_id: str) -> str:
    """The one line of ``check_id``."""
    [line] = [line for line in text.splitlines() if f"({check_id})" in line]
    return line


def migrated(tmp_path) -> Path:
    done = manage(tmp_path, "migrate", "--verbosity", "0")
    assert done.returncode == 0, done.stderr
    return tmp_path


def postgres_needed():
    need_service(settings.POSTGRES_UNAVAILABLE)


# -- manage.py check connects ------------------------------------------------------------
def test_a_migrated_store_checks_clean(tmp_path):
    done = manage(migrated(tmp_path), "check")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "System check identified no issues" in done.stdout


def test_unapplied_migrations_warn_and_migrate_still_runs(tmp_path):
    done = manage(tmp_path, "check")
    assert done.returncode == 0, done.stdout + done.stderr
    line = finding(said(done), "checkpoints.W041")
    assert "migration(s) not applied" in line and "fix: run `manage.py migrate`" in line
    assert str(tmp_path / "checkpoints.sqlite3") in line
    migrated(tmp_path)
    assert "W041" not in manage(tmp_path, "check").stderr


def test_an_unreachable_database_names_the_url_and_the_fix(tmp_path):
    port = free_port()
    done = manage(tmp_path, "check", DATABASE_URL=f"postgres://postgres:hunter2@127.0.0.1:{port}/x")
    assert done.returncode == 1
    line = finding(said(done), "checkpoints.E040")
    assert (
        f"DATABASE_URL (DATABASES['default']) is postgres://postgres:***@127.0.0.1:{port}/x" in line
    )
    assert "nothing accepts connections" in line and "start PostgreSQL there" in line
    assert "hunter2" not in done.stdout + done.stderr
    assert "migrate" not in line


def test_a_missing_database_says_create_it(tmp_path):
    postgres_needed()
    name = f"no_such_db_{uuid.uuid4().hex[:8]}"
    done = manage(
        tmp_path, "check", DATABASE_URL=f"{PG}/{name}", LLM_PROVIDER_CHECKPOINT="postgres"
    )
    assert done.returncode == 1
    line = finding(said(done), "checkpoints.E040")
    assert (
        f"database '{name}' does not exist" in line
        and f"createdb -h 127.0.0.1 -p 5432 {name}" in line
    )
    assert "migrate" not in line


def test_a_wrong_role_is_not_told_to_migrate(tmp_path):
    postgres_needed()
    role = f"no_such_role_{uuid.uuid4().hex[:8]}"
    url = f"postgres://{role}:s3cret@127.0.0.1:5432/postgres"
    done = manage(tmp_path, "check", DATABASE_URL=url, LLM_PROVIDER_CHECKPOINT="postgres")
    assert done.returncode == 1
    line = finding(said(done), "checkpoints.E040")
    assert f"role '{role}' does not exist" in line and "correct the user in the URL" in line
    assert "s3cret" not in done.stdout + done.stderr and "migrate" not in line


def test_a_port_where_something_else_listens_says_correct_the_port(tmp_path):
    with socket.socket() as mute:
        mute.bind(("127.0.0.1", 0))
        mute.listen()  # connections wait in the backlog, never answered
        port = mute.getsockname()[1]
        done = manage(
            tmp_path,
            "check",
            DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/store",
            LLM_PROVIDER_CHECKPOINT="postgres",
        )
    assert done.returncode == 1
    line = finding(said(done), "checkpoints.E040")
    assert "did not answer as PostgreSQL" in line and "correct the port in the URL" in line


def test_a_provider_that_does_not_match_the_database(tmp_path):
    done = manage(migrated(tmp_path), "check", LLM_PROVIDER_CHECKPOINT="postgres")
    assert done.returncode == 1
    line = finding(said(done), "checkpoints.E042")
    assert "LLM_PROVIDER_CHECKPOINT (CHECKPOINTS['PROVIDER']) is 'postgres'" in line
    assert "database 'default' is sqlite" in line


def test_a_role_that_cannot_read_the_tables_is_told_to_grant(tmp_path):
    postgres_needed()
    import psycopg

    suffix = uuid.uuid4().hex[:8]
    name, role = f"first_hour_{suffix}", f"reader_{suffix}"
    with psycopg.connect(f"{PG}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        admin.execute(f"CREATE ROLE {role} LOGIN")
    try:
        owner = {"DATABASE_URL": f"{PG}/{name}", "LLM_PROVIDER_CHECKPOINT": "postgres"}
        assert manage(tmp_path, "migrate", "--verbosity", "0", **owner).returncode == 0
        stranger = {**owner, "DATABASE_URL": f"postgres://{role}@127.0.0.1:5432/{name}"}
        done = manage(tmp_path, "check", **stranger)
        assert done.returncode == 1
        text = said(done)
        line = finding(text, "checkpoints.E041")
        assert f"role '{role}' may not read the checkpoint tables" in line
        assert (
            f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}" in line
        )
        assert "manage.py migrate" not in text
    finally:
        with psycopg.connect(f"{PG}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
            admin.execute(f"DROP ROLE IF EXISTS {role}")


def test_an_unreachable_cache_redis_warns_that_limits_count_per_process(tmp_path):
    port = free_port()
    done = manage(migrated(tmp_path), "check", REDIS_URL=f"redis://127.0.0.1:{port}/0")
    assert done.returncode == 0  # the service runs, degraded
    line = finding(said(done), "checkpoints.W040")
    assert f"REDIS_URL (CACHES['default']['LOCATION']) is redis://127.0.0.1:{port}/0" in line
    assert "nothing accepts connections" in line and "count per process" in line


def test_a_redis_url_that_is_not_redis_is_an_error(tmp_path):
    def greet_and_hang_up(server: socket.socket) -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")  # speaks first, then hangs up: not Redis
            conn.close()

    migrated(tmp_path)
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        threading.Thread(target=greet_and_hang_up, args=(other,), daemon=True).start()
        done = manage(tmp_path, "check", REDIS_URL=f"redis://127.0.0.1:{other.getsockname()[1]}/0")
    assert done.returncode == 1
    line = finding(said(done), "checkpoints.E045")
    assert "is not a Redis server" in line and "correct the port" in line


def test_a_redis_database_number_past_the_last_is_an_error(tmp_path):
    url = settings.REDIS_TEST_URL.rsplit("/", 1)[0] + "/99"
    done = manage(migrated(tmp_path), "check", REDIS_URL=url)
    assert done.returncode == 1
    assert "database number is past the server's last one" in finding(
        said(done), "checkpoints.E045"
    )


def test_an_unreachable_redis_store_masks_its_password(tmp_path):
    port = free_port()
    done = manage(
        migrated(tmp_path),
        "check",
        LLM_PROVIDER_CHECKPOINT="redis",
        LLM_PROVIDER_CHECKPOINT_CONN_STRING=f"redis://:hunter2@127.0.0.1:{port}/0",
    )
    assert done.returncode == 1
    line = finding(said(done), "checkpoints.E044")
    assert f"is redis://:***@127.0.0.1:{port}/0: nothing accepts connections" in line
    assert "hunter2" not in done.stdout + done.stderr


def test_no_connect_leaves_the_servers_alone(tmp_path):
    port = free_port()
    done = manage(
        tmp_path, "check", "--no-connect", DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/x"
    )
    assert done.returncode == 0 and "no issues" in done.stdout, done.stderr


# -- errors in a few lines ---------------------------------------------------------------
def test_a_settings_error_is_a_few_lines_and_traceback_shows_it(tmp_path):
    env = {k: v for k, v in PROD_ENV.items() if k != "DJANGO_SECRET_KEY"}
    done = manage(tmp_path, "check", **env)
    assert done.returncode == 1
    text = said(done)
    assert "DJANGO_SECRET_KEY must be set" in text and "--traceback" in text
    shown = manage(tmp_path, "check", "--traceback", **env)
    assert shown.returncode != 0 and "Traceback" in shown.stderr


def test_a_command_on_an_unreachable_database_names_the_setting(tmp_path):
    port = free_port()
    done = manage(tmp_path, "migrate", DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/x")
    assert done.returncode == 1
    text = said(done)
    assert f"DATABASE_URL (DATABASES['default']) is postgres://postgres@127.0.0.1:{port}/x" in text
    assert "start PostgreSQL there" in text
    debug = manage(
        tmp_path,
        "migrate",
        DATABASE_URL=f"postgres://postgres@127.0.0.1:{port}/x",
        DJANGO_DEBUG="1",
    )
    assert "Traceback" in debug.stderr


def test_a_command_before_migrate_is_told_to_migrate(tmp_path):
    done = manage(tmp_path, "seed_demo")
    assert done.returncode == 1
    text = said(done)
    assert "checkpoint tables are missing" in text and "fix: run `manage.py migrate`" in text


def test_a_server_boot_on_wrong_settings_is_a_few_lines(tmp_path):
    env = service_env(tmp_path, FLOW_CHECKPOINT_RETENTION_DAYS="7")
    done = subprocess.run(
        [sys.executable, "-c", "import project.asgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3  # gunicorn's "worker failed to boot": no restart loop
    text = said(done)
    assert "FLOW_CHECKPOINT_RETENTION_DAYS is set to '7' but was removed" in text


# -- static files and the data folder ----------------------------------------------------
def test_importing_the_settings_writes_nothing(tmp_path):
    data_dir = tmp_path / "not-made"
    env = {**service_env(tmp_path), "CHECKPOINTS_DATA_DIR": str(data_dir)}
    done = subprocess.run(
        [sys.executable, "-c", "import project.settings"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert not data_dir.exists()


def test_a_missing_static_manifest_is_a_deploy_error(tmp_path):
    done = manage(migrated(tmp_path), "check", "--deploy", **PROD_ENV)
    assert done.returncode == 1
    line = finding(done.stdout + done.stderr, "checkpoints.E050")
    assert "staticfiles.json, which does not exist" in line and "collectstatic" in line
    # At start (runserver runs the checks) it is a warning.
    started = manage(tmp_path, "check", **PROD_ENV)
    assert started.returncode == 0
    assert "collectstatic" in finding(started.stdout + started.stderr, "checkpoints.W050")
    collected = manage(tmp_path, "collectstatic", "--no-input", "--verbosity", "0", **PROD_ENV)
    assert collected.returncode == 0, collected.stderr
    assert "E050" not in manage(tmp_path, "check", "--deploy", **PROD_ENV).stdout


def test_a_server_start_without_a_static_manifest_says_so(tmp_path):
    env = {**service_env(tmp_path), **PROD_ENV}
    done = subprocess.run(
        [sys.executable, "-c", "import project.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "warning: STORAGES['staticfiles']" in said(done) and "collectstatic" in done.stderr


@pytest.mark.django_db
def test_admin_pages_answer_without_a_static_manifest(tmp_path):
    storages = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "project.storage.ManifestOutsideStaticRoot"},
    }
    with override_settings(DEBUG=False, STORAGES=storages, DATA_DIR=tmp_path):
        page = Client().get("/admin/login/")
    assert page.status_code == 200
    assert b"/static/admin/css/base.css" in page.content


# -- the cache's Redis down --------------------------------------------------------------
def rates(**scopes: str):
    return override_settings(
        REST_FRAMEWORK={**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": scopes}
    )


@pytest.mark.usefixtures("threads")
def test_throttles_hold_with_the_cache_down(clients, private_cache):
    private_cache.stop()
    with rates(**{"checkpoints.sweep": "2/min"}):
        sweeper = clients["sweeper"]
        for _ in range(2):
            ok = sweeper.post("/api/checkpoints/sweep/", {"dry_run": True}, format="json")
            assert ok.status_code == 200, ok.content
        limited = sweeper.post("/api/checkpoints/sweep/", {"dry_run": True}, format="json")
        assert limited.status_code == 429, limited.content
        # Reads still serve.
        assert clients["alice"].get("/api/threads/alice-1/").status_code == 200


def test_the_token_failure_cap_holds_with_the_cache_down(db, private_cache):
    user = User.objects.create_user("keyholder", password="pw")
    from rest_framework.authtoken.models import Token

    key = Token.objects.create(user=user).key
    private_cache.stop()
    guesser = Client(REMOTE_ADDR="2001:db8::55")
    with rates(**{"checkpoints.token_failures": "3/min"}):
        for attempt in range(3):
            wrong = guesser.get("/api/threads/", HTTP_AUTHORIZATION=f"Token wrong-{attempt}")
            assert wrong.status_code == 401, wrong.content
        refused = guesser.get("/api/threads/", HTTP_AUTHORIZATION=f"Token {key}")
        assert refused.status_code == 429, refused.content


def test_the_sign_in_lockout_holds_with_the_cache_down(db, private_cache):
    User.objects.create_user("operator", password="right-password")
    private_cache.stop()
    client = Client(REMOTE_ADDR="192.0.2.55")
    form = {"username": "operator", "password": "wrong"}
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        assert client.post("/admin/login/", form).status_code == 200
    assert client.post("/admin/login/", form).status_code == 429  # the limit's failure locks
    locked = client.post("/admin/login/", {**form, "password": "right-password"})
    assert locked.status_code == 429


@pytest.mark.django_db(transaction=True)
def test_health_says_the_cache_is_down_and_stays_serving(private_cache):
    from checkpoints.health import CacheServer, StoreFormat

    up = {"CacheServer()": "OK", "StoreFormat(provider='sqlite')": "OK"}
    assert health([CacheServer, StoreFormat]) == (200, up)
    private_cache.stop()
    status, body = health([CacheServer, StoreFormat])
    assert status == 200, body  # degraded, not down: a balancer must not pull every replica
    assert "nothing accepts connections" in body["CacheServer()"], body
    assert body["StoreFormat(provider='sqlite')"] == "OK"


def test_the_cache_returns_to_redis_once_it_answers(private_cache):
    from django.core.cache import cache

    private_cache.stop()
    cache.set("first-hour", 1)
    assert cache.get("first-hour") == 1  # this process's memory meanwhile
    assert cache.down
    private_cache.start()
    cache.probe()
    assert not cache.down
    cache.set("first-hour", 2)
    assert private_cache.cli(private_cache.port, "DBSIZE").strip() == "1"


# -- the shared pieces -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("redis://:pw@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0"),
        ("postgres://app:p%40ss@db:5432/store", "postgres://app:***@db:5432/store"),
        ("rediss://user:secret@cache.internal/3", "rediss://user:***@cache.internal/3"),
        ("redis://127.0.0.1:6379/15", "redis://127.0.0.1:6379/15"),
    ],
)
def test_a_shown_url_never_holds_its_password(url, shown):
    from checkpoints.store.diagnosis import mask_url

    assert mask_url(url) == shown


def test_a_shown_database_entry_never_holds_its_password():
    from checkpoints.store.diagnosis import database_value

    entry = {"ENGINE": "django.db.backends.postgresql", "NAME": "store", "USER": "app",
             "PASSWORD": "hunter2", "HOST": "db", "PORT": "6543"}  # fmt: skip
    assert database_value(entry) == "postgres://app:***@db:6543/store"
