"""``from checkpoints import from_conn_string``: a plain LangGraph script on every provider.

Each script runs as its own process with no DJANGO_SETTINGS_MODULE; the durable providers
are interrupted in one process and resumed in the next.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.conf import settings

from checkpoints.connect import provider_for
from checkpoints.errors import CheckpointConfigError
from tests.services import need_service, redis_unavailable
from tests.standalone import (
    DONE,
    GRAPH_SCRIPT,
    check_interrupt_and_resume,
    fresh_postgres_database,
    plain_env,
    run_graph,
    run_python,
)


def test_memory(tmp_path):
    check_interrupt_and_resume("memory://", tmp_path, same_process=True)


def test_sqlite_file_made_on_first_use(tmp_path):
    path = tmp_path / "graphs.sqlite3"
    check_interrupt_and_resume(f"sqlite:///{path}", tmp_path, same_process=False)
    assert path.exists()


def test_sqlite_relative_path_is_the_scripts_folder(tmp_path):
    check_interrupt_and_resume("sqlite:///relative.sqlite3", tmp_path, same_process=False)
    assert (tmp_path / "relative.sqlite3").exists()


@pytest.mark.postgres
def test_postgres_fresh_database(tmp_path):
    with fresh_postgres_database("standalone") as url:
        check_interrupt_and_resume(url, tmp_path, same_process=False)


@pytest.mark.redis
def test_redis(tmp_path):
    # This run's own Redis db; every thread the script writes it deletes again.
    need_service(redis_unavailable())
    check_interrupt_and_resume(settings.REDIS_TEST_URL, tmp_path, same_process=False)


def test_a_cluster_url_names_the_redis_saver():
    assert provider_for("redis+cluster://127.0.0.1:7000,127.0.0.1:7001") == "redis"
    assert provider_for("rediss+cluster://u:p@h:7000") == "redis"
    assert provider_for("redis+sentinel://h:26379,h:26380/service/0") == "redis"


@pytest.mark.parametrize(
    "url, words",
    [
        ("sqlite://", "names no SQLite file"),
        ("sqlite:///:memory:", "memory://"),
        ("mysql://db/x", "'mysql'"),
        ("checkpoints.sqlite3", "no scheme"),
    ],
)
def test_refusals_name_the_problem(url, words):
    with pytest.raises(CheckpointConfigError) as caught:
        provider_for(url)
    assert words in caught.value.message
    assert caught.value.field == "conn_string"


def test_importing_the_app_loads_no_django(tmp_path):
    done = run_python(
        [
            "-c",
            "import sys, checkpoints; from checkpoints import from_conn_string; "
            "print(sorted(m for m in sys.modules if m.startswith('django')))",
        ],
        cwd=tmp_path,
    )
    assert done.stdout.strip() == "[]", done.stdout


CONFIGURED = """
import django, sys
django.setup()
from checkpoints import from_conn_string
from checkpoints.errors import CheckpointConfigError
own = sys.argv[1]
try:
    with from_conn_string(own):
        pass
except CheckpointConfigError as exc:
    print("refused:", exc.message)
from django.core.management import call_command
call_command("migrate", verbosity=0)
with from_conn_string(own) as saver:
    print("own database:", saver.using)
with from_conn_string(sys.argv[2]) as saver:
    print("other database:", saver.using)
"""


def test_inside_a_configured_django_project(tmp_path):
    """The project's own database is the project's to migrate; another one is set up here."""
    env = plain_env(DJANGO_SETTINGS_MODULE="project.settings", CHECKPOINTS_DATA_DIR=str(tmp_path))
    own = f"sqlite:///{tmp_path / 'checkpoints.sqlite3'}"
    other = f"sqlite:///{tmp_path / 'other.sqlite3'}"
    done = run_python(["-c", CONFIGURED, own, other], cwd=tmp_path, env=env)
    lines = done.stdout.splitlines()
    assert lines[0].startswith("refused:") and "manage.py migrate" in lines[0], lines
    assert lines[1] == "own database: default", lines
    assert lines[2].startswith("other database: checkpoints_"), lines
    results = run_graph(other, "in-project", "start", "resume", cwd=tmp_path, env=env)
    assert results[-1]["log"] == DONE, results


def run_at_once(url: str, tmp_path, count: int = 4) -> None:
    """``count`` scripts opening one new database at the same moment all finish their run."""
    runs = [
        subprocess.Popen(
            [sys.executable, str(GRAPH_SCRIPT), url, f"at-once-{index}", "start", "resume"],
            cwd=tmp_path,
            env=plain_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(count)
    ]
    for run in runs:
        out, err = run.communicate(timeout=180)
        assert run.returncode == 0, err[-3000:]
        assert json.loads(out.splitlines()[-1])["log"] == DONE, out


def test_scripts_starting_at_once_on_a_new_sqlite_file(tmp_path):
    run_at_once(f"sqlite:///{tmp_path / 'new.sqlite3'}", tmp_path)


@pytest.mark.postgres
def test_scripts_starting_at_once_on_a_new_postgres_database(tmp_path):
    # Before the migrate retry, 3 of 4 failed making the same tables.
    with fresh_postgres_database("at_once") as url:
        run_at_once(url, tmp_path)
