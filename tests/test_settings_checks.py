"""Boot-time validation of the CHECKPOINTS settings, and the environment they come from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test import override_settings

from checkpoints.dburl import database_url, parse_database_url

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable  # the suite's own interpreter (CI runs it in two virtualenvs)
WAITING = "LLM_PROVIDER_CHECKPOINT_RETENTION_WAITING_MINUTES"
FINISHED = "LLM_PROVIDER_CHECKPOINT_RETENTION_FINISHED_MINUTES"
REMOVED = ("LLM_PROVIDER_CHECKPOINT_TTL_MINUTES", "FLOW_CHECKPOINT_RETENTION_DAYS")


def checkpoints(**overrides) -> dict:
    return {**settings.CHECKPOINTS, **overrides}


def check_output() -> str:
    """What `manage.py check` refuses with; fails the test when it passes."""
    with pytest.raises(SystemCheckError) as caught:
        call_command("check")
    return str(caught.value)


def test_valid_settings_pass_the_check(capsys):
    call_command("check")
    assert "System check identified no issues" in capsys.readouterr().out


def test_finished_longer_than_waiting_names_both(capsys):
    with override_settings(
        CHECKPOINTS=checkpoints(RETENTION_WAITING_MINUTES=60, RETENTION_FINISHED_MINUTES=90)
    ):
        output = check_output()
    assert "checkpoints.E005" in output
    assert f"{FINISHED} (CHECKPOINTS['RETENTION_FINISHED_MINUTES']) is 90" in output
    assert f"{WAITING} (CHECKPOINTS['RETENTION_WAITING_MINUTES']) 60" in output
    # Equal horizons are allowed.
    with override_settings(
        CHECKPOINTS=checkpoints(RETENTION_WAITING_MINUTES=60, RETENTION_FINISHED_MINUTES=60)
    ):
        call_command("check")


@pytest.mark.parametrize(
    ("key", "variable"),
    [
        ("RETENTION_WAITING_MINUTES", WAITING),
        ("RETENTION_FINISHED_MINUTES", FINISHED),
        ("INLINE_COMPRESS_BYTES", "LLM_PROVIDER_CHECKPOINT_INLINE_COMPRESS_BYTES"),
    ],
)
def test_negative_value_is_refused(key, variable):
    with override_settings(CHECKPOINTS=checkpoints(**{key: -5})):
        output = check_output()
    assert "checkpoints.E004" in output
    assert f"{variable} (CHECKPOINTS['{key}']) is -5, which is negative" in output


@pytest.mark.parametrize("value", ["a week", "12.5", True])
def test_non_numeric_value_is_refused(value):
    with override_settings(CHECKPOINTS=checkpoints(RETENTION_WAITING_MINUTES=value)):
        output = check_output()
    assert "checkpoints.E003" in output
    assert f"{WAITING} (CHECKPOINTS['RETENTION_WAITING_MINUTES']) is {value!r}" in output
    assert "not a whole number" in output


def test_compression_may_be_turned_off_with_null():
    with override_settings(CHECKPOINTS=checkpoints(INLINE_COMPRESS_BYTES=None)):
        call_command("check")


def test_unknown_provider_is_refused():
    with override_settings(CHECKPOINTS=checkpoints(PROVIDER="mongodb")):
        output = check_output()
    assert "checkpoints.E002" in output
    assert "LLM_PROVIDER_CHECKPOINT (CHECKPOINTS['PROVIDER']) is 'mongodb'" in output
    assert "postgres, sqlite, redis, memory" in output


@pytest.mark.parametrize("variable", REMOVED)
def test_removed_variable_still_set_is_refused(variable, monkeypatch):
    monkeypatch.setenv(variable, "30")
    output = check_output()
    assert "checkpoints.E001" in output
    assert f"{variable} is set to '30' but was removed" in output
    assert "RETENTION" in output
    others = [v for v in REMOVED if v != variable]
    assert all(other not in output for other in others)


def test_every_problem_is_reported_at_once(monkeypatch):
    monkeypatch.setenv(REMOVED[0], "1")
    with override_settings(CHECKPOINTS=checkpoints(PROVIDER="etcd", RETENTION_FINISHED_MINUTES=-1)):
        output = check_output()
    for code in ("checkpoints.E001", "checkpoints.E002", "checkpoints.E004"):
        assert code in output


def test_memory_provider_warns_only_on_deploy_checks(capsys):
    with override_settings(CHECKPOINTS=checkpoints(PROVIDER="memory")):
        call_command("check")
        assert "checkpoints.W001" not in capsys.readouterr().err
        call_command("check", deploy=True, fail_level="CRITICAL")
        captured = capsys.readouterr()
    assert "checkpoints.W001" in captured.out + captured.err


# -- a WSGI boot refuses too ---------------------------------------------------------------
def run_python(code: str, tmp_path, **env_overrides) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LLM_PROVIDER_CHECKPOINT", "CHECKPOINTS_", "DJANGO_"))
        and k not in (*REMOVED, "DATABASE_URL", "PYTEST_CURRENT_TEST")
    }
    env["CHECKPOINTS_DATA_DIR"] = str(tmp_path)
    env.update(env_overrides)
    return subprocess.run(
        [PYTHON, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_wsgi_boot_refuses_finished_longer_than_waiting(tmp_path):
    refused = run_python("import project.wsgi", tmp_path, **{FINISHED: "99999"})
    assert refused.returncode != 0
    assert "ImproperlyConfigured" in refused.stderr
    assert f"{FINISHED} (CHECKPOINTS['RETENTION_FINISHED_MINUTES']) is 99999" in refused.stderr
    assert f"{WAITING} (CHECKPOINTS['RETENTION_WAITING_MINUTES']) 10080" in refused.stderr


def test_wsgi_boot_refuses_a_removed_variable(tmp_path):
    refused = run_python("import project.wsgi", tmp_path, FLOW_CHECKPOINT_RETENTION_DAYS="7")
    assert refused.returncode != 0
    assert "FLOW_CHECKPOINT_RETENTION_DAYS is set to '7' but was removed" in refused.stderr


def test_wsgi_boot_succeeds_on_valid_settings(tmp_path):
    booted = run_python(
        "import project.wsgi; print(type(project.wsgi.application).__name__)",
        tmp_path,
        **{WAITING: "120", FINISHED: "30"},
    )
    assert booted.returncode == 0, booted.stderr
    assert booted.stdout.strip() == "WSGIHandler"


# -- project.settings reads the environment ------------------------------------------------
SETTINGS_DUMP = (
    "import json, project.settings as s; "
    "print(json.dumps({'db': s.DATABASES['default'], 'cp': s.CHECKPOINTS}, default=str))"
)


def test_settings_read_checkpoint_variables(tmp_path):
    done = run_python(
        SETTINGS_DUMP,
        tmp_path,
        LLM_PROVIDER_CHECKPOINT=" Redis ",
        LLM_PROVIDER_CHECKPOINT_CONN_STRING="redis://cache:6379/3",
        **{WAITING: " 600 ", FINISHED: "soon"},
        LLM_PROVIDER_CHECKPOINT_INLINE_COMPRESS_BYTES="null",
    )
    assert done.returncode == 0, done.stderr
    conf = json.loads(done.stdout)["cp"]
    assert conf["PROVIDER"] == "redis"
    assert conf["CONN_STRING"] == "redis://cache:6379/3"
    assert conf["RETENTION_WAITING_MINUTES"] == 600
    # Left as text so the system check can name it.
    assert conf["RETENTION_FINISHED_MINUTES"] == "soon"
    assert conf["INLINE_COMPRESS_BYTES"] is None


def test_settings_defaults_without_environment(tmp_path):
    done = run_python(SETTINGS_DUMP, tmp_path)
    assert done.returncode == 0, done.stderr
    parsed = json.loads(done.stdout)
    assert parsed["cp"]["PROVIDER"] == "sqlite"
    assert parsed["cp"]["CONN_STRING"] is None
    assert parsed["cp"]["RETENTION_WAITING_MINUTES"] == 10080
    assert parsed["cp"]["RETENTION_FINISHED_MINUTES"] == 1440
    assert parsed["cp"]["INLINE_COMPRESS_BYTES"] == 65536
    assert parsed["db"]["ENGINE"] == "django.db.backends.sqlite3"
    assert parsed["db"]["NAME"] == str(tmp_path / "checkpoints.sqlite3")


def test_settings_take_database_url(tmp_path):
    done = run_python(
        SETTINGS_DUMP, tmp_path, DATABASE_URL="postgres://app:s3cret@db.internal:6543/store"
    )
    assert done.returncode == 0, done.stderr
    db = json.loads(done.stdout)["db"]
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "store",
        "app",
        "s3cret",
        "db.internal",
        "6543",
    )


def test_settings_refuse_a_bad_database_url(tmp_path):
    refused = run_python(SETTINGS_DUMP, tmp_path, DATABASE_URL="mysql://app@db/store")
    assert refused.returncode != 0
    assert "mysql://app@db/store" in refused.stderr


# -- database URLs -------------------------------------------------------------------------
def test_parse_postgres_url():
    assert parse_database_url(
        "postgresql://user%40corp:p%2Fw@db.example.com:5433/check%20points?sslmode=require"
    ) == {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": "check points",
        "USER": "user@corp",
        "PASSWORD": "p/w",
        "HOST": "db.example.com",
        "PORT": "5433",
        "OPTIONS": {"sslmode": "require"},
    }
    assert parse_database_url("postgres://localhost")["NAME"] == "postgres"
    assert parse_database_url("pgsql://h/db")["ENGINE"] == "django.db.backends.postgresql"
    assert parse_database_url("postgres+psycopg://h/db")["NAME"] == "db"


def test_a_database_entry_turns_back_into_the_url_that_reads_as_it():
    entry = parse_database_url("postgresql://user%40corp:p%2Fw@db.example.com:5433/check%20points")
    assert database_url(entry) == "postgres://user%40corp:p%2Fw@db.example.com:5433/check%20points"
    back = parse_database_url(database_url(entry))
    assert {k: back[k] for k in ("NAME", "USER", "PASSWORD", "HOST", "PORT")} == {
        "NAME": "check points",
        "USER": "user@corp",
        "PASSWORD": "p/w",
        "HOST": "db.example.com",
        "PORT": "5433",
    }
    bare = {"NAME": "store", "USER": "postgres", "PASSWORD": "", "HOST": "", "PORT": ""}
    assert database_url(bare) == "postgres://postgres@127.0.0.1:5432/store"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # Cases from dj-database-url's own tests that a hand-written parser got wrong.
        ("postgres://%2Fvar%2Frun%2Fpostgresql/db", {"HOST": "/var/run/postgresql", "NAME": "db"}),
        ("postgres://[::1]:5433/db", {"HOST": "::1", "PORT": "5433"}),
        ("postgres://h/db?currentSchema=s", {"OPTIONS": {"options": "-c search_path=s"}}),
        ("postgres://h/db?sslmode=verify-full", {"OPTIONS": {"sslmode": "verify-full"}}),
    ],
)
def test_parse_postgres_url_forms(url, expected):
    entry = parse_database_url(url)
    assert {k: entry[k] for k in expected} == expected
    if not expected.get("OPTIONS"):
        assert parse_database_url(database_url(entry))["HOST"] == entry["HOST"]


def test_parse_sqlite_url():
    assert parse_database_url("sqlite:////var/lib/store.db") == {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": "/var/lib/store.db",
    }
    assert parse_database_url("sqlite:///relative.db")["NAME"] == "relative.db"
    assert parse_database_url("sqlite://")["NAME"] == ":memory:"


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("mysql://app@db/store", ["'mysql://app@db/store'", "'mysql'"]),
        ("just-a-path.db", ["'just-a-path.db'", "no scheme"]),
    ],
)
def test_bad_database_url_names_the_url(url, words):
    with pytest.raises(ValueError) as caught:
        parse_database_url(url)
    for word in words:
        assert word in str(caught.value)


def test_a_fresh_data_dir_is_created_for_the_embedded_sqlite(tmp_path):
    """A fresh clone has no var/ folder: booting must make it, not fail to open the file."""
    import subprocess
    import sys

    data_dir = tmp_path / "not-there-yet" / "var"
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("LLM_")}
    env.update(CHECKPOINTS_DATA_DIR=str(data_dir), DJANGO_SETTINGS_MODULE="project.settings")
    done = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (data_dir / "checkpoints.sqlite3").exists()


@pytest.mark.parametrize(
    "key, value, variable",
    [
        ("PG_PREPARED_STATEMENTS", "sometimes", "CHECKPOINTS_PG_PREPARED_STATEMENTS"),
        ("SWEEP_LEASE_SECONDS", 0, "CHECKPOINTS_SWEEP_LEASE_SECONDS"),
        ("SWEEP_LEASE_SECONDS", "a minute", "CHECKPOINTS_SWEEP_LEASE_SECONDS"),
        ("DURABILITY_RECHECK_SECONDS", -1, "CHECKPOINTS_DURABILITY_RECHECK_SECONDS"),
        ("PG_STANDBY_WAIT_SECONDS", "soon", "CHECKPOINTS_PG_STANDBY_WAIT_SECONDS"),
    ],
)
def test_engine_settings_are_refused_by_name(key, value, variable):
    with override_settings(CHECKPOINTS=checkpoints(**{key: value})):
        output = check_output()
    assert variable in output and repr(value) in output


@pytest.mark.parametrize("value", ["auto", "AUTO", True, False, "1", "0"])
def test_every_prepared_statement_mode_passes(value):
    with override_settings(CHECKPOINTS=checkpoints(PG_PREPARED_STATEMENTS=value)):
        call_command("check")
