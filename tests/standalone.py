"""Run Python as a user's own process would: a subprocess, no DJANGO_SETTINGS_MODULE.

Shared by the from_conn_string, README and host-project tests (and by the Redis Cluster
and Sentinel ones: ``check_interrupt_and_resume``). Also gives each test a fresh
PostgreSQL database of its own, dropped afterwards.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from django.conf import settings

from tests.services import need_service

ROOT = Path(__file__).resolve().parent.parent
GRAPH_SCRIPT = Path(__file__).resolve().parent / "scripts" / "standalone_graph.py"


def plain_env(**extra: str) -> dict[str, str]:
    """The environment of a plain script: this checkout importable, no Django settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "CHECKPOINTS_"))}
    env.pop("LLM_PROVIDER_CHECKPOINT", None)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def service_env(tmp_path, **extra: str) -> dict[str, str]:
    """The environment an operator starts the service with: no test settings, no test vars."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("DJANGO_", "LLM_PROVIDER_CHECKPOINT", "CHECKPOINTS_", "PYTEST_"))
    }
    env.update(
        CHECKPOINTS_DATA_DIR=str(tmp_path),
        REDIS_URL=settings.REDIS_TEST_URL,
        DJANGO_LOG_FORMAT="json",
        **extra,
    )
    return env


def run_python(
    args: list[str], *, cwd: Path, env: dict[str, str] | None = None, timeout: int = 180
) -> subprocess.CompletedProcess:
    """``python args...``; fails the test with both streams when the process fails."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env=env if env is not None else plain_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, (
        f"{args} exited {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    return done


def run_graph(url: str, thread_id: str, *steps: str, cwd: Path, env=None) -> list[dict]:
    """Run ``standalone_graph.py``: one JSON result per step."""
    done = run_python([str(GRAPH_SCRIPT), url, thread_id, *steps], cwd=cwd, env=env)
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


ASKED = ["asked", "drafted"]
DONE = ["asked", "drafted", "approved:yes"]


def check_interrupt_and_resume(url: str, tmp_path, *, same_process: bool) -> None:
    """Start a graph, answer its interrupt and delete the thread, sync and async, at ``url``:
    in one process, or each step in a new one."""
    for prefix in ("", "async-"):
        thread_id = f"standalone-{prefix or 'sync-'}{uuid.uuid4().hex[:8]}"
        start, resume = f"{prefix}start", f"{prefix}resume"
        if same_process:
            results = run_graph(url, thread_id, start, resume, "delete", cwd=tmp_path)
        else:
            results = [
                *run_graph(url, thread_id, start, cwd=tmp_path),
                *run_graph(url, thread_id, resume, "delete", cwd=tmp_path),
            ]
        assert [r["step"] for r in results] == [start, resume, "delete"], results
        assert results[0]["interrupted"] and results[0]["log"] == ASKED, results
        assert not results[1]["interrupted"] and results[1]["log"] == DONE, results
        assert results[2]["log"] == [], "the thread is still there after delete_thread"


def postgres_base_url() -> str:
    need_service(settings.POSTGRES_UNAVAILABLE)
    return settings.POSTGRES_URL.rsplit("/", 1)[0]


@contextlib.contextmanager
def fresh_postgres_database(tag: str) -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database, dropped on exit."""
    import psycopg

    base = postgres_base_url()
    name = f"checkpoint_store_{tag}_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    admin = f"{base}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{base}/{name}".replace("postgres://", "postgresql://", 1)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def service_setting(tmp_path, name: str, **env: str) -> subprocess.CompletedProcess:
    """``manage.py shell`` printing ``settings.<name>`` as the service reads its environment
    (``service_env`` and ``env``)."""
    code = f"from django.conf import settings; print(settings.{name})"
    return subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env=service_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
